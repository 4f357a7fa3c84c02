//! Direct TCP transport framing (MS-SMB2 2.1): a 4-byte header with a zero
//! byte and a 24-bit big-endian length before each SMB2 message or compound.

use crate::error::{DecodeError, DecodeResult};

/// Length of the transport header.
pub const FRAME_HEADER_LEN: usize = 4;
/// Largest payload the 24-bit length can express.
pub const MAX_FRAME_LEN: usize = 0x00FF_FFFF;

/// Reads the payload length from a transport header.
///
/// Errors: a non-zero first byte (not a direct TCP frame).
pub fn frame_len(hdr: [u8; 4]) -> DecodeResult<usize> {
    if hdr[0] != 0 {
        return Err(DecodeError::BadValue { field: "transport header", got: hdr[0].into() });
    }
    Ok(u32::from_be_bytes(hdr) as usize)
}

/// Encodes a transport header for a payload of `len` bytes.
///
/// Errors: `len` above [`MAX_FRAME_LEN`].
pub fn frame_header(len: usize) -> DecodeResult<[u8; 4]> {
    if len > MAX_FRAME_LEN {
        return Err(DecodeError::TooLarge(len));
    }
    Ok((len as u32).to_be_bytes())
}
