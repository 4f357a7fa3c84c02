//! Session setup as states, apart from the socket: each state takes what
//! the server answered (and the bytes of what we sent, for the 3.1.1
//! preauth integrity hash) and gives the next state, or the error that
//! ends the setup. `Session::setup` drives them over a connection; the
//! unit tests drive them with answers made in memory.
//!
//! ```text
//!   ExpectNegotiate ──NEGOTIATE answer──▶ ExpectLogonStart
//!        (dialect offered? SHA-512 preauth on 3.1.1? limits ≥ 4 KiB?)
//!   ExpectLogonStart ──the logon's first token──▶ ExpectSessionSetup
//!   ExpectSessionSetup ──MORE_PROCESSING_REQUIRED──▶ ExpectSessionSetup
//!        (the logon's next token; at most 4 rounds)
//!   ExpectSessionSetup ──SUCCESS──▶ Established
//!        (no guest or anonymous session for given credentials; the final
//!         answer signed with the derived key where it must be; a cipher
//!         where the session must be encrypted)
//! ```
//!
//! MS-SMB2 3.2.4.2 (NEGOTIATE), 3.2.5.2 (its answer), 3.2.4.2.3 and
//! 3.2.5.3 (SESSION_SETUP and key derivation).

use smb_proto::negotiate::{
    capabilities, dialect, security_mode, Cipher, NegotiateRequest, NegotiateResponse, SigningAlgorithm,
};
use smb_proto::session::{session_flags, SessionSetupRequest, SessionSetupResponse};
use smb_proto::{Command, NtStatus};

use crate::client_config::ClientConfig;
use crate::connection::Security;
use crate::crypto::{derive_keys, Cipherer, PreauthHash, Signer};
use crate::error::{Error, Result};
use crate::logon::{Logon, LogonFacts};

/// Most SESSION_SETUP round trips a logon may take (NTLM takes two,
/// Kerberos one or two).
const MAX_ROUNDS: u32 = 4;

/// What NEGOTIATE and SESSION_SETUP settled on.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// Dialect revision (0x0300, 0x0302 or 0x0311).
    pub dialect: u16,
    /// Largest READ in bytes.
    pub max_read_size: u32,
    /// Largest WRITE in bytes.
    pub max_write_size: u32,
    /// Largest QUERY/IOCTL buffer in bytes.
    pub max_transact_size: u32,
    /// Signing algorithm in use, if the session is signed.
    pub signing: Option<SigningAlgorithm>,
    /// Whether every message is signed.
    pub sign_all: bool,
    /// Cipher available for encryption.
    pub cipher: Option<Cipher>,
    /// The whole session is encrypted.
    pub encrypt_all: bool,
    /// The server made this a guest session.
    pub is_guest: bool,
    /// Anonymous (null) session.
    pub is_anonymous: bool,
}

/// Both sides of a NEGOTIATE, as FSCTL_VALIDATE_NEGOTIATE_INFO compares
/// them (MS-SMB2 2.2.31.4, 2.2.32.6).
pub(crate) struct ValidateNegotiate {
    /// What we sent: Capabilities, ClientGuid, SecurityMode, Dialects.
    pub(crate) capabilities: u32,
    pub(crate) guid: [u8; 16],
    pub(crate) security_mode: u16,
    pub(crate) dialects: Vec<u16>,
    /// What the server answered: Capabilities, ServerGuid, SecurityMode,
    /// DialectRevision.
    pub(crate) server: (u32, [u8; 16], u16, u16),
}

/// The first state: our NEGOTIATE, sent; its answer expected.
pub(crate) struct ExpectNegotiate {
    request: NegotiateRequest,
    dialects: Vec<u16>,
    require_signing: bool,
}

impl ExpectNegotiate {
    /// The NEGOTIATE `config` asks for (its dialects, signing required or
    /// not), with a fresh client GUID and salt.
    pub(crate) fn new(config: &ClientConfig) -> ExpectNegotiate {
        let mut security_mode = security_mode::SIGNING_ENABLED;
        if config.require_signing {
            security_mode |= security_mode::SIGNING_REQUIRED;
        }
        let request = NegotiateRequest {
            dialects: config.dialects.clone(),
            security_mode,
            capabilities: capabilities::LARGE_MTU | capabilities::ENCRYPTION,
            client_guid: rand::random(),
            salt: rand::random(),
            ciphers: vec![Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Aes128Ccm, Cipher::Aes256Ccm],
            signing: vec![SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac, SigningAlgorithm::HmacSha256],
        };
        ExpectNegotiate { request, dialects: config.dialects.clone(), require_signing: config.require_signing }
    }

    /// The request to send.
    pub(crate) fn request(&self) -> &NegotiateRequest {
        &self.request
    }

    /// The server's answer `neg` (whose message is `answer`, to the request
    /// sent as `sent`).
    ///
    /// Errors: [`Error::Protocol`] for a dialect we did not offer, a 3.1.1
    /// answer without SHA-512 preauth integrity, or limits under 4 KiB.
    pub(crate) fn answer(self, sent: &[u8], answer: &[u8], neg: NegotiateResponse) -> Result<ExpectLogonStart> {
        if !self.dialects.contains(&neg.dialect) {
            return Err(Error::Protocol(format!("server chose dialect {:#06x}, which we did not offer", neg.dialect)));
        }
        let is_311 = neg.dialect == dialect::SMB311;
        let mut preauth = PreauthHash::new();
        if is_311 {
            if !neg.preauth_sha512 {
                return Err(Error::Protocol("server did not select SHA-512 preauth integrity".into()));
            }
            preauth.update(sent);
            preauth.update(answer);
        }
        if neg.max_read_size < 4096 || neg.max_write_size < 4096 || neg.max_transact_size < 4096 {
            return Err(Error::Protocol(format!(
                "server limits too small: read {} write {} transact {}",
                neg.max_read_size, neg.max_write_size, neg.max_transact_size
            )));
        }
        let signing = match is_311 {
            true => neg.signing.unwrap_or(SigningAlgorithm::AesCmac),
            false => SigningAlgorithm::AesCmac,
        };
        let cipher = if is_311 {
            neg.cipher
        } else if neg.capabilities & capabilities::ENCRYPTION != 0 {
            Some(Cipher::Aes128Ccm)
        } else {
            None
        };
        // 3.0 and 3.0.2 have no preauth hash: their NEGOTIATE is checked
        // afterwards with a signed FSCTL_VALIDATE_NEGOTIATE_INFO, so they
        // always sign (MS-SMB2 3.2.5.14.12).
        let sign_required = self.require_signing || neg.security_mode & security_mode::SIGNING_REQUIRED != 0;
        let r = &self.request;
        let validate = ValidateNegotiate {
            capabilities: r.capabilities,
            guid: r.client_guid,
            security_mode: r.security_mode,
            dialects: self.dialects,
            server: (neg.capabilities, neg.server_guid, neg.security_mode, neg.dialect),
        };
        Ok(ExpectLogonStart {
            settled: Settled { neg, is_311, signing, cipher, sign_required, validate, security_mode: r.security_mode },
            preauth,
        })
    }
}

/// What NEGOTIATE settled, carried to the end of the setup.
struct Settled {
    neg: NegotiateResponse,
    is_311: bool,
    signing: SigningAlgorithm,
    cipher: Option<Cipher>,
    /// Either side requires signing.
    sign_required: bool,
    validate: ValidateNegotiate,
    /// Our SecurityMode, sent again in each SESSION_SETUP.
    security_mode: u16,
}

/// NEGOTIATE done: the logon (NTLM or Kerberos, which may ask a KDC) is
/// to start from the server's security buffer.
pub(crate) struct ExpectLogonStart {
    settled: Settled,
    preauth: PreauthHash,
}

impl ExpectLogonStart {
    /// The SPNEGO hint the server gave in its NEGOTIATE answer.
    pub(crate) fn security_buffer(&self) -> &[u8] {
        &self.settled.neg.security_buffer
    }

    /// The logon started, with its first token to send.
    pub(crate) fn started(self, logon: Logon, token: Vec<u8>) -> ExpectSessionSetup {
        ExpectSessionSetup { settled: self.settled, preauth: self.preauth, logon, token, session_id: 0, round: 1 }
    }
}

/// A SESSION_SETUP sent; its answer expected.
pub(crate) struct ExpectSessionSetup {
    settled: Settled,
    preauth: PreauthHash,
    logon: Logon,
    /// The security token the request carries.
    token: Vec<u8>,
    /// The SessionId to send it with (0 in the first round).
    session_id: u64,
    round: u32,
}

/// A SESSION_SETUP answer, as the states read it.
pub(crate) struct SetupAnswer<'a> {
    /// Its NTSTATUS.
    pub(crate) status: NtStatus,
    /// The SessionId in its header.
    pub(crate) session_id: u64,
    /// The whole message, header included (signed or not).
    pub(crate) msg: &'a bytes::Bytes,
}

/// What a SESSION_SETUP answer leads to.
pub(crate) enum AfterSetup {
    /// Another round: send [`ExpectSessionSetup::request`] again.
    More(Box<ExpectSessionSetup>),
    /// The session is set up.
    Done(Box<Established>),
}

impl ExpectSessionSetup {
    /// The request to send, and the SessionId to send it with.
    pub(crate) fn request(&self) -> (SessionSetupRequest<'_>, u64) {
        let req = SessionSetupRequest {
            security_mode: self.settled.security_mode as u8,
            capabilities: 0,
            token: &self.token,
        };
        (req, self.session_id)
    }

    /// The server's answer to the request sent as `sent`.
    ///
    /// Errors: the answer's NTSTATUS (STATUS_LOGON_FAILURE for a bad
    /// password, or for a guest or anonymous session given credentials);
    /// [`Error::Protocol`] past [`MAX_ROUNDS`] rounds or for an encrypted
    /// session without a cipher; [`Error::Integrity`] for a final answer
    /// not signed with the derived key; [`Error::SigningNeedsAccount`] for
    /// a session that must sign and has no key; the logon's errors.
    pub(crate) fn answer(mut self, sent: &[u8], answer: SetupAnswer<'_>, config: &ClientConfig) -> Result<AfterSetup> {
        if self.settled.is_311 {
            self.preauth.update(sent);
        }
        if answer.status == NtStatus::STATUS_MORE_PROCESSING_REQUIRED {
            if self.round >= MAX_ROUNDS {
                return Err(Error::Protocol("SESSION_SETUP did not converge".into()));
            }
            if self.settled.is_311 {
                self.preauth.update(answer.msg);
            }
            let body = SessionSetupResponse::decode(answer.msg)?;
            self.token = self.logon.step(&body.token)?;
            self.session_id = answer.session_id;
            self.round += 1;
            return Ok(AfterSetup::More(Box::new(self)));
        }
        if answer.status != NtStatus::STATUS_SUCCESS {
            return Err(Error::Status { command: Command::SessionSetup, status: answer.status });
        }
        let body = SessionSetupResponse::decode(answer.msg)?;
        self.logon.finish(&body.token)?;
        let key = self.logon.session_key();
        let logon = self.logon.facts();
        let last = Final { session_id: answer.session_id, flags: body.session_flags, msg: answer.msg };
        settle(self.settled, &self.preauth, last, key, logon, config).map(|e| AfterSetup::Done(Box::new(e)))
    }
}

/// The final SESSION_SETUP answer.
struct Final<'a> {
    session_id: u64,
    flags: u16,
    msg: &'a [u8],
}

/// The set-up session: the keys for the connection, what was negotiated,
/// what a 3.0.x tree validates, and when a Kerberos session is renewed.
pub(crate) struct Established {
    pub(crate) security: Security,
    pub(crate) negotiated: Negotiated,
    /// For FSCTL_VALIDATE_NEGOTIATE_INFO on 3.0 and 3.0.2 (`None` on
    /// 3.1.1, whose preauth hash covers it, and on an unsigned session).
    pub(crate) validate: Option<ValidateNegotiate>,
    pub(crate) ticket_lifetime: Option<std::time::Duration>,
}

/// The checks of the final answer, and the keys derived from `key`.
fn settle(
    s: Settled,
    preauth: &PreauthHash,
    last: Final<'_>,
    key: Option<Vec<u8>>,
    logon: LogonFacts,
    config: &ClientConfig,
) -> Result<Established> {
    let is_guest = last.flags & session_flags::IS_GUEST != 0;
    let is_anonymous = last.flags & session_flags::IS_NULL != 0 || logon.anonymous;
    let has_credentials = logon.kerberos || !(config.user.is_empty() && config.password.is_empty());
    if has_credentials && (is_guest || is_anonymous) {
        // A server that maps a bad password to guest, or an answer whose
        // flags were flipped on the way: either way there is no key to sign
        // with, and not the identity asked for.
        tracing::warn!(
            user = %config.user,
            "the SMB server answered with a guest or anonymous session although credentials were given; refusing it"
        );
        return Err(Error::Status { command: Command::SessionSetup, status: NtStatus::STATUS_LOGON_FAILURE });
    }
    let encrypt_all = last.flags & session_flags::ENCRYPT_DATA != 0 || config.require_encryption;
    let sign_all = s.sign_required || !s.is_311;
    let mut sec = Security { session_id: last.session_id, ..Default::default() };
    let mut signing = None;
    match key {
        Some(key) if !is_guest && !is_anonymous => {
            let keys = derive_keys(&key, s.neg.dialect, preauth, s.cipher);
            let signer = Signer::new(s.signing, &keys.signing);
            // The final answer is signed with the new key (3.1.1 always;
            // 3.0.x when either side requires signing). An unsigned one is
            // then refused, not skipped; otherwise on 3.0.x the signed
            // VALIDATE_NEGOTIATE_INFO checks the key.
            let mut msg = last.msg.to_vec();
            let signed = is_signed(&msg);
            if !signed && (s.is_311 || s.sign_required) {
                return Err(Error::Integrity("final SESSION_SETUP response is not signed"));
            }
            if signed && !signer.verify(&mut msg) {
                return Err(Error::Integrity("SESSION_SETUP response signature (key derivation mismatch?)"));
            }
            sec.signer = Some(signer);
            signing = Some(s.signing);
            sec.cipher = s.cipher.map(|c| Cipherer::new(c, &keys));
        }
        _ if sign_all => return Err(Error::SigningNeedsAccount),
        _ => {}
    }
    if encrypt_all && sec.cipher.is_none() {
        return Err(Error::Protocol(
            "encryption is required (require_encryption, or the server's session flag) but the server \
             offers no SMB encryption cipher (or gave no session key)"
                .into(),
        ));
    }
    sec.sign_all = sign_all && sec.signer.is_some();
    sec.encrypt_all = encrypt_all;
    let negotiated = Negotiated {
        dialect: s.neg.dialect,
        max_read_size: s.neg.max_read_size.min(config.max_io_size),
        max_write_size: s.neg.max_write_size.min(config.max_io_size),
        max_transact_size: s.neg.max_transact_size.min(config.max_io_size),
        signing,
        sign_all: sec.sign_all,
        cipher: if sec.cipher.is_some() { s.cipher } else { None },
        encrypt_all,
        is_guest,
        is_anonymous,
    };
    let validate = (!s.is_311 && signing.is_some()).then_some(s.validate);
    Ok(Established { security: sec, negotiated, validate, ticket_lifetime: logon.ticket_lifetime })
}

/// True if the message's header has SMB2_FLAGS_SIGNED.
fn is_signed(msg: &[u8]) -> bool {
    smb_proto::header::Header::decode(msg).is_ok_and(|h| h.flags & smb_proto::header::flags::SIGNED != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use smb_proto::header::Header;

    const SENT: &[u8] = b"the NEGOTIATE as sent";
    const ANSWER: &[u8] = b"the NEGOTIATE answer";
    const KEY: [u8; 16] = [0x55; 16];

    fn config(user: &str) -> ClientConfig {
        ClientConfig::new("127.0.0.1:445", user, if user.is_empty() { "" } else { "secret" })
    }

    fn answer(dialect: u16) -> NegotiateResponse {
        NegotiateResponse {
            security_mode: security_mode::SIGNING_ENABLED,
            dialect,
            server_guid: [7; 16],
            capabilities: 0,
            max_transact_size: 1 << 20,
            max_read_size: 1 << 20,
            max_write_size: 1 << 20,
            security_buffer: bytes::Bytes::new(),
            cipher: (dialect == dialect::SMB311).then_some(Cipher::Aes128Gcm),
            signing: (dialect == dialect::SMB311).then_some(SigningAlgorithm::AesGmac),
            preauth_sha512: dialect == dialect::SMB311,
        }
    }

    fn negotiated(cfg: &ClientConfig, neg: NegotiateResponse) -> Result<ExpectLogonStart> {
        ExpectNegotiate::new(cfg).answer(SENT, ANSWER, neg)
    }

    fn protocol_error(r: Result<ExpectLogonStart>) -> String {
        match r {
            Err(Error::Protocol(m)) => m,
            Err(e) => panic!("not a protocol error: {e}"),
            Ok(_) => panic!("accepted"),
        }
    }

    /// A final SESSION_SETUP answer's message with `flags`, signed with
    /// `signer` if given.
    fn final_msg(signer: Option<&Signer>) -> bytes::Bytes {
        let mut h = Header::request(Command::SessionSetup);
        h.flags = smb_proto::header::flags::SERVER_TO_REDIR;
        h.session_id = 0x1234;
        let mut out = BytesMut::new();
        h.encode(&mut out);
        out.extend_from_slice(&[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
        if let Some(s) = signer {
            s.sign(&mut out);
        }
        out.freeze()
    }

    fn logon(kerberos: bool) -> LogonFacts {
        LogonFacts { kerberos, anonymous: false, ticket_lifetime: None }
    }

    fn settle_with(
        start: ExpectLogonStart,
        cfg: &ClientConfig,
        flags: u16,
        msg: &[u8],
        key: Option<Vec<u8>>,
    ) -> Result<Established> {
        let last = Final { session_id: 0x1234, flags, msg };
        settle(start.settled, &start.preauth, last, key, logon(false), cfg)
    }

    /// The signer the gateway derives on 3.1.1 from [`KEY`] and the
    /// preauth hash of [`SENT`] and [`ANSWER`].
    fn signer_311() -> Signer {
        let mut preauth = PreauthHash::new();
        preauth.update(SENT);
        preauth.update(ANSWER);
        let keys = derive_keys(&KEY, dialect::SMB311, &preauth, Some(Cipher::Aes128Gcm));
        Signer::new(SigningAlgorithm::AesGmac, &keys.signing)
    }

    #[test]
    fn a_negotiate_answer_outside_what_was_offered_is_refused() {
        let only_311 = ClientConfig { dialects: vec![dialect::SMB311], ..config("u") };
        assert!(protocol_error(negotiated(&only_311, answer(dialect::SMB302))).contains("did not offer"));
        let no_sha512 = NegotiateResponse { preauth_sha512: false, ..answer(dialect::SMB311) };
        assert!(protocol_error(negotiated(&config("u"), no_sha512)).contains("SHA-512"));
        let tiny = NegotiateResponse { max_write_size: 4095, ..answer(dialect::SMB311) };
        assert!(protocol_error(negotiated(&config("u"), tiny)).contains("too small"));
    }

    #[test]
    fn smb30_signs_everything_and_takes_ccm_from_the_encryption_capability() {
        let neg = NegotiateResponse { capabilities: capabilities::ENCRYPTION, ..answer(dialect::SMB302) };
        let start = negotiated(&config("u"), neg).expect("negotiated");
        assert_eq!(start.settled.cipher, Some(Cipher::Aes128Ccm));
        // No key (an anonymous logon): 3.0.x must sign, so this ends here.
        let r = settle_with(start, &config(""), 0, &final_msg(None), None);
        assert!(matches!(&r, Err(Error::SigningNeedsAccount)), "{:?}", r.as_ref().err());
    }

    #[test]
    fn a_guest_or_anonymous_session_for_given_credentials_is_a_logon_failure() {
        for flags in [session_flags::IS_GUEST, session_flags::IS_NULL] {
            let start = negotiated(&config("u"), answer(dialect::SMB311)).expect("negotiated");
            let r = settle_with(start, &config("u"), flags, &final_msg(Some(&signer_311())), Some(KEY.to_vec()));
            match r {
                Err(Error::Status { status, .. }) => assert_eq!(status, NtStatus::STATUS_LOGON_FAILURE),
                other => panic!("flags {flags:#x}: {:?}", other.err()),
            }
        }
    }

    #[test]
    fn the_final_answer_on_311_must_be_signed_with_the_derived_key() {
        let cfg = config("u");
        let start = negotiated(&cfg, answer(dialect::SMB311)).expect("negotiated");
        let r = settle_with(start, &cfg, 0, &final_msg(None), Some(KEY.to_vec()));
        assert!(matches!(&r, Err(Error::Integrity(m)) if m.contains("not signed")), "{:?}", r.as_ref().err());

        let start = negotiated(&cfg, answer(dialect::SMB311)).expect("negotiated");
        let wrong = Signer::new(SigningAlgorithm::AesGmac, &[1; 16]);
        let r = settle_with(start, &cfg, 0, &final_msg(Some(&wrong)), Some(KEY.to_vec()));
        assert!(matches!(&r, Err(Error::Integrity(m)) if m.contains("signature")), "{:?}", r.as_ref().err());

        let start = negotiated(&cfg, answer(dialect::SMB311)).expect("negotiated");
        let done = settle_with(start, &cfg, 0, &final_msg(Some(&signer_311())), Some(KEY.to_vec())).expect("set up");
        assert_eq!(done.security.session_id, 0x1234);
        assert_eq!(done.negotiated.signing, Some(SigningAlgorithm::AesGmac));
        assert_eq!(done.negotiated.cipher, Some(Cipher::Aes128Gcm));
        assert!(!done.negotiated.sign_all, "3.1.1 signs all only when asked to");
        assert!(done.validate.is_none(), "3.1.1's preauth hash covers the NEGOTIATE");
    }

    #[test]
    fn required_encryption_without_a_cipher_is_refused() {
        let cfg = ClientConfig { require_encryption: true, ..config("u") };
        let neg = NegotiateResponse { cipher: None, ..answer(dialect::SMB311) };
        let start = negotiated(&cfg, neg).expect("negotiated");
        let r = settle_with(start, &cfg, 0, &final_msg(Some(&signer_311())), Some(KEY.to_vec()));
        assert!(
            matches!(&r, Err(Error::Protocol(m)) if m.contains("encryption is required")),
            "{:?}",
            r.as_ref().err()
        );
    }
}
