//! NTLMv2 and Kerberos inside SPNEGO for SMB2 SESSION_SETUP. NTLM is
//! computed here with no I/O; Kerberos is MIT krb5's (see [`kerberos`]),
//! which talks to the KDC when a logon starts.
//!
//! The SMB client drives an [`NtlmClient`] by hand: it sends
//! [`NtlmClient::initial_token`] in the first SESSION_SETUP request, feeds the
//! server's security buffer (returned with STATUS_MORE_PROCESSING_REQUIRED) to
//! [`NtlmClient::step`], sends the result in the second request, and on
//! STATUS_SUCCESS checks the final buffer with [`NtlmClient::finish`]. The
//! key for SMB signing and encryption is then [`NtlmClient::session_key`].
//!
//! ```
//! use smb_auth::{NtlmClient, NtlmCredentials, NtlmOptions};
//!
//! let creds = NtlmCredentials::new("alice", "CORP", "secret");
//! let mut client = NtlmClient::new(creds, NtlmOptions::default());
//! let first = client.initial_token(); // SESSION_SETUP #1 SecurityBuffer
//! assert_eq!(first[0], 0x60); // GSS-API InitialContextToken
//! // let second = client.step(&response_1_security_buffer)?;
//! // client.finish(&response_2_security_buffer)?;
//! // let key = client.session_key(); // None for anonymous
//! ```
//!
//! Nothing here opens sockets, spawns tasks or reads the clock unless asked:
//! the client challenge, timestamp and session key can be injected through
//! [`NtlmOptions`] so that exchanges are reproducible in tests.
//!
//! Layers, bottom up: `reader` (bounds-checked cursor), `der` (the DER subset
//! SPNEGO needs), [`spnego`] (RFC 4178 tokens), `flags` (NegotiateFlags),
//! `crypto` (NTOWFv2, RC4, keys),
//! `ntlm` (MS-NLMP messages) and `client` (the state machine); beside them
//! `gss` (the GSS-API calls, the crate's only unsafe code) and [`kerberos`].

#![warn(missing_docs)]

mod client;
mod crypto;
mod der;
mod flags;
mod gss;
pub mod kerberos;
mod ntlm;
mod reader;
pub mod spnego;
#[cfg(test)]
mod vectors;

pub use client::{NtlmClient, NtlmCredentials, NtlmOptions};
pub use kerberos::{KerberosClient, KerberosCredentials, KerberosIdentity, KerberosSource};

/// Why a security token could not be decoded or an exchange could not go on.
///
/// Decoding never panics: every malformed input maps to one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The input ended before the named field was complete, or a length
    /// field pointed past the end of its enclosing structure.
    #[error("truncated {0}")]
    Truncated(&'static str),
    /// A DER element had a different tag from the one the grammar requires.
    #[error("bad tag {found:#04x} for {what} (expected {expected:#04x})")]
    BadTag {
        /// The element being decoded.
        what: &'static str,
        /// The tag the grammar requires there.
        expected: u8,
        /// The tag found in the input.
        found: u8,
    },
    /// A DER length was indefinite, or longer than four octets.
    #[error("unsupported DER length in {0}")]
    BadLength(&'static str),
    /// Bytes were left over after the named structure.
    #[error("trailing data after {0}")]
    TrailingData(&'static str),
    /// A field that this exchange needs was absent.
    #[error("missing {0}")]
    Missing(&'static str),
    /// The token's GSS-API mechanism OID was not SPNEGO (1.3.6.1.5.5.2).
    #[error("not a SPNEGO token")]
    NotSpnego,
    /// The server selected a mechanism other than NTLMSSP.
    #[error("server selected a mechanism other than NTLMSSP")]
    NotNtlm,
    /// The server selected a mechanism other than Kerberos after a
    /// Kerberos logon began.
    #[error("server selected a mechanism other than Kerberos")]
    NotKerberos,
    /// The Kerberos library refused a step: `what` was being done, `message`
    /// is the library's reason ("Preauthentication failed", "Clock skew too
    /// great", "Cannot find KDC for realm ...").
    #[error("Kerberos: {what}: {message}")]
    Kerberos {
        /// The step that failed.
        what: &'static str,
        /// The library's words.
        message: String,
    },
    /// The server answered with negState reject (RFC 4178 4.2.2).
    #[error("server rejected the authentication")]
    Rejected,
    /// The server's negState does not fit this point of the exchange.
    #[error("unexpected SPNEGO negState {0}")]
    UnexpectedState(u8),
    /// An NTLM message was malformed (bad signature, type or value).
    #[error("malformed NTLM message: {0}")]
    BadNtlm(&'static str),
    /// The server did not agree to a capability this client requires.
    #[error("server did not negotiate {0}")]
    Unsupported(&'static str),
    /// A field of the AUTHENTICATE message would not fit its 16-bit length.
    #[error("{0} is too long for an NTLM message")]
    TooLong(&'static str),
    /// The server's mechListMIC did not verify (RFC 4178 5).
    #[error("server mechListMIC does not verify")]
    MicMismatch,
    /// A method was called at the wrong point of the exchange.
    #[error("out of order: {0}")]
    OutOfOrder(&'static str),
}
