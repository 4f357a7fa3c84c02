//! READ, WRITE and FLUSH (MS-SMB2 2.2.19 to 2.2.22, 2.2.17, 2.2.18).
//!
//! A READ response's payload is a [`Bytes`] slice of the received frame, so
//! data goes from the socket buffer to the caller without a copy.

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::{DecodeError, DecodeResult};
use crate::header::{Command, HEADER_LEN};
use crate::message::{put_u16, put_u32, put_u64, Request};
use crate::reader::{range_at, Reader};

/// READ request for `length` bytes at byte `offset`.
#[derive(Debug, Clone, Copy)]
pub struct ReadRequest {
    /// The handle, or [`FileId::RELATED`].
    pub file_id: FileId,
    /// Bytes to read.
    pub length: u32,
    /// Byte offset in the file.
    pub offset: u64,
    /// MinimumCount: fewer bytes fail with STATUS_END_OF_FILE.
    pub minimum_count: u32,
}

impl Request for ReadRequest {
    fn command(&self) -> Command {
        Command::Read
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 49);
        out.extend_from_slice(&[0x50, 0]); // Padding: data offset hint, Flags
        put_u32(out, self.length);
        put_u64(out, self.offset);
        self.file_id.encode(out);
        put_u32(out, self.minimum_count);
        put_u32(out, 0); // Channel
        put_u32(out, 0); // RemainingBytes
        put_u16(out, 0);
        put_u16(out, 0);
        out.extend_from_slice(&[0]);
    }
    fn credit_bytes(&self) -> u64 {
        self.length as u64
    }
}

/// READ response: the data is a zero-copy slice of the frame.
#[derive(Debug, Clone)]
pub struct ReadResponse {
    /// The bytes read.
    pub data: Bytes,
    /// DataRemaining.
    pub remaining: u32,
}

impl ReadResponse {
    /// Decodes a whole READ response message; `data` shares `msg`'s buffer.
    pub fn decode(msg: &Bytes) -> DecodeResult<ReadResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(17, "READ StructureSize")?;
        let off = r.u8("DataOffset")? as usize;
        r.skip(1, "Reserved")?;
        let len = r.u32("DataLength")? as usize;
        let remaining = r.u32("DataRemaining")?;
        // The data follows the 16-byte fixed part; an offset into the header
        // or the fixed part would hand header bytes out as file data.
        if len != 0 && off < HEADER_LEN + 16 {
            return Err(DecodeError::OutOfBounds("READ Data"));
        }
        let data = if len == 0 { Bytes::new() } else { msg.slice(range_at(msg.len(), off, len, "READ Data")?) };
        Ok(ReadResponse { data, remaining })
    }
}

/// WRITE request; `data` is appended right after the fixed part.
#[derive(Debug, Clone, Copy)]
pub struct WriteRequest<'a> {
    /// The handle, or [`FileId::RELATED`].
    pub file_id: FileId,
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes to write.
    pub data: &'a [u8],
}

/// Appends the 48-byte fixed part of a WRITE request for `length` bytes of
/// data that will follow it (so a caller can build the payload in place).
pub fn encode_write_fixed(out: &mut BytesMut, file_id: FileId, offset: u64, length: u32) {
    put_u16(out, 49);
    put_u16(out, (HEADER_LEN + 48) as u16);
    put_u32(out, length);
    put_u64(out, offset);
    file_id.encode(out);
    put_u32(out, 0); // Channel
    put_u32(out, 0); // RemainingBytes
    put_u16(out, 0);
    put_u16(out, 0);
    put_u32(out, 0); // Flags
}

impl Request for WriteRequest<'_> {
    fn command(&self) -> Command {
        Command::Write
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        encode_write_fixed(out, self.file_id, self.offset, self.data.len() as u32);
        out.extend_from_slice(self.data);
    }
    fn credit_bytes(&self) -> u64 {
        self.data.len() as u64
    }
}

/// WRITE response: bytes written.
#[derive(Debug, Clone, Copy)]
pub struct WriteResponse {
    /// Count of bytes written.
    pub count: u32,
}

impl WriteResponse {
    /// Decodes a whole WRITE response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<WriteResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(17, "WRITE StructureSize")?;
        r.skip(2, "Reserved")?;
        Ok(WriteResponse { count: r.u32("Count")? })
    }
}

/// FLUSH request.
#[derive(Debug, Clone, Copy)]
pub struct FlushRequest {
    /// The handle.
    pub file_id: FileId,
}

impl Request for FlushRequest {
    fn command(&self) -> Command {
        Command::Flush
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 24);
        put_u16(out, 0);
        put_u32(out, 0);
        self.file_id.encode(out);
    }
}
