//! The 64-byte SMB2 packet header, sync and async forms (MS-SMB2 2.2.1).

use bytes::BytesMut;

use crate::error::{DecodeError, DecodeResult};
use crate::reader::Reader;
use crate::status::NtStatus;

/// Size of the SMB2 header in bytes.
pub const HEADER_LEN: usize = 64;
/// `0xFE 'S' 'M' 'B'`.
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
/// Byte range of the 16-byte Signature field inside a header.
pub const SIGNATURE_RANGE: std::ops::Range<usize> = 48..64;
/// Byte range of the Flags field.
pub const FLAGS_RANGE: std::ops::Range<usize> = 16..20;

/// Header flags (MS-SMB2 2.2.1.2).
pub mod flags {
    /// The message is a response.
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    /// Async header form: AsyncId replaces Reserved+TreeId.
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    /// Part of a related compound chain.
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    /// The Signature field is valid.
    pub const SIGNED: u32 = 0x0000_0008;
}

/// SMB2 command codes (MS-SMB2 2.2.1.2 "Command").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
#[allow(missing_docs)]
pub enum Command {
    Negotiate = 0,
    SessionSetup = 1,
    Logoff = 2,
    TreeConnect = 3,
    TreeDisconnect = 4,
    Create = 5,
    Close = 6,
    Flush = 7,
    Read = 8,
    Write = 9,
    Lock = 10,
    Ioctl = 11,
    Cancel = 12,
    Echo = 13,
    QueryDirectory = 14,
    ChangeNotify = 15,
    QueryInfo = 16,
    SetInfo = 17,
    OplockBreak = 18,
}

impl Command {
    /// The command's name as MS-SMB2 2.2.1.2 writes it (`SMB2 CREATE` is
    /// `"CREATE"`), for logs and traces.
    pub fn name(self) -> &'static str {
        use Command::*;
        match self {
            Negotiate => "NEGOTIATE",
            SessionSetup => "SESSION_SETUP",
            Logoff => "LOGOFF",
            TreeConnect => "TREE_CONNECT",
            TreeDisconnect => "TREE_DISCONNECT",
            Create => "CREATE",
            Close => "CLOSE",
            Flush => "FLUSH",
            Read => "READ",
            Write => "WRITE",
            Lock => "LOCK",
            Ioctl => "IOCTL",
            Cancel => "CANCEL",
            Echo => "ECHO",
            QueryDirectory => "QUERY_DIRECTORY",
            ChangeNotify => "CHANGE_NOTIFY",
            QueryInfo => "QUERY_INFO",
            SetInfo => "SET_INFO",
            OplockBreak => "OPLOCK_BREAK",
        }
    }

    /// Maps a wire value to a command, or `None` for unknown codes.
    pub fn from_u16(v: u16) -> Option<Command> {
        use Command::*;
        Some(match v {
            0 => Negotiate,
            1 => SessionSetup,
            2 => Logoff,
            3 => TreeConnect,
            4 => TreeDisconnect,
            5 => Create,
            6 => Close,
            7 => Flush,
            8 => Read,
            9 => Write,
            10 => Lock,
            11 => Ioctl,
            12 => Cancel,
            13 => Echo,
            14 => QueryDirectory,
            15 => ChangeNotify,
            16 => QueryInfo,
            17 => SetInfo,
            18 => OplockBreak,
            _ => return None,
        })
    }
}

/// A decoded or to-be-encoded SMB2 header.
///
/// For requests `status` carries ChannelSequence/Reserved (0 here). In the
/// async form `async_id` is set and `tree_id` is 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Credits this message consumes: ceil(payload / 64 KiB), at least 1.
    pub credit_charge: u16,
    /// NTSTATUS of a response.
    pub status: NtStatus,
    /// The command.
    pub command: Command,
    /// CreditRequest (requests) or CreditResponse (responses).
    pub credits: u16,
    /// Header flags, see [`flags`].
    pub flags: u32,
    /// Offset from this header to the next message of a compound, 0 if last.
    pub next_command: u32,
    /// MessageId (MS-SMB2 3.2.4.1.3).
    pub message_id: u64,
    /// AsyncId of an async response.
    pub async_id: Option<u64>,
    /// TreeId (sync form only).
    pub tree_id: u32,
    /// SessionId.
    pub session_id: u64,
    /// Signature (zero when unsigned).
    pub signature: [u8; 16],
}

impl Header {
    /// A request header with defaults for everything but the command.
    pub fn request(command: Command) -> Header {
        Header {
            credit_charge: 1,
            status: NtStatus::STATUS_SUCCESS,
            command,
            credits: 1,
            flags: 0,
            next_command: 0,
            message_id: 0,
            async_id: None,
            tree_id: 0,
            session_id: 0,
            signature: [0; 16],
        }
    }

    /// Appends the 64 header bytes to `out`.
    pub fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(&PROTOCOL_ID);
        out.extend_from_slice(&64u16.to_le_bytes());
        out.extend_from_slice(&self.credit_charge.to_le_bytes());
        out.extend_from_slice(&self.status.0.to_le_bytes());
        out.extend_from_slice(&(self.command as u16).to_le_bytes());
        out.extend_from_slice(&self.credits.to_le_bytes());
        let mut flags = self.flags;
        if self.async_id.is_some() {
            flags |= flags::ASYNC_COMMAND;
        }
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.next_command.to_le_bytes());
        out.extend_from_slice(&self.message_id.to_le_bytes());
        match self.async_id {
            Some(id) => out.extend_from_slice(&id.to_le_bytes()),
            None => {
                out.extend_from_slice(&0u32.to_le_bytes());
                out.extend_from_slice(&self.tree_id.to_le_bytes());
            }
        }
        out.extend_from_slice(&self.session_id.to_le_bytes());
        out.extend_from_slice(&self.signature);
    }

    /// Decodes the header at the start of `buf`.
    ///
    /// Errors: [`DecodeError::Truncated`] if `buf` is shorter than 64 bytes,
    /// [`DecodeError::BadValue`] for a wrong ProtocolId, StructureSize or
    /// unknown command.
    pub fn decode(buf: &[u8]) -> DecodeResult<Header> {
        let mut r = Reader::new(buf);
        let proto = r.array::<4>("ProtocolId")?;
        if proto != PROTOCOL_ID {
            return Err(DecodeError::BadValue { field: "ProtocolId", got: u32::from_le_bytes(proto).into() });
        }
        r.expect_u16(64, "header StructureSize")?;
        let credit_charge = r.u16("CreditCharge")?;
        let status = NtStatus(r.u32("Status")?);
        let cmd = r.u16("Command")?;
        let command = Command::from_u16(cmd).ok_or(DecodeError::BadValue { field: "Command", got: cmd.into() })?;
        let credits = r.u16("CreditResponse")?;
        let flags = r.u32("Flags")?;
        let next_command = r.u32("NextCommand")?;
        let message_id = r.u64("MessageId")?;
        let (async_id, tree_id) = if flags & flags::ASYNC_COMMAND != 0 {
            (Some(r.u64("AsyncId")?), 0)
        } else {
            r.skip(4, "Reserved")?;
            (None, r.u32("TreeId")?)
        };
        let session_id = r.u64("SessionId")?;
        let signature = r.array::<16>("Signature")?;
        Ok(Header {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            async_id,
            tree_id,
            session_id,
            signature,
        })
    }

    /// True if this is a response (SMB2_FLAGS_SERVER_TO_REDIR).
    pub fn is_response(&self) -> bool {
        self.flags & flags::SERVER_TO_REDIR != 0
    }
}

/// CreditCharge for an I/O of `bytes` payload: ceil(bytes / 65536), min 1
/// (MS-SMB2 3.1.5.2).
pub fn credit_charge(bytes: u64) -> u16 {
    bytes.div_ceil(65536).clamp(1, u16::MAX as u64) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_sync_and_async() {
        let mut h = Header::request(Command::Read);
        h.credit_charge = 16;
        h.message_id = 0x1122_3344_5566_7788;
        h.tree_id = 7;
        h.session_id = 0xdead_beef;
        h.flags = flags::SIGNED;
        let mut b = BytesMut::new();
        h.encode(&mut b);
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(Header::decode(&b).unwrap(), h);

        h.async_id = Some(42);
        h.tree_id = 0;
        let mut b = BytesMut::new();
        h.encode(&mut b);
        let d = Header::decode(&b).unwrap();
        assert_eq!(d.async_id, Some(42));
        assert!(d.flags & flags::ASYNC_COMMAND != 0);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(Header::decode(&[0xFE, b'S']), Err(DecodeError::Truncated("ProtocolId")));
        let mut b = BytesMut::new();
        Header::request(Command::Echo).encode(&mut b);
        b[0] = 0xFF;
        assert!(matches!(Header::decode(&b), Err(DecodeError::BadValue { field: "ProtocolId", .. })));
    }

    #[test]
    fn credit_charges() {
        assert_eq!(credit_charge(0), 1);
        assert_eq!(credit_charge(65536), 1);
        assert_eq!(credit_charge(65537), 2);
        assert_eq!(credit_charge(8 << 20), 128);
    }
}
