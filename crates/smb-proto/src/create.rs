//! CREATE with create contexts, and CLOSE (MS-SMB2 2.2.13, 2.2.14, 2.2.15,
//! 2.2.16).

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, DecodeResult};
use crate::header::{Command, HEADER_LEN};
use crate::info::{encode_full_ea, FileTimes, FullEa};
use crate::message::{patch_u16, patch_u32, put_u16, put_u32, put_u64, OpenIntent, Request};
use crate::reader::{pad_to, put_utf16, range_at, Reader};

pub use crate::create_flags::{access, attributes, create_action, oplock, options, share, Disposition};

/// An SMB2_FILEID: persistent and volatile halves (MS-SMB2 2.2.14.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    /// Persistent part.
    pub persistent: u64,
    /// Volatile part.
    pub volatile: u64,
}

impl FileId {
    /// The all-ones FileId that makes a related compound operation use the
    /// handle of the previous CREATE (MS-SMB2 3.2.4.1.4).
    pub const RELATED: FileId = FileId { persistent: u64::MAX, volatile: u64::MAX };

    /// Appends the 16 wire bytes.
    pub fn encode(&self, out: &mut BytesMut) {
        put_u64(out, self.persistent);
        put_u64(out, self.volatile);
    }

    /// Reads 16 bytes.
    pub fn read(r: &mut Reader<'_>) -> DecodeResult<FileId> {
        Ok(FileId { persistent: r.u64("FileId.Persistent")?, volatile: r.u64("FileId.Volatile")? })
    }
}

/// Create contexts we send (MS-SMB2 2.2.13.2).
#[derive(Debug, Clone)]
#[allow(missing_docs)] // variant docs name the fields
pub enum CreateContext<'a> {
    /// "ExtA": extended attributes to set on create.
    EaBuffer(&'a [FullEa]),
    /// "QFid": ask for the on-disk file id.
    QueryOnDiskId,
    /// "DH2Q": durable handle v2 request with timeout (ms) and CreateGuid
    /// (MS-SMB2 2.2.13.2.11).
    DurableV2 { timeout_ms: u32, create_guid: [u8; 16] },
    /// "DH2C": reclaim the durable handle `file_id`, opened with
    /// `create_guid`, after its connection was lost (MS-SMB2 2.2.13.2.12).
    DurableV2Reconnect { file_id: FileId, create_guid: [u8; 16] },
    /// "MxAc": ask for the maximal access.
    QueryMaximalAccess,
    /// "RqLs" version 2: ask for a lease with `key` and the `wanted`
    /// [`crate::lease::state`] bits (MS-SMB2 2.2.13.2.10); the request's
    /// oplock level must be [`oplock::LEASE`].
    LeaseV2 { key: [u8; 16], wanted: u32 },
}

impl CreateContext<'_> {
    fn name(&self) -> &'static [u8; 4] {
        match self {
            CreateContext::EaBuffer(_) => b"ExtA",
            CreateContext::QueryOnDiskId => b"QFid",
            CreateContext::DurableV2 { .. } => b"DH2Q",
            CreateContext::DurableV2Reconnect { .. } => b"DH2C",
            CreateContext::QueryMaximalAccess => b"MxAc",
            CreateContext::LeaseV2 { .. } => b"RqLs",
        }
    }
    fn encode_data(&self, out: &mut BytesMut) {
        match self {
            CreateContext::EaBuffer(eas) => encode_full_ea(out, eas),
            CreateContext::QueryOnDiskId | CreateContext::QueryMaximalAccess => {}
            CreateContext::DurableV2 { timeout_ms, create_guid } => {
                put_u32(out, *timeout_ms);
                put_u32(out, 0);
                put_u64(out, 0);
                out.extend_from_slice(create_guid);
            }
            CreateContext::DurableV2Reconnect { file_id, create_guid } => {
                file_id.encode(out);
                out.extend_from_slice(create_guid);
                put_u32(out, 0); // Flags: not persistent
            }
            CreateContext::LeaseV2 { key, wanted } => crate::lease::encode_request_v2(out, key, *wanted),
        }
    }
}

/// CREATE request (MS-SMB2 2.2.13). `name` is relative to the share root,
/// with `\` separators and no leading separator; empty opens the root.
#[derive(Debug, Clone)]
pub struct CreateRequest<'a> {
    /// Path relative to the share root.
    pub name: &'a str,
    /// RequestedOplockLevel, see [`oplock`].
    pub oplock_level: u8,
    /// DesiredAccess, see [`access`].
    pub desired_access: u32,
    /// FileAttributes for a new file.
    pub file_attributes: u32,
    /// ShareAccess, see [`share`].
    pub share_access: u32,
    /// CreateDisposition.
    pub disposition: Disposition,
    /// CreateOptions, see [`options`].
    pub options: u32,
    /// Create contexts.
    pub contexts: &'a [CreateContext<'a>],
}

impl<'a> CreateRequest<'a> {
    fn with(name: &'a str, desired_access: u32, disposition: Disposition) -> CreateRequest<'a> {
        CreateRequest {
            name,
            oplock_level: oplock::NONE,
            desired_access,
            file_attributes: 0,
            share_access: share::ALL,
            disposition,
            options: 0,
            contexts: &[],
        }
    }

    /// An open of what exists at `name` (file or directory), asking for
    /// `desired_access` (see [`access`]): no oplock, sharing read, write
    /// and delete (others' opens, renames and deletes never wait on it),
    /// no attributes, options or contexts. The methods below say what sets
    /// an open apart.
    pub fn open(name: &'a str, desired_access: u32) -> CreateRequest<'a> {
        CreateRequest::with(name, desired_access, Disposition::Open)
    }

    /// A new file at `name` (failing if the name exists: see
    /// [`CreateRequest::disposition`]), attributes NORMAL, never a
    /// directory (FILE_NON_DIRECTORY_FILE); otherwise as
    /// [`CreateRequest::open`].
    pub fn new_file(name: &'a str, desired_access: u32) -> CreateRequest<'a> {
        CreateRequest {
            file_attributes: attributes::NORMAL,
            options: options::NON_DIRECTORY_FILE,
            ..CreateRequest::with(name, desired_access, Disposition::Create)
        }
    }

    /// A new directory at `name` (failing if the name exists), attributes
    /// DIRECTORY, FILE_DIRECTORY_FILE; otherwise as [`CreateRequest::open`].
    pub fn new_directory(name: &'a str, desired_access: u32) -> CreateRequest<'a> {
        CreateRequest {
            file_attributes: attributes::DIRECTORY,
            options: options::DIRECTORY_FILE,
            ..CreateRequest::with(name, desired_access, Disposition::Create)
        }
    }

    /// What to do when the name exists or does not.
    pub fn disposition(self, disposition: Disposition) -> CreateRequest<'a> {
        CreateRequest { disposition, ..self }
    }

    /// Shares only `share_access` (see [`share`]; 0: nothing) with other
    /// opens.
    pub fn sharing(self, share_access: u32) -> CreateRequest<'a> {
        CreateRequest { share_access, ..self }
    }

    /// Adds CreateOptions (see [`options`]) to those already set.
    pub fn options(self, options: u32) -> CreateRequest<'a> {
        CreateRequest { options: self.options | options, ..self }
    }

    /// Sends `contexts` with the CREATE.
    pub fn contexts(self, contexts: &'a [CreateContext<'a>]) -> CreateRequest<'a> {
        CreateRequest { contexts, ..self }
    }

    /// Asks for oplock `level` (see [`oplock`]).
    pub fn oplock(self, level: u8) -> CreateRequest<'a> {
        CreateRequest { oplock_level: level, ..self }
    }
}

impl Request for CreateRequest<'_> {
    fn command(&self) -> Command {
        Command::Create
    }
    fn opens(&self) -> Option<OpenIntent> {
        Some(OpenIntent { disposition: self.disposition, desired_access: self.desired_access, options: self.options })
    }
    fn check(&self) -> Result<(), String> {
        crate::message::check_utf16_u16("CREATE name", self.name)
    }
    fn encode_body(&self, out: &mut BytesMut, hdr: usize) {
        put_u16(out, 57);
        out.extend_from_slice(&[0, self.oplock_level]);
        put_u32(out, 2); // ImpersonationLevel: Impersonation
        put_u64(out, 0);
        put_u64(out, 0);
        put_u32(out, self.desired_access);
        put_u32(out, self.file_attributes);
        put_u32(out, self.share_access);
        put_u32(out, self.disposition as u32);
        put_u32(out, self.options);
        put_u16(out, (HEADER_LEN + 56) as u16);
        let name_len_at = out.len();
        put_u16(out, 0);
        let ctx_off_at = out.len();
        put_u32(out, 0);
        put_u32(out, 0);
        let n = put_utf16(out, self.name);
        patch_u16(out, name_len_at, n as u16);
        if n == 0 {
            out.extend_from_slice(&[0]); // the Buffer must hold at least one byte
        }
        if self.contexts.is_empty() {
            return;
        }
        pad_to(out, hdr, 8);
        let ctx_start = out.len();
        patch_u32(out, ctx_off_at, (ctx_start - hdr) as u32);
        let mut prev_next_at: Option<(usize, usize)> = None;
        for c in self.contexts {
            pad_to(out, hdr, 8);
            let start = out.len();
            if let Some((at, prev_start)) = prev_next_at {
                patch_u32(out, at, (start - prev_start) as u32);
            }
            put_u32(out, 0); // Next
            put_u16(out, 16); // NameOffset
            put_u16(out, 4);
            put_u16(out, 0);
            let data_off_at = out.len();
            put_u16(out, 0);
            let data_len_at = out.len();
            put_u32(out, 0);
            out.extend_from_slice(c.name());
            out.extend_from_slice(&[0; 4]);
            let data_start = out.len();
            c.encode_data(out);
            let data_len = out.len() - data_start;
            if data_len > 0 {
                patch_u16(out, data_off_at, (data_start - start) as u16);
                patch_u32(out, data_len_at, data_len as u32);
            }
            prev_next_at = Some((start, start));
        }
        patch_u32(out, ctx_off_at + 4, (out.len() - ctx_start) as u32);
    }
}

/// A create context returned by the server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)] // variant docs name the fields
pub enum CreateResponseContext {
    /// "QFid": DiskFileId and VolumeId.
    OnDiskId { disk_file_id: u64, volume_id: u64 },
    /// "DH2Q": durable handle granted.
    DurableV2 { timeout_ms: u32, flags: u32 },
    /// "MxAc": QueryStatus and MaximalAccess.
    MaximalAccess { status: u32, access: u32 },
    /// "RqLs": the lease granted.
    Lease(crate::lease::GrantedLease),
    /// Any other context, by name.
    Other([u8; 4]),
}

/// CREATE response (MS-SMB2 2.2.14).
#[derive(Debug, Clone)]
pub struct CreateResponse {
    /// OplockLevel granted.
    pub oplock_level: u8,
    /// CreateAction, see [`create_action`].
    pub create_action: u32,
    /// Timestamps, sizes and attributes.
    pub times: FileTimes,
    /// The handle.
    pub file_id: FileId,
    /// Decoded response contexts.
    pub contexts: Vec<CreateResponseContext>,
}

impl CreateResponse {
    /// Decodes a whole CREATE response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<CreateResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(89, "CREATE StructureSize")?;
        let oplock_level = r.u8("OplockLevel")?;
        r.skip(1, "Flags")?;
        let create_action = r.u32("CreateAction")?;
        let creation = r.u64("CreationTime")?;
        let last_access = r.u64("LastAccessTime")?;
        let last_write = r.u64("LastWriteTime")?;
        let change = r.u64("ChangeTime")?;
        let allocation_size = r.u64("AllocationSize")?;
        let end_of_file = r.u64("EndofFile")?;
        let attributes = r.u32("FileAttributes")?;
        r.skip(4, "Reserved2")?;
        let file_id = FileId::read(&mut r)?;
        let ctx_off = r.u32("CreateContextsOffset")? as usize;
        let ctx_len = r.u32("CreateContextsLength")? as usize;
        let mut contexts = Vec::new();
        if ctx_len > 0 {
            let region = &msg[range_at(msg.len(), ctx_off, ctx_len, "CreateContexts")?];
            let mut off = 0usize;
            loop {
                let c = region.get(off..).ok_or(DecodeError::OutOfBounds("CreateContext"))?;
                let mut cr = Reader::new(c);
                let next = cr.u32("Context.Next")? as usize;
                let name_off = cr.u16("Context.NameOffset")? as usize;
                let name_len = cr.u16("Context.NameLength")? as usize;
                cr.skip(2, "Context.Reserved")?;
                let data_off = cr.u16("Context.DataOffset")? as usize;
                let data_len = cr.u32("Context.DataLength")? as usize;
                let name = &c[range_at(c.len(), name_off, name_len, "Context.Name")?];
                let data = &c[range_at(c.len(), data_off, data_len, "Context.Data")?];
                let mut d = Reader::new(data);
                contexts.push(match name {
                    b"QFid" => CreateResponseContext::OnDiskId {
                        disk_file_id: d.u64("DiskFileId")?,
                        volume_id: d.u64("VolumeId")?,
                    },
                    b"DH2Q" => {
                        CreateResponseContext::DurableV2 { timeout_ms: d.u32("Timeout")?, flags: d.u32("Flags")? }
                    }
                    b"MxAc" => CreateResponseContext::MaximalAccess {
                        status: d.u32("QueryStatus")?,
                        access: d.u32("MaximalAccess")?,
                    },
                    b"RqLs" => CreateResponseContext::Lease(crate::lease::GrantedLease::decode(data)?),
                    other => {
                        let mut n = [0u8; 4];
                        let k = other.len().min(4);
                        n[..k].copy_from_slice(&other[..k]);
                        CreateResponseContext::Other(n)
                    }
                });
                if next == 0 {
                    break;
                }
                off = off.checked_add(next).ok_or(DecodeError::OutOfBounds("CreateContext.Next"))?;
            }
        }
        Ok(CreateResponse {
            oplock_level,
            create_action,
            times: FileTimes { creation, last_access, last_write, change, allocation_size, end_of_file, attributes },
            file_id,
            contexts,
        })
    }

    /// The lease granted, from an "RqLs" context, if the server sent one.
    pub fn lease(&self) -> Option<crate::lease::GrantedLease> {
        self.contexts.iter().find_map(|c| match c {
            CreateResponseContext::Lease(l) => Some(*l),
            _ => None,
        })
    }

    /// The on-disk id from a "QFid" context, if the server sent one.
    pub fn on_disk_id(&self) -> Option<u64> {
        self.contexts.iter().find_map(|c| match c {
            CreateResponseContext::OnDiskId { disk_file_id, .. } => Some(*disk_file_id),
            _ => None,
        })
    }
}

/// CLOSE request (MS-SMB2 2.2.15). `post_query` asks for the final
/// attributes (SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB).
#[derive(Debug, Clone, Copy)]
pub struct CloseRequest {
    /// The handle, or [`FileId::RELATED`] in a compound.
    pub file_id: FileId,
    /// Return attributes in the response.
    pub post_query: bool,
}

impl Request for CloseRequest {
    fn command(&self) -> Command {
        Command::Close
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        put_u16(out, 24);
        put_u16(out, self.post_query as u16);
        put_u32(out, 0);
        self.file_id.encode(out);
    }
}

/// CLOSE response (MS-SMB2 2.2.16). `times` is all zero unless post-query
/// attributes were asked for.
#[derive(Debug, Clone, Copy)]
pub struct CloseResponse {
    /// Flags echoed.
    pub flags: u16,
    /// Final timestamps, sizes and attributes.
    pub times: FileTimes,
}

impl CloseResponse {
    /// Decodes a whole CLOSE response message.
    pub fn decode(msg: &Bytes) -> DecodeResult<CloseResponse> {
        let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
        r.expect_u16(60, "CLOSE StructureSize")?;
        let flags = r.u16("Flags")?;
        r.skip(4, "Reserved")?;
        let times = FileTimes {
            creation: r.u64("CreationTime")?,
            last_access: r.u64("LastAccessTime")?,
            last_write: r.u64("LastWriteTime")?,
            change: r.u64("ChangeTime")?,
            allocation_size: r.u64("AllocationSize")?,
            end_of_file: r.u64("EndofFile")?,
            attributes: r.u32("FileAttributes")?,
        };
        Ok(CloseResponse { flags, times })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_sets_what_each_open_is_for_and_nothing_else() {
        let o = CreateRequest::open("a\\b", access::FILE_READ_ATTRIBUTES);
        assert_eq!(
            (o.oplock_level, o.file_attributes, o.share_access, o.disposition, o.options, o.contexts.len()),
            (oplock::NONE, 0, share::ALL, Disposition::Open, 0, 0)
        );
        let f = CreateRequest::new_file("f", access::GENERIC_WRITE).disposition(Disposition::OverwriteIf);
        assert_eq!(
            (f.file_attributes, f.options, f.disposition),
            (attributes::NORMAL, options::NON_DIRECTORY_FILE, Disposition::OverwriteIf)
        );
        let d = CreateRequest::new_directory("d", access::FILE_LIST_DIRECTORY);
        assert_eq!(
            (d.file_attributes, d.options, d.disposition),
            (attributes::DIRECTORY, options::DIRECTORY_FILE, Disposition::Create)
        );
        let l = CreateRequest::new_file("l", access::DELETE)
            .sharing(0)
            .options(options::DELETE_ON_CLOSE)
            .oplock(oplock::BATCH);
        assert_eq!(
            (l.share_access, l.options, l.oplock_level),
            (0, options::NON_DIRECTORY_FILE | options::DELETE_ON_CLOSE, oplock::BATCH)
        );
    }
}
