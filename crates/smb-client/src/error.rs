//! The client's error type. NTSTATUS failures keep their symbolic names;
//! transport failures say whether the connection was poisoned.

use smb_proto::{Command, DecodeError, NtStatus};

/// Errors returned by the SMB client.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The server answered a command with a failure NTSTATUS.
    #[error("{command:?} failed: {status}")]
    Status {
        /// The command that failed.
        command: Command,
        /// The NTSTATUS from the response header.
        status: NtStatus,
    },
    /// A message from the server could not be decoded; the connection is
    /// poisoned.
    #[error("malformed response: {0}")]
    Decode(#[from] DecodeError),
    /// A response failed signature or decryption checks; the connection is
    /// poisoned.
    #[error("response failed its integrity check: {0}")]
    Integrity(&'static str),
    /// Socket error (connect, read or write).
    #[error("I/O error: {0}")]
    Io(String),
    /// A deadline passed (connect, write, response); the connection is
    /// poisoned since its stream may be desynchronised.
    #[error("timed out: {0}")]
    Timeout(&'static str),
    /// The connection is gone (closed, reset or poisoned earlier).
    #[error("connection lost: {0}")]
    ConnectionLost(String),
    /// Authentication failed locally (bad SPNEGO/NTLM token).
    #[error("authentication: {0}")]
    Auth(#[from] smb_auth::AuthError),
    /// The server chose something we did not offer or cannot use.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A file opened again by name ([`crate::Tree::reopen`]) is not the
    /// file that was open: another one took its name meanwhile.
    #[error("not the same file: {0}")]
    NotSameFile(String),
    /// The caller asked for something invalid (e.g. a name too long).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A DFS link names a server this pool may not connect to
    /// ([`crate::PoolConfig::dfs_servers`]): the server's name.
    #[error("the DFS link now points at {0}, a server this pool may not connect to")]
    DfsTargetRefused(String),
    /// The server requires every message signed, but the logon gave a
    /// guest or anonymous session, which has no key to sign with (MS-SMB2
    /// 3.2.5.3.1): an account is needed.
    #[error("the server requires signing, which a guest or anonymous session cannot do")]
    SigningNeedsAccount,
}

impl Error {
    /// The NTSTATUS, if this is a [`Error::Status`].
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Error::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True if the error means the connection can no longer be used and the
    /// operation may be retried on another one.
    pub fn is_connection_error(&self) -> bool {
        matches!(
            self,
            Error::Decode(_) | Error::Integrity(_) | Error::Io(_) | Error::Timeout(_) | Error::ConnectionLost(_)
        ) || matches!(
            self.status(),
            Some(NtStatus::STATUS_USER_SESSION_DELETED)
                | Some(NtStatus::STATUS_NETWORK_SESSION_EXPIRED)
                | Some(NtStatus::STATUS_NETWORK_NAME_DELETED)
        )
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
