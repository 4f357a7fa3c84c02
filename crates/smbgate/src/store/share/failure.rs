//! What an SMB failure means to the store: the server's NTSTATUS turned
//! into a [`Failure`] (MS-ERREF 2.3 names them), so that no rule above the
//! share layer matches a wire status; and the count of SMB errors by
//! status for the metrics (what each means to an S3 client is the store's
//! `error`).

use smb_client::Error as SmbError;
use smb_proto::NtStatus;

/// One kind of failed SMB request, as the store tells them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The name does not exist (STATUS_OBJECT_NAME_NOT_FOUND,
    /// STATUS_NO_SUCH_FILE).
    NameNotFound,
    /// A directory on the way to the name does not exist
    /// (STATUS_OBJECT_PATH_NOT_FOUND).
    PathNotFound,
    /// A component of the path is a file (STATUS_NOT_A_DIRECTORY).
    NotADirectory,
    /// The path's syntax is refused (STATUS_OBJECT_PATH_INVALID,
    /// STATUS_OBJECT_PATH_SYNTAX_BAD).
    BadPath,
    /// The file is being deleted and goes once its last open closes
    /// (STATUS_DELETE_PENDING).
    DeletePending,
    /// A directory stands where a file was asked for
    /// (STATUS_FILE_IS_A_DIRECTORY).
    IsDirectory,
    /// The directory still has entries (STATUS_DIRECTORY_NOT_EMPTY).
    NotEmpty,
    /// The name is taken (STATUS_OBJECT_NAME_COLLISION).
    Collision,
    /// Another open denies what this one needs
    /// (STATUS_SHARING_VIOLATION).
    SharingViolation,
    /// STATUS_ACCESS_DENIED: no right to it, or, on Samba, a rename over
    /// a file another handle holds open.
    AccessDenied,
    /// STATUS_NETWORK_ACCESS_DENIED.
    NetworkAccessDenied,
    /// The server cannot hold the name: too long, or a character it cannot
    /// store (STATUS_OBJECT_NAME_INVALID, STATUS_NAME_TOO_LONG).
    NameInvalid,
    /// A byte-range lock is in the way (STATUS_FILE_LOCK_CONFLICT).
    LockConflict,
    /// The server is out of resources or sessions
    /// (STATUS_INSUFFICIENT_RESOURCES, STATUS_TOO_MANY_SESSIONS).
    Exhausted,
    /// The share keeps no extended attributes (STATUS_EAS_NOT_SUPPORTED).
    EasNotSupported,
    /// The server has no room for what was written: STATUS_DISK_FULL (a
    /// full disk; or, from Samba, an extended attribute larger than the
    /// file system keeps, about 4 KB on ext4) or STATUS_EA_TOO_LARGE.
    NoRoom,
    /// The server refused the logon: a wrong user name or password, or an
    /// account that may not log on now (disabled, locked out, expired,
    /// outside its hours or workstations, a password to change)
    /// (STATUS_LOGON_FAILURE, STATUS_WRONG_PASSWORD, STATUS_ACCOUNT_*,
    /// STATUS_PASSWORD_EXPIRED, STATUS_PASSWORD_MUST_CHANGE,
    /// STATUS_INVALID_LOGON_HOURS, STATUS_INVALID_WORKSTATION,
    /// STATUS_LOGON_TYPE_NOT_GRANTED).
    LogonRefused,
    /// The share does not exist on the server (STATUS_BAD_NETWORK_NAME).
    NoSuchShare,
    /// Any other status, or no status at all (a lost connection, a
    /// protocol error).
    Other,
}

impl Failure {
    /// The failure a server's `status` means.
    pub fn of_status(status: NtStatus) -> Failure {
        match status {
            // A symbolic link the server leaves to the client to follow
            // (MS-SMB2 2.2.2.2.1): the gateway never follows one, so no
            // object is there.
            NtStatus::STATUS_OBJECT_NAME_NOT_FOUND
            | NtStatus::STATUS_NO_SUCH_FILE
            | NtStatus::STATUS_STOPPED_ON_SYMLINK => Failure::NameNotFound,
            NtStatus::STATUS_OBJECT_PATH_NOT_FOUND => Failure::PathNotFound,
            NtStatus::STATUS_NOT_A_DIRECTORY => Failure::NotADirectory,
            NtStatus::STATUS_OBJECT_PATH_INVALID | NtStatus::STATUS_OBJECT_PATH_SYNTAX_BAD => Failure::BadPath,
            NtStatus::STATUS_DELETE_PENDING => Failure::DeletePending,
            NtStatus::STATUS_FILE_IS_A_DIRECTORY => Failure::IsDirectory,
            NtStatus::STATUS_DIRECTORY_NOT_EMPTY => Failure::NotEmpty,
            NtStatus::STATUS_OBJECT_NAME_COLLISION => Failure::Collision,
            NtStatus::STATUS_SHARING_VIOLATION => Failure::SharingViolation,
            NtStatus::STATUS_ACCESS_DENIED => Failure::AccessDenied,
            NtStatus::STATUS_NETWORK_ACCESS_DENIED => Failure::NetworkAccessDenied,
            NtStatus::STATUS_OBJECT_NAME_INVALID | NtStatus::STATUS_NAME_TOO_LONG => Failure::NameInvalid,
            NtStatus::STATUS_FILE_LOCK_CONFLICT => Failure::LockConflict,
            NtStatus::STATUS_INSUFFICIENT_RESOURCES | NtStatus::STATUS_TOO_MANY_SESSIONS => Failure::Exhausted,
            NtStatus::STATUS_EAS_NOT_SUPPORTED => Failure::EasNotSupported,
            NtStatus::STATUS_EA_TOO_LARGE | NtStatus::STATUS_DISK_FULL => Failure::NoRoom,
            NtStatus::STATUS_LOGON_FAILURE
            | NtStatus::STATUS_WRONG_PASSWORD
            | NtStatus::STATUS_ACCOUNT_RESTRICTION
            | NtStatus::STATUS_ACCOUNT_DISABLED
            | NtStatus::STATUS_ACCOUNT_EXPIRED
            | NtStatus::STATUS_ACCOUNT_LOCKED_OUT
            | NtStatus::STATUS_PASSWORD_EXPIRED
            | NtStatus::STATUS_PASSWORD_MUST_CHANGE
            | NtStatus::STATUS_INVALID_LOGON_HOURS
            | NtStatus::STATUS_INVALID_WORKSTATION
            | NtStatus::STATUS_LOGON_TYPE_NOT_GRANTED => Failure::LogonRefused,
            NtStatus::STATUS_BAD_NETWORK_NAME => Failure::NoSuchShare,
            _ => Failure::Other,
        }
    }

    /// The failure an SMB error means: by its status, else
    /// [`Failure::Other`] (a lost connection, a protocol error). For the
    /// pools' connects, at startup and for users' own accounts, which see
    /// the SMB error before any share operation.
    pub fn of_error(e: &SmbError) -> Failure {
        e.status().map_or(Failure::Other, Failure::of_status)
    }

    /// Nothing is at the name: it, or a directory on its path, does not
    /// exist, is a file where a directory was needed, or is going.
    pub fn is_not_found(self) -> bool {
        matches!(self, Failure::NameNotFound | Failure::PathNotFound | Failure::DeletePending | Failure::NotADirectory)
    }

    /// The path cannot be walked (a component is a file, or the syntax is
    /// refused): its parents need a look.
    pub fn is_bad_path(self) -> bool {
        matches!(self, Failure::BadPath | Failure::NotADirectory)
    }

    /// Another client holds the file: a sharing violation, or Samba's
    /// access denied for a rename over a file open elsewhere.
    pub fn is_busy(self) -> bool {
        matches!(self, Failure::SharingViolation | Failure::AccessDenied)
    }
}

/// A failed share operation. Above the share layer it is known by what it
/// means ([`ShareError::failure`]) and by its text for the log; the SMB
/// error behind it stays inside the layer.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ShareError(SmbError);

/// The result of a share operation.
pub type Result<T> = std::result::Result<T, ShareError>;

impl From<SmbError> for ShareError {
    fn from(e: SmbError) -> Self {
        ShareError(e)
    }
}

impl ShareError {
    /// What the failure means to the store ([`Failure::Other`] for one
    /// without a status: a lost connection, a protocol error).
    pub fn failure(&self) -> Failure {
        self.0.failure()
    }

    /// True if the connection was lost or poisoned (the request may be
    /// retried on another).
    pub fn is_connection_error(&self) -> bool {
        self.0.is_connection_error()
    }

    /// The caller asked for something the share layer cannot send (a name
    /// too long, a record too large), with the reason.
    pub fn invalid_argument(&self) -> Option<&str> {
        match &self.0 {
            SmbError::InvalidArgument(m) => Some(m),
            _ => None,
        }
    }

    /// For a failed record write: true if the server had no room for the
    /// record. A full disk answers the same; a smaller record then fails
    /// too.
    pub fn is_record_too_large(&self) -> bool {
        self.failure() == Failure::NoRoom
    }

    /// The server's status, for the share layer's own decisions.
    pub(super) fn status(&self) -> Option<NtStatus> {
        self.0.status()
    }
}

/// The [`Failure`] of an SMB error, inside the share layer.
pub(super) trait SmbFailure {
    /// What the error means to the store ([`Failure::Other`] for one
    /// without a status).
    fn failure(&self) -> Failure;
}

impl SmbFailure for SmbError {
    fn failure(&self) -> Failure {
        Failure::of_error(self)
    }
}

/// True if nothing is at the name ([`Failure::is_not_found`]).
pub fn is_not_found(e: &ShareError) -> bool {
    e.failure().is_not_found()
}

/// True if the path cannot be walked ([`Failure::is_bad_path`]).
pub fn is_bad_path(e: &ShareError) -> bool {
    e.failure().is_bad_path()
}

/// True if the server refused the name itself: too long for it, or a
/// character it cannot store.
pub fn is_unholdable_name(e: &ShareError) -> bool {
    e.failure() == Failure::NameInvalid
}

/// True if another client holds the file ([`Failure::is_busy`]).
pub fn is_busy(e: &ShareError) -> bool {
    e.failure().is_busy()
}

/// A not-found error of a CREATE, for an answer the store makes up (a
/// name that cannot be the object asked for).
pub fn not_found() -> ShareError {
    ShareError(SmbError::Status { command: smb_proto::Command::Create, status: NtStatus::STATUS_OBJECT_NAME_NOT_FOUND })
}

/// A sharing-violation error of a CREATE, for an open that gave up (every
/// try came back stale).
pub fn sharing_violation() -> ShareError {
    ShareError(SmbError::Status { command: smb_proto::Command::Create, status: NtStatus::STATUS_SHARING_VIOLATION })
}

/// The error a server answers for `failure` (one NTSTATUS that means it):
/// what the in-memory share of the rule tests answers.
#[cfg(test)]
pub fn failing_with(failure: Failure) -> ShareError {
    let status = match failure {
        Failure::NameNotFound => NtStatus::STATUS_OBJECT_NAME_NOT_FOUND,
        Failure::PathNotFound => NtStatus::STATUS_OBJECT_PATH_NOT_FOUND,
        Failure::NotADirectory => NtStatus::STATUS_NOT_A_DIRECTORY,
        Failure::BadPath => NtStatus::STATUS_OBJECT_PATH_INVALID,
        Failure::DeletePending => NtStatus::STATUS_DELETE_PENDING,
        Failure::IsDirectory => NtStatus::STATUS_FILE_IS_A_DIRECTORY,
        Failure::NotEmpty => NtStatus::STATUS_DIRECTORY_NOT_EMPTY,
        Failure::Collision => NtStatus::STATUS_OBJECT_NAME_COLLISION,
        Failure::SharingViolation => NtStatus::STATUS_SHARING_VIOLATION,
        Failure::AccessDenied => NtStatus::STATUS_ACCESS_DENIED,
        Failure::NetworkAccessDenied => NtStatus::STATUS_NETWORK_ACCESS_DENIED,
        Failure::NameInvalid => NtStatus::STATUS_OBJECT_NAME_INVALID,
        Failure::LockConflict => NtStatus::STATUS_FILE_LOCK_CONFLICT,
        Failure::Exhausted => NtStatus::STATUS_INSUFFICIENT_RESOURCES,
        Failure::EasNotSupported => NtStatus::STATUS_EAS_NOT_SUPPORTED,
        Failure::NoRoom => NtStatus::STATUS_DISK_FULL,
        Failure::LogonRefused => NtStatus::STATUS_LOGON_FAILURE,
        Failure::NoSuchShare => NtStatus::STATUS_BAD_NETWORK_NAME,
        Failure::Other => return ShareError(SmbError::ConnectionLost("in-memory share".into())),
    };
    ShareError(SmbError::Status { command: smb_proto::Command::Create, status })
}

/// The error a server answers with `status` to `command`: what the
/// in-memory share of the rule tests answers where no [`Failure`] names
/// the status.
#[cfg(test)]
pub fn failing_status(command: smb_proto::Command, status: NtStatus) -> ShareError {
    ShareError(SmbError::Status { command, status })
}

/// SMB errors that reached the store's error mapping, by status name
/// (process-wide; read by the metrics at each scrape).
static SMB_ERRORS: std::sync::Mutex<std::collections::BTreeMap<String, u64>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Counts one SMB error: its NTSTATUS name (`STATUS_DISK_FULL`), its hex
/// value when it has no name, `connection` for a lost or poisoned
/// connection, or `other`.
pub(crate) fn count_smb_error(e: &ShareError) {
    let status = match e.0.status() {
        Some(s) => s.name().map_or_else(|| format!("{:#010x}", s.0), str::to_string),
        None if e.is_connection_error() => "connection".to_string(),
        None => "other".to_string(),
    };
    *SMB_ERRORS.lock().unwrap().entry(status).or_default() += 1;
}

/// Every SMB error count so far, by status name (see `count_smb_error`).
pub fn smb_error_counts() -> Vec<(String, u64)> {
    SMB_ERRORS.lock().unwrap().iter().map(|(k, v)| (k.clone(), *v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_hold_what_the_rules_rely_on() {
        let f = |s| Failure::of_status(s);
        for s in [
            NtStatus::STATUS_OBJECT_NAME_NOT_FOUND,
            NtStatus::STATUS_OBJECT_PATH_NOT_FOUND,
            NtStatus::STATUS_NO_SUCH_FILE,
            NtStatus::STATUS_DELETE_PENDING,
            NtStatus::STATUS_NOT_A_DIRECTORY,
            NtStatus::STATUS_STOPPED_ON_SYMLINK,
        ] {
            assert!(f(s).is_not_found(), "{s}");
        }
        assert!(!f(NtStatus::STATUS_FILE_IS_A_DIRECTORY).is_not_found());
        assert!(f(NtStatus::STATUS_NOT_A_DIRECTORY).is_bad_path());
        assert!(f(NtStatus::STATUS_OBJECT_PATH_SYNTAX_BAD).is_bad_path());
        assert!(!f(NtStatus::STATUS_OBJECT_PATH_NOT_FOUND).is_bad_path());
        assert!(f(NtStatus::STATUS_ACCESS_DENIED).is_busy() && f(NtStatus::STATUS_SHARING_VIOLATION).is_busy());
        assert!(!f(NtStatus::STATUS_NETWORK_ACCESS_DENIED).is_busy());
        assert_eq!(f(NtStatus::STATUS_NAME_TOO_LONG), Failure::NameInvalid);
        assert_eq!(SmbError::Timeout("t").failure(), Failure::Other);
    }

    #[test]
    fn every_refused_logon_is_one_kind() {
        for s in [
            NtStatus::STATUS_LOGON_FAILURE,
            NtStatus::STATUS_WRONG_PASSWORD,
            NtStatus::STATUS_ACCOUNT_DISABLED,
            NtStatus::STATUS_ACCOUNT_LOCKED_OUT,
            NtStatus::STATUS_ACCOUNT_EXPIRED,
            NtStatus::STATUS_PASSWORD_EXPIRED,
            NtStatus::STATUS_PASSWORD_MUST_CHANGE,
            NtStatus::STATUS_INVALID_LOGON_HOURS,
        ] {
            assert_eq!(Failure::of_status(s), Failure::LogonRefused, "{s}");
        }
        assert_eq!(Failure::of_status(NtStatus::STATUS_BAD_NETWORK_NAME), Failure::NoSuchShare);
        assert_eq!(Failure::of_error(&SmbError::Timeout("t")), Failure::Other);
    }
}
