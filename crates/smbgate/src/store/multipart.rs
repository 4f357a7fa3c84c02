//! Multipart uploads, with all state on the share so that any gateway
//! instance can continue any upload: `.smbgate\uploads\<UploadId>\` holds
//! the upload record (an EA on the directory) and the parts.
//!
//! Clients send parts of one size (the last one smaller). The first part
//! with a known Content-Length fixes that size as the upload's stride (the
//! `stride` file), and every part no larger than it is written straight into
//! one `data` file at offset (n-1) x stride, with a small record file
//! (`part-NNNNN`, EA `smbgate.part`) for its ETag. When the completed parts
//! are 1..N of stride size (the last smaller), CompleteMultipartUpload is
//! O(1): truncate, set metadata, rename. Otherwise (other part sizes, gaps,
//! parts larger than the stride, UploadPartCopy) parts are separate files
//! and Complete concatenates them server-side with COPYCHUNK.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::Stream;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use smb_proto::create::{access, options, share, CreateRequest, Disposition, FileId};
use smb_proto::info::{FullEa, SetFileInfo};

use super::error::is_not_found;
use super::keys::map_key;
use super::meta::ObjectMeta;
use super::object::{PutRequest, PutResult, Target};
use super::spread::SpreadWriter;
use super::{open_with_meta, Store, StoreError, StoreResult, INTERNAL};

/// Minimum size of every part but the last (S3: 5 MiB).
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// Highest part number S3 allows.
pub const MAX_PART_NUMBER: i32 = 10_000;

/// The upload record stored on the upload directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UploadRecord {
    /// Target bucket.
    pub bucket: String,
    /// Target key.
    pub key: String,
    /// Metadata for the final object.
    pub meta: ObjectMeta,
    /// Initiation time, Unix seconds.
    pub initiated: i64,
}

/// A stored part.
#[derive(Debug, Clone)]
pub struct PartInfo {
    /// Where the part's bytes are in the upload's `data` file, if there.
    pub data_offset: Option<u64>,
    /// Part number (1..=10000).
    pub number: i32,
    /// Size in bytes.
    pub size: u64,
    /// ETag (MD5 hex).
    pub etag: String,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
}

/// An in-progress upload for ListMultipartUploads.
#[derive(Debug, Clone)]
pub struct UploadInfo {
    /// UploadId.
    pub upload_id: String,
    /// The record.
    pub record: UploadRecord,
}

const UPLOAD_EA: &str = "smbgate.upload";
const PART_EA: &str = "smbgate.part";

/// The record of a part written into the `data` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartRecord {
    etag: String,
    size: u64,
    offset: u64,
}

fn valid_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Store {
    fn upload_dir(&self, id: &str) -> String {
        self.path(&format!("{INTERNAL}\\uploads\\{id}"))
    }

    /// The file that in-place parts are written into.
    fn data_path(&self, id: &str) -> String {
        format!("{}\\data", self.upload_dir(id))
    }

    fn part_path(&self, id: &str, n: i32) -> String {
        format!("{}\\part-{n:05}", self.upload_dir(id))
    }

    /// CreateMultipartUpload: a new upload directory with its record.
    /// Returns the UploadId.
    ///
    /// Errors: NoSuchBucket, InvalidKey.
    pub async fn create_upload(&self, bucket: &str, key: &str, meta: ObjectMeta) -> StoreResult<String> {
        let mapped = map_key(key)?;
        if mapped.dir_marker {
            return Err(StoreError::InvalidArgument("multipart upload to a key ending in '/'".into()));
        }
        let tree = self.tree().await?;
        self.check_bucket(&tree, bucket).await?;
        let id = format!("{:032x}", rand::random::<u128>());
        let rec = UploadRecord {
            bucket: bucket.into(),
            key: key.into(),
            meta,
            initiated: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
        };
        let ea = [FullEa { name: UPLOAD_EA.into(), value: serde_json::to_vec(&rec).expect("serialisable") }];
        let dir = self.upload_dir(&id);
        let req = CreateRequest {
            name: &dir,
            oplock_level: 0,
            desired_access: access::FILE_LIST_DIRECTORY | access::FILE_WRITE_EA | access::SYNCHRONIZE,
            file_attributes: smb_proto::create::attributes::DIRECTORY,
            share_access: share::ALL,
            disposition: Disposition::Create,
            options: options::DIRECTORY_FILE,
            contexts: &[smb_proto::create::CreateContext::EaBuffer(&ea)],
        };
        let d = tree.create(&req).await?;
        let _ = tree.close(d.file_id).await;
        Ok(id)
    }

    /// Reads an upload's record.
    ///
    /// Errors: NoSuchUpload.
    pub async fn upload_record(&self, id: &str) -> StoreResult<UploadRecord> {
        if !valid_upload_id(id) {
            return Err(StoreError::NoSuchUpload);
        }
        let tree = self.tree().await?;
        let f = match tree.open_read(&self.upload_dir(id)).await {
            Ok(f) => f,
            Err(e) if is_not_found(&e) => return Err(StoreError::NoSuchUpload),
            Err(e) => return Err(e.into()),
        };
        let eas = tree.query_eas(f.file_id, &[UPLOAD_EA]).await;
        let _ = tree.close(f.file_id).await;
        eas?.iter()
            .find(|e| e.name.eq_ignore_ascii_case(UPLOAD_EA))
            .and_then(|e| serde_json::from_slice(&e.value).ok())
            .ok_or(StoreError::NoSuchUpload)
    }

    /// Checks that `id` is an upload for `bucket`/`key`.
    async fn check_upload(&self, bucket: &str, key: &str, id: &str) -> StoreResult<UploadRecord> {
        let rec = self.upload_record(id).await?;
        if rec.bucket != bucket || rec.key != key {
            return Err(StoreError::NoSuchUpload);
        }
        Ok(rec)
    }

    #[allow(clippy::too_many_arguments)]
    /// UploadPart: stores part `n` (replacing an earlier upload of it).
    ///
    /// Errors: NoSuchUpload, InvalidArgument (part number), BadDigest.
    pub async fn upload_part<S, E>(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        n: i32,
        body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        if !(1..=MAX_PART_NUMBER).contains(&n) {
            return Err(StoreError::InvalidArgument("part number must be an integer between 1 and 10000".into()));
        }
        self.check_upload(bucket, key, id).await?;
        let tree = self.tree().await?;
        if let Some(len) = req.content_length.filter(|&l| l > 0) {
            if let Some(stride) = self.stride(&tree, id, len).await? {
                if len <= stride {
                    if let Some(claim) = self.claim_part(&tree, id, n).await? {
                        return self.upload_part_in_place(&tree, id, n, len, stride, claim, body, req, trailer).await;
                    }
                }
            }
        }
        // The part is a file of its own, published by a rename over the
        // part's record: an earlier upload of this number stays valid until
        // this one is verified and replaces it.
        self.put_to(&tree, Target::Part(self.part_path(id, n)), body, req, trailer).await
    }

    /// Claims part `n` for the data file by creating its record (empty,
    /// without the record EA, so listings skip it until it is filled).
    /// Returns the open record, or `None` if part `n` already has a record
    /// (an earlier or concurrent upload): the bytes of that upload may be in
    /// the data file, so this one must not write there.
    ///
    /// Errors: NoSuchUpload.
    async fn claim_part(&self, tree: &smb_client::Tree, id: &str, n: i32) -> StoreResult<Option<FileId>> {
        let record = self.part_path(id, n);
        let claim = CreateRequest {
            desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
            share_access: share::READ | share::DELETE,
            ..upload_file(&record, Disposition::Create)
        };
        match tree.create(&claim).await {
            Ok(c) => Ok(Some(c.file_id)),
            Err(e) if e.status() == Some(smb_proto::NtStatus::STATUS_OBJECT_NAME_COLLISION) => Ok(None),
            Err(e) if is_not_found(&e) => Err(StoreError::NoSuchUpload),
            Err(e) => Err(e.into()),
        }
    }

    /// The upload's stride: set by the first part of at least the minimum
    /// part size that gets here (an atomic CREATE), read by the others.
    /// `None` while no such part has arrived.
    async fn stride(&self, tree: &smb_client::Tree, id: &str, len: u64) -> StoreResult<Option<u64>> {
        let path = format!("{}\\stride", self.upload_dir(id));
        let read = |data: Bytes| -> StoreResult<Option<u64>> {
            std::str::from_utf8(&data)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .map(Some)
                .ok_or_else(|| StoreError::Busy("upload stride is being written; retry".into()))
        };
        if len < MIN_PART_SIZE {
            return match tree.read_small(&path, 64).await {
                Ok((_, data)) => read(data),
                Err(e) if is_not_found(&e) => Ok(None),
                Err(e) => Err(e.into()),
            };
        }
        let create = upload_file(&path, Disposition::Create);
        let text = len.to_string();
        let write = smb_proto::io::WriteRequest {
            file_id: smb_proto::create::FileId::RELATED,
            offset: 0,
            data: text.as_bytes(),
        };
        let close = smb_proto::create::CloseRequest { file_id: smb_proto::create::FileId::RELATED, post_query: false };
        let rs = tree.compound(&[&create, &write, &close]).await?;
        match rs[0].status() {
            smb_proto::NtStatus::STATUS_SUCCESS => Ok(Some(len)),
            smb_proto::NtStatus::STATUS_OBJECT_NAME_COLLISION => read(tree.read_small(&path, 64).await?.1),
            s if s == smb_proto::NtStatus::STATUS_OBJECT_PATH_NOT_FOUND => Err(StoreError::NoSuchUpload),
            s => Err(smb_client::Error::Status { command: smb_proto::Command::Create, status: s }.into()),
        }
    }

    /// Writes part `n` into the data file at (n-1) x stride, then fills its
    /// claimed record (see [`Store::claim_part`]); on failure the claim is
    /// deleted, so the part reads as not uploaded, never torn.
    #[allow(clippy::too_many_arguments)]
    async fn upload_part_in_place<S, E>(
        &self,
        tree: &smb_client::Tree,
        id: &str,
        n: i32,
        len: u64,
        stride: u64,
        claim: FileId,
        mut body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let data_path = self.data_path(id);
        let open = upload_file(&data_path, Disposition::OpenIf);
        let f = match tree.create(&open).await {
            Ok(f) => f,
            Err(e) => {
                let _ = tree.set_info(claim, SetFileInfo::Disposition { delete_pending: true }).await;
                let _ = tree.close(claim).await;
                return Err(if is_not_found(&e) { StoreError::NoSuchUpload } else { e.into() });
            }
        };
        let offset = (n as u64 - 1) * stride;
        let result: StoreResult<(PutResult, PartRecord)> = async {
            let writer = SpreadWriter::new(self, tree, f.file_id, &data_path, offset);
            let (md5, sums, size) = self.stream_body(writer, &mut body, &req, Some(len)).await?;
            let meta = super::object::verified_meta(&req, md5, sums, size, trailer)?;
            let rec = PartRecord { etag: meta.etag.clone(), size, offset };
            Ok((PutResult { etag: meta.etag, checksums: meta.checksums, size, last_modified: None }, rec))
        }
        .await;
        let _ = tree.close(f.file_id).await;
        let filled = match result {
            Err(e) => {
                let _ = tree.set_info(claim, SetFileInfo::Disposition { delete_pending: true }).await;
                Err(e)
            }
            Ok((put, rec)) => {
                let ea = [FullEa { name: PART_EA.into(), value: serde_json::to_vec(&rec).expect("serialisable") }];
                match tree.set_info(claim, SetFileInfo::FullEa(&ea)).await {
                    Ok(()) => Ok(put),
                    // A concurrent upload of this part published its own file
                    // over the claim (Samba allows that while the claim is
                    // open with share-delete): that one is the part now.
                    Err(e) if is_not_found(&e) || e.status() == Some(smb_proto::NtStatus::STATUS_ACCESS_DENIED) => {
                        Err(StoreError::Busy("a concurrent upload of this part replaced it; retry the request".into()))
                    }
                    Err(e) => Err(e.into()),
                }
            }
        };
        let _ = tree.close(claim).await;
        filled
    }

    /// UploadPartCopy: part `n` from a (range of a) source object.
    ///
    /// Errors: NoSuchUpload, NoSuchKey, InvalidRange, PreconditionFailed.
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part_copy(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        n: i32,
        src_bucket: &str,
        src_key: &str,
        src_range: Option<std::ops::Range<u64>>,
        check: impl FnOnce(&super::object::ObjectInfo) -> StoreResult<()>,
    ) -> StoreResult<(super::object::ObjectInfo, PutResult)> {
        if !(1..=MAX_PART_NUMBER).contains(&n) {
            return Err(StoreError::InvalidArgument("part number must be an integer between 1 and 10000".into()));
        }
        self.check_upload(bucket, key, id).await?;
        let target = Target::Part(self.part_path(id, n));
        self.copy_object(src_bucket, src_key, target, Some(ObjectMeta::default()), src_range, check).await
    }

    /// The stored parts of an upload, by part number.
    pub async fn list_parts(&self, bucket: &str, key: &str, id: &str) -> StoreResult<Vec<PartInfo>> {
        self.check_upload(bucket, key, id).await?;
        let tree = self.tree().await?;
        let dir = self.upload_dir(id);
        let mut parts = Vec::new();
        for e in tree.list_dir(&dir).await? {
            let Some(n) = e.name.strip_prefix("part-").and_then(|n| n.parse::<i32>().ok()) else { continue };
            let path = format!("{dir}\\{}", e.name);
            if e.ea_size > 0 && e.times.end_of_file == 0 {
                // Possibly a record of a part in the data file.
                if let Some(rec) = read_part_record(&tree, &path).await? {
                    parts.push(PartInfo {
                        number: n,
                        size: rec.size,
                        etag: rec.etag,
                        last_modified: e.times.last_write,
                        data_offset: Some(rec.offset),
                    });
                    continue;
                }
            }
            let req = smb_client::tree::read_open(&path, &[]);
            let (c, meta, _) = match open_with_meta(&tree, &req, None, true).await {
                Ok(r) => r,
                Err(err) if is_not_found(&err) => continue,
                Err(err) => return Err(err.into()),
            };
            let Some(meta) = meta else { continue };
            parts.push(PartInfo {
                number: n,
                size: c.times.end_of_file,
                etag: meta.etag,
                last_modified: c.times.last_write,
                data_offset: None,
            });
        }
        parts.sort_by_key(|p| p.number);
        Ok(parts)
    }

    /// Checks a CompleteMultipartUpload request without changing anything:
    /// returns the upload record, the chosen parts and the final ETag.
    ///
    /// Errors: NoSuchUpload, InvalidPart, InvalidPartOrder, EntityTooSmall.
    pub async fn plan_complete(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        requested: &[(i32, String)],
    ) -> StoreResult<(UploadRecord, Vec<PartInfo>, String)> {
        let rec = self.check_upload(bucket, key, id).await?;
        if requested.is_empty() {
            return Err(StoreError::InvalidArgument("you must specify at least one part".into()));
        }
        if requested.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(StoreError::InvalidPartOrder);
        }
        let stored: BTreeMap<i32, PartInfo> =
            self.list_parts(bucket, key, id).await?.into_iter().map(|p| (p.number, p)).collect();
        let mut chosen = Vec::with_capacity(requested.len());
        for (i, (n, etag)) in requested.iter().enumerate() {
            let Some(p) = stored.get(n) else {
                return Err(StoreError::InvalidPart(format!("part {n} was not uploaded")));
            };
            if etag.trim().trim_matches('"') != p.etag {
                return Err(StoreError::InvalidPart(format!("part {n} has ETag {}, not {etag}", p.etag)));
            }
            if i + 1 < requested.len() && p.size < MIN_PART_SIZE {
                return Err(StoreError::EntityTooSmall);
            }
            chosen.push(p.clone());
        }
        let mut md5 = Md5::new();
        for p in &chosen {
            md5.update(hex::decode(&p.etag).unwrap_or_default());
        }
        let etag = format!("{}-{}", hex::encode(md5.finalize()), chosen.len());
        // Conflicts with existing names are found now, not after the
        // response has started.
        let tree = self.tree().await?;
        self.preflight(&tree, bucket, &map_key(key)?).await?;
        Ok((rec, chosen, etag))
    }

    /// CompleteMultipartUpload: checks the requested parts, concatenates
    /// them server-side, publishes the object and removes the upload.
    /// `requested` is `(part number, ETag)` in request order.
    ///
    /// Errors: NoSuchUpload, InvalidPart, InvalidPartOrder, EntityTooSmall,
    /// and publish errors.
    pub async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        requested: &[(i32, String)],
    ) -> StoreResult<PutResult> {
        let (rec, chosen, etag) = self.plan_complete(bucket, key, id, requested).await?;
        let mapped = map_key(key)?;
        let tree = self.tree().await?;
        let temp = self.temp_path();
        let create = super::object::temp_create(&temp);
        // The completed object's record: the upload's metadata, the
        // multipart ETag and the part sizes (for partNumber GETs).
        let final_meta = |size: u64, disk_id: Option<u64>| ObjectMeta {
            etag: etag.clone(),
            size,
            disk_id,
            parts: chosen.iter().map(|p| p.size).collect(),
            key: Some(key.to_string()),
            checksums: BTreeMap::new(),
            ..rec.meta.clone()
        };
        // In place when the parts are 1..N of one size (the last no larger):
        // parts stored apart (e.g. a small last part that came first) are
        // copied into the data file at their offset; then Complete is a
        // truncate and a rename.
        let stride = chosen[0].size;
        let in_place = stride > 0
            && chosen.iter().enumerate().all(|(i, p)| {
                p.number == i as i32 + 1
                    && (if i + 1 == chosen.len() { p.size <= stride } else { p.size == stride })
                    && p.data_offset.is_none_or(|o| o == i as u64 * stride)
            });
        if in_place {
            let size: u64 = chosen.iter().map(|p| p.size).sum();
            let data_path = self.data_path(id);
            let open = CreateRequest {
                name: &data_path,
                desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
                share_access: share::READ | share::DELETE,
                disposition: Disposition::OpenIf,
                ..create
            };
            let d = tree.create(&open).await?;
            let r: StoreResult<()> = async {
                for (i, p) in chosen.iter().enumerate() {
                    if p.data_offset.is_none() && p.size > 0 {
                        let f = tree.open_read(&self.part_path(id, p.number)).await?;
                        let r = tree.copy_chunks(f.file_id, 0, d.file_id, i as u64 * stride, p.size).await;
                        let _ = tree.close(f.file_id).await;
                        if r? != p.size {
                            return Err(StoreError::Busy(format!("part {} copy was short", p.number)));
                        }
                    }
                }
                tree.set_info(d.file_id, SetFileInfo::EndOfFile(size)).await?;
                let ea = [final_meta(size, d.on_disk_id()).to_ea()];
                tree.set_info(d.file_id, SetFileInfo::FullEa(&ea)).await?;
                self.publish(
                    &tree,
                    d.file_id,
                    &data_path,
                    &Target::Object { bucket: bucket.into(), key: mapped.clone() },
                )
                .await
            }
            .await;
            let _ = tree.close(d.file_id).await;
            r?;
            self.remove_upload(id).await?;
            return Ok(PutResult { etag, checksums: BTreeMap::new(), size, last_modified: None });
        }
        let created = tree.create(&create).await?;
        let fid = created.file_id;
        let guard = super::object::TempGuard::new(self, &tree, fid, &temp);
        let result: StoreResult<u64> = async {
            let mut off = 0u64;
            for p in &chosen {
                if p.size > 0 {
                    let (src, src_off) = match p.data_offset {
                        Some(o) => (self.data_path(id), o),
                        None => (self.part_path(id, p.number), 0),
                    };
                    let f = tree.open_read(&src).await?;
                    let r = tree.copy_chunks(f.file_id, src_off, fid, off, p.size).await;
                    let _ = tree.close(f.file_id).await;
                    if r? != p.size {
                        return Err(StoreError::Busy(format!("part {} copy was short", p.number)));
                    }
                }
                off += p.size;
            }
            let t = tree.query_times(fid).await?;
            if t.end_of_file != off {
                return Err(StoreError::Busy("assembled object has the wrong size".into()));
            }
            let ea = [final_meta(off, created.on_disk_id()).to_ea()];
            tree.set_info(fid, SetFileInfo::FullEa(&ea)).await?;
            self.publish(&tree, fid, &temp, &Target::Object { bucket: bucket.into(), key: mapped.clone() }).await?;
            Ok(off)
        }
        .await;
        match result {
            Ok(size) => {
                guard.keep().await;
                self.remove_upload(id).await?;
                Ok(PutResult { etag, checksums: BTreeMap::new(), size, last_modified: None })
            }
            Err(e) => {
                guard.discard().await;
                Err(e)
            }
        }
    }

    /// AbortMultipartUpload.
    ///
    /// Errors: NoSuchUpload.
    pub async fn abort_upload(&self, bucket: &str, key: &str, id: &str) -> StoreResult<()> {
        self.check_upload(bucket, key, id).await?;
        self.remove_upload(id).await
    }

    async fn remove_upload(&self, id: &str) -> StoreResult<()> {
        let tree = self.tree().await?;
        let dir = self.upload_dir(id);
        for e in tree.list_dir(&dir).await? {
            let _ = tree.delete(&format!("{dir}\\{}", e.name), false).await;
        }
        match tree.delete(&dir, true).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// ListMultipartUploads for a bucket, ordered by key then initiation.
    pub async fn list_uploads(&self, bucket: &str, prefix: &str) -> StoreResult<Vec<UploadInfo>> {
        let tree = self.tree().await?;
        self.check_bucket(&tree, bucket).await?;
        let mut out = Vec::new();
        for e in tree.list_dir(&self.path(&format!("{INTERNAL}\\uploads"))).await? {
            if !valid_upload_id(&e.name) {
                continue;
            }
            match self.upload_record(&e.name).await {
                Ok(rec) if rec.bucket == bucket && rec.key.starts_with(prefix) => {
                    out.push(UploadInfo { upload_id: e.name, record: rec })
                }
                _ => {}
            }
        }
        out.sort_by(|a, b| (&a.record.key, a.record.initiated).cmp(&(&b.record.key, b.record.initiated)));
        Ok(out)
    }
}

/// Reads the `smbgate.part` record of a part in the data file, if the file
/// carries one.
/// CREATE of a file in an upload's directory for reading and writing,
/// shared with every other open (parts are written over several
/// connections).
fn upload_file(name: &str, disposition: Disposition) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_WRITE | access::GENERIC_READ,
        file_attributes: smb_proto::create::attributes::NORMAL,
        share_access: share::ALL,
        disposition,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

async fn read_part_record(tree: &smb_client::Tree, path: &str) -> StoreResult<Option<PartRecord>> {
    let f = match tree.open_read(path).await {
        Ok(f) => f,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let eas = tree.query_eas(f.file_id, &[PART_EA]).await;
    let _ = tree.close(f.file_id).await;
    Ok(eas?.iter().find(|e| e.name.eq_ignore_ascii_case(PART_EA)).and_then(|e| serde_json::from_slice(&e.value).ok()))
}
