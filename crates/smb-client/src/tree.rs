//! A connected share (TreeId) and the file operations on it: single
//! requests, and compounds that do small work in one round trip
//! (CREATE+READ+CLOSE, CREATE+WRITE+CLOSE, CREATE+QUERY_INFO+CLOSE,
//! CREATE+QUERY_DIRECTORY+CLOSE).

use bytes::{Bytes, BytesMut};
use smb_proto::create::{
    access, options, CloseRequest, CloseResponse, CreateContext, CreateRequest, CreateResponse, Disposition, FileId,
};
use smb_proto::info::{class, decode_dir_entries, decode_full_ea, info_type, DirEntry, FileTimes, FullEa, SetFileInfo};
use smb_proto::io::{FlushRequest, ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use smb_proto::ioctl::{
    decode_resume_key, encode_copychunk, CopyChunk, CopyChunkResponse, IoctlRequest, IoctlResponse,
    FSCTL_SRV_COPYCHUNK_WRITE, FSCTL_SRV_REQUEST_RESUME_KEY,
};
use smb_proto::message::Empty;
use smb_proto::query::{dir_flags, OutputBuffer, QueryDirectoryRequest, QueryInfoRequest, SetInfoRequest};
use smb_proto::{Command, NtStatus, Request};

use crate::connection::{Connection, Op, Response};
use crate::error::{Error, Result};
use crate::session::Session;

/// Converts an S3-style path (`a/b/c`) to the share-relative SMB form
/// (`a\b\c`). Callers validate components; this only swaps separators.
pub fn smb_path(path: &str) -> String {
    path.trim_matches('/').replace('/', "\\")
}

/// A tree connect on one session. Cloning shares the connection, so every
/// FileId opened through a `Tree` stays on the connection that opened it.
#[derive(Clone)]
pub struct Tree {
    session: Session,
    tree_id: u32,
    encrypt: bool,
    share: String,
}

impl Tree {
    pub(crate) fn new(session: Session, tree_id: u32, encrypt: bool, share: String) -> Tree {
        Tree { session, tree_id, encrypt, share }
    }

    /// The session this tree belongs to.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The connection carrying this tree.
    pub fn conn(&self) -> &Connection {
        &self.session.conn
    }

    /// The TreeId.
    pub fn tree_id(&self) -> u32 {
        self.tree_id
    }

    /// The share name.
    pub fn share(&self) -> &str {
        &self.share
    }

    /// Whether requests on this tree are encrypted.
    pub fn is_encrypted(&self) -> bool {
        self.encrypt
    }

    /// Negotiated max READ size in bytes.
    pub fn max_read(&self) -> u32 {
        self.session.negotiated.max_read_size
    }

    /// Negotiated max WRITE size in bytes.
    pub fn max_write(&self) -> u32 {
        self.session.negotiated.max_write_size
    }

    /// Sends one request and returns its final response, whatever its status.
    pub async fn call(&self, body: &dyn Request) -> Result<Response> {
        self.conn().call(Op { body, tree_id: self.tree_id }, self.encrypt).await
    }

    /// Sends `bodies` as one related compound and returns every response,
    /// whatever its status. Later bodies use [`FileId::RELATED`] to refer to
    /// the first CREATE's handle.
    pub async fn compound(&self, bodies: &[&dyn Request]) -> Result<Vec<Response>> {
        let ops: Vec<Op<'_>> = bodies.iter().map(|&body| Op { body, tree_id: self.tree_id }).collect();
        let rxs = self.conn().send_batch(&[&ops], self.encrypt).await?;
        let mut out = Vec::with_capacity(rxs.len());
        for rx in rxs {
            out.push(self.conn().wait(rx).await?);
        }
        Ok(out)
    }

    /// Sends `bodies` as one unrelated compound: run in order, each on the
    /// FileId it names (see [`crate::connection::Connection::send_unrelated`]), and
    /// returns every response, whatever its status.
    pub async fn compound_unrelated(&self, bodies: &[&dyn Request]) -> Result<Vec<Response>> {
        let ops: Vec<Op<'_>> = bodies.iter().map(|&body| Op { body, tree_id: self.tree_id }).collect();
        let rxs = self.conn().send_unrelated(&ops, self.encrypt).await?;
        let mut out = Vec::with_capacity(rxs.len());
        for rx in rxs {
            out.push(self.conn().wait(rx).await?);
        }
        Ok(out)
    }

    /// Sends several related compounds in one batch (one buffer, one
    /// write) and returns each chain's responses, whatever their status.
    /// A batch larger than the server's credit window goes out in parts
    /// that each fit it, the next sent as credits come back: one batch
    /// asking for more credits than the window holds would wait forever
    /// (failure class 2).
    pub async fn compounds(&self, chains: &[&[&dyn Request]]) -> Result<Vec<Vec<Response>>> {
        let ops: Vec<Vec<Op<'_>>> =
            chains.iter().map(|c| c.iter().map(|&body| Op { body, tree_id: self.tree_id }).collect()).collect();
        let refs: Vec<&[Op<'_>]> = ops.iter().map(|c| &c[..]).collect();
        let window = self.conn().credit_window().max(1) as u64;
        let mut all = Vec::with_capacity(chains.iter().map(|c| c.len()).sum());
        let mut start = 0;
        while start < refs.len() {
            let (mut end, mut charge) = (start, 0u64);
            while end < refs.len() {
                let c: u64 = refs[end]
                    .iter()
                    .map(|op| smb_proto::header::credit_charge(op.body.credit_bytes()).max(1) as u64)
                    .sum();
                if end > start && charge + c > window {
                    break;
                }
                charge += c;
                end += 1;
            }
            all.extend(self.conn().send_batch(&refs[start..end], self.encrypt).await?);
            start = end;
        }
        let mut rxs = all.into_iter();
        let mut out = Vec::with_capacity(chains.len());
        for c in chains {
            let mut v = Vec::with_capacity(c.len());
            for _ in 0..c.len() {
                v.push(self.conn().wait(rxs.next().expect("one future per message")).await?);
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Sends many independent single requests in one batch (one buffer,
    /// one write) and returns their futures in order.
    pub async fn send_many(&self, bodies: &[&dyn Request]) -> Result<Vec<crate::connection::ResponseFuture>> {
        let ops: Vec<[Op<'_>; 1]> = bodies.iter().map(|&body| [Op { body, tree_id: self.tree_id }]).collect();
        let chains: Vec<&[Op<'_>]> = ops.iter().map(|o| &o[..]).collect();
        self.conn().send_batch(&chains, self.encrypt).await
    }

    /// CREATE (MS-SMB2 2.2.13).
    ///
    /// Errors: the NTSTATUS, e.g. STATUS_OBJECT_NAME_NOT_FOUND,
    /// STATUS_OBJECT_NAME_COLLISION, STATUS_SHARING_VIOLATION.
    ///
    /// The caller owns the returned FileId and must close it; prefer
    /// [`Tree::open`], whose handle closes itself.
    pub async fn create(&self, req: &CreateRequest<'_>) -> Result<CreateResponse> {
        self.call(req).await?.into_create()
    }

    /// Opens an existing file or directory for reading (share
    /// Read|Write|Delete, so renames and deletes by others never wait on us).
    pub async fn open_read(&self, path: &str) -> Result<CreateResponse> {
        let name = smb_path(path);
        self.create(&read_open(&name, &[])).await
    }

    /// CLOSE with post-query attributes (MS-SMB2 2.2.15).
    pub async fn close(&self, file_id: FileId) -> Result<CloseResponse> {
        let r = self.call(&CloseRequest { file_id, post_query: true }).await?.ok_or_status(&[])?;
        r.body(CloseResponse::decode)
    }

    /// One READ of up to `length` bytes (at most the negotiated max) at
    /// `offset`. Returns fewer bytes at end of file, and an empty buffer at
    /// or past it. The data is a zero-copy slice of the received frame.
    pub async fn read(&self, file_id: FileId, offset: u64, length: u32) -> Result<Bytes> {
        let window = self.conn().credit_window().saturating_mul(65536).max(65536);
        let length = length.min(self.max_read()).min(window);
        let r = self.call(&ReadRequest { file_id, length, offset, minimum_count: 0 }).await?;
        if r.status() == NtStatus::STATUS_END_OF_FILE {
            return Ok(Bytes::new());
        }
        let data = r.ok_or_status(&[])?.body(ReadResponse::decode)?.data;
        check_read_len(data.len(), length)?;
        Ok(data)
    }

    /// One WRITE of `data` (at most the negotiated max) at `offset`.
    /// Returns the count written.
    pub async fn write(&self, file_id: FileId, offset: u64, data: &[u8]) -> Result<u32> {
        if data.len() > self.max_write() as usize {
            return Err(Error::InvalidArgument(format!("write of {} bytes exceeds MaxWriteSize", data.len())));
        }
        let r = self.call(&WriteRequest { file_id, offset, data }).await?.ok_or_status(&[])?;
        Ok(r.body(WriteResponse::decode)?.count)
    }

    /// FLUSH (MS-SMB2 2.2.17).
    pub async fn flush(&self, file_id: FileId) -> Result<()> {
        self.call(&FlushRequest { file_id }).await?.ok_or_status(&[])?;
        Ok(())
    }

    /// QUERY_INFO returning the raw output buffer.
    pub async fn query_info(&self, file_id: FileId, info_type: u8, class: u8, output_len: u32) -> Result<Bytes> {
        let req = QueryInfoRequest {
            info_type,
            class,
            output_buffer_length: output_len.min(self.session.negotiated.max_transact_size),
            ea_names: &[],
            additional_information: 0,
            file_id,
        };
        let r = self.call(&req).await?.ok_or_status(&[])?;
        Ok(r.body(OutputBuffer::decode)?.0)
    }

    /// FileNetworkOpenInformation of an open file.
    pub async fn query_times(&self, file_id: FileId) -> Result<FileTimes> {
        let b = self.query_info(file_id, info_type::FILE, class::FILE_NETWORK_OPEN_INFORMATION, 56).await?;
        Ok(FileTimes::decode_network_open(&b)?)
    }

    /// FileFsFullSizeInformation of the volume an open file or directory is
    /// on (MS-FSCC 2.5.4): its size and free space, in allocation units.
    pub async fn fs_full_size(&self, file_id: FileId) -> Result<smb_proto::info::FsFullSize> {
        let b = self.query_info(file_id, info_type::FILESYSTEM, class::FILE_FS_FULL_SIZE_INFORMATION, 32).await?;
        Ok(smb_proto::info::FsFullSize::decode(&b)?)
    }

    /// FileStandardInformation of an open file (MS-FSCC 2.4.41): its link
    /// count and whether it is delete-pending.
    pub async fn query_standard(&self, file_id: FileId) -> Result<smb_proto::info::StandardInfo> {
        let b = self.query_info(file_id, info_type::FILE, class::FILE_STANDARD_INFORMATION, 24).await?;
        Ok(smb_proto::info::StandardInfo::decode(&b)?)
    }

    /// The path of an open file as the server stores it (share-relative,
    /// on-disk case), from FileNormalizedNameInformation (MS-FSCC 2.4.30,
    /// SMB 3.1.1).
    ///
    /// Errors: STATUS_NOT_SUPPORTED / STATUS_INVALID_INFO_CLASS on servers
    /// without it.
    pub async fn normalized_name(&self, file_id: FileId) -> Result<String> {
        let b = self.query_info(file_id, info_type::FILE, class::FILE_NORMALIZED_NAME_INFORMATION, 4096).await?;
        Ok(smb_proto::info::decode_file_name_information(&b)?)
    }

    /// The EAs named in `names` (all EAs if empty). A file without EAs
    /// gives an empty list.
    pub async fn query_eas(&self, file_id: FileId, names: &[&str]) -> Result<Vec<FullEa>> {
        let req = QueryInfoRequest {
            info_type: info_type::FILE,
            class: class::FILE_FULL_EA_INFORMATION,
            output_buffer_length: 65536,
            ea_names: names,
            additional_information: 0,
            file_id,
        };
        let r = self.call(&req).await?;
        if matches!(r.status(), NtStatus::STATUS_NO_EAS_ON_FILE | NtStatus::STATUS_NONEXISTENT_EA_ENTRY) {
            return Ok(Vec::new());
        }
        let r = r.ok_or_status(&[])?;
        let eas = r.body(|m| decode_full_ea(&OutputBuffer::decode(m)?.0))?;
        // Samba answers a query for a missing name with an empty value.
        Ok(eas.into_iter().filter(|e| !e.value.is_empty()).collect())
    }

    /// SET_INFO (MS-SMB2 2.2.39): rename, disposition, end of file, basic
    /// info or EAs.
    pub async fn set_info(&self, file_id: FileId, info: SetFileInfo<'_>) -> Result<()> {
        self.call(&SetInfoRequest { file_id, info }).await?.ok_or_status(&[])?;
        Ok(())
    }

    /// Renames an open file to `target` (share-relative, `/` or `\`
    /// separators), replacing an existing target if asked.
    pub async fn rename(&self, file_id: FileId, target: &str, replace_if_exists: bool) -> Result<()> {
        let t = smb_path(target);
        self.set_info(file_id, SetFileInfo::Rename { target: &t, replace_if_exists }).await
    }

    /// One QUERY_DIRECTORY page on an open directory handle; `None` at the
    /// end of the enumeration.
    pub async fn query_directory(
        &self,
        file_id: FileId,
        pattern: &str,
        restart: bool,
    ) -> Result<Option<Vec<DirEntry>>> {
        let q = QueryDirectoryRequest {
            class: class::FILE_ID_FULL_DIRECTORY_INFORMATION,
            flags: if restart { dir_flags::RESTART_SCANS } else { 0 },
            file_id,
            pattern,
            output_buffer_length: self.session.negotiated.max_transact_size.min(1 << 20),
        };
        let r = self.call(&q).await?;
        if r.status() == NtStatus::STATUS_NO_MORE_FILES {
            return Ok(None);
        }
        let r = r.ok_or_status(&[])?;
        let mut v = Vec::new();
        r.body(|m| decode_dir_entries(&OutputBuffer::decode(m)?.0, |e| v.push(e)))?;
        Ok(Some(v))
    }

    /// CREATE+QUERY_INFO+CLOSE: times, size and attributes of `path` in one
    /// round trip.
    ///
    /// Errors: STATUS_OBJECT_NAME_NOT_FOUND / STATUS_OBJECT_PATH_NOT_FOUND.
    pub async fn stat(&self, path: &str) -> Result<FileTimes> {
        let name = smb_path(path);
        let open = CreateRequest::open(&name, access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE);
        let q = QueryInfoRequest {
            info_type: info_type::FILE,
            class: class::FILE_NETWORK_OPEN_INFORMATION,
            output_buffer_length: 56,
            ea_names: &[],
            additional_information: 0,
            file_id: FileId::RELATED,
        };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        let rs = self.compound(&[&open, &q, &close]).await?;
        first_error(&rs)?;
        rs[1].body(|m| FileTimes::decode_network_open(&OutputBuffer::decode(m)?.0))
    }

    /// CREATE+READ+CLOSE: reads up to `max_len` bytes (at most one READ) of
    /// a small file in one round trip. Returns the file's times/size from
    /// the CREATE and the data.
    pub async fn read_small(&self, path: &str, max_len: u32) -> Result<(CreateResponse, Bytes)> {
        let name = smb_path(path);
        let open = read_open(&name, &[]);
        let read =
            ReadRequest { file_id: FileId::RELATED, length: max_len.min(self.max_read()), offset: 0, minimum_count: 0 };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        let rs = self.compound(&[&open, &read, &close]).await?;
        let mut rs = rs.into_iter();
        let (cr, rd, cl) = (rs.next(), rs.next(), rs.next());
        let created = cr.expect("three responses").ok_or_status(&[])?.body(CreateResponse::decode)?;
        let rd = rd.expect("three responses");
        let data = if rd.status() == NtStatus::STATUS_END_OF_FILE {
            Bytes::new()
        } else {
            let data = rd.ok_or_status(&[])?.body(ReadResponse::decode)?.data;
            check_read_len(data.len(), read.length)?;
            data
        };
        cl.expect("three responses").ok_or_status(&[])?;
        Ok((created, data))
    }

    /// CREATE+WRITE+CLOSE: creates or overwrites `path` with `data` (at most
    /// one WRITE) in one round trip, optionally setting EAs in the CREATE.
    /// Returns the final attributes from the CLOSE.
    pub async fn write_small(&self, path: &str, data: &[u8], eas: &[FullEa]) -> Result<CloseResponse> {
        if data.len() > self.max_write() as usize {
            return Err(Error::InvalidArgument(format!("{} bytes is more than one WRITE", data.len())));
        }
        let name = smb_path(path);
        let ctx = [CreateContext::EaBuffer(eas)];
        let open = CreateRequest::new_file(&name, access::GENERIC_WRITE | access::GENERIC_READ | access::DELETE)
            .disposition(Disposition::OverwriteIf)
            .contexts(if eas.is_empty() { &[] } else { &ctx });
        let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: true };
        let rs = if data.is_empty() {
            self.compound(&[&open, &close]).await?
        } else {
            self.compound(&[&open, &write, &close]).await?
        };
        first_error(&rs)?;
        if !data.is_empty() {
            let n = rs[1].body(WriteResponse::decode)?.count;
            if n as usize != data.len() {
                return Err(Error::Protocol(format!("short write: {n} of {} bytes", data.len())));
            }
        }
        rs[rs.len() - 1].body(CloseResponse::decode)
    }

    /// Creates a directory (CREATE with FILE_DIRECTORY_FILE, disposition
    /// Create) and closes it.
    ///
    /// Errors: STATUS_OBJECT_NAME_COLLISION if it exists.
    pub async fn mkdir(&self, path: &str) -> Result<()> {
        let name = smb_path(path);
        let open = CreateRequest::new_directory(
            &name,
            access::FILE_LIST_DIRECTORY | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        );
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        first_error(&self.compound(&[&open, &close]).await?)
    }

    /// Deletes a file (or, with `directory`, an empty directory) with
    /// CREATE + SET_INFO(FileDispositionInformation) + CLOSE in one round
    /// trip. Marking the disposition (rather than delete-on-close) makes the
    /// server check a directory for emptiness now and report it.
    ///
    /// Errors: STATUS_OBJECT_NAME_NOT_FOUND, STATUS_DIRECTORY_NOT_EMPTY,
    /// STATUS_SHARING_VIOLATION, STATUS_FILE_IS_A_DIRECTORY /
    /// STATUS_NOT_A_DIRECTORY when `directory` does not match.
    pub async fn delete(&self, path: &str, directory: bool) -> Result<()> {
        let name = smb_path(path);
        let open = CreateRequest::open(&name, access::DELETE | access::FILE_READ_ATTRIBUTES).options(if directory {
            options::DIRECTORY_FILE
        } else {
            options::NON_DIRECTORY_FILE
        });
        let mark = SetInfoRequest { file_id: FileId::RELATED, info: SetFileInfo::Disposition { delete_pending: true } };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        first_error(&self.compound(&[&open, &mark, &close]).await?)
    }

    /// Server-side copy of `length` bytes from `src` at `src_offset` to
    /// `dst` at `dst_offset` with FSCTL_SRV_REQUEST_RESUME_KEY and
    /// FSCTL_SRV_COPYCHUNK_WRITE, in requests within the server's limits.
    /// Returns the bytes copied.
    pub async fn copy_chunks(
        &self,
        src: FileId,
        src_offset: u64,
        dst: FileId,
        dst_offset: u64,
        length: u64,
    ) -> Result<u64> {
        let key_req = IoctlRequest { ctl_code: FSCTL_SRV_REQUEST_RESUME_KEY, file_id: src, input: &[], max_output: 32 };
        let r = self.call(&key_req).await?.ok_or_status(&[])?;
        let key = r.body(|m| decode_resume_key(&IoctlResponse::decode(m)?.output))?;
        // Conservative defaults (MS-SMB2 3.3.3: 16 chunks of 1 MiB, 16 MiB
        // total); adopt the server's limits if it rejects them, within
        // COPYCHUNK_BOUNDS, and only a few times: a server cannot make us send
        // billions of tiny chunks or loop forever.
        let (mut max_chunks, mut max_chunk, mut max_total) = (16u32, 1u32 << 20, 16u32 << 20);
        let mut renegotiated = 0;
        let mut done = 0u64;
        let mut input = BytesMut::new();
        while done < length {
            let mut chunks = Vec::new();
            let mut batch = 0u64;
            while chunks.len() < max_chunks as usize && done + batch < length && batch < max_total as u64 {
                let len = (length - done - batch).min(max_chunk as u64).min(max_total as u64 - batch) as u32;
                chunks.push(CopyChunk {
                    source_offset: src_offset + done + batch,
                    target_offset: dst_offset + done + batch,
                    length: len,
                });
                batch += len as u64;
            }
            input.clear();
            encode_copychunk(&mut input, &key, &chunks);
            let req = IoctlRequest { ctl_code: FSCTL_SRV_COPYCHUNK_WRITE, file_id: dst, input: &input, max_output: 12 };
            let r = self.call(&req).await?;
            if r.status() == NtStatus::STATUS_INVALID_PARAMETER {
                let limits = IoctlResponse::decode(&r.msg).ok().and_then(|i| CopyChunkResponse::decode(&i.output).ok());
                let (min_chunk, most_chunks, most_total) = COPYCHUNK_BOUNDS;
                match limits {
                    Some(l)
                        if renegotiated < 4
                            && l.chunks_written > 0
                            && l.chunk_bytes_written >= min_chunk
                            && (l.chunks_written, l.chunk_bytes_written, l.total_bytes_written)
                                != (max_chunks, max_chunk, max_total) =>
                    {
                        renegotiated += 1;
                        max_chunks = l.chunks_written.min(most_chunks);
                        max_chunk = l.chunk_bytes_written.min(most_total);
                        max_total = l.total_bytes_written.max(max_chunk).min(most_total);
                        continue;
                    }
                    _ => return Err(Error::Status { command: Command::Ioctl, status: r.status() }),
                }
            }
            let r = r.ok_or_status(&[])?;
            let out = r.body(|m| CopyChunkResponse::decode(&IoctlResponse::decode(m)?.output))?;
            // Each round trip must copy at least a chunk's worth (or all
            // that was asked): a server writing a byte at a time would
            // otherwise hold the copy for billions of round trips.
            let least = batch.min(COPYCHUNK_BOUNDS.0 as u64);
            if (out.total_bytes_written as u64) < least {
                return Err(Error::Protocol(format!(
                    "COPYCHUNK made too little progress: {} bytes written of {batch} asked",
                    out.total_bytes_written
                )));
            }
            if out.total_bytes_written as u64 > batch {
                return Err(Error::Protocol(format!(
                    "COPYCHUNK reported {} bytes written for {batch} asked",
                    out.total_bytes_written
                )));
            }
            done += out.total_bytes_written as u64;
        }
        Ok(done)
    }

    /// TREE_DISCONNECT (MS-SMB2 2.2.11).
    pub async fn disconnect(&self) -> Result<()> {
        self.call(&Empty(Command::TreeDisconnect)).await?.ok_or_status(&[])?;
        Ok(())
    }
}

/// Limits a server may set for COPYCHUNK (MS-SMB2 3.3.3 gives 256 chunks of
/// 1 MiB, 16 MiB in all, as server defaults): the smallest chunk in bytes we
/// accept, the most chunks per request, the most bytes per request.
const COPYCHUNK_BOUNDS: (u32, u32, u32) = (64 << 10, 256, 256 << 20);

/// A READ answer longer than the READ asked for is a server fault: its extra
/// bytes would land past where the caller wanted them.
///
/// Errors: [`Error::Protocol`].
pub fn check_read_len(got: usize, asked: u32) -> Result<()> {
    if got > asked as usize {
        return Err(Error::Protocol(format!("READ returned {got} bytes for {asked} asked")));
    }
    Ok(())
}

/// A CREATE that opens an existing file or directory for reading with share
/// Read|Write|Delete.
pub fn read_open<'a>(name: &'a str, contexts: &'a [CreateContext<'a>]) -> CreateRequest<'a> {
    CreateRequest::open(
        name,
        access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA | access::SYNCHRONIZE,
    )
    .contexts(contexts)
}

/// The first failing status of a compound's responses, as an error. A
/// failed CREATE makes the related operations after it fail with the same
/// status (MS-SMB2 3.3.5.2.7.2), so the first failure is the cause.
pub fn first_error(rs: &[Response]) -> Result<()> {
    for r in rs {
        if r.status() != NtStatus::STATUS_SUCCESS {
            return Err(Error::Status { command: r.header.command, status: r.status() });
        }
    }
    Ok(())
}
