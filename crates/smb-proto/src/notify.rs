//! CHANGE_NOTIFY (MS-SMB2 2.2.35, 2.2.36): a request on an open directory
//! that the server answers once something in it (or, with
//! [`WATCH_TREE`], under it) changes, with the changes as
//! FILE_NOTIFY_INFORMATION entries (MS-FSCC 2.7.1).
//!
//! The server first answers STATUS_PENDING (an interim response) and
//! answers for good when there is a change; STATUS_NOTIFY_ENUM_DIR with no
//! entries means more changed than it kept (the watcher must look at the
//! directory itself), STATUS_NOTIFY_CLEANUP that the handle was closed.

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::{DecodeError, DecodeResult};
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, Request};
use crate::reader::{range_at, Reader};

/// Flags: watch the whole tree under the directory, not only its entries.
pub const WATCH_TREE: u16 = 0x0001;

/// CompletionFilter bits (MS-SMB2 2.2.35): which changes complete the
/// request.
pub mod filter {
    #![allow(missing_docs)]
    pub const FILE_NAME: u32 = 0x0001;
    pub const DIR_NAME: u32 = 0x0002;
    pub const ATTRIBUTES: u32 = 0x0004;
    pub const SIZE: u32 = 0x0008;
    pub const LAST_WRITE: u32 = 0x0010;
    pub const LAST_ACCESS: u32 = 0x0020;
    pub const CREATION: u32 = 0x0040;
    pub const EA: u32 = 0x0080;
    pub const SECURITY: u32 = 0x0100;
    pub const STREAM_NAME: u32 = 0x0200;
    pub const STREAM_SIZE: u32 = 0x0400;
    pub const STREAM_WRITE: u32 = 0x0800;
}

/// What happened to a name (FILE_NOTIFY_INFORMATION Action, MS-FSCC
/// 2.7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// FILE_ACTION_ADDED.
    Added,
    /// FILE_ACTION_REMOVED.
    Removed,
    /// FILE_ACTION_MODIFIED: data, size, times or attributes.
    Modified,
    /// FILE_ACTION_RENAMED_OLD_NAME: the name a rename took away.
    RenamedOldName,
    /// FILE_ACTION_RENAMED_NEW_NAME: the name a rename gave.
    RenamedNewName,
    /// Any other action (stream changes, REMOVED_BY_DELETE, id changes),
    /// with its code.
    Other(u32),
}

impl Action {
    fn from_u32(v: u32) -> Action {
        match v {
            1 => Action::Added,
            2 => Action::Removed,
            3 => Action::Modified,
            4 => Action::RenamedOldName,
            5 => Action::RenamedNewName,
            other => Action::Other(other),
        }
    }
}

/// One change: what happened, and the name relative to the watched
/// directory (`a\b.txt` under a tree watch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// What happened.
    pub action: Action,
    /// The name, relative to the watched directory, `\`-separated.
    pub name: String,
}

/// CHANGE_NOTIFY request (MS-SMB2 2.2.35).
#[derive(Debug, Clone, Copy)]
pub struct ChangeNotifyRequest {
    /// Flags: [`WATCH_TREE`] or 0.
    pub flags: u16,
    /// OutputBufferLength: the most bytes of changes the answer may carry
    /// (more changes than fit answer STATUS_NOTIFY_ENUM_DIR).
    pub output_buffer_length: u32,
    /// The directory's handle.
    pub file_id: FileId,
    /// CompletionFilter, see [`filter`].
    pub completion_filter: u32,
}

impl Request for ChangeNotifyRequest {
    fn command(&self) -> Command {
        Command::ChangeNotify
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 32);
        put_u16(out, self.flags);
        put_u32(out, self.output_buffer_length);
        self.file_id.encode(out);
        put_u32(out, self.completion_filter);
        put_u32(out, 0); // Reserved
    }
    fn credit_bytes(&self) -> u64 {
        self.output_buffer_length as u64
    }
}

/// Decodes a CHANGE_NOTIFY response message (header included) into its
/// changes, in the server's order; none for an empty buffer (as
/// STATUS_NOTIFY_ENUM_DIR carries).
///
/// Errors: StructureSize other than 9; the buffer outside the message;
/// an entry that overruns the buffer, whose NextEntryOffset points back
/// into it or off a 4-byte boundary, or whose name is not UTF-16.
pub fn decode_changes(msg: &Bytes) -> DecodeResult<Vec<Change>> {
    let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
    r.expect_u16(9, "StructureSize")?;
    let off = r.u16("OutputBufferOffset")? as usize;
    let len = r.u32("OutputBufferLength")? as usize;
    if len == 0 {
        return Ok(Vec::new());
    }
    let buf = &msg[range_at(msg.len(), off, len, "OutputBuffer")?];
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < buf.len() {
        let mut r = Reader::new(&buf[at..]);
        let next = r.u32("NOTIFY NextEntryOffset")? as usize;
        let action = Action::from_u32(r.u32("NOTIFY Action")?);
        let name_len = r.u32("FileNameLength")? as usize;
        // A name that is not valid UTF-16 still names a change: decoded
        // with replacement characters, it matches nothing, and the rest of
        // the answer is kept.
        let name = r.take(name_len, "FileName")?;
        if !name_len.is_multiple_of(2) {
            return Err(DecodeError::BadUtf16("FileName"));
        }
        let units: Vec<u16> = name.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        let name = String::from_utf16_lossy(&units);
        out.push(Change { action, name });
        if next == 0 {
            break;
        }
        // Each entry starts past the one before, 4-aligned (MS-FSCC
        // 2.7.1): otherwise one answer could decode to far more changes
        // than its bytes hold.
        if next < r.pos() || !next.is_multiple_of(4) {
            return Err(DecodeError::BadValue { field: "NOTIFY NextEntryOffset", got: next as u64 });
        }
        at = at.checked_add(next).ok_or(DecodeError::OutOfBounds("NOTIFY NextEntryOffset"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(next: u32, action: u32, name: &str) -> Vec<u8> {
        let name: Vec<u8> = name.encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        let mut e = Vec::new();
        e.extend_from_slice(&next.to_le_bytes());
        e.extend_from_slice(&action.to_le_bytes());
        e.extend_from_slice(&(name.len() as u32).to_le_bytes());
        e.extend_from_slice(&name);
        e
    }

    fn response(buffer: &[u8]) -> Bytes {
        let mut m = vec![0u8; HEADER_LEN];
        m.extend_from_slice(&9u16.to_le_bytes());
        m.extend_from_slice(&((HEADER_LEN + 8) as u16).to_le_bytes());
        m.extend_from_slice(&(buffer.len() as u32).to_le_bytes());
        m.extend_from_slice(buffer);
        Bytes::from(m)
    }

    #[test]
    fn the_request_is_32_bytes_as_the_spec_lays_them_out() {
        let req = ChangeNotifyRequest {
            flags: WATCH_TREE,
            output_buffer_length: 0x1000,
            file_id: FileId { persistent: 1, volatile: 2 },
            completion_filter: filter::FILE_NAME | filter::LAST_WRITE,
        };
        let mut out = BytesMut::new();
        req.encode_body(&mut out, 0);
        assert_eq!(out.len(), 32);
        assert_eq!(&out[..8], &[32, 0, 1, 0, 0, 0x10, 0, 0]);
        assert_eq!(&out[8..16], &1u64.to_le_bytes());
        assert_eq!(&out[16..24], &2u64.to_le_bytes());
        assert_eq!(&out[24..], &[0x11, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(req.credit_bytes(), 0x1000);
    }

    #[test]
    fn entries_decode_in_order_with_their_actions() {
        let mut first = entry(0, 4, "dir\\old.txt");
        first.resize(first.len().next_multiple_of(4), 0);
        let next = first.len() as u32;
        first[..4].copy_from_slice(&next.to_le_bytes());
        let mut buf = first;
        buf.extend(entry(0, 5, "dir\\new é.txt"));
        let changes = decode_changes(&response(&buf)).unwrap();
        assert_eq!(
            changes,
            vec![
                Change { action: Action::RenamedOldName, name: "dir\\old.txt".into() },
                Change { action: Action::RenamedNewName, name: "dir\\new é.txt".into() },
            ]
        );
        // An unpaired surrogate is replaced, not an error.
        let mut bad = entry(0, 2, "ab");
        bad[12..14].copy_from_slice(&0xD800u16.to_le_bytes());
        let got = decode_changes(&response(&bad)).unwrap();
        assert_eq!(got, vec![Change { action: Action::Removed, name: "\u{FFFD}b".into() }]);
        let three = decode_changes(&response(&entry(0, 3, "a"))).unwrap();
        assert_eq!(three, vec![Change { action: Action::Modified, name: "a".into() }]);
        assert_eq!(decode_changes(&response(&entry(0, 9, "a"))).unwrap()[0].action, Action::Other(9));
    }

    #[test]
    fn an_empty_buffer_is_no_changes() {
        assert_eq!(decode_changes(&response(&[])).unwrap(), Vec::new());
    }

    #[test]
    fn bad_offsets_and_overruns_are_errors_not_panics() {
        // NextEntryOffset pointing back into the entry, or unaligned.
        for next in [4u32, 14] {
            let mut buf = entry(next, 1, "abc");
            buf.extend(entry(0, 1, "x"));
            assert!(decode_changes(&response(&buf)).is_err(), "next {next}");
        }
        // A name longer than the buffer.
        let mut buf = entry(0, 1, "abc");
        buf[8..12].copy_from_slice(&100u32.to_le_bytes());
        assert!(decode_changes(&response(&buf)).is_err());
        // An odd name length is not UTF-16.
        let mut buf = entry(0, 1, "abc");
        buf[8..12].copy_from_slice(&5u32.to_le_bytes());
        assert!(decode_changes(&response(&buf)).is_err());
        // The buffer outside the message.
        let mut msg = response(&entry(0, 1, "abc")).to_vec();
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&1000u32.to_le_bytes());
        assert!(decode_changes(&Bytes::from(msg)).is_err());
        // Every truncation of a good answer fails cleanly.
        let good = response(&entry(0, 1, "name")).to_vec();
        for cut in HEADER_LEN..good.len() {
            let _ = decode_changes(&Bytes::from(good[..cut].to_vec()));
        }
    }
}
