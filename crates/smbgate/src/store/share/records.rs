//! Where the gateway keeps its records on a share: the object record
//! (`meta`), the upload record and the part records of multipart uploads.
//!
//! - [`Kind::Ea`]: one extended attribute on the file or directory it
//!   describes. Read in the same compound as the open, and renamed,
//!   copied and deleted with the file by the server itself.
//! - [`Kind::Stream`]: for shares that store no EAs but have alternate
//!   data streams (Samba with `ea support = no` and `streams_xattr`, some
//!   NAS): a stream `file:smbgate.meta` on the file, which renames, copies
//!   and deletes take along like an EA. It is addressed by name, not by
//!   handle, so its read (sent beside the open, same round trip) may meet
//!   another version of the file during a rename; object records name the
//!   file id they were written for, and a record for another id makes the
//!   caller open both again.
//! - [`Kind::Sidecar`]: for shares that store neither EAs nor streams
//!   (Samba with `ea support = no`, Azure Files, several NAS). A small file under
//!   `.smbgate\meta`, named after the on-disk file id of the file it
//!   describes, which a rename keeps. It is written before the file is
//!   published (by a rename of a complete temp file, so never seen half
//!   written), and read by file id after the open: one round trip more.
//!
//! A sidecar counts only for the file it was written for: it stores that
//! file's id and CreationTime, both of which a rename keeps. A file that
//! got a reused id (inode) has another CreationTime, so a sidecar left
//! behind by a deleted file never describes a new one.

use super::{Handle, Tree};
use super::{Result, ShareError, SmbFailure};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use smb_client::Error;
use smb_proto::create::{access, options, share, CloseRequest, CreateRequest, CreateResponse, Disposition, FileId};
use smb_proto::info::{FullEa, SetFileInfo};
use smb_proto::io::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use smb_proto::query::SetInfoRequest;
use smb_proto::{NtStatus, Request};

use super::backoff;
use crate::store::path::SharePath;

/// Longest sidecar read, in bytes: an object record of 10,000 parts is
/// about 200 KiB.
const MAX_SIDECAR: u32 = 1 << 20;

/// How this share keeps the gateway's records; chosen once per store root
/// at startup by [`choose`]. Which kind it is stays inside the share
/// layer: the rules above ask what they need of it.
#[derive(Debug, Clone)]
pub struct Records {
    kind: Kind,
    /// Where sidecars go: every record on a sidecar share, and on the
    /// others a record too large for an EA or stream (see `spill`).
    sidecars: Sidecars,
    /// Set once this process has written or read a spilled record: only
    /// then do deletes on an EA or stream share look for a sidecar to
    /// remove ([`Records::forget`]).
    spills_seen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The sidecar directory and where sidecars are written before their
/// rename into place.
#[derive(Debug, Clone)]
struct Sidecars {
    /// `<root>\.smbgate\meta`.
    dir: SharePath,
    /// `<root>\.smbgate\tmp`.
    tmp: SharePath,
}

/// The kinds of record store.
#[derive(Debug, Clone)]
pub(super) enum Kind {
    /// In an EA on each file (the default; see the module docs).
    Ea,
    /// In a named stream on each file, one per record name.
    Stream,
    /// In sidecar files under `<root>\.smbgate\meta`, for a share
    /// without EAs.
    Sidecar,
}

/// What identifies the file a sidecar describes: its on-disk id and its
/// CreationTime (FILETIME), both kept by a rename.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKey {
    /// The on-disk file id (QFid, or a directory entry's FileId).
    pub id: u64,
    /// CreationTime, FILETIME (100 ns since 1601).
    pub created: u64,
}

impl FileKey {
    /// The key of the file a CREATE answered for; `None` if the server
    /// sent no on-disk id (QFid context).
    pub fn of(created: &CreateResponse) -> Option<FileKey> {
        created.on_disk_id().map(|id| FileKey { id, created: created.times.creation })
    }
}

/// A sidecar's contents (format version 1): the file it describes and its
/// records by name, values as the JSON text the EA would hold.
#[derive(Serialize, Deserialize)]
struct Sidecar {
    v: u32,
    id: u64,
    created: u64,
    records: std::collections::BTreeMap<String, String>,
}

impl Records {
    /// True if a file's record is found by its on-disk id (sidecars): only
    /// an open or a directory entry tells that id, and a record left by a
    /// replaced or deleted file must be forgotten ([`Records::forget`]).
    pub fn kept_by_file_id(&self) -> bool {
        self.in_sidecars()
    }

    /// True if a directory entry says whether its file has a record (EAs:
    /// the entry's EaSize), so that a listing needs no look at each file.
    pub fn shown_in_listings(&self) -> bool {
        self.in_eas()
    }

    /// True if the record is part of the file itself (EAs): renamed,
    /// replaced and deleted with it, and changed only through a handle on
    /// it, which breaks other clients' leases on the file.
    pub fn part_of_the_file(&self) -> bool {
        self.in_eas()
    }

    /// True unless a record of `len` bytes is over what a sidecar carries
    /// (half of [`MAX_SIDECAR`], for the escaping of a record's JSON inside
    /// the sidecar's): a larger EA or stream record spills to one (see
    /// `spill`).
    pub fn may_hold(&self, len: usize) -> bool {
        len <= MAX_SIDECAR as usize / 2
    }

    /// Notes that this process met a spilled record (see
    /// [`Records::forget`]).
    pub(super) fn saw_spill(&self) {
        self.spills_seen.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Which kind of store this is, for the share layer's own operations.
    pub(super) fn kind(&self) -> &Kind {
        &self.kind
    }

    /// True if records travel inside the open's compound (EAs).
    pub(super) fn in_eas(&self) -> bool {
        matches!(self.kind, Kind::Ea)
    }

    /// True if records are named streams of their files.
    pub(super) fn in_streams(&self) -> bool {
        matches!(self.kind, Kind::Stream)
    }

    /// True if records are sidecar files, found by file id.
    pub(super) fn in_sidecars(&self) -> bool {
        matches!(self.kind, Kind::Sidecar)
    }

    /// A name for the logs.
    pub fn describe(&self) -> &'static str {
        match &self.kind {
            Kind::Ea => "extended attributes",
            Kind::Stream => "alternate data streams",
            Kind::Sidecar => "sidecar files under .smbgate/meta",
        }
    }

    fn sidecar_path(dir: &SharePath, key: FileKey) -> SharePath {
        // 256 subdirectories, so that no one directory holds every record.
        dir.join(&format!("{:02x}", key.id & 0xff)).join(&format!("{:016x}", key.id))
    }

    /// Writes `eas` (empty values remove) as the records of the file `key`
    /// names: all its records on a sidecar share, its spilled ones on the
    /// others (see `spill`).
    ///
    /// Sidecar form: CREATE(temp) + WRITE + SET_INFO(rename over the
    /// sidecar) + CLOSE, one round trip, so a reader sees the old sidecar
    /// or the new one, never part of one. All values empty: the sidecar is
    /// deleted.
    ///
    /// Errors: the first failing step's NTSTATUS.
    pub async fn write_sidecar(&self, tree: &Tree, key: FileKey, eas: &[FullEa]) -> Result<()> {
        let Sidecars { dir, tmp } = &self.sidecars;
        let target = Self::sidecar_path(dir, key);
        let mut records = std::collections::BTreeMap::new();
        for ea in eas.iter().filter(|e| !e.value.is_empty()) {
            let text = String::from_utf8(ea.value.clone())
                .map_err(|_| Error::InvalidArgument(format!("record {} is not UTF-8 text", ea.name)))?;
            records.insert(ea.name.to_ascii_lowercase(), text);
        }
        if records.is_empty() {
            return match tree.smb().delete(target.as_str(), false).await {
                Err(e) if !e.failure().is_not_found() => Err(e.into()),
                _ => Ok(()),
            };
        }
        let body =
            serde_json::to_vec(&Sidecar { v: 1, id: key.id, created: key.created, records }).expect("serialisable");
        let temp = tmp.join(&format!("rec-{:016x}", rand::random::<u64>()));
        match self.publish_retrying(tree, &temp, &target, &body).await {
            Err(e) if e.status() == Some(NtStatus::STATUS_OBJECT_PATH_NOT_FOUND) => {
                // The first record in this subdirectory (and, on a share
                // whose records spill only now and then, the first of all).
                if let Some((sub, _)) = target.split_leaf() {
                    for d in [dir, &sub] {
                        match tree.smb().mkdir(d.as_str()).await {
                            Err(e) if e.status() != Some(NtStatus::STATUS_OBJECT_NAME_COLLISION) => {
                                return Err(e.into())
                            }
                            _ => {}
                        }
                    }
                }
                self.publish_retrying(tree, &temp, &target, &body).await
            }
            r => r,
        }
    }

    /// [`Records::publish`], tried again for a while when the old sidecar
    /// is held by a [`Records::forget`] (one round trip).
    async fn publish_retrying(&self, tree: &Tree, temp: &SharePath, target: &SharePath, body: &[u8]) -> Result<()> {
        let held = |e: &ShareError| {
            matches!(e.status(), Some(NtStatus::STATUS_SHARING_VIOLATION | NtStatus::STATUS_ACCESS_DENIED))
        };
        backoff::retry(&backoff::SIDECAR_HELD, held, || self.publish(tree, temp, target, body)).await
    }

    async fn publish(&self, tree: &Tree, temp: &SharePath, target: &SharePath, body: &[u8]) -> Result<()> {
        let create = CreateRequest::new_file(temp.as_str(), access::GENERIC_WRITE | access::DELETE);
        let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data: body };
        let t = smb_client::tree::smb_path(target.as_str());
        let rename = SetInfoRequest {
            file_id: FileId::RELATED,
            info: SetFileInfo::Rename { target: &t, replace_if_exists: true },
        };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        let chain: [&dyn Request; 4] = [&create, &write, &rename, &close];
        let rs = tree.smb().compound(&chain).await?;
        let [created, written, renamed, _closed]: [_; 4] =
            rs.try_into().map_err(|_| Error::Protocol("a compound of 4 got another count of answers".into()))?;
        created.ok_or_status(&[])?;
        let outcome = written
            .ok_or_status(&[])
            .and_then(|w| w.body(WriteResponse::decode))
            .and_then(|w| check_written(w.count, body.len()))
            .and_then(|_| renamed.ok_or_status(&[]).map(|_| ()));
        if outcome.is_err() {
            // Not renamed: the temp file is ours to remove (else the sweep
            // takes it).
            let _ = tree.smb().delete(temp.as_str(), false).await;
        }
        outcome.map_err(Into::into)
    }

    /// Writes `eas` (empty values remove) as named streams of the file or
    /// directory at `path`. Only for [`Kind::Stream`].
    ///
    /// A file nobody else reads yet (`fresh`: a temp file, a new upload
    /// directory, a new part claim): CREATE(overwrite) + WRITE + CLOSE. An
    /// existing one (a directory that becomes a marker): CREATE(open or
    /// create) first, then one WRITE at offset 0 padded with spaces to the
    /// stream's old length, which JSON ignores, so that a reader never
    /// meets an empty or cut stream.
    ///
    /// Errors: the first failing step's NTSTATUS.
    pub async fn write_streams(&self, tree: &Tree, path: &str, eas: &[FullEa], fresh: bool) -> Result<()> {
        for ea in eas {
            let name = stream_path(path, &ea.name);
            if ea.value.is_empty() {
                match tree.smb().delete(&name, false).await {
                    Err(e) if !e.failure().is_not_found() => return Err(e.into()),
                    _ => continue,
                }
            }
            let disposition = if fresh { Disposition::OverwriteIf } else { Disposition::OpenIf };
            let create = CreateRequest::new_file(&name, access::GENERIC_WRITE).disposition(disposition);
            let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
            if fresh {
                let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data: &ea.value };
                let chain: [&dyn Request; 3] = [&create, &write, &close];
                let rs = tree.smb().compound(&chain).await?;
                let mut rs = rs.into_iter();
                rs.next().ok_or_else(|| Error::Protocol("no answer to a stream create".into()))?.ok_or_status(&[])?;
                let w = rs.next().ok_or_else(|| Error::Protocol("no answer to a stream write".into()))?;
                check_written(w.ok_or_status(&[])?.body(WriteResponse::decode)?.count, ea.value.len())?;
                continue;
            }
            let h = tree.open(&create).await?;
            let old = h.info().times.end_of_file as usize;
            let mut data = ea.value.clone();
            data.resize(data.len().max(old), b' ');
            let written = tree.smb().write(h.smb().id(), 0, &data).await;
            let _ = h.close().await;
            check_written(written?, data.len())?;
        }
        Ok(())
    }

    /// The record `name` of the file or directory at `path`, from its
    /// stream (`None` if it has none). Only for [`Kind::Stream`].
    ///
    /// Errors: a failing status other than not-found, a transport error.
    pub async fn read_stream(&self, tree: &Tree, path: &str, name: &str) -> Result<Option<Bytes>> {
        let stream = stream_path(path, name);
        let (open, read, close) = whole_read(&stream, tree.max_read());
        let chain: [&dyn Request; 3] = [&open, &read, &close];
        whole_read_answer(tree.smb().compound(&chain).await?)
    }

    /// The records of the file `key` names, from its sidecar (empty if it
    /// has none, or if the sidecar was written for another file).
    ///
    /// Errors: a failing status other than not-found, a transport error.
    pub async fn read_sidecar(&self, tree: &Tree, key: FileKey) -> Result<Vec<FullEa>> {
        let path = Self::sidecar_path(&self.sidecars.dir, key);
        let (open, read, close) = whole_read(path.as_str(), tree.max_read());
        let chain: [&dyn Request; 3] = [&open, &read, &close];
        let Some(data) = whole_read_answer(tree.smb().compound(&chain).await?)? else { return Ok(Vec::new()) };
        // Unreadable, or another file's (a reused id): no record, so the
        // file is treated as one the gateway did not write.
        let Ok(s) = serde_json::from_slice::<Sidecar>(&data) else { return Ok(Vec::new()) };
        if s.v != 1 || s.id != key.id || s.created != key.created {
            return Ok(Vec::new());
        }
        Ok(s.records.into_iter().map(|(name, value)| FullEa { name, value: value.into_bytes() }).collect())
    }

    /// Removes, [`backoff::SIDECAR_FORGET_DELAY`] from now, the sidecar of the file `key`
    /// names: after the file itself was deleted or replaced. The wait is for
    /// readers that opened the file just before and read its sidecar next
    /// (they would otherwise see a file without a record, with a derived
    /// ETag). Runs on `tree`'s connection; best effort, since a leftover is
    /// harmless (see the module docs) and small. On an EA or stream share,
    /// only once this process has met a spilled record.
    pub fn forget(&self, tree: &Tree, key: Option<FileKey>) {
        if self.in_sidecars() || self.spills_seen.load(std::sync::atomic::Ordering::Relaxed) {
            self.forget_any(tree, key);
        }
    }

    /// [`Records::forget`] on any share, for the rare removals where a
    /// spilled record is likely (an upload's directory, whose record holds
    /// the object's metadata and tags) whatever this process has met.
    pub fn forget_any(&self, tree: &Tree, key: Option<FileKey>) {
        let Some(key) = key else { return };
        let (records, tree) = (self.clone(), tree.clone());
        tokio::spawn(async move {
            backoff::pause(backoff::SIDECAR_FORGET_DELAY).await;
            records.forget_now(&tree, key).await;
        });
    }

    /// Removes the sidecar of the file `key` names, if there is one and it
    /// was written for that very file. Its id may meanwhile have gone to a
    /// new file with a sidecar of its own, so the sidecar is opened sharing
    /// only READ (a writer's rename over it waits, see
    /// [`Records::write_sidecar`]; readers go on), read, and deleted through
    /// that handle only if it names `key`.
    async fn forget_now(&self, tree: &Tree, key: FileKey) {
        let path = Self::sidecar_path(&self.sidecars.dir, key);
        let (open, read, _) = whole_read(path.as_str(), tree.max_read());
        let open = CreateRequest {
            desired_access: access::GENERIC_READ | access::DELETE,
            share_access: share::READ,
            options: options::NON_DIRECTORY_FILE,
            ..open
        };
        let chain: [&dyn Request; 2] = [&open, &read];
        let Ok(rs) = tree.smb().compound(&chain).await else { return };
        let mut rs = rs.into_iter();
        let (Some(created), Some(read)) = (rs.next(), rs.next()) else { return };
        let Ok(handle) = Handle::from_response(tree, created) else { return };
        let ours = read.status() == NtStatus::STATUS_SUCCESS
            && read
                .body(ReadResponse::decode)
                .ok()
                .and_then(|r| serde_json::from_slice::<Sidecar>(&r.data).ok())
                .is_some_and(|s| s.id == key.id && s.created == key.created);
        if ours {
            let _ = tree.smb().set_info(handle.smb().id(), SetFileInfo::Disposition { delete_pending: true }).await;
        }
        let _ = handle.close().await;
    }
}

/// `path:name`, the named stream `name` of the file at `path`.
pub fn stream_path(path: &str, name: &str) -> String {
    format!("{path}:{name}")
}

/// CREATE(read) + READ (up to [`MAX_SIDECAR`] bytes) + CLOSE of the
/// stream or file at `path`: a record read, whole, in one round trip.
pub fn whole_read(path: &str, max_read: u32) -> (CreateRequest<'_>, ReadRequest, CloseRequest) {
    (
        smb_client::tree::read_open(path, &[]),
        ReadRequest { file_id: FileId::RELATED, length: MAX_SIDECAR.min(max_read), offset: 0, minimum_count: 0 },
        CloseRequest { file_id: FileId::RELATED, post_query: false },
    )
}

/// The bytes a [`whole_read`] chain answered (its first two answers),
/// `None` if the stream or file is missing or empty.
///
/// Errors: a failing status other than not-found; a body that does not
/// decode.
pub fn whole_read_answer(rs: Vec<smb_client::connection::Response>) -> Result<Option<Bytes>> {
    let mut rs = rs.into_iter();
    let created = rs.next().ok_or_else(|| Error::Protocol("no answer to a record open".into()))?;
    if let Err(e) = created.ok_or_status(&[]) {
        return if e.failure().is_not_found() { Ok(None) } else { Err(e.into()) };
    }
    let read = rs.next().ok_or_else(|| Error::Protocol("no answer to a record read".into()))?;
    if read.status() != NtStatus::STATUS_SUCCESS {
        return Ok(None); // empty (END_OF_FILE)
    }
    Ok(Some(read.body(ReadResponse::decode)?.data))
}

fn check_written(count: u32, want: usize) -> smb_client::Result<()> {
    if count as usize == want {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!("short write: {count} of {want} bytes")))
    }
}

/// Whether the share keeps named streams on files and on directories: a
/// stream created on a new file `probe` (then deleted with it) and on the
/// directory `dir` (then deleted). Any failing status means no.
///
/// Errors: transport errors, and failing to create or remove `probe`.
pub async fn probe_streams(tree: &Tree, dir: &SharePath, probe: &SharePath) -> Result<bool> {
    tree.smb().write_small(probe.as_str(), b"", &[]).await?;
    let r = async {
        for base in [probe.as_str(), dir.as_str()] {
            let stream = stream_path(base, "smbgate.probe");
            let create = CreateRequest::new_file(&stream, access::GENERIC_WRITE | access::DELETE)
                .options(options::DELETE_ON_CLOSE);
            let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
            let chain: [&dyn Request; 2] = [&create, &close];
            let rs = tree.smb().compound(&chain).await?;
            let created = rs.into_iter().next().ok_or_else(|| Error::Protocol("no answer to a stream probe".into()))?;
            if let Err(e) = created.ok_or_status(&[]) {
                tracing::debug!(error = %e, "the share keeps no named streams");
                return Ok(false);
            }
        }
        Ok(true)
    }
    .await;
    tree.smb().delete(probe.as_str(), false).await?;
    r
}

/// Chooses where this store root keeps its records: EAs if the share
/// stores them (`ea_supported`), else named streams if it has them
/// (`streams`), else sidecar files under `internal\meta`, which need
/// on-disk file ids (`has_disk_ids`).
///
/// Errors: InvalidArgument, one line, for a share that can hold none;
/// the status of creating the sidecar directory.
pub async fn choose(
    tree: &Tree,
    internal: &SharePath,
    ea_supported: bool,
    streams: bool,
    has_disk_ids: bool,
) -> Result<Records> {
    let records = |kind| Records {
        kind,
        sidecars: Sidecars { dir: internal.join("meta"), tmp: internal.join("tmp") },
        spills_seen: Default::default(),
    };
    if ea_supported {
        return Ok(records(Kind::Ea));
    }
    if streams && has_disk_ids {
        return Ok(records(Kind::Stream));
    }
    if !has_disk_ids {
        return Err(Error::InvalidArgument(
            "the share stores no extended attributes (STATUS_EAS_NOT_SUPPORTED) and reports no on-disk file \
             ids, so smbgate has nowhere to keep object metadata; enable EAs on the server (Samba: ea support = yes)"
                .into(),
        )
        .into());
    }
    let records = records(Kind::Sidecar);
    match tree.smb().mkdir(records.sidecars.dir.as_str()).await {
        Err(e) if e.status() != Some(NtStatus::STATUS_OBJECT_NAME_COLLISION) => return Err(e.into()),
        _ => {}
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_fan_out_by_the_ids_low_byte() {
        let dir = SharePath::root(".smbgate\\meta");
        let key = FileKey { id: 0x9e_0155, created: 1 };
        assert_eq!(Records::sidecar_path(&dir, key).as_str(), ".smbgate\\meta\\55\\00000000009e0155");
    }

    #[test]
    fn a_sidecar_names_the_file_it_was_written_for() {
        let s = Sidecar {
            v: 1,
            id: 7,
            created: 133_000_000_000_000_000,
            records: [("smbgate.meta".to_string(), "{\"etag\":\"x\"}".to_string())].into(),
        };
        let text = String::from_utf8(serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"v\":1,\"id\":7,\"created\":133000000000000000,\"records\":{\"smbgate.meta\":\"{\\\"etag\\\":\\\"x\\\"}\"}}"
        );
    }
}
