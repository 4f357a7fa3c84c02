//! The trait every request body implements, so that the client can chain
//! heterogeneous requests into one compound buffer.

use bytes::BytesMut;

use crate::create_flags::Disposition;
use crate::header::Command;

/// A request body that can be appended after its SMB2 header.
pub trait Request: Send + Sync {
    /// The SMB2 command of this body.
    fn command(&self) -> Command;
    /// Appends the body to `out`. `hdr` is the offset in `out` where this
    /// message's header starts; wire offsets are measured from there.
    fn encode_body(&self, out: &mut BytesMut, hdr: usize);
    /// Payload bytes moved by this request (sent for WRITE, asked for READ,
    /// QUERY_DIRECTORY, ...), used for CreditCharge (MS-SMB2 3.1.5.2).
    fn credit_bytes(&self) -> u64 {
        0
    }
    /// What this body opens, if it is a CREATE, so that a client can see
    /// what a CREATE asked for (its disposition, access, options) without
    /// downcasting.
    fn opens(&self) -> Option<OpenIntent> {
        None
    }
    /// Whether the body fits its wire fields (a name's 16-bit byte count,
    /// say); an encoder cannot fail, so a client checks before encoding.
    ///
    /// Errors: what does not fit, for an InvalidArgument.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// What a CREATE asks of the server (MS-SMB2 2.2.13), as
/// [`Request::opens`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenIntent {
    /// CreateDisposition.
    pub disposition: Disposition,
    /// DesiredAccess, see [`crate::create_flags::access`].
    pub desired_access: u32,
    /// CreateOptions, see [`crate::create_flags::options`].
    pub options: u32,
}

/// Errors unless `s` in UTF-16 fits a 16-bit byte count (`field`).
pub(crate) fn check_utf16_u16(field: &str, s: &str) -> Result<(), String> {
    // UTF-16 never has more units than UTF-8 has bytes: most names need no count.
    if s.len() * 2 <= u16::MAX as usize {
        return Ok(());
    }
    let bytes = s.encode_utf16().count() * 2;
    if bytes > u16::MAX as usize {
        return Err(format!("{field} of {bytes} bytes does not fit its 16-bit length"));
    }
    Ok(())
}

/// Appends `v` little-endian.
#[inline]
pub(crate) fn put_u16(out: &mut BytesMut, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// Appends `v` little-endian.
#[inline]
pub(crate) fn put_u32(out: &mut BytesMut, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// Appends `v` little-endian.
#[inline]
pub(crate) fn put_u64(out: &mut BytesMut, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// Overwrites a u16 at `at`.
#[inline]
pub(crate) fn patch_u16(out: &mut BytesMut, at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
/// Overwrites a u32 at `at`.
#[inline]
pub(crate) fn patch_u32(out: &mut BytesMut, at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A body with only StructureSize 4 and Reserved: ECHO, LOGOFF,
/// TREE_DISCONNECT and CANCEL requests (MS-SMB2 2.2.28, 2.2.7, 2.2.11, 2.2.30).
#[derive(Debug, Clone, Copy)]
pub struct Empty(pub Command);

impl Request for Empty {
    fn command(&self) -> Command {
        self.0
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 4);
        put_u16(out, 0);
    }
}
