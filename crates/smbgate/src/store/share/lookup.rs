//! Finding an object and its record: opens and stats that read the record
//! in the same round trip (EAs) or right after (streams, sidecars), and
//! that open again when the record belongs to another version of the file
//! (a writer published between the open and the read).

use super::Result;
use super::{Handle, Tree};
use bytes::Bytes;
use smb_client::connection::Response;
use smb_client::Error;
use smb_proto::create::{access, share, CreateRequest, CreateResponse, FileId};
use smb_proto::info::{decode_file_name_information, decode_full_ea};
use smb_proto::io::{ReadRequest, ReadResponse};
use smb_proto::query::{OutputBuffer, QueryInfoRequest};
use smb_proto::{NtStatus, Request};

use super::backoff::{self, Backoff};
use super::records::{FileKey, Kind, Records};
use super::requests::{lookup_req, meta_query, read_req, take, CLOSE_RELATED, NAME_QUERY};
use super::spill::unspill_meta;
use crate::store::meta::{ObjectMeta, META_EA};

/// The share-relative on-disk path from a [`NAME_QUERY`] answer; `None`
/// if the query failed (a server without the class).
///
/// Errors: an answer that does not decode (which poisons the connection,
/// as any body that does not decode does).
pub(crate) fn decode_name(r: &Response) -> Result<Option<String>> {
    if r.status() != NtStatus::STATUS_SUCCESS {
        return Ok(None);
    }
    let n = r.body(|m| decode_file_name_information(&OutputBuffer::decode(m)?.0))?;
    Ok(Some(n.trim_start_matches('\\').to_string()))
}

/// Our record from a QUERY_INFO(EA) answer, if present, readable, and
/// written for this very file (same size and on-disk id).
pub(crate) fn decode_meta(r: &Response, created: &CreateResponse) -> Option<ObjectMeta> {
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
pub(crate) async fn sidecar_meta(rec: &Records, tree: &Tree, created: &CreateResponse) -> Result<Option<ObjectMeta>> {
    let Some(key) = FileKey::of(created) else { return Ok(None) };
    let eas = rec.read_sidecar(tree, key).await?;
    Ok(ObjectMeta::from_eas(&eas).filter(|m| m.matches(created.times.end_of_file, created.on_disk_id())))
}

/// Where a record answer came from: the EA query in the open's compound,
/// the record stream read beside it, or neither (a sidecar, read next).
pub(crate) enum RecordAnswer {
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
pub(crate) async fn record_of(
    rec: &Records,
    tree: &Tree,
    answer: RecordAnswer,
    created: &CreateResponse,
) -> Result<(Option<ObjectMeta>, bool)> {
    match answer {
        RecordAnswer::Ea(r) => match decode_meta(&r, created) {
            Some(meta) => Ok((Some(unspill_meta(rec, tree, FileKey::of(created), meta).await?), false)),
            None => Ok((None, false)),
        },
        RecordAnswer::Stream(bytes) => {
            let Some(meta) = bytes.as_deref().and_then(ObjectMeta::from_ea) else { return Ok((None, false)) };
            let other_file = meta.disk_id.is_some() && meta.disk_id != created.on_disk_id();
            Ok(match meta.matches(created.times.end_of_file, created.on_disk_id()) {
                true => (Some(unspill_meta(rec, tree, FileKey::of(created), meta).await?), false),
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
pub(crate) async fn record_or_retry(
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
pub(crate) fn opening<'a>(
    rec: &Records,
    create: &'a CreateRequest<'a>,
    q: &'a QueryInfoRequest<'a>,
) -> Vec<&'a dyn Request> {
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
pub(crate) async fn compound_with_record(
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
    match rec.kind() {
        Kind::Ea => {
            let mut rs = tree.smb().compound(chain).await?;
            if rs.len() < 2 {
                return Err(Error::Protocol(format!("{} answers to a compound of {}", rs.len(), chain.len())).into());
            }
            let answer = rs.remove(1);
            Ok((rs, RecordAnswer::Ea(answer)))
        }
        Kind::Stream if pins => {
            let rs = tree.smb().compound(chain).await?;
            let answer = stream_answer(rec.read_stream(tree, path, META_EA).await)?;
            Ok((rs, answer))
        }
        Kind::Stream => {
            let stream = super::records::stream_path(path, META_EA);
            let (o, r, c) = super::records::whole_read(&stream, tree.max_read());
            let side: [&dyn Request; 3] = [&o, &r, &c];
            let mut all = tree.smb().compounds(&[chain, &side]).await?;
            let (Some(s), Some(main)) = (all.pop(), all.pop()) else {
                return Err(Error::Protocol("two compounds got another count of answers".into()).into());
            };
            Ok((main, stream_answer(super::records::whole_read_answer(s))?))
        }
        Kind::Sidecar => Ok((tree.smb().compound(chain).await?, RecordAnswer::Later)),
    }
}

/// Opens an existing file or directory for reading (QFid).
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_OBJECT_NAME_NOT_FOUND.
pub async fn open_read(tree: &Tree, path: &str) -> Result<Handle> {
    tree.open(&read_req(path)).await.map_err(Into::into)
}

/// The sidecar key of the file a CREATE answered for.
///
/// Errors: the server sent no on-disk id (its QFid context), which a
/// sidecar needs.
pub(crate) fn key_of(created: &CreateResponse) -> Result<FileKey> {
    FileKey::of(created)
        .ok_or_else(|| Error::Protocol("the server sent no on-disk file id for a sidecar record".into()))
        .map_err(Into::into)
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
    open_with_record(tree, rec, lookup_req(path, file_only), path, read, name).await
}

/// Opens an object to change its record (its tags): as [`open_with_meta`]
/// without the READ, with the right to write its record and a share mode
/// without delete, so that while the handle is open no rename or delete
/// can put another file at `path` (a writer that tries waits, see
/// `backoff::RENAME_OVER_OPEN`). Returns the handle, the record if it
/// matches the file, and with `name` the on-disk path.
///
/// Errors: as [`open_with_meta`]; STATUS_SHARING_VIOLATION while another
/// client holds the file for delete or a rename.
pub async fn open_to_update_record(
    tree: &Tree,
    rec: &Records,
    path: &str,
    name: bool,
    file_only: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    let req = lookup_req(path, file_only);
    let req = CreateRequest {
        desired_access: req.desired_access | access::FILE_WRITE_EA | access::FILE_WRITE_ATTRIBUTES,
        share_access: share::READ | share::WRITE,
        ..req
    };
    let (handle, meta, _, on_disk) = open_with_record(tree, rec, req, path, None, name).await?;
    Ok((handle, meta, on_disk))
}

/// The CREATE `create` of `path` + QUERY_INFO(our EA) [+ READ] [+ its
/// name], tried again while the record read is of another version of the
/// file; see [`open_with_meta`].
async fn open_with_record(
    tree: &Tree,
    rec: &Records,
    create: CreateRequest<'_>,
    path: &str,
    read: Option<(u64, u32)>,
    name: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<Bytes>, Option<String>)> {
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
    Ok(FileKey::of(&stat_created(tree, path).await?))
}

/// CREATE(read attributes, QFid) + CLOSE: what the server says of the file
/// at `path` (times, on-disk id). An open for attributes only meets no
/// sharing mode, so it sees files held open sharing nothing.
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_OBJECT_NAME_NOT_FOUND.
pub(crate) async fn stat_created(tree: &Tree, path: &str) -> Result<CreateResponse> {
    let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..read_req(path) };
    let [created, _closed] = take(tree.smb().compound(&[&open, &CLOSE_RELATED]).await?)?;
    Ok(created.ok_or_status(&[])?.body(CreateResponse::decode)?)
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

/// For each path, CREATE(read attributes) + QUERY_INFO(normalized name) +
/// CLOSE, all in one batch: the name as the server stores it
/// (share-relative, on-disk case, no leading `\`), or `None` where the path
/// does not open. An existing name costs a lookup, not a directory scan.
///
/// Errors: a transport error, or an answer that does not decode.
pub async fn normalized_names(tree: &Tree, paths: &[String]) -> Result<Vec<Option<String>>> {
    let opens: Vec<CreateRequest<'_>> =
        paths.iter().map(|path| CreateRequest::open(path, access::FILE_READ_ATTRIBUTES)).collect();
    let chains: Vec<[&dyn Request; 3]> =
        opens.iter().map(|o| [o as &dyn Request, &NAME_QUERY, &CLOSE_RELATED]).collect();
    let refs: Vec<&[&dyn Request]> = chains.iter().map(|c| &c[..]).collect();
    let mut out = Vec::with_capacity(paths.len());
    for chain in tree.smb().compounds(&refs).await? {
        let [created, name, _closed] = take(chain)?;
        out.push(if created.status() == NtStatus::STATUS_SUCCESS { decode_name(&name)? } else { None });
    }
    Ok(out)
}
