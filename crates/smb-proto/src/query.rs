//! QUERY_DIRECTORY, QUERY_INFO and SET_INFO (MS-SMB2 2.2.33 to 2.2.40).

use bytes::{Bytes, BytesMut};

use crate::create::FileId;
use crate::error::DecodeResult;
use crate::header::{Command, HEADER_LEN};
use crate::info::{encode_get_ea, SetFileInfo};
use crate::message::{patch_u16, patch_u32, put_u16, put_u32, Request};
use crate::reader::{put_utf16, range_at, Reader};

/// QUERY_DIRECTORY flags.
pub mod dir_flags {
    #![allow(missing_docs)]
    pub const RESTART_SCANS: u8 = 0x01;
    pub const RETURN_SINGLE_ENTRY: u8 = 0x02;
    pub const INDEX_SPECIFIED: u8 = 0x04;
    pub const REOPEN: u8 = 0x10;
}

/// QUERY_DIRECTORY request (MS-SMB2 2.2.33).
#[derive(Debug, Clone, Copy)]
pub struct QueryDirectoryRequest<'a> {
    /// FileInformationClass, e.g. FileIdFullDirectoryInformation.
    pub class: u8,
    /// Flags, see [`dir_flags`].
    pub flags: u8,
    /// The directory handle, or [`FileId::RELATED`].
    pub file_id: FileId,
    /// Search pattern, e.g. `*`.
    pub pattern: &'a str,
    /// OutputBufferLength in bytes.
    pub output_buffer_length: u32,
}

impl Request for QueryDirectoryRequest<'_> {
    fn command(&self) -> Command {
        Command::QueryDirectory
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 33);
        out.extend_from_slice(&[self.class, self.flags]);
        put_u32(out, 0); // FileIndex
        self.file_id.encode(out);
        put_u16(out, (HEADER_LEN + 32) as u16);
        let len_at = out.len();
        put_u16(out, 0);
        put_u32(out, self.output_buffer_length);
        let n = put_utf16(out, self.pattern);
        patch_u16(out, len_at, n as u16);
        if n == 0 {
            out.extend_from_slice(&[0]);
        }
    }
    fn credit_bytes(&self) -> u64 {
        self.output_buffer_length as u64
    }
    fn check(&self) -> Result<(), String> {
        crate::message::check_utf16_u16("QUERY_DIRECTORY pattern", self.pattern)
    }
}

/// The output buffer of a QUERY_DIRECTORY or QUERY_INFO response, as a
/// slice of the frame (MS-SMB2 2.2.34, 2.2.38).
#[derive(Debug, Clone)]
pub struct OutputBuffer(pub Bytes);

impl OutputBuffer {
    /// Decodes a QUERY_DIRECTORY or QUERY_INFO response message (both have
    /// StructureSize 9, OutputBufferOffset, OutputBufferLength).
    pub fn decode(msg: &Bytes) -> DecodeResult<OutputBuffer> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(9, "StructureSize")?;
        let off = r.u16("OutputBufferOffset")? as usize;
        let len = r.u32("OutputBufferLength")? as usize;
        if len == 0 {
            return Ok(OutputBuffer(Bytes::new()));
        }
        Ok(OutputBuffer(msg.slice(range_at(msg.len(), off, len, "OutputBuffer")?)))
    }
}

/// QUERY_INFO request (MS-SMB2 2.2.37).
#[derive(Debug, Clone, Copy)]
pub struct QueryInfoRequest<'a> {
    /// InfoType, see [`crate::info::info_type`].
    pub info_type: u8,
    /// FileInfoClass.
    pub class: u8,
    /// OutputBufferLength in bytes.
    pub output_buffer_length: u32,
    /// EA names to query (FileFullEaInformation only); empty for all.
    pub ea_names: &'a [&'a str],
    /// AdditionalInformation (security queries).
    pub additional_information: u32,
    /// The handle, or [`FileId::RELATED`].
    pub file_id: FileId,
}

impl Request for QueryInfoRequest<'_> {
    fn command(&self) -> Command {
        Command::QueryInfo
    }
    fn encode_body(&self, out: &mut BytesMut, hdr: usize) {
        put_u16(out, 41);
        out.extend_from_slice(&[self.info_type, self.class]);
        put_u32(out, self.output_buffer_length);
        let in_off_at = out.len();
        put_u16(out, 0);
        put_u16(out, 0);
        let in_len_at = out.len();
        put_u32(out, 0);
        put_u32(out, self.additional_information);
        put_u32(out, 0); // Flags
        self.file_id.encode(out);
        if self.ea_names.is_empty() {
            out.extend_from_slice(&[0]);
        } else {
            let start = out.len();
            encode_get_ea(out, self.ea_names);
            patch_u16(out, in_off_at, (start - hdr) as u16);
            patch_u32(out, in_len_at, (out.len() - start) as u32);
        }
    }
    fn credit_bytes(&self) -> u64 {
        self.output_buffer_length as u64
    }
}

/// SET_INFO request (MS-SMB2 2.2.39) for InfoType FILE or SECURITY.
#[derive(Debug, Clone)]
pub struct SetInfoRequest<'a> {
    /// The handle, or [`FileId::RELATED`].
    pub file_id: FileId,
    /// The payload.
    pub info: SetFileInfo<'a>,
}

impl Request for SetInfoRequest<'_> {
    fn command(&self) -> Command {
        Command::SetInfo
    }
    fn encode_body(&self, out: &mut BytesMut, hdr: usize) {
        put_u16(out, 33);
        out.extend_from_slice(&[self.info.info_type(), self.info.class()]);
        let len_at = out.len();
        put_u32(out, 0);
        put_u16(out, (HEADER_LEN + 32) as u16);
        put_u16(out, 0);
        put_u32(out, self.info.additional_information());
        self.file_id.encode(out);
        let start = out.len();
        debug_assert_eq!(start - hdr, HEADER_LEN + 32);
        self.info.encode(out);
        patch_u32(out, len_at, (out.len() - start) as u32);
    }
}
