//! Leases (SMB 2.1+; MS-SMB2 2.2.13.2.10, 2.2.14.2.10, 2.2.23.2, 2.2.24.2,
//! 2.2.25.2): the "RqLs" create context a client asks for one with and the
//! server grants it in, the server's lease break notification, the
//! client's acknowledgment and the server's answer to it.
//!
//! A lease belongs to a 16-byte LeaseKey the client chooses, not to a
//! handle: every open with the same key shares it, and a break names the
//! key. Its state is a set of [`state`] bits. A CREATE asks for one with
//! RequestedOplockLevel [`crate::create_flags::oplock::LEASE`].

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, DecodeResult};
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, put_u64, Request};
use crate::reader::Reader;

/// LeaseState bits (MS-SMB2 2.2.13.2.8).
pub mod state {
    /// SMB2_LEASE_READ_CACHING: reads may be served from the client's copy.
    pub const READ: u32 = 0x01;
    /// SMB2_LEASE_HANDLE_CACHING: the handle may be kept open after use.
    pub const HANDLE: u32 = 0x02;
    /// SMB2_LEASE_WRITE_CACHING: writes may be held by the client.
    pub const WRITE: u32 = 0x04;
}

/// Flags of a lease break notification (MS-SMB2 2.2.23.2).
pub mod break_flags {
    /// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED: the server waits for an
    /// acknowledgment before the open that caused the break goes on.
    pub const ACK_REQUIRED: u32 = 0x01;
}

/// Flags of a granted lease (MS-SMB2 2.2.14.2.10).
pub mod lease_flags {
    /// SMB2_LEASE_FLAG_BREAK_IN_PROGRESS: the lease is being broken as it
    /// is granted.
    pub const BREAK_IN_PROGRESS: u32 = 0x02;
}

/// Length of an SMB2_CREATE_REQUEST_LEASE_V2 context's data, bytes.
pub const LEASE_V2_LEN: usize = 52;
/// Length of a version 1 lease context's data, bytes.
pub const LEASE_V1_LEN: usize = 32;

/// Appends the data of an "RqLs" version 2 request (MS-SMB2 2.2.13.2.10):
/// `key`, the `wanted` state bits, no parent key, epoch 0.
pub(crate) fn encode_request_v2(out: &mut BytesMut, key: &[u8; 16], wanted: u32) {
    out.extend_from_slice(key);
    put_u32(out, wanted);
    put_u32(out, 0); // Flags: no ParentLeaseKey
    put_u64(out, 0); // LeaseDuration
    out.extend_from_slice(&[0; 16]); // ParentLeaseKey
    put_u16(out, 0); // Epoch
    put_u16(out, 0); // Reserved
}

/// A lease the server granted, from the "RqLs" context of a CREATE
/// response (MS-SMB2 2.2.14.2.10; version 1 has no epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantedLease {
    /// The LeaseKey, as asked for.
    pub key: [u8; 16],
    /// The [`state`] bits granted (may be fewer than asked for).
    pub state: u32,
    /// [`lease_flags`].
    pub flags: u32,
    /// The lease's epoch (version 2; 0 for version 1).
    pub epoch: u16,
}

impl GrantedLease {
    /// Decodes an "RqLs" response context's data (32 or 52 bytes).
    ///
    /// Errors: [`DecodeError::BadValue`] for any other length.
    pub fn decode(data: &[u8]) -> DecodeResult<GrantedLease> {
        if data.len() != LEASE_V1_LEN && data.len() != LEASE_V2_LEN {
            return Err(DecodeError::BadValue { field: "RqLs context length", got: data.len() as u64 });
        }
        let mut r = Reader::new(data);
        let key = r.array::<16>("LeaseKey")?;
        let state = r.u32("LeaseState")?;
        let flags = r.u32("LeaseFlags")?;
        r.skip(8, "LeaseDuration")?;
        let epoch = match data.len() {
            LEASE_V2_LEN => {
                r.skip(16, "ParentLeaseKey")?;
                r.u16("Epoch")?
            }
            _ => 0,
        };
        Ok(GrantedLease { key, state, flags, epoch })
    }
}

/// A lease break notification (MS-SMB2 2.2.23.2, StructureSize 44): the
/// lease `key` goes from `current` to `new` state bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreak {
    /// NewEpoch (version 2 leases).
    pub new_epoch: u16,
    /// [`break_flags`].
    pub flags: u32,
    /// The lease broken.
    pub key: [u8; 16],
    /// CurrentLeaseState.
    pub current: u32,
    /// NewLeaseState: what the client may keep.
    pub new: u32,
}

impl LeaseBreak {
    /// Decodes a whole OPLOCK_BREAK message that is a lease break.
    ///
    /// Errors: another StructureSize (an oplock break is 24) or a short
    /// message.
    pub fn decode(msg: &Bytes) -> DecodeResult<LeaseBreak> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(44, "LEASE_BREAK StructureSize")?;
        let new_epoch = r.u16("NewEpoch")?;
        let flags = r.u32("Flags")?;
        let key = r.array::<16>("LeaseKey")?;
        let current = r.u32("CurrentLeaseState")?;
        let new = r.u32("NewLeaseState")?;
        r.skip(12, "BreakReason, AccessMaskHint, ShareMaskHint")?;
        Ok(LeaseBreak { new_epoch, flags, key, current, new })
    }

    /// True if the server waits for an acknowledgment.
    pub fn ack_required(&self) -> bool {
        self.flags & break_flags::ACK_REQUIRED != 0
    }
}

/// True if an OPLOCK_BREAK message (notification or answer) is about a
/// lease (StructureSize 44 or 36) rather than an oplock (24).
pub fn is_lease_message(msg: &Bytes) -> bool {
    matches!(msg.get(HEADER_LEN..HEADER_LEN + 2), Some([44, 0] | [36, 0]))
}

/// A lease break acknowledgment (MS-SMB2 2.2.24.2): the client now holds
/// `state` of lease `key`. The server answers with the same layout
/// ([`LeaseBreakAck::decode_answer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseBreakAck {
    /// The lease.
    pub key: [u8; 16],
    /// The state bits kept: the notification's NewLeaseState, or fewer.
    pub state: u32,
}

impl LeaseBreakAck {
    /// Decodes the server's answer to an acknowledgment (MS-SMB2
    /// 2.2.25.2, StructureSize 36): the lease and the state it now has.
    ///
    /// Errors: another StructureSize or a short message.
    pub fn decode_answer(msg: &Bytes) -> DecodeResult<LeaseBreakAck> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(36, "LEASE_BREAK response StructureSize")?;
        r.skip(6, "Reserved, Flags")?;
        let key = r.array::<16>("LeaseKey")?;
        let state = r.u32("LeaseState")?;
        r.skip(8, "LeaseDuration")?;
        Ok(LeaseBreakAck { key, state })
    }
}

impl Request for LeaseBreakAck {
    fn command(&self) -> Command {
        Command::OplockBreak
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 36);
        put_u16(out, 0); // Reserved
        put_u32(out, 0); // Flags
        out.extend_from_slice(&self.key);
        put_u32(out, self.state);
        put_u64(out, 0); // LeaseDuration
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;

    fn message(body: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        Header::request(Command::OplockBreak).encode(&mut out);
        out.extend_from_slice(body);
        out.freeze()
    }

    #[test]
    fn a_lease_break_decodes_field_by_field() {
        let mut body = BytesMut::new();
        put_u16(&mut body, 44);
        put_u16(&mut body, 3); // NewEpoch
        put_u32(&mut body, break_flags::ACK_REQUIRED);
        body.extend_from_slice(&[7; 16]);
        put_u32(&mut body, state::READ | state::HANDLE);
        put_u32(&mut body, state::READ);
        body.extend_from_slice(&[0; 12]);
        let msg = message(&body);
        assert!(is_lease_message(&msg));
        let b = LeaseBreak::decode(&msg).unwrap();
        assert_eq!(
            b,
            LeaseBreak {
                new_epoch: 3,
                flags: break_flags::ACK_REQUIRED,
                key: [7; 16],
                current: state::READ | state::HANDLE,
                new: state::READ
            }
        );
        assert!(b.ack_required());
    }

    #[test]
    fn an_acknowledgment_is_36_bytes_and_reads_back_as_its_answer() {
        let ack = LeaseBreakAck { key: [9; 16], state: state::READ };
        let mut out = BytesMut::new();
        Header::request(Command::OplockBreak).encode(&mut out);
        ack.encode_body(&mut out, 0);
        assert_eq!(out.len(), HEADER_LEN + 36);
        let msg = out.freeze();
        assert!(is_lease_message(&msg));
        assert_eq!(LeaseBreakAck::decode_answer(&msg).unwrap(), ack);
    }

    #[test]
    fn a_granted_lease_of_either_version_decodes_and_other_lengths_are_refused() {
        let mut v2 = BytesMut::new();
        encode_request_v2(&mut v2, &[5; 16], state::READ | state::HANDLE);
        assert_eq!(v2.len(), LEASE_V2_LEN);
        let g = GrantedLease::decode(&v2).unwrap();
        assert_eq!((g.key, g.state, g.epoch), ([5; 16], state::READ | state::HANDLE, 0));
        let g1 = GrantedLease::decode(&v2[..LEASE_V1_LEN]).unwrap();
        assert_eq!((g1.key, g1.state), ([5; 16], state::READ | state::HANDLE));
        for n in [0, 31, 33, 51, 53] {
            assert!(GrantedLease::decode(&vec![0; n]).is_err(), "{n} bytes");
        }
    }

    #[test]
    fn short_or_oplock_messages_are_errors_not_panics() {
        for n in 0..42 {
            let mut body = BytesMut::new();
            put_u16(&mut body, 44);
            body.extend_from_slice(&vec![0; n]);
            assert!(LeaseBreak::decode(&message(&body)).is_err(), "{} bytes", n + 2);
        }
        let mut oplock = BytesMut::new();
        put_u16(&mut oplock, 24);
        oplock.extend_from_slice(&[0; 22]);
        let msg = message(&oplock);
        assert!(!is_lease_message(&msg));
        assert!(LeaseBreak::decode(&msg).is_err());
        assert!(LeaseBreakAck::decode_answer(&msg).is_err());
    }
}
