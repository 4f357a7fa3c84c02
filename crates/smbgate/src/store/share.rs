//! The share layer: the only code in the gateway that builds SMB requests.
//!
//! Everything above it (the S3 rules in `store/`) works with typed
//! operations and [`Handle`]s. Three rules hold here, so that no caller can
//! leak a handle or publish unchecked data (failure class 26):
//! - Every open returns a [`Handle`], which closes itself when dropped, also
//!   when a request future is dropped mid-flight (see `smb_client::file`).
//! - A temporary file is a [`TempFile`]: dropped unpublished, it deletes
//!   its file.
//! - A compound is one named function that returns typed results; a failure
//!   of any step is an error of that step.

use bytes::Bytes;
use smb_client::connection::Response;
use smb_client::{Error, Handle, Pool, Result, Tree};
use smb_proto::create::{
    access, attributes, options, share, CloseRequest, CloseResponse, CreateContext, CreateRequest, CreateResponse,
    Disposition, FileId,
};
use smb_proto::info::{class, decode_file_name_information, decode_full_ea, info_type, FullEa, SetFileInfo};
use smb_proto::io::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use smb_proto::query::{OutputBuffer, QueryInfoRequest, SetInfoRequest};
use smb_proto::{NtStatus, Request};

use std::sync::atomic::{AtomicBool, Ordering};

use super::backoff::{self, Backoff};
use super::meta::{ObjectMeta, META_EA};
use super::records::{FileKey, Records};

/// The QFid context: the CREATE answer carries the on-disk file id, which
/// derived ETags and generation checks use.
static QFID: [CreateContext<'static>; 1] = [CreateContext::QueryOnDiskId];

/// An open for reading an existing file or directory. Shares read, write
/// and delete, so renames and deletes by others never wait on a reader.
fn read_req(name: &str) -> CreateRequest<'_> {
    CreateRequest { contexts: &QFID, ..smb_client::tree::read_open(name, &[]) }
}

/// [`read_req`], and with `file_only` refused for a directory
/// (STATUS_FILE_IS_A_DIRECTORY) without a handle ever being made: a handle
/// on a directory keeps it, once removed, delete-pending until it closes,
/// and such a directory opens on Samba as an empty file with made-up
/// attributes (see `beside`).
fn lookup_req(name: &str, file_only: bool) -> CreateRequest<'_> {
    let req = read_req(name);
    match file_only {
        true => CreateRequest { options: req.options | options::NON_DIRECTORY_FILE, ..req },
        false => req,
    }
}

/// A new temporary file, read/write/delete, sharing everything: share-delete
/// so that once renamed into place the still-open file does not block the
/// next writer's rename over it; share-write so that a large body can be
/// written over several connections (`store::spread`).
fn temp_req<'a>(name: &'a str, contexts: &'a [CreateContext<'a>]) -> CreateRequest<'a> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::Create,
        options: options::NON_DIRECTORY_FILE,
        contexts,
    }
}

/// An open of an existing file for DELETE (what a rename needs), sharing
/// `share_access` (0: exclusive, as a probe of other opens).
fn delete_req(name: &str, share_access: u32) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES,
        file_attributes: attributes::NORMAL,
        share_access,
        disposition: Disposition::Open,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

/// A file in an upload's directory, read/write, sharing everything (parts
/// are written over several connections).
fn upload_file_req(name: &str, disposition: Disposition) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_WRITE | access::GENERIC_READ,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

/// QUERY_INFO of our metadata EA on the related handle.
fn meta_query<'a>(names: &'a [&'a str]) -> QueryInfoRequest<'a> {
    QueryInfoRequest {
        info_type: info_type::FILE,
        class: class::FILE_FULL_EA_INFORMATION,
        output_buffer_length: 65536,
        ea_names: names,
        additional_information: 0,
        file_id: FileId::RELATED,
    }
}

const CLOSE_RELATED: CloseRequest = CloseRequest { file_id: FileId::RELATED, post_query: false };

/// QUERY_INFO(FileNormalizedNameInformation) on the related handle: the
/// path as it is on disk (its case), for exact-name checks.
const NAME_QUERY: QueryInfoRequest<'static> = QueryInfoRequest {
    info_type: info_type::FILE,
    class: class::FILE_NORMALIZED_NAME_INFORMATION,
    output_buffer_length: 4096,
    ea_names: &[],
    additional_information: 0,
    file_id: FileId::RELATED,
};

/// The share-relative on-disk path from a [`NAME_QUERY`] answer; `None`
/// if the query failed (a server without the class).
///
/// Errors: an answer that does not decode (which poisons the connection,
/// as any body that does not decode does).
fn decode_name(r: &Response) -> Result<Option<String>> {
    if r.status() != NtStatus::STATUS_SUCCESS {
        return Ok(None);
    }
    let n = r.body(|m| decode_file_name_information(&OutputBuffer::decode(m)?.0))?;
    Ok(Some(n.trim_start_matches('\\').to_string()))
}

/// Our record from a QUERY_INFO(EA) answer, if present, readable, and
/// written for this very file (same size and on-disk id).
fn decode_meta(r: &Response, created: &CreateResponse) -> Option<ObjectMeta> {
    if r.status() != NtStatus::STATUS_SUCCESS {
        return None;
    }
    // An unreadable record only makes the file foreign; the ETag is then
    // derived, so it is not a reason to drop the connection.
    let buf = OutputBuffer::decode(&r.msg).ok()?.0;
    let meta = decode_full_ea(&buf).ok().and_then(|eas| ObjectMeta::from_eas(&eas))?;
    meta.matches(created.times.end_of_file, created.on_disk_id()).then_some(meta)
}

/// Our record of the file a CREATE answered for, from its sidecar (shares
/// without EAs, see `records`), if it matches the file.
///
/// Errors: reading the sidecar failed.
async fn sidecar_meta(rec: &Records, tree: &Tree, created: &CreateResponse) -> Result<Option<ObjectMeta>> {
    let Some(key) = FileKey::of(created) else { return Ok(None) };
    let eas = rec.read_sidecar(tree, key).await?;
    Ok(ObjectMeta::from_eas(&eas).filter(|m| m.matches(created.times.end_of_file, created.on_disk_id())))
}

/// Where a record answer came from: the EA query in the open's compound,
/// the record stream read beside it, or neither (a sidecar, read next).
enum RecordAnswer {
    Ea(Response),
    Stream(Option<Bytes>),
    /// The stream's open failed (the file was being replaced or deleted,
    /// say): worth another try.
    StreamFailed,
    Later,
}

/// Our record of the file a CREATE answered for, if it matches the file;
/// and whether a record was there that names another file id, which on a
/// share with stream records may be a read that met another version during
/// a rename.
///
/// Errors: reading the sidecar failed.
async fn record_of(
    rec: &Records,
    tree: &Tree,
    answer: RecordAnswer,
    created: &CreateResponse,
) -> Result<(Option<ObjectMeta>, bool)> {
    match answer {
        RecordAnswer::Ea(r) => Ok((decode_meta(&r, created), false)),
        RecordAnswer::Stream(bytes) => {
            let Some(meta) = bytes.as_deref().and_then(ObjectMeta::from_ea) else { return Ok((None, false)) };
            let other_file = meta.disk_id.is_some() && meta.disk_id != created.on_disk_id();
            Ok(match meta.matches(created.times.end_of_file, created.on_disk_id()) {
                true => (Some(meta), false),
                false => (None, other_file),
            })
        }
        RecordAnswer::StreamFailed => Ok((None, true)),
        RecordAnswer::Later => Ok((sidecar_meta(rec, tree, created).await?, false)),
    }
}

/// The record of the file opened at `path` (`created`), decided from
/// `answer`; or `None` when another open should follow, after a pause
/// ([`backoff::OTHER_VERSION`]) that gives a writer mid-publish time to
/// finish.
/// That is when the record names another file (a stream read that met
/// another version), when a stream open failed, or when a sidecar share's
/// file has no record and `path` now names another file: an open can wait
/// seconds on the server (an oplock break) and then return a version that
/// was replaced meanwhile, whose sidecar may be gone. A file without a
/// record that is still at `path` (one the gateway did not write) costs
/// one stat. The last try takes what it finds.
///
/// Errors: reading the sidecar failed.
async fn record_or_retry(
    rec: &Records,
    tree: &Tree,
    path: &str,
    answer: RecordAnswer,
    created: &CreateResponse,
    other_version: &mut Backoff,
) -> Result<Option<Option<ObjectMeta>>> {
    let (meta, mut other_file) = record_of(rec, tree, answer, created).await?;
    if rec.in_sidecars() && meta.is_none() && !other_file {
        other_file = matches!(stat_key(tree, path).await, Ok(Some(now)) if Some(now) != FileKey::of(created));
    }
    if other_file && other_version.wait().await {
        return Ok(None);
    }
    Ok(Some(meta))
}

/// The start of an open's chain: its CREATE, and where records are EAs the
/// record query `q` right after it (see [`compound_with_record`]).
fn opening<'a>(rec: &Records, create: &'a CreateRequest<'a>, q: &'a QueryInfoRequest<'a>) -> Vec<&'a dyn Request> {
    match rec.in_eas() {
        true => vec![create, q],
        false => vec![create],
    }
}

/// Sends `chain` (begun by [`opening`], so its CREATE opens `path`) and
/// returns its answers, without the EA query's, and the record's answer:
/// - EAs: the query's answer, from the same compound;
/// - streams: the read of `path`'s record stream, sent beside the chain in
///   the same round trip, or, for an open that `pins` its path (held
///   without share-delete, so nobody can rename or replace the file),
///   after it, once;
/// - sidecars: nothing yet (read by file id once the CREATE has answered).
///
/// Errors: a transport error; a stream read that fails other than with a
/// status.
async fn compound_with_record(
    tree: &Tree,
    rec: &Records,
    path: &str,
    chain: &[&dyn Request],
    pins: bool,
) -> Result<(Vec<Response>, RecordAnswer)> {
    let stream_answer = |r: Result<Option<Bytes>>| match r {
        Ok(bytes) => Ok(RecordAnswer::Stream(bytes)),
        Err(e) if e.status().is_some() => Ok(RecordAnswer::StreamFailed),
        Err(e) => Err(e),
    };
    match rec {
        Records::Ea => {
            let mut rs = tree.compound(chain).await?;
            if rs.len() < 2 {
                return Err(Error::Protocol(format!("{} answers to a compound of {}", rs.len(), chain.len())));
            }
            let answer = rs.remove(1);
            Ok((rs, RecordAnswer::Ea(answer)))
        }
        Records::Stream if pins => {
            let rs = tree.compound(chain).await?;
            let answer = stream_answer(rec.read_stream(tree, path, META_EA).await)?;
            Ok((rs, answer))
        }
        Records::Stream => {
            let stream = super::records::stream_path(path, META_EA);
            let (o, r, c) = super::records::whole_read(&stream, tree.max_read());
            let side: [&dyn Request; 3] = [&o, &r, &c];
            let mut all = tree.compounds(&[chain, &side]).await?;
            let (Some(s), Some(main)) = (all.pop(), all.pop()) else {
                return Err(Error::Protocol("two compounds got another count of answers".into()));
            };
            Ok((main, stream_answer(super::records::whole_read_answer(s))?))
        }
        Records::Sidecar { .. } => Ok((tree.compound(chain).await?, RecordAnswer::Later)),
    }
}

/// The `n` responses of a compound, in order.
fn take<const N: usize>(rs: Vec<Response>) -> Result<[Response; N]> {
    rs.try_into().map_err(|v: Vec<Response>| Error::Protocol(format!("{} answers to a compound of {N}", v.len())))
}

/// Opens an existing file or directory for reading (QFid).
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_OBJECT_NAME_NOT_FOUND.
pub async fn open_read(tree: &Tree, path: &str) -> Result<Handle> {
    tree.open(&read_req(path)).await
}

/// CREATE(new file `path`, sharing nothing, delete-on-close): a lock that
/// exists exactly while this handle is open, and that only one opener can
/// create (the server's create-if-absent is atomic, where its rename
/// without ReplaceIfExists is not: Samba checks the target, then renames
/// over whatever is there by then). Returns `None` if the file exists
/// already, is being deleted, or is open.
///
/// Errors: any other failing status.
pub async fn create_lock(tree: &Tree, path: &str) -> Result<Option<Handle>> {
    let req = CreateRequest {
        name: path,
        oplock_level: 0,
        desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        file_attributes: attributes::NORMAL,
        share_access: 0,
        disposition: Disposition::Create,
        options: options::NON_DIRECTORY_FILE | options::DELETE_ON_CLOSE,
        contexts: &[],
    };
    match tree.open(&req).await {
        Ok(h) => Ok(Some(h)),
        Err(e)
            if matches!(
                e.status(),
                Some(
                    NtStatus::STATUS_OBJECT_NAME_COLLISION
                        | NtStatus::STATUS_DELETE_PENDING
                        | NtStatus::STATUS_SHARING_VIOLATION
                )
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Opens an existing file for DELETE, sharing everything (`exclusive`:
/// sharing nothing, so another open makes it fail with
/// STATUS_SHARING_VIOLATION).
pub async fn open_for_delete(tree: &Tree, path: &str, exclusive: bool) -> Result<Handle> {
    tree.open(&delete_req(path, if exclusive { 0 } else { share::ALL })).await
}

/// Opens an existing file for writing data only: another lane of a body
/// spread over several connections (`store::spread`).
pub async fn open_lane(tree: &Tree, path: &str) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::FILE_WRITE_DATA | access::SYNCHRONIZE,
        ..upload_file_req(path, Disposition::Open)
    };
    tree.open_durable(&req).await
}

/// Opens, or creates, a file in an upload's directory for reading and
/// writing, shared with every other open.
pub async fn open_upload_file(tree: &Tree, path: &str) -> Result<Handle> {
    tree.open_durable(&upload_file_req(path, Disposition::OpenIf)).await
}

/// Creates a multipart part's claim record: a new empty file, read/write/
/// delete, that others may read or delete but not write.
///
/// Errors: STATUS_OBJECT_NAME_COLLISION if the part already has a record.
pub async fn create_claim(tree: &Tree, path: &str) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        share_access: share::READ | share::DELETE,
        contexts: &QFID, // a sidecar record is keyed by the on-disk id
        ..upload_file_req(path, Disposition::Create)
    };
    tree.open_durable(&req).await
}

/// Opens (or creates) an upload's data file to complete it in place:
/// read/write/delete (it is renamed into place), QFid, shared with readers
/// and deleters but not writers.
pub async fn open_data_file(tree: &Tree, path: &str) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        share_access: share::READ | share::DELETE,
        disposition: Disposition::OpenIf,
        ..temp_req(path, &QFID)
    };
    tree.open(&req).await
}

/// Creates a directory with `eas` as its records: set by the CREATE itself
/// (CREATE + CLOSE), or, on a share without EAs, written to its sidecar
/// once the CREATE has told its on-disk id.
///
/// Errors: STATUS_OBJECT_NAME_COLLISION, STATUS_OBJECT_PATH_NOT_FOUND; the
/// sidecar's write.
pub async fn create_dir_with_eas(tree: &Tree, rec: &Records, path: &str, eas: &[FullEa]) -> Result<()> {
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    let req = CreateRequest {
        name: path,
        oplock_level: 0,
        desired_access: access::FILE_LIST_DIRECTORY | access::FILE_WRITE_EA | access::SYNCHRONIZE,
        file_attributes: attributes::DIRECTORY,
        share_access: share::ALL,
        disposition: Disposition::Create,
        options: options::DIRECTORY_FILE,
        contexts: if rec.in_eas() { &ctx[..1] } else { &ctx[1..] },
    };
    let [created, _closed] = take(tree.compound(&[&req, &CLOSE_RELATED]).await?)?;
    let created = created.ok_or_status(&[])?.body(CreateResponse::decode)?;
    match rec {
        Records::Ea => {}
        Records::Stream => rec.write_streams(tree, path, eas, true).await?,
        Records::Sidecar { .. } => rec.write_sidecar(tree, key_of(&created)?, eas).await?,
    }
    Ok(())
}

/// The sidecar key of the file a CREATE answered for.
///
/// Errors: the server sent no on-disk id (its QFid context), which a
/// sidecar needs.
fn key_of(created: &CreateResponse) -> Result<FileKey> {
    FileKey::of(created)
        .ok_or_else(|| Error::Protocol("the server sent no on-disk file id for a sidecar record".into()))
}

/// CREATE(read) + QUERY_INFO(our EA) [+ READ of `read = (offset, length)`],
/// the handle left open. Returns the handle, our record if it matches the
/// file, the first bytes (empty at end of file), and with `name` the
/// on-disk path. With `file_only` a directory is refused (see
/// [`lookup_req`]).
///
/// Errors: the CREATE's NTSTATUS (a failing READ only brings no data;
/// STATUS_FILE_IS_A_DIRECTORY with `file_only`).
pub async fn open_with_meta(
    tree: &Tree,
    rec: &Records,
    path: &str,
    read: Option<(u64, u32)>,
    name: bool,
    file_only: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<Bytes>, Option<String>)> {
    let create = lookup_req(path, file_only);
    let names = [META_EA];
    let q = meta_query(&names);
    let r = read.map(|(offset, length)| ReadRequest {
        file_id: FileId::RELATED,
        length: length.min(tree.max_read()),
        offset,
        minimum_count: 0,
    });
    // The name query goes last, so that its failure (a server without the
    // class) cannot touch the READ.
    let mut chain = opening(rec, &create, &q);
    if let Some(r) = &r {
        chain.push(r);
    }
    if name {
        chain.push(&NAME_QUERY);
    }
    let mut other_version = backoff::OTHER_VERSION.start();
    loop {
        let (rs, answer) = compound_with_record(tree, rec, path, &chain, false).await?;
        let mut rs = rs.into_iter();
        let handle = Handle::from_response(tree, rs.next().expect("one answer per request"))?;
        let read_answer = if r.is_some() { rs.next() } else { None };
        let on_disk = match rs.next() {
            Some(r) if name => decode_name(&r)?,
            _ => None,
        };
        // A READ that fails (a directory answers STATUS_INVALID_DEVICE_REQUEST)
        // just brings no data: the caller decides what the open means.
        let data = match read_answer {
            Some(resp) if resp.status() == NtStatus::STATUS_SUCCESS => {
                let data = resp.body(ReadResponse::decode)?.data;
                smb_client::tree::check_read_len(data.len(), r.as_ref().map_or(0, |r| r.length))?;
                Some(data)
            }
            Some(resp) if resp.status() == NtStatus::STATUS_END_OF_FILE => Some(Bytes::new()),
            _ => None,
        };
        match record_or_retry(rec, tree, path, answer, handle.info(), &mut other_version).await? {
            Some(meta) => return Ok((handle, meta, data, on_disk)),
            None => {
                let _ = handle.close().await;
            }
        }
    }
}

/// CREATE(read attributes, QFid) + CLOSE: the sidecar key of the file at
/// `path` (see `records`), or `None` if the server sent no on-disk id.
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_OBJECT_NAME_NOT_FOUND.
pub async fn stat_key(tree: &Tree, path: &str) -> Result<Option<FileKey>> {
    let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..read_req(path) };
    let [created, _closed] = take(tree.compound(&[&open, &CLOSE_RELATED]).await?)?;
    Ok(FileKey::of(&created.ok_or_status(&[])?.body(CreateResponse::decode)?))
}

/// CREATE(read) + QUERY_INFO(our EA) + CLOSE: what the CREATE said and our
/// record if it matches the file.
///
/// Errors: the CREATE's NTSTATUS.
pub async fn stat_with_meta(tree: &Tree, rec: &Records, path: &str) -> Result<(CreateResponse, Option<ObjectMeta>)> {
    let (created, meta, _) = stat_with_meta_and_name(tree, rec, path, false, false).await?;
    Ok((created, meta))
}

/// [`stat_with_meta`], and with `name` the on-disk path too (one more
/// QUERY_INFO in the same compound); with `file_only` a directory is
/// refused (see [`lookup_req`]).
///
/// Errors: the CREATE's NTSTATUS.
pub async fn stat_with_meta_and_name(
    tree: &Tree,
    rec: &Records,
    path: &str,
    name: bool,
    file_only: bool,
) -> Result<(CreateResponse, Option<ObjectMeta>, Option<String>)> {
    let create = lookup_req(path, file_only);
    let names = [META_EA];
    let q = meta_query(&names);
    let mut chain = opening(rec, &create, &q);
    if name {
        chain.push(&NAME_QUERY);
    }
    chain.push(&CLOSE_RELATED);
    let mut other_version = backoff::OTHER_VERSION.start();
    loop {
        let (rs, answer) = compound_with_record(tree, rec, path, &chain, false).await?;
        let mut rs = rs.into_iter();
        let created = rs.next().expect("one answer per request").ok_or_status(&[])?.body(CreateResponse::decode)?;
        let on_disk = match rs.next() {
            Some(r) if name => decode_name(&r)?,
            _ => None,
        };
        if let Some(meta) = record_or_retry(rec, tree, path, answer, &created, &mut other_version).await? {
            return Ok((created, meta, on_disk));
        }
    }
}

/// CREATE(DELETE, read attributes and EAs; not a directory) + QUERY_INFO(our
/// EA), the handle left open: a delete that must first check whose file it
/// is (case-insensitive shares), or its ETag (If-Match). With `exclusive`
/// it shares only READ, so that of racing conditional deletes one holds the
/// file at a time and the next finds it gone.
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_FILE_IS_A_DIRECTORY, or
/// STATUS_SHARING_VIOLATION while an `exclusive` holder has it.
pub async fn open_delete_with_meta(
    tree: &Tree,
    rec: &Records,
    path: &str,
    name: bool,
    exclusive: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    open_for_delete_with_meta(tree, rec, path, if exclusive { share::READ } else { share::ALL }, name).await
}

/// CREATE(DELETE, read attributes and EAs; not a directory; sharing only
/// READ) + QUERY_INFO(our EA), the handle left open: the compare-and-swap
/// lock of an If-Match write. While it is open nobody else can write,
/// rename or delete the file, or rename another over it (their opens meet a
/// sharing violation); readers still read.
///
/// Errors: the CREATE's NTSTATUS (STATUS_SHARING_VIOLATION while another
/// writer holds the file, not-found statuses).
pub async fn open_to_replace(tree: &Tree, rec: &Records, path: &str) -> Result<(Handle, Option<ObjectMeta>)> {
    let (handle, meta, _) = open_for_delete_with_meta(tree, rec, path, share::READ, false).await?;
    Ok((handle, meta))
}

/// [`open_for_delete_once`], checked, when the open pins its path, to hold
/// the file that path names now. A clustered Samba (CTDB) can answer an
/// open that waited on a sharing violation with the file the path named
/// when it began, though the holder renamed it away meanwhile; that handle
/// would then compare an old ETag and rename or delete by a stale name
/// (two If-Match winners across nodes). Once the pinning handle is open the
/// file cannot move, so a stat of the path that finds its on-disk id holds
/// for as long as the handle does.
///
/// Errors: as [`open_for_delete_once`]; STATUS_SHARING_VIOLATION if every
/// try came back stale.
async fn open_for_delete_with_meta(
    tree: &Tree,
    rec: &Records,
    path: &str,
    share_access: u32,
    name: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    let pins = share_access & share::DELETE == 0;
    let mut stale = backoff::STALE_PIN.start();
    loop {
        let (handle, meta, on_disk) = open_for_delete_once(tree, rec, path, share_access, name).await?;
        let id = handle.info().on_disk_id();
        if !pins || id.is_none() {
            return Ok((handle, meta, on_disk));
        }
        match stat_key(tree, path).await {
            Ok(Some(now)) if Some(now.id) == id => return Ok((handle, meta, on_disk)),
            Ok(_) => {}
            Err(e) => {
                let _ = handle.close().await;
                return Err(e);
            }
        }
        let _ = handle.close().await;
        tracing::debug!(path, stale = stale.pauses() + 1, "a pinning open came back with a file no longer at its path");
        if !stale.wait().await {
            break;
        }
    }
    Err(Error::Status { command: smb_proto::Command::Create, status: NtStatus::STATUS_SHARING_VIOLATION })
}

async fn open_for_delete_once(
    tree: &Tree,
    rec: &Records,
    path: &str,
    share_access: u32,
    name: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    let create = CreateRequest {
        desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA,
        share_access,
        options: options::NON_DIRECTORY_FILE,
        ..read_req(path)
    };
    let names = [META_EA];
    let q = meta_query(&names);
    let mut chain = opening(rec, &create, &q);
    if name {
        chain.push(&NAME_QUERY);
    }
    let pins = share_access & share::DELETE == 0;
    let mut other_version = backoff::OTHER_VERSION.start();
    loop {
        let (rs, answer) = compound_with_record(tree, rec, path, &chain, pins).await?;
        let mut rs = rs.into_iter();
        let handle = Handle::from_response(tree, rs.next().expect("one answer per request"))?;
        let on_disk = match rs.next() {
            Some(r) if name => decode_name(&r)?,
            _ => None,
        };
        match record_or_retry(rec, tree, path, answer, handle.info(), &mut other_version).await? {
            Some(meta) => return Ok((handle, meta, on_disk)),
            // Closed before the next open, which it would refuse.
            None => {
                let _ = handle.close().await;
            }
        }
    }
}

/// The swap of an If-Match write, in one unrelated compound on the lock's
/// connection (each step on its own handle): SET_INFO(rename the locked
/// file to `backup`) then SET_INFO(rename `file`, the new version, to
/// `target`), neither replacing anything. The second can only succeed once
/// the first has freed the name, and readers meet the name free only
/// between two steps of one compound. Returns each rename's result.
///
/// Errors: a connection error (neither result is known).
pub async fn swap_in(lock: &Handle, backup: &str, file: &Handle, target: &str) -> Result<(Result<()>, Result<()>)> {
    let (b, t) = (smb_client::tree::smb_path(backup), smb_client::tree::smb_path(target));
    let away =
        SetInfoRequest { file_id: lock.id(), info: SetFileInfo::Rename { target: &b, replace_if_exists: false } };
    let into =
        SetInfoRequest { file_id: file.id(), info: SetFileInfo::Rename { target: &t, replace_if_exists: false } };
    let [a, i] = take(lock.tree().compound_unrelated(&[&away, &into]).await?)?;
    Ok((a.ok_or_status(&[]).map(|_| ()), i.ok_or_status(&[]).map(|_| ())))
}

/// Creates the temporary file `path` (QFid), with `eas` set by the CREATE.
///
/// Errors: the CREATE's NTSTATUS.
pub async fn create_temp(pool: &Pool, tree: &Tree, path: &str, eas: &[FullEa]) -> Result<TempFile> {
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    let ctx = if eas.is_empty() { &ctx[1..] } else { &ctx[..] };
    let handle = tree.open_durable(&temp_req(path, ctx)).await?;
    Ok(TempFile::new(pool, handle, path))
}

/// CREATE(temp `path`, `eas` in the CREATE) + WRITE(`data` at 0), the
/// handle left open, in one round trip. Returns the temp file and the byte
/// count the server reports written, to be checked before anything is
/// published. With empty `data` no WRITE is sent.
///
/// Errors: the CREATE's NTSTATUS (nothing created), or the WRITE's (the
/// temp file is deleted as the returned error drops it).
pub async fn create_temp_and_write(
    pool: &Pool,
    tree: &Tree,
    rec: &Records,
    path: &str,
    eas: &[FullEa],
    data: &[u8],
) -> Result<(TempFile, u32)> {
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    let in_create = rec.in_eas() && !eas.is_empty();
    let create = temp_req(path, if in_create { &ctx[..] } else { &ctx[1..] });
    let (temp, n) = if data.is_empty() {
        (TempFile::new(pool, tree.open(&create).await?, path), 0)
    } else {
        let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data };
        let [created, written] = take(tree.compound(&[&create, &write]).await?)?;
        let temp = TempFile::new(pool, Handle::from_response(tree, created)?, path);
        (temp, written.ok_or_status(&[])?.body(WriteResponse::decode)?.count)
    };
    if !in_create && !eas.is_empty() {
        set_eas(temp.handle(), rec, path, eas).await?;
    }
    Ok((temp, n))
}

/// SET_INFO(rename to `target`; over an existing file only if `replace`) +
/// CLOSE on the temp file's handle, in one round trip. Without `replace`
/// the server alone decides whether the name is free (an existing target
/// fails with STATUS_OBJECT_NAME_COLLISION), so racing creators cannot both
/// win. On failure the rename's error comes back
/// with the temp file, still open, for a slower publish; a server that ran
/// the CLOSE anyway gets the file re-opened by name, and `None` comes back
/// only if that fails too (the file is then deleted by name).
pub async fn publish_and_close(
    temp: TempFile,
    target: &str,
    replace: bool,
) -> std::result::Result<(), (Error, Option<TempFile>)> {
    temp.publishing.store(true, Ordering::Release);
    let (tree, id) = (temp.handle().tree().clone(), temp.handle().id());
    let t = smb_client::tree::smb_path(target);
    let rename = SetInfoRequest { file_id: id, info: SetFileInfo::Rename { target: &t, replace_if_exists: replace } };
    let close = CloseRequest { file_id: id, post_query: false };
    let [renamed, closed] = match tree.compound(&[&rename, &close]).await.and_then(take::<2>) {
        Ok(rs) => rs,
        Err(e) => return Err((e, None)), // dropped: deleted by name, if it was not renamed
    };
    let closed = closed.status() == NtStatus::STATUS_SUCCESS;
    match renamed.ok_or_status(&[]) {
        Ok(_) => {
            temp.kept(closed);
            Ok(())
        }
        Err(e) if !closed => {
            temp.publishing.store(false, Ordering::Release);
            Err((e, Some(temp)))
        }
        Err(e) => {
            let path = temp.path.clone();
            let pool = temp.pool.clone();
            let id = temp.shared_name.then(|| temp.handle().info().on_disk_id()).flatten();
            temp.kept(true);
            match open_for_delete(&tree, &path, false).await {
                Ok(h) => Err((e, Some(TempFile::new(&pool, h, &path)))),
                Err(_) => {
                    tokio::spawn(delete_by_name(path, pool, id));
                    Err((e, None))
                }
            }
        }
    }
}

/// CREATE(`source`, DELETE) + SET_INFO(rename to `target`, over an existing
/// file only if `replace`) + CLOSE in one round trip: a rename through a
/// handle of this connection.
///
/// Errors: the first failing step's NTSTATUS (a failed CLOSE after the
/// rename does not undo it and is not an error).
pub async fn rename_through_new_handle(tree: &Tree, source: &str, target: &str, replace: bool) -> Result<()> {
    let name = smb_client::tree::smb_path(source);
    let open = delete_req(&name, share::ALL);
    let t = smb_client::tree::smb_path(target);
    let rename = SetInfoRequest {
        file_id: FileId::RELATED,
        info: SetFileInfo::Rename { target: &t, replace_if_exists: replace },
    };
    let [created, renamed, _closed] = take(tree.compound(&[&open, &rename, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    renamed.ok_or_status(&[])?;
    Ok(())
}

/// Sets (or, with an empty value, removes) one record on a directory:
/// CREATE(directory, write EA) + SET_INFO(`ea`) + CLOSE, or, on a share
/// without EAs, CREATE + CLOSE (which fails on a file: STATUS_NOT_A_DIRECTORY)
/// and then its stream or sidecar.
///
/// Errors: the first failing step's NTSTATUS.
pub async fn set_dir_ea(tree: &Tree, rec: &Records, path: &str, ea: FullEa) -> Result<()> {
    let open = CreateRequest {
        name: path,
        oplock_level: 0,
        desired_access: access::FILE_WRITE_EA | access::FILE_READ_ATTRIBUTES,
        file_attributes: 0,
        share_access: share::ALL,
        disposition: Disposition::Open,
        options: options::DIRECTORY_FILE,
        contexts: &QFID,
    };
    let eas = [ea];
    if rec.in_streams() {
        // A stream is written by name: make sure the name is a directory's,
        // or a marker's record would replace a file's own.
        let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..open };
        let [created, _closed] = take(tree.compound(&[&open, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        return rec.write_streams(tree, path, &eas, false).await;
    }
    if !rec.in_eas() {
        let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..open };
        let [created, _closed] = take(tree.compound(&[&open, &CLOSE_RELATED]).await?)?;
        let created = created.ok_or_status(&[])?.body(CreateResponse::decode)?;
        return rec.write_sidecar(tree, key_of(&created)?, &eas).await;
    }
    let set = SetInfoRequest { file_id: FileId::RELATED, info: SetFileInfo::FullEa(&eas) };
    let [created, set, _closed] = take(tree.compound(&[&open, &set, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    set.ok_or_status(&[])?;
    Ok(())
}

/// What the share can hold records in, asked the way a PUT uses them:
/// CREATE of a new file `path` carrying an EA (EaBuffer context) and the
/// QFid context, delete-on-close, then CLOSE, in one round trip; if the
/// server answers STATUS_EAS_NOT_SUPPORTED (Samba with `ea support = no`,
/// Azure Files, some NAS), the same without the EA. Returns whether EAs are
/// stored, and whether the CREATE reports on-disk file ids.
///
/// Errors: any other failing status.
pub async fn probe_record_support(tree: &Tree, path: &str) -> Result<(bool, bool)> {
    let eas = [FullEa { name: "smbgate.probe".into(), value: b"1".to_vec() }];
    let ctx = [CreateContext::EaBuffer(&eas), CreateContext::QueryOnDiskId];
    for with_ea in [true, false] {
        let create = CreateRequest {
            options: options::NON_DIRECTORY_FILE | options::DELETE_ON_CLOSE,
            ..temp_req(path, if with_ea { &ctx[..] } else { &ctx[1..] })
        };
        let [created, _closed] = take(tree.compound(&[&create, &CLOSE_RELATED]).await?)?;
        match created.ok_or_status(&[]) {
            Ok(r) => return Ok((with_ea, r.body(CreateResponse::decode)?.on_disk_id().is_some())),
            Err(e) if with_ea && e.status() == Some(NtStatus::STATUS_EAS_NOT_SUPPORTED) => {}
            Err(e) => return Err(e),
        }
    }
    unreachable!("the second probe returns")
}

/// For each path, CREATE(read attributes) + QUERY_INFO(normalized name) +
/// CLOSE, all in one batch: the name as the server stores it
/// (share-relative, on-disk case, no leading `\`), or `None` where the path
/// does not open. An existing name costs a lookup, not a directory scan.
///
/// Errors: a transport error, or an answer that does not decode.
pub async fn normalized_names(tree: &Tree, paths: &[String]) -> Result<Vec<Option<String>>> {
    let opens: Vec<CreateRequest<'_>> = paths
        .iter()
        .map(|path| CreateRequest {
            name: path,
            oplock_level: 0,
            desired_access: access::FILE_READ_ATTRIBUTES,
            file_attributes: 0,
            share_access: share::ALL,
            disposition: Disposition::Open,
            options: 0,
            contexts: &[],
        })
        .collect();
    let chains: Vec<[&dyn Request; 3]> =
        opens.iter().map(|o| [o as &dyn Request, &NAME_QUERY, &CLOSE_RELATED]).collect();
    let refs: Vec<&[&dyn Request]> = chains.iter().map(|c| &c[..]).collect();
    let mut out = Vec::with_capacity(paths.len());
    for chain in tree.compounds(&refs).await? {
        let [created, name, _closed] = take(chain)?;
        out.push(if created.status() == NtStatus::STATUS_SUCCESS { decode_name(&name)? } else { None });
    }
    Ok(out)
}

/// CREATE(new file, fails if it exists) + WRITE(`data`) + CLOSE: a small
/// file written once by whoever creates it first. Returns false if the file
/// already existed.
///
/// Errors: the CREATE's NTSTATUS other than a collision; a short or failed
/// WRITE.
pub async fn create_once(tree: &Tree, path: &str, data: &[u8]) -> Result<bool> {
    let create = upload_file_req(path, Disposition::Create);
    let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data };
    let [created, written, _closed] = take(tree.compound(&[&create, &write, &CLOSE_RELATED]).await?)?;
    if created.status() == NtStatus::STATUS_OBJECT_NAME_COLLISION {
        return Ok(false);
    }
    created.ok_or_status(&[])?;
    let n = written.ok_or_status(&[])?.body(WriteResponse::decode)?.count;
    if n as usize != data.len() {
        return Err(Error::InvalidArgument(format!("short write: {n} of {} bytes", data.len())));
    }
    Ok(true)
}

/// Renames the open `handle` to `target`, over an existing file only if
/// `replace` (else STATUS_OBJECT_NAME_COLLISION).
pub async fn rename(handle: &Handle, target: &str, replace: bool) -> Result<()> {
    handle.tree().rename(handle.id(), target, replace).await
}

/// Sets (or, with empty values, removes) records on the open `handle` of
/// the file at `path`, which nobody else writes (a temp file, a part claim,
/// an upload's data file): its EAs, its named streams, or its sidecar.
///
/// Errors: the SET_INFO's NTSTATUS, or the stream or sidecar write's; a
/// handle opened without the QFid context cannot have a sidecar.
pub async fn set_eas(handle: &Handle, rec: &Records, path: &str, eas: &[FullEa]) -> Result<()> {
    match rec {
        Records::Ea => handle.tree().set_info(handle.id(), SetFileInfo::FullEa(eas)).await,
        Records::Stream => rec.write_streams(handle.tree(), path, eas, true).await,
        Records::Sidecar { .. } => rec.write_sidecar(handle.tree(), handle_key(handle)?, eas).await,
    }
}

/// The sidecar key of an open file: from its CREATE's answer, or, for a
/// reclaimed durable handle (whose answer has no QFid), the first open's id.
///
/// Errors: no on-disk id is known.
fn handle_key(handle: &Handle) -> Result<FileKey> {
    let id = handle.info().on_disk_id().or_else(|| handle.reopen_info().and_then(|r| r.on_disk_id()));
    id.map(|id| FileKey { id, created: handle.info().times.creation })
        .ok_or_else(|| Error::Protocol("the server sent no on-disk file id for a sidecar record".into()))
}

/// The records named `names` of the open `handle` of the file at `path`:
/// QUERY_INFO of its EAs, its named streams, or its sidecar (every record
/// it holds).
///
/// Errors: the QUERY_INFO's NTSTATUS, or the stream or sidecar read's.
pub async fn query_records(handle: &Handle, rec: &Records, path: &str, names: &[&str]) -> Result<Vec<FullEa>> {
    match rec {
        Records::Ea => handle.tree().query_eas(handle.id(), names).await,
        Records::Stream => {
            let mut out = Vec::new();
            for name in names {
                if let Some(value) = rec.read_stream(handle.tree(), path, name).await? {
                    out.push(FullEa { name: name.to_string(), value: value.to_vec() });
                }
            }
            Ok(out)
        }
        Records::Sidecar { .. } => match handle_key(handle) {
            Ok(key) => rec.read_sidecar(handle.tree(), key).await,
            Err(_) => Ok(Vec::new()),
        },
    }
}

/// Marks the open `handle` delete-on-close.
pub async fn delete_on_close(handle: &Handle) -> Result<()> {
    handle.tree().set_info(handle.id(), SetFileInfo::Disposition { delete_pending: true }).await
}

/// SET_INFO(delete-on-close) + CLOSE of `handle` in one round trip: the
/// file goes once its other opens close.
///
/// Errors: the mark's NTSTATUS (the CLOSE runs either way).
pub async fn close_and_delete(handle: Handle) -> Result<()> {
    let mark = SetInfoRequest { file_id: handle.id(), info: SetFileInfo::Disposition { delete_pending: true } };
    let close = CloseRequest { file_id: handle.id(), post_query: false };
    let r = handle.tree().compound(&[&mark, &close]).await.and_then(take::<2>);
    match r {
        Ok([marked, closed]) => {
            if closed.status() == NtStatus::STATUS_SUCCESS {
                handle.closed_elsewhere();
            }
            marked.ok_or_status(&[]).map(|_| ())
        }
        Err(e) => Err(e), // the handle, dropped, is closed by its reaper
    }
}

/// Truncates or extends the open `handle` to `size` bytes.
pub async fn set_end_of_file(handle: &Handle, size: u64) -> Result<()> {
    handle.tree().set_info(handle.id(), SetFileInfo::EndOfFile(size)).await
}

/// A temporary file under `.smbgate\tmp`, open on one connection. Dropped
/// before [`TempFile::keep`], it deletes its file: through its handle, or,
/// if that handle's connection has died (the likeliest reason the request
/// failed), by name over another pooled connection. Once a publish of it
/// has been sent ([`TempFile::publishing`]) it is deleted by name only: a
/// temp file already renamed into place is never touched.
pub struct TempFile {
    handle: Option<Handle>,
    path: String,
    pool: Pool,
    publishing: AtomicBool,
    /// Its name is not private (a part claim's is the part's record), so
    /// another writer may rename its own file over it.
    shared_name: bool,
}

impl TempFile {
    /// Takes charge of the temp file at `path`, open as `handle`.
    pub fn new(pool: &Pool, handle: Handle, path: &str) -> TempFile {
        TempFile {
            handle: Some(handle),
            path: path.to_string(),
            pool: pool.clone(),
            publishing: AtomicBool::new(false),
            shared_name: false,
        }
    }

    /// [`TempFile::new`] for a file at a name others may rename over (a
    /// part claim): it is deleted only while that name is still its own.
    pub fn with_shared_name(pool: &Pool, handle: Handle, path: &str) -> TempFile {
        let mut t = TempFile::new(pool, handle, path);
        t.shared_name = true;
        t
    }

    /// The open handle.
    pub fn handle(&self) -> &Handle {
        self.handle.as_ref().expect("present until keep or discard")
    }

    /// The share-relative path the file was created at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Makes sure the handle is usable after its connection was lost:
    /// takes `replacement` (the same file, reopened by a writer on another
    /// connection) if given, else reopens the file itself on a pooled
    /// connection (`smb_client::durable`). A live handle is kept as it is.
    ///
    /// Errors: the reopen's (the file is gone or is another file, or no
    /// connection came back).
    pub async fn revive(&mut self, replacement: Option<Handle>) -> Result<()> {
        let handle = self.handle.as_ref().expect("present until keep or discard");
        if !handle.tree().conn().is_poisoned() {
            return Ok(()); // a replacement (if any) is dropped, and closes itself
        }
        let fresh = match replacement {
            Some(h) => h,
            None => reopen(&self.pool, handle).await?,
        };
        self.handle = Some(fresh);
        Ok(())
    }

    /// Says that a rename of this file into place is being sent: from now
    /// on a discard deletes it by its temp name, never through the handle,
    /// which may by then name the published object.
    pub fn publishing(&self) {
        self.publishing.store(true, Ordering::Release);
    }

    /// The file was published (or is to stay): closes the handle, leaving
    /// the file. Returns the CLOSE's post-query, if it succeeded.
    pub async fn keep(mut self) -> Option<CloseResponse> {
        self.handle.take().expect("present until keep or discard").close().await.ok()
    }

    /// The file was published; `handle_closed`: by a compound that also
    /// closed its handle.
    fn kept(mut self, handle_closed: bool) {
        let h = self.handle.take().expect("present until keep or discard");
        if handle_closed {
            h.closed_elsewhere();
        }
    }

    /// Keeps the file if `result` is Ok, else deletes it; returns `result`.
    pub async fn settle<T, E>(self, result: std::result::Result<T, E>) -> std::result::Result<T, E> {
        match result {
            Ok(v) => {
                self.keep().await;
                Ok(v)
            }
            Err(e) => {
                self.discard().await;
                Err(e)
            }
        }
    }

    /// Deletes the file now.
    pub async fn discard(mut self) {
        let handle = self.handle.take().expect("present until keep or discard");
        let by_name = self.publishing.load(Ordering::Acquire);
        discard(handle, std::mem::take(&mut self.path), self.pool.clone(), by_name, self.shared_name).await;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            let by_name = self.publishing.load(Ordering::Acquire);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(discard(handle, std::mem::take(&mut self.path), self.pool.clone(), by_name, self.shared_name));
            }
        }
    }
}

/// Opens `lost` (a handle whose connection is gone) again on a pooled
/// connection: its durable handle reclaimed, or the same file by name.
///
/// Errors: the handle cannot be reopened (not opened durable), or as
/// [`Tree::reopen`].
pub async fn reopen(pool: &Pool, lost: &Handle) -> Result<Handle> {
    let Some(info) = lost.reopen_info() else {
        return Err(Error::ConnectionLost("the connection holding the file was lost".into()));
    };
    let tree = pool.get().await?;
    tracing::info!(name = info.name(), "SMB connection lost under an open file; reopening it on another connection");
    Ok(tree.reopen(&info).await?.0)
}

/// Deletes a temp file: marks it delete-on-close through `handle` and
/// closes it, unless `by_name`; by name over a pooled connection when asked
/// to, or when the mark failed (the handle's connection is gone).
async fn discard(handle: Handle, path: String, pool: Pool, by_name: bool, shared_name: bool) {
    // Samba deletes a delete-on-close file by the name its handle has, so a
    // file another writer renamed over a shared name (a part claim replaced
    // by a concurrent upload of the part) would go in its place: mark ours
    // only while the name is still ours. Private temp names need no look.
    let id = shared_name.then(|| handle.info().on_disk_id()).flatten();
    if !by_name && id.is_some() && !name_is(handle.tree(), &path, id).await {
        let _ = handle.close().await;
        return;
    }
    if !by_name {
        if close_and_delete(handle).await.is_ok() {
            return;
        }
        // Its connection died, or the mark was refused: the file still has
        // its temp name (nothing was published), so delete it by that.
    } else {
        drop(handle); // closed by its connection's reaper
    }
    delete_by_name(path, pool, id).await;
}

/// True unless `path` now names a file other than the one with on-disk
/// `id` (a file that is gone, or a failed look, counts as ours).
async fn name_is(tree: &Tree, path: &str, id: Option<u64>) -> bool {
    let req = CreateRequest {
        desired_access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        options: options::NON_DIRECTORY_FILE,
        contexts: &QFID,
        ..delete_req(path, share::ALL)
    };
    match tree.open(&req).await {
        Ok(h) => {
            let same = h.info().on_disk_id() == id;
            let _ = h.close().await;
            if !same {
                tracing::debug!(path, "a file of ours was replaced by another's under its name; kept");
            }
            same
        }
        Err(_) => true,
    }
}

/// Deletes `path` over a pooled connection; a missing file is fine (it was
/// renamed into place, or never written). With `id` (the on-disk id the
/// file had when it was ours), only that file: a part claim's name is the
/// part's record, which a concurrent upload of the part may have replaced
/// with its own, and that one must stay.
async fn delete_by_name(path: String, pool: Pool, id: Option<u64>) {
    let deleted = match pool.get().await {
        Ok(t) if id.is_some() && !name_is(&t, &path, id).await => Ok(()),
        Ok(t) => t.delete(&path, false).await,
        Err(e) => Err(e),
    };
    match deleted {
        Ok(()) => {}
        Err(e)
            if e.status().is_some_and(|s| {
                matches!(s, NtStatus::STATUS_OBJECT_NAME_NOT_FOUND | NtStatus::STATUS_OBJECT_PATH_NOT_FOUND)
            }) => {}
        Err(e) => tracing::debug!(error = %e, "temp file not deleted; the sweep will remove it"),
    }
}
