//! Oplock breaks: the server's notification and the client's
//! acknowledgment (MS-SMB2 2.2.23.1, 2.2.24.1, 2.2.25.1). The levels are
//! [`crate::create::oplock`].

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, Request};
use crate::reader::Reader;

/// An oplock break notification, or the answer to an acknowledgment (both
/// StructureSize 24): the handle and the level it now holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OplockBreak {
    /// The level the server breaks the oplock to (notification) or has
    /// granted (answer to an acknowledgment).
    pub oplock_level: u8,
    /// The handle whose oplock breaks.
    pub file_id: FileId,
}

impl OplockBreak {
    /// Decodes a whole OPLOCK_BREAK message. A lease break (StructureSize
    /// 44, `crate::lease::LeaseBreak`) is [`crate::DecodeError::BadValue`].
    pub fn decode(msg: &Bytes) -> DecodeResult<OplockBreak> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(24, "OPLOCK_BREAK StructureSize")?;
        let oplock_level = r.u8("OplockLevel")?;
        r.skip(5, "Reserved")?;
        Ok(OplockBreak { oplock_level, file_id: FileId::read(&mut r)? })
    }
}

/// The acknowledgment of an oplock break (MS-SMB2 2.2.24.1): the client
/// now holds `oplock_level` on `file_id`.
#[derive(Debug, Clone, Copy)]
pub struct OplockBreakAck {
    /// The level acknowledged: the one the notification named.
    pub oplock_level: u8,
    /// The handle.
    pub file_id: FileId,
}

impl Request for OplockBreakAck {
    fn command(&self) -> Command {
        Command::OplockBreak
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 24);
        out.extend_from_slice(&[self.oplock_level, 0]);
        put_u32(out, 0);
        self.file_id.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::Header;

    #[test]
    fn an_acknowledgment_decodes_as_the_break_it_answers() {
        let ack = OplockBreakAck { oplock_level: 1, file_id: FileId { persistent: 7, volatile: 9 } };
        let mut out = BytesMut::new();
        Header::request(Command::OplockBreak).encode(&mut out);
        ack.encode_body(&mut out, 0);
        assert_eq!(out.len(), HEADER_LEN + 24);
        let b = OplockBreak::decode(&out.freeze()).unwrap();
        assert_eq!(b, OplockBreak { oplock_level: 1, file_id: FileId { persistent: 7, volatile: 9 } });
    }

    #[test]
    fn a_lease_break_or_a_short_message_is_an_error_not_a_panic() {
        let mut out = BytesMut::new();
        Header::request(Command::OplockBreak).encode(&mut out);
        put_u16(&mut out, 44);
        out.extend_from_slice(&[0; 42]);
        assert!(OplockBreak::decode(&out.clone().freeze()).is_err());
        out.truncate(HEADER_LEN + 10);
        assert!(OplockBreak::decode(&out.freeze()).is_err());
    }
}
