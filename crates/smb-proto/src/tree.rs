//! TREE_CONNECT request and response (MS-SMB2 2.2.9, 2.2.10).

use bytes::{Bytes, BytesMut};

use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::message::{patch_u16, put_u16, Request};
use crate::reader::{put_utf16, Reader};

/// ShareFlags bits we act on (MS-SMB2 2.2.10).
pub mod share_flags {
    /// The share requires encryption.
    pub const ENCRYPT_DATA: u32 = 0x0000_8000;
}

/// TREE_CONNECT request for a UNC path `\\server\share`.
#[derive(Debug, Clone)]
pub struct TreeConnectRequest<'a> {
    /// The UNC path.
    pub path: &'a str,
}

impl Request for TreeConnectRequest<'_> {
    fn command(&self) -> Command {
        Command::TreeConnect
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 9);
        put_u16(out, 0);
        put_u16(out, (HEADER_LEN + 8) as u16);
        let len_at = out.len();
        put_u16(out, 0);
        let n = put_utf16(out, self.path);
        patch_u16(out, len_at, n as u16);
    }
    fn check(&self) -> Result<(), String> {
        crate::message::check_utf16_u16("TREE_CONNECT path", self.path)
    }
}

/// TREE_CONNECT response.
#[derive(Debug, Clone, Copy)]
pub struct TreeConnectResponse {
    /// ShareType (1 disk, 2 pipe, 3 print).
    pub share_type: u8,
    /// ShareFlags.
    pub share_flags: u32,
    /// Share capabilities.
    pub capabilities: u32,
    /// MaximalAccess mask.
    pub maximal_access: u32,
}

impl TreeConnectResponse {
    /// Decodes a whole TREE_CONNECT response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<TreeConnectResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(16, "TREE_CONNECT StructureSize")?;
        let share_type = r.u8("ShareType")?;
        r.skip(1, "Reserved")?;
        Ok(TreeConnectResponse {
            share_type,
            share_flags: r.u32("ShareFlags")?,
            capabilities: r.u32("Capabilities")?,
            maximal_access: r.u32("MaximalAccess")?,
        })
    }
}
