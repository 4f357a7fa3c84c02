//! SMB2 TRANSFORM_HEADER for encrypted messages (MS-SMB2 2.2.41).

use bytes::BytesMut;

use crate::error::{DecodeError, DecodeResult};
use crate::reader::Reader;

/// Size of the transform header in bytes.
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// `0xFD 'S' 'M' 'B'`.
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// The bytes authenticated as AAD: Nonce through SessionId.
pub const AAD_RANGE: std::ops::Range<usize> = 20..52;
/// The Signature (AEAD tag) bytes.
pub const TAG_RANGE: std::ops::Range<usize> = 4..20;

/// A decoded transform header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransformHeader {
    /// The AEAD tag.
    pub signature: [u8; 16],
    /// Nonce (11 bytes used for CCM, 12 for GCM).
    pub nonce: [u8; 16],
    /// Size of the plaintext message in bytes.
    pub original_message_size: u32,
    /// Flags (1 = encrypted).
    pub flags: u16,
    /// SessionId.
    pub session_id: u64,
}

impl TransformHeader {
    /// Appends the 52 bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(&TRANSFORM_PROTOCOL_ID);
        out.extend_from_slice(&self.signature);
        out.extend_from_slice(&self.nonce);
        out.extend_from_slice(&self.original_message_size.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.session_id.to_le_bytes());
    }

    /// Decodes the header at the start of `buf`.
    pub fn decode(buf: &[u8]) -> DecodeResult<TransformHeader> {
        let mut r = Reader::new(buf);
        let p = r.array::<4>("TRANSFORM ProtocolId")?;
        if p != TRANSFORM_PROTOCOL_ID {
            return Err(DecodeError::BadValue { field: "TRANSFORM ProtocolId", got: u32::from_le_bytes(p).into() });
        }
        let signature = r.array::<16>("TRANSFORM Signature")?;
        let nonce = r.array::<16>("TRANSFORM Nonce")?;
        let original_message_size = r.u32("OriginalMessageSize")?;
        r.skip(2, "Reserved")?;
        let flags = r.u16("Flags")?;
        let session_id = r.u64("SessionId")?;
        Ok(TransformHeader { signature, nonce, original_message_size, flags, session_id })
    }
}

/// True if `buf` starts with the transform ProtocolId.
pub fn is_transform(buf: &[u8]) -> bool {
    buf.len() >= 4 && buf[..4] == TRANSFORM_PROTOCOL_ID
}
