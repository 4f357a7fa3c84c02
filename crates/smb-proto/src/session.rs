//! SESSION_SETUP request and response (MS-SMB2 2.2.5, 2.2.6).

use bytes::{Bytes, BytesMut};

use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, put_u64, Request};
use crate::reader::{range_at, Reader};

/// SessionFlags of the response (MS-SMB2 2.2.6).
pub mod session_flags {
    /// Authenticated as guest.
    pub const IS_GUEST: u16 = 0x0001;
    /// Anonymous (null) session.
    pub const IS_NULL: u16 = 0x0002;
    /// The server requires encryption for the whole session.
    pub const ENCRYPT_DATA: u16 = 0x0004;
}

/// SESSION_SETUP request carrying one SPNEGO token.
#[derive(Debug, Clone)]
pub struct SessionSetupRequest<'a> {
    /// SecurityMode byte (signing enabled/required).
    pub security_mode: u8,
    /// Capabilities (only DFS is meaningful).
    pub capabilities: u32,
    /// The GSS/SPNEGO token.
    pub token: &'a [u8],
}

impl Request for SessionSetupRequest<'_> {
    fn command(&self) -> Command {
        Command::SessionSetup
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 25);
        out.extend_from_slice(&[0, self.security_mode]);
        put_u32(out, self.capabilities);
        put_u32(out, 0); // Channel
        put_u16(out, (HEADER_LEN + 24) as u16);
        put_u16(out, self.token.len() as u16);
        put_u64(out, 0); // PreviousSessionId
        out.extend_from_slice(self.token);
    }
}

/// SESSION_SETUP response.
#[derive(Debug, Clone)]
pub struct SessionSetupResponse {
    /// SessionFlags.
    pub session_flags: u16,
    /// The server's SPNEGO token (a slice of the frame).
    pub token: Bytes,
}

impl SessionSetupResponse {
    /// Decodes a whole SESSION_SETUP response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<SessionSetupResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(9, "SESSION_SETUP StructureSize")?;
        let session_flags = r.u16("SessionFlags")?;
        let off = r.u16("SecurityBufferOffset")? as usize;
        let len = r.u16("SecurityBufferLength")? as usize;
        let token = if len == 0 { Bytes::new() } else { msg.slice(range_at(msg.len(), off, len, "SecurityBuffer")?) };
        Ok(SessionSetupResponse { session_flags, token })
    }
}
