//! File information structures carried by QUERY_INFO, SET_INFO,
//! QUERY_DIRECTORY and the ExtA create context (MS-FSCC 2.4).

use bytes::BytesMut;

use crate::error::{DecodeError, DecodeResult};
use crate::message::{put_u32, put_u64};
use crate::reader::{put_utf16, utf16_to_string, Reader};

/// FileInformationClass values we use (MS-FSCC 2.4).
pub mod class {
    #![allow(missing_docs)]
    pub const FILE_BASIC_INFORMATION: u8 = 4;
    pub const FILE_STANDARD_INFORMATION: u8 = 5;
    pub const FILE_INTERNAL_INFORMATION: u8 = 6;
    pub const FILE_EA_INFORMATION: u8 = 7;
    pub const FILE_RENAME_INFORMATION: u8 = 10;
    pub const FILE_DISPOSITION_INFORMATION: u8 = 13;
    pub const FILE_FULL_EA_INFORMATION: u8 = 15;
    pub const FILE_ALL_INFORMATION: u8 = 18;
    pub const FILE_END_OF_FILE_INFORMATION: u8 = 20;
    pub const FILE_NETWORK_OPEN_INFORMATION: u8 = 34;
    pub const FILE_ID_FULL_DIRECTORY_INFORMATION: u8 = 38;
    pub const FILE_NORMALIZED_NAME_INFORMATION: u8 = 48;
    /// Filesystem class (InfoType FILESYSTEM): FileFsFullSizeInformation.
    pub const FILE_FS_FULL_SIZE_INFORMATION: u8 = 7;
}

/// InfoType values of QUERY_INFO/SET_INFO (MS-SMB2 2.2.37).
pub mod info_type {
    #![allow(missing_docs)]
    pub const FILE: u8 = 1;
    pub const FILESYSTEM: u8 = 2;
    pub const SECURITY: u8 = 3;
    pub const QUOTA: u8 = 4;
}

/// Timestamps (FILETIME, 100 ns since 1601), sizes (bytes) and attributes
/// of a file, as returned by CREATE, CLOSE and FileNetworkOpenInformation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileTimes {
    /// CreationTime.
    pub creation: u64,
    /// LastAccessTime.
    pub last_access: u64,
    /// LastWriteTime.
    pub last_write: u64,
    /// ChangeTime.
    pub change: u64,
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndOfFile: the file size in bytes.
    pub end_of_file: u64,
    /// FileAttributes.
    pub attributes: u32,
}

impl FileTimes {
    /// Decodes FileNetworkOpenInformation (MS-FSCC 2.4.29), 56 bytes.
    pub fn decode_network_open(b: &[u8]) -> DecodeResult<FileTimes> {
        let mut r = Reader::new(b);
        Ok(FileTimes {
            creation: r.u64("CreationTime")?,
            last_access: r.u64("LastAccessTime")?,
            last_write: r.u64("LastWriteTime")?,
            change: r.u64("ChangeTime")?,
            allocation_size: r.u64("AllocationSize")?,
            end_of_file: r.u64("EndOfFile")?,
            attributes: r.u32("FileAttributes")?,
        })
    }

    /// True if FILE_ATTRIBUTE_DIRECTORY is set.
    pub fn is_directory(&self) -> bool {
        self.attributes & crate::create_flags::attributes::DIRECTORY != 0
    }

    /// True if FILE_ATTRIBUTE_READONLY is set: the server refuses to delete
    /// the file or open it for writing (MS-FSCC 2.6).
    pub fn is_read_only(&self) -> bool {
        self.attributes & crate::create_flags::attributes::READONLY != 0
    }

    /// True if FILE_ATTRIBUTE_REPARSE_POINT is set: a symbolic link, a
    /// junction or another reparse point (MS-FSCC 2.1.2), which may lead
    /// anywhere on the server.
    pub fn is_reparse_point(&self) -> bool {
        self.attributes & crate::create_flags::attributes::REPARSE_POINT != 0
    }
}

/// FileStandardInformation (MS-FSCC 2.4.41): what says whether an open
/// file is still linked in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StandardInfo {
    /// AllocationSize in bytes.
    pub allocation_size: u64,
    /// EndOfFile: the size in bytes.
    pub end_of_file: u64,
    /// NumberOfLinks: 0 once the file is unlinked while open.
    pub number_of_links: u32,
    /// DeletePending: some open has marked it delete-on-close.
    pub delete_pending: bool,
    /// Directory.
    pub directory: bool,
}

impl StandardInfo {
    /// Decodes the 24-byte structure.
    ///
    /// Errors: fewer than 22 bytes.
    pub fn decode(b: &[u8]) -> DecodeResult<StandardInfo> {
        let mut r = Reader::new(b);
        Ok(StandardInfo {
            allocation_size: r.u64("AllocationSize")?,
            end_of_file: r.u64("EndOfFile")?,
            number_of_links: r.u32("NumberOfLinks")?,
            delete_pending: r.u8("DeletePending")? != 0,
            directory: r.u8("Directory")? != 0,
        })
    }

    /// True if the file is gone from its directory, or going: another open
    /// deleted it (no link left) or marked it delete-on-close.
    pub fn is_going(&self) -> bool {
        self.number_of_links == 0 || self.delete_pending
    }
}

/// One extended attribute (FILE_FULL_EA_INFORMATION, MS-FSCC 2.4.15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullEa {
    /// EA name (ASCII, no NUL).
    pub name: String,
    /// EA value; empty deletes the EA on SET_INFO.
    pub value: Vec<u8>,
}

/// Appends a FILE_FULL_EA_INFORMATION chain (entries 4-byte aligned).
pub fn encode_full_ea(out: &mut BytesMut, eas: &[FullEa]) {
    for (i, ea) in eas.iter().enumerate() {
        let start = out.len();
        put_u32(out, 0);
        out.extend_from_slice(&[0, ea.name.len() as u8]);
        out.extend_from_slice(&(ea.value.len() as u16).to_le_bytes());
        out.extend_from_slice(ea.name.as_bytes());
        out.extend_from_slice(&[0]);
        out.extend_from_slice(&ea.value);
        if i + 1 < eas.len() {
            let len = out.len() - start;
            let padded = len.next_multiple_of(4);
            out.resize(start + padded, 0);
            out[start..start + 4].copy_from_slice(&(padded as u32).to_le_bytes());
        }
    }
}

/// Decodes a FILE_FULL_EA_INFORMATION chain (MS-FSCC 2.4.15).
///
/// Errors: Truncated when an entry overruns the buffer; BadValue naming
/// `EA NextEntryOffset` when the next entry would start inside this one or
/// off a 4-byte boundary.
pub fn decode_full_ea(b: &[u8]) -> DecodeResult<Vec<FullEa>> {
    let mut out = Vec::new();
    let mut off = 0usize;
    while off < b.len() {
        let mut r = Reader::new(&b[off..]);
        let next = r.u32("EA NextEntryOffset")? as usize;
        r.skip(1, "EA Flags")?;
        let name_len = r.u8("EaNameLength")? as usize;
        let value_len = r.u16("EaValueLength")? as usize;
        let name = r.take(name_len, "EaName")?;
        r.skip(1, "EaName NUL")?;
        let value = r.take(value_len, "EaValue")?;
        out.push(FullEa { name: String::from_utf8_lossy(name).into_owned(), value: value.to_vec() });
        if next == 0 {
            break;
        }
        // Entries never overlap (each starts past the end of the one
        // before), and start 4-aligned (MS-FSCC 2.4.15): otherwise one
        // answer could decode to far more EAs than its bytes hold.
        if next < r.pos() || !next.is_multiple_of(4) {
            return Err(DecodeError::BadValue { field: "EA NextEntryOffset", got: next as u64 });
        }
        off = off.checked_add(next).ok_or(DecodeError::OutOfBounds("EA NextEntryOffset"))?;
    }
    Ok(out)
}

/// Appends FILE_GET_EA_INFORMATION entries naming the EAs to query.
pub fn encode_get_ea(out: &mut BytesMut, names: &[&str]) {
    for (i, n) in names.iter().enumerate() {
        let start = out.len();
        put_u32(out, 0);
        out.extend_from_slice(&[n.len() as u8]);
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(&[0]);
        if i + 1 < names.len() {
            let padded = (out.len() - start).next_multiple_of(4);
            out.resize(start + padded, 0);
            out[start..start + 4].copy_from_slice(&(padded as u32).to_le_bytes());
        }
    }
}

/// A SET_INFO payload: InfoType FILE, or a DACL (InfoType SECURITY).
#[derive(Debug, Clone)]
#[allow(missing_docs)] // variant docs name the fields
pub enum SetFileInfo<'a> {
    /// FileRenameInformation (SMB2 form, MS-FSCC 2.4.37.2): target path
    /// relative to the share root.
    Rename { target: &'a str, replace_if_exists: bool },
    /// FileDispositionInformation: mark for delete on close.
    Disposition { delete_pending: bool },
    /// FileEndOfFileInformation: truncate or extend to a size in bytes.
    EndOfFile(u64),
    /// FileBasicInformation; 0 leaves a time unchanged, attributes 0 too.
    Basic { creation: u64, last_access: u64, last_write: u64, change: u64, attributes: u32 },
    /// FileFullEaInformation: set (or delete, with an empty value) EAs.
    FullEa(&'a [FullEa]),
    /// InfoType SECURITY with DACL_SECURITY_INFORMATION: a self-relative
    /// security descriptor carrying the new DACL (see
    /// `security::SecurityDescriptor::encode_dacl`).
    Dacl(&'a [u8]),
}

impl SetFileInfo<'_> {
    /// The FileInformationClass of this payload.
    pub fn class(&self) -> u8 {
        match self {
            SetFileInfo::Rename { .. } => class::FILE_RENAME_INFORMATION,
            SetFileInfo::Disposition { .. } => class::FILE_DISPOSITION_INFORMATION,
            SetFileInfo::EndOfFile(_) => class::FILE_END_OF_FILE_INFORMATION,
            SetFileInfo::Basic { .. } => class::FILE_BASIC_INFORMATION,
            SetFileInfo::FullEa(_) => class::FILE_FULL_EA_INFORMATION,
            SetFileInfo::Dacl(_) => 0,
        }
    }

    /// The InfoType of this payload (MS-SMB2 2.2.39).
    pub fn info_type(&self) -> u8 {
        match self {
            SetFileInfo::Dacl(_) => info_type::SECURITY,
            _ => info_type::FILE,
        }
    }

    /// The AdditionalInformation of this payload: which parts of a
    /// security descriptor it sets; 0 for the FILE classes.
    pub fn additional_information(&self) -> u32 {
        match self {
            SetFileInfo::Dacl(_) => crate::security::security_information::DACL,
            _ => 0,
        }
    }

    /// Appends the payload bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        match self {
            SetFileInfo::Rename { target, replace_if_exists } => {
                out.extend_from_slice(&[*replace_if_exists as u8, 0, 0, 0, 0, 0, 0, 0]);
                put_u64(out, 0); // RootDirectory
                let len_at = out.len();
                put_u32(out, 0);
                let n = put_utf16(out, target);
                out[len_at..len_at + 4].copy_from_slice(&(n as u32).to_le_bytes());
            }
            SetFileInfo::Disposition { delete_pending } => out.extend_from_slice(&[*delete_pending as u8]),
            SetFileInfo::EndOfFile(n) => put_u64(out, *n),
            SetFileInfo::Basic { creation, last_access, last_write, change, attributes } => {
                put_u64(out, *creation);
                put_u64(out, *last_access);
                put_u64(out, *last_write);
                put_u64(out, *change);
                put_u32(out, *attributes);
                put_u32(out, 0);
            }
            SetFileInfo::FullEa(eas) => encode_full_ea(out, eas),
            SetFileInfo::Dacl(descriptor) => out.extend_from_slice(descriptor),
        }
    }
}

/// One entry of FileIdFullDirectoryInformation (MS-FSCC 2.4.18).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// File name (no path).
    pub name: String,
    /// Times, size and attributes.
    pub times: FileTimes,
    /// EaSize in bytes.
    pub ea_size: u32,
    /// FileId (the 8-byte file system id, not an SMB2 handle).
    pub file_id: u64,
}

/// Decodes a FileIdFullDirectoryInformation buffer (MS-FSCC 2.4.18) into
/// entries, calling `f` for each.
///
/// Errors: Truncated when an entry overruns the buffer; BadValue naming
/// `NextEntryOffset` when the next entry would start inside this one or
/// off an 8-byte boundary.
pub fn decode_dir_entries(b: &[u8], mut f: impl FnMut(DirEntry)) -> DecodeResult<()> {
    let mut off = 0usize;
    while off < b.len() {
        let mut r = Reader::new(&b[off..]);
        let next = r.u32("NextEntryOffset")? as usize;
        r.skip(4, "FileIndex")?;
        let creation = r.u64("CreationTime")?;
        let last_access = r.u64("LastAccessTime")?;
        let last_write = r.u64("LastWriteTime")?;
        let change = r.u64("ChangeTime")?;
        let end_of_file = r.u64("EndOfFile")?;
        let allocation_size = r.u64("AllocationSize")?;
        let attributes = r.u32("FileAttributes")?;
        let name_len = r.u32("FileNameLength")? as usize;
        let ea_size = r.u32("EaSize")?;
        r.skip(4, "Reserved")?;
        let file_id = r.u64("FileId")?;
        let name = utf16_to_string(r.take(name_len, "FileName")?, "FileName")?;
        f(DirEntry {
            name,
            times: FileTimes { creation, last_access, last_write, change, allocation_size, end_of_file, attributes },
            ea_size,
            file_id,
        });
        if next == 0 {
            break;
        }
        // Entries never overlap and start 8-aligned (MS-FSCC 2.4): otherwise
        // one 1 MiB answer repeating a short pattern decodes to tens of
        // thousands of entries, each with up to 1 MiB of name.
        if next < r.pos() || !next.is_multiple_of(8) {
            return Err(DecodeError::BadValue { field: "NextEntryOffset", got: next as u64 });
        }
        off = off.checked_add(next).ok_or(DecodeError::OutOfBounds("NextEntryOffset"))?;
    }
    Ok(())
}

/// Decodes FILE_NAME_INFORMATION (MS-FSCC 2.1.7): FileNameLength (u32)
/// and the UTF-16 name, as FileNormalizedNameInformation returns it.
pub fn decode_file_name_information(b: &[u8]) -> DecodeResult<String> {
    let mut r = Reader::new(b);
    let len = r.u32("FileNameLength")? as usize;
    utf16_to_string(r.take(len, "FileName")?, "FileName")
}

/// FileFsFullSizeInformation (MS-FSCC 2.5.4), sizes in allocation units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsFullSize {
    /// TotalAllocationUnits.
    pub total_units: u64,
    /// CallerAvailableAllocationUnits.
    pub caller_available_units: u64,
    /// ActualAvailableAllocationUnits.
    pub actual_available_units: u64,
    /// SectorsPerAllocationUnit.
    pub sectors_per_unit: u32,
    /// BytesPerSector.
    pub bytes_per_sector: u32,
}

impl FsFullSize {
    /// Decodes the 32-byte structure.
    pub fn decode(b: &[u8]) -> DecodeResult<FsFullSize> {
        let mut r = Reader::new(b);
        Ok(FsFullSize {
            total_units: r.u64("TotalAllocationUnits")?,
            caller_available_units: r.u64("CallerAvailableAllocationUnits")?,
            actual_available_units: r.u64("ActualAvailableAllocationUnits")?,
            sectors_per_unit: r.u32("SectorsPerAllocationUnit")?,
            bytes_per_sector: r.u32("BytesPerSector")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ea_round_trip() {
        let eas = vec![
            FullEa { name: "user.a".into(), value: b"1".to_vec() },
            FullEa { name: "user.smbgate".into(), value: vec![0, 1, 2, 3, 4] },
        ];
        let mut b = BytesMut::new();
        encode_full_ea(&mut b, &eas);
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 16); // 8+6+1+1 = 16
        assert_eq!(decode_full_ea(&b).unwrap(), eas);
    }

    /// One directory entry of FileIdFullDirectoryInformation with `name`
    /// (ASCII) and NextEntryOffset `next`.
    fn dir_entry(name: &str, next: u32) -> Vec<u8> {
        let mut b = vec![0u8; 80];
        b[..4].copy_from_slice(&next.to_le_bytes());
        b[60..64].copy_from_slice(&((name.len() * 2) as u32).to_le_bytes());
        b.extend(name.encode_utf16().flat_map(u16::to_le_bytes));
        b
    }

    #[test]
    fn dir_entries_follow_their_next_offsets() {
        let mut b = dir_entry("ab", 88);
        b.resize(88, 0);
        b.extend(dir_entry("c", 0));
        let mut names = Vec::new();
        decode_dir_entries(&b, |e| names.push(e.name)).unwrap();
        assert_eq!(names, ["ab", "c"]);
    }

    #[test]
    fn dir_entries_may_not_overlap_or_leave_alignment() {
        // A hostile server's answer: entries 8 bytes apart, each claiming
        // the rest of the buffer as its name, would decode to one entry per
        // 8 bytes with names of nearly the whole buffer.
        let mut b = dir_entry("", 8);
        b.resize(1 << 12, b'a');
        let mut n = 0;
        let e = decode_dir_entries(&b, |_| n += 1).unwrap_err();
        assert_eq!(e, DecodeError::BadValue { field: "NextEntryOffset", got: 8 });
        assert_eq!(n, 1);
        // Just past the name, but not 8-aligned.
        let mut b = dir_entry("a", 82);
        b.resize(82, 0);
        b.extend(dir_entry("b", 0));
        let e = decode_dir_entries(&b, |_| {}).unwrap_err();
        assert_eq!(e, DecodeError::BadValue { field: "NextEntryOffset", got: 82 });
    }

    #[test]
    fn full_eas_may_not_overlap_or_leave_alignment() {
        let ea = |next: u32, name: &[u8], value: &[u8]| {
            let mut b = next.to_le_bytes().to_vec();
            b.extend([0, name.len() as u8]);
            b.extend((value.len() as u16).to_le_bytes());
            b.extend(name);
            b.push(0);
            b.extend(value);
            b
        };
        // Next entry 4 bytes on: inside this one.
        let mut b = ea(4, b"a", b"xyz");
        b.extend(ea(0, b"b", b""));
        assert_eq!(decode_full_ea(&b).unwrap_err(), DecodeError::BadValue { field: "EA NextEntryOffset", got: 4 });
        // Past it but not 4-aligned (the entry is 13 bytes).
        let mut b = ea(13, b"a", b"xyz");
        b.extend(ea(0, b"b", b""));
        assert_eq!(decode_full_ea(&b).unwrap_err(), DecodeError::BadValue { field: "EA NextEntryOffset", got: 13 });
        let mut b = ea(16, b"a", b"xyz");
        b.resize(16, 0);
        b.extend(ea(0, b"b", b""));
        assert_eq!(decode_full_ea(&b).unwrap().len(), 2);
    }

    #[test]
    fn full_ea_rejects_overrun() {
        let b = [0u8, 0, 0, 0, 0, 5, 10, 0, b'a'];
        assert!(decode_full_ea(&b).is_err());
    }
}
