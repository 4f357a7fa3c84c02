//! LOCK (MS-SMB2 2.2.26, 2.2.27): byte-range locks on an open file.
//!
//! A lock belongs to the open that took it: another open of the same file,
//! on any connection, conflicts with it, and the server drops it when the
//! open closes or its connection goes. A lock with [`FAIL_IMMEDIATELY`]
//! that conflicts is answered STATUS_LOCK_NOT_GRANTED at once rather than
//! left pending.

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, put_u64, Request};
use crate::reader::Reader;

/// Flags of a [`LockElement`] (MS-SMB2 2.2.26.1).
pub mod flags {
    /// A shared (read) lock: others may hold shared locks on the range.
    pub const SHARED: u32 = 0x0000_0001;
    /// An exclusive (write) lock: nobody else may hold the range.
    pub const EXCLUSIVE: u32 = 0x0000_0002;
    /// Releases a lock taken before on exactly this range.
    pub const UNLOCK: u32 = 0x0000_0004;
}

/// With [`flags::SHARED`] or [`flags::EXCLUSIVE`]: answer at once if the
/// range is held, rather than wait for it.
pub const FAIL_IMMEDIATELY: u32 = 0x0000_0010;

/// One range to lock or unlock (MS-SMB2 2.2.26.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockElement {
    /// First byte of the range.
    pub offset: u64,
    /// Bytes in the range.
    pub length: u64,
    /// [`flags`], with [`FAIL_IMMEDIATELY`] where wanted.
    pub flags: u32,
}

/// LOCK request: one element here, as the gateway sends it (the wire
/// allows several, applied in order).
#[derive(Debug, Clone, Copy)]
pub struct LockRequest {
    /// The open the lock belongs to.
    pub file_id: FileId,
    /// The range and what to do with it.
    pub lock: LockElement,
}

impl Request for LockRequest {
    fn command(&self) -> Command {
        Command::Lock
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 48); // StructureSize
        put_u16(out, 1); // LockCount
        put_u32(out, 0); // LockSequenceNumber/Index: no lock resiliency
        self.file_id.encode(out);
        put_u64(out, self.lock.offset);
        put_u64(out, self.lock.length);
        put_u32(out, self.lock.flags);
        put_u32(out, 0); // Reserved
    }
}

/// Checks a whole LOCK response message (MS-SMB2 2.2.27), which carries
/// nothing but its size; the answer is its header's status.
///
/// Errors: a body that is not the 4-byte LOCK response.
pub fn decode_lock_response(msg: &Bytes) -> DecodeResult<()> {
    let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
    r.expect_u16(4, "LOCK StructureSize")?;
    r.skip(2, "Reserved")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_request_is_the_48_byte_body_with_one_element() {
        let req = LockRequest {
            file_id: FileId { persistent: 0x1122, volatile: 0x3344 },
            lock: LockElement { offset: 0x0102_0304, length: 1, flags: flags::EXCLUSIVE | FAIL_IMMEDIATELY },
        };
        let mut out = BytesMut::new();
        req.encode_body(&mut out, 0);
        assert_eq!(out.len(), 48);
        assert_eq!(&out[0..4], &[48, 0, 1, 0]);
        assert_eq!(&out[4..8], &[0, 0, 0, 0]);
        assert_eq!(&out[8..16], &0x1122u64.to_le_bytes());
        assert_eq!(&out[16..24], &0x3344u64.to_le_bytes());
        assert_eq!(&out[24..32], &0x0102_0304u64.to_le_bytes());
        assert_eq!(&out[32..40], &1u64.to_le_bytes());
        assert_eq!(&out[40..44], &0x12u32.to_le_bytes());
        assert_eq!(&out[44..48], &[0, 0, 0, 0]);
    }

    #[test]
    fn a_lock_response_is_four_bytes_and_anything_shorter_is_refused() {
        let mut msg = vec![0u8; HEADER_LEN];
        msg.extend_from_slice(&[4, 0, 0, 0]);
        assert!(decode_lock_response(&Bytes::from(msg.clone())).is_ok());
        msg.truncate(HEADER_LEN + 3);
        assert!(decode_lock_response(&Bytes::from(msg.clone())).is_err());
        msg[HEADER_LEN] = 9;
        msg.push(0);
        assert!(decode_lock_response(&Bytes::from(msg)).is_err());
    }
}
