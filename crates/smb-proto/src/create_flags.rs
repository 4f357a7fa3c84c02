//! The values a CREATE is made of (MS-SMB2 2.2.13, MS-FSCC 2.6): access
//! masks, share access, dispositions, options, file attributes, oplock
//! levels and create actions. Kept apart from the CREATE codec so that the
//! info classes and the request trait can name them without importing it.

/// Access mask bits (MS-SMB2 2.2.13.1.1).
pub mod access {
    #![allow(missing_docs)]
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_ADD_FILE: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    pub const FILE_ADD_SUBDIRECTORY: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_TRAVERSE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;
}

/// ShareAccess bits.
pub mod share {
    #![allow(missing_docs)]
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const DELETE: u32 = 4;
    pub const ALL: u32 = 7;
}

/// CreateDisposition values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
#[allow(missing_docs)]
pub enum Disposition {
    Supersede = 0,
    Open = 1,
    Create = 2,
    OpenIf = 3,
    Overwrite = 4,
    OverwriteIf = 5,
}

/// CreateOptions bits.
pub mod options {
    #![allow(missing_docs)]
    pub const DIRECTORY_FILE: u32 = 0x0000_0001;
    pub const WRITE_THROUGH: u32 = 0x0000_0002;
    pub const SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    pub const NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    pub const RANDOM_ACCESS: u32 = 0x0000_0800;
    pub const DELETE_ON_CLOSE: u32 = 0x0000_1000;
    pub const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
}

/// File attribute bits (MS-FSCC 2.6).
pub mod attributes {
    #![allow(missing_docs)]
    pub const READONLY: u32 = 0x0000_0001;
    pub const HIDDEN: u32 = 0x0000_0002;
    pub const DIRECTORY: u32 = 0x0000_0010;
    pub const ARCHIVE: u32 = 0x0000_0020;
    pub const NORMAL: u32 = 0x0000_0080;
    pub const REPARSE_POINT: u32 = 0x0000_0400;
}

/// Oplock levels (MS-SMB2 2.2.13, 2.2.23).
pub mod oplock {
    #![allow(missing_docs)]
    pub const NONE: u8 = 0x00;
    pub const LEVEL_II: u8 = 0x01;
    pub const EXCLUSIVE: u8 = 0x08;
    pub const BATCH: u8 = 0x09;
    /// SMB2_OPLOCK_LEVEL_LEASE: a lease context says what is asked for.
    pub const LEASE: u8 = 0xFF;
}

/// CreateAction values of the response.
pub mod create_action {
    #![allow(missing_docs)]
    pub const SUPERSEDED: u32 = 0;
    pub const OPENED: u32 = 1;
    pub const CREATED: u32 = 2;
    pub const OVERWRITTEN: u32 = 3;
}
