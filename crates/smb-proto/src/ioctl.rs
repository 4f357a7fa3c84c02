//! IOCTL with the FSCTLs for server-side copy (MS-SMB2 2.2.31, 2.2.32).

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, put_u64, Request};
use crate::reader::{range_at, Reader};

/// FSCTL_SRV_REQUEST_RESUME_KEY.
pub const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
/// FSCTL_SRV_COPYCHUNK_WRITE (needs only write access on the target).
pub const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
/// FSCTL_VALIDATE_NEGOTIATE_INFO.
pub const FSCTL_VALIDATE_NEGOTIATE_INFO: u32 = 0x0014_0204;

/// IOCTL request with an FSCTL and an input buffer.
#[derive(Debug, Clone, Copy)]
pub struct IoctlRequest<'a> {
    /// CtlCode.
    pub ctl_code: u32,
    /// The handle.
    pub file_id: FileId,
    /// Input buffer.
    pub input: &'a [u8],
    /// MaxOutputResponse in bytes.
    pub max_output: u32,
}

impl Request for IoctlRequest<'_> {
    fn command(&self) -> Command {
        Command::Ioctl
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 57);
        put_u16(out, 0);
        put_u32(out, self.ctl_code);
        self.file_id.encode(out);
        let in_off = if self.input.is_empty() { 0 } else { (HEADER_LEN + 56) as u32 };
        put_u32(out, in_off);
        put_u32(out, self.input.len() as u32);
        put_u32(out, 0); // MaxInputResponse
        put_u32(out, 0); // OutputOffset
        put_u32(out, 0); // OutputCount
        put_u32(out, self.max_output);
        put_u32(out, 1); // SMB2_0_IOCTL_IS_FSCTL
        put_u32(out, 0);
        out.extend_from_slice(self.input);
    }
    fn credit_bytes(&self) -> u64 {
        (self.input.len() as u64).max(self.max_output as u64)
    }
}

/// IOCTL response output buffer (a slice of the frame).
#[derive(Debug, Clone)]
pub struct IoctlResponse {
    /// CtlCode echoed.
    pub ctl_code: u32,
    /// Output buffer.
    pub output: Bytes,
}

impl IoctlResponse {
    /// Decodes a whole IOCTL response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<IoctlResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(49, "IOCTL StructureSize")?;
        r.skip(2, "Reserved")?;
        let ctl_code = r.u32("CtlCode")?;
        r.skip(16 + 8, "FileId/Input")?;
        let off = r.u32("OutputOffset")? as usize;
        let len = r.u32("OutputCount")? as usize;
        let output = if len == 0 { Bytes::new() } else { msg.slice(range_at(msg.len(), off, len, "IOCTL Output")?) };
        Ok(IoctlResponse { ctl_code, output })
    }
}

/// Extracts the 24-byte ResumeKey from a FSCTL_SRV_REQUEST_RESUME_KEY
/// output (MS-SMB2 2.2.32.3).
pub fn decode_resume_key(out: &[u8]) -> DecodeResult<[u8; 24]> {
    Reader::new(out).array::<24>("ResumeKey")
}

/// One chunk of a server-side copy: bytes at `source_offset` in the source
/// go to `target_offset` in the target (MS-SMB2 2.2.31.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyChunk {
    /// Source byte offset.
    pub source_offset: u64,
    /// Target byte offset.
    pub target_offset: u64,
    /// Length in bytes.
    pub length: u32,
}

/// Encodes an SRV_COPYCHUNK_COPY input buffer.
pub fn encode_copychunk(out: &mut BytesMut, resume_key: &[u8; 24], chunks: &[CopyChunk]) {
    out.extend_from_slice(resume_key);
    put_u32(out, chunks.len() as u32);
    put_u32(out, 0);
    for c in chunks {
        put_u64(out, c.source_offset);
        put_u64(out, c.target_offset);
        put_u32(out, c.length);
        put_u32(out, 0);
    }
}

/// SRV_COPYCHUNK_RESPONSE (MS-SMB2 2.2.32.1). On STATUS_INVALID_PARAMETER
/// the fields carry the server's limits instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyChunkResponse {
    /// ChunksWritten (or max chunks per request).
    pub chunks_written: u32,
    /// ChunkBytesWritten (or max bytes per chunk).
    pub chunk_bytes_written: u32,
    /// TotalBytesWritten (or max total bytes per request).
    pub total_bytes_written: u32,
}

impl CopyChunkResponse {
    /// Decodes the 12-byte response.
    pub fn decode(b: &[u8]) -> DecodeResult<CopyChunkResponse> {
        let mut r = Reader::new(b);
        Ok(CopyChunkResponse {
            chunks_written: r.u32("ChunksWritten")?,
            chunk_bytes_written: r.u32("ChunkBytesWritten")?,
            total_bytes_written: r.u32("TotalBytesWritten")?,
        })
    }
}
