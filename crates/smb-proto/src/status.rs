//! NTSTATUS values (MS-ERREF 2.3) with their symbolic names, so errors read as
//! `STATUS_LOGON_FAILURE` rather than `0xc000006d`.

use std::fmt;

/// A 32-bit NTSTATUS code as carried in the SMB2 header (MS-SMB2 2.2.1).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NtStatus(pub u32);

macro_rules! statuses {
    ($($name:ident = $val:expr,)*) => {
        impl NtStatus {
            $(#[doc = concat!("`", stringify!($name), "`")] pub const $name: NtStatus = NtStatus($val);)*

            /// The symbolic name, if this code is one we know.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

statuses! {
    STATUS_SUCCESS = 0x0000_0000,
    STATUS_PENDING = 0x0000_0103,
    STATUS_NOTIFY_ENUM_DIR = 0x0000_010C,
    STATUS_BUFFER_OVERFLOW = 0x8000_0005,
    STATUS_NO_MORE_FILES = 0x8000_0006,
    STATUS_UNSUCCESSFUL = 0xC000_0001,
    STATUS_NOT_IMPLEMENTED = 0xC000_0002,
    STATUS_INVALID_INFO_CLASS = 0xC000_0003,
    STATUS_INFO_LENGTH_MISMATCH = 0xC000_0004,
    STATUS_INVALID_HANDLE = 0xC000_0008,
    STATUS_INVALID_PARAMETER = 0xC000_000D,
    STATUS_NO_SUCH_FILE = 0xC000_000F,
    STATUS_INVALID_DEVICE_REQUEST = 0xC000_0010,
    STATUS_END_OF_FILE = 0xC000_0011,
    STATUS_MORE_PROCESSING_REQUIRED = 0xC000_0016,
    STATUS_NO_MEMORY = 0xC000_0017,
    STATUS_ACCESS_DENIED = 0xC000_0022,
    STATUS_BUFFER_TOO_SMALL = 0xC000_0023,
    STATUS_OBJECT_NAME_INVALID = 0xC000_0033,
    STATUS_OBJECT_NAME_NOT_FOUND = 0xC000_0034,
    STATUS_OBJECT_NAME_COLLISION = 0xC000_0035,
    STATUS_OBJECT_PATH_INVALID = 0xC000_0039,
    STATUS_OBJECT_PATH_NOT_FOUND = 0xC000_003A,
    STATUS_OBJECT_PATH_SYNTAX_BAD = 0xC000_003B,
    STATUS_DATA_ERROR = 0xC000_003E,
    STATUS_SHARING_VIOLATION = 0xC000_0043,
    STATUS_EA_TOO_LARGE = 0xC000_0050,
    STATUS_NONEXISTENT_EA_ENTRY = 0xC000_0051,
    STATUS_NO_EAS_ON_FILE = 0xC000_0052,
    STATUS_EA_CORRUPT_ERROR = 0xC000_0053,
    STATUS_FILE_LOCK_CONFLICT = 0xC000_0054,
    STATUS_LOCK_NOT_GRANTED = 0xC000_0055,
    STATUS_DELETE_PENDING = 0xC000_0056,
    STATUS_PRIVILEGE_NOT_HELD = 0xC000_0061,
    STATUS_WRONG_PASSWORD = 0xC000_006A,
    STATUS_LOGON_FAILURE = 0xC000_006D,
    STATUS_ACCOUNT_RESTRICTION = 0xC000_006E,
    STATUS_PASSWORD_EXPIRED = 0xC000_0071,
    STATUS_ACCOUNT_DISABLED = 0xC000_0072,
    STATUS_DISK_FULL = 0xC000_007F,
    STATUS_INSUFFICIENT_RESOURCES = 0xC000_009A,
    STATUS_FILE_IS_A_DIRECTORY = 0xC000_00BA,
    STATUS_NOT_SUPPORTED = 0xC000_00BB,
    STATUS_NETWORK_NAME_DELETED = 0xC000_00C9,
    STATUS_NETWORK_ACCESS_DENIED = 0xC000_00CA,
    STATUS_BAD_NETWORK_NAME = 0xC000_00CC,
    STATUS_TOO_MANY_SESSIONS = 0xC000_00CE,
    STATUS_REQUEST_NOT_ACCEPTED = 0xC000_00D0,
    STATUS_NOT_SAME_DEVICE = 0xC000_00D4,
    STATUS_FILE_RENAMED = 0xC000_00D5,
    STATUS_DIRECTORY_NOT_EMPTY = 0xC000_0101,
    STATUS_NOT_A_DIRECTORY = 0xC000_0103,
    STATUS_NAME_TOO_LONG = 0xC000_0106,
    STATUS_FILES_OPEN = 0xC000_0107,
    STATUS_CANCELLED = 0xC000_0120,
    STATUS_CANNOT_DELETE = 0xC000_0121,
    STATUS_FILE_DELETED = 0xC000_0123,
    STATUS_FILE_CLOSED = 0xC000_0128,
    STATUS_INVALID_LEVEL = 0xC000_0148,
    STATUS_PIPE_BROKEN = 0xC000_014B,
    STATUS_IO_TIMEOUT = 0xC000_00B5,
    STATUS_CONNECTION_DISCONNECTED = 0xC000_020C,
    STATUS_CONNECTION_RESET = 0xC000_020D,
    STATUS_USER_SESSION_DELETED = 0xC000_0203,
    STATUS_NOT_FOUND = 0xC000_0225,
    STATUS_NETWORK_SESSION_EXPIRED = 0xC000_035C,
}

impl NtStatus {
    /// True for success and informational codes (severity 0 or 1).
    pub fn is_success(self) -> bool {
        self.0 >> 30 <= 1
    }

    /// True for error severity (0b11).
    pub fn is_error(self) -> bool {
        self.0 >> 30 == 3
    }
}

impl fmt::Display for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({:#010x})", self.0),
            None => write!(f, "NTSTATUS {:#010x}", self.0),
        }
    }
}

impl fmt::Debug for NtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_severity() {
        assert_eq!(NtStatus(0xC000_006D).to_string(), "STATUS_LOGON_FAILURE (0xc000006d)");
        assert!(NtStatus::STATUS_PENDING.is_success());
        assert!(!NtStatus::STATUS_NO_MORE_FILES.is_error());
        assert!(NtStatus::STATUS_ACCESS_DENIED.is_error());
        assert_eq!(NtStatus(0xC0FF_EE00).to_string(), "NTSTATUS 0xc0ffee00");
    }
}
