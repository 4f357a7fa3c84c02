//! Multipart uploads, with all state on the share so that any gateway
//! instance can continue any upload: `.smbgate\uploads\<UploadId>\` holds
//! the upload record (an EA on the directory) and one file per part.
//! CompleteMultipartUpload concatenates the parts server-side with
//! COPYCHUNK into a temporary file and publishes it like a PUT.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::Stream;
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use smb_proto::create::{access, options, share, CreateRequest, Disposition};
use smb_proto::info::{FullEa, SetFileInfo};

use super::error::is_not_found;
use super::keys::map_key;
use super::meta::ObjectMeta;
use super::object::{PutRequest, PutResult, Target};
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

fn valid_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Store {
    fn upload_dir(&self, id: &str) -> String {
        self.path(&format!("{INTERNAL}\\uploads\\{id}"))
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
        self.put_to(&tree, Target::Part(self.part_path(id, n)), body, req, trailer).await
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
        let create = CreateRequest {
            name: &temp,
            oplock_level: 0,
            desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
            file_attributes: smb_proto::create::attributes::NORMAL,
            share_access: share::READ,
            disposition: Disposition::Create,
            options: options::NON_DIRECTORY_FILE,
            contexts: &[smb_proto::create::CreateContext::QueryOnDiskId],
        };
        let created = tree.create(&create).await?;
        let fid = created.file_id;
        let result: StoreResult<u64> = async {
            let mut off = 0u64;
            for p in &chosen {
                if p.size > 0 {
                    let f = tree.open_read(&self.part_path(id, p.number)).await?;
                    let r = tree.copy_chunks(f.file_id, 0, fid, off, p.size).await;
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
            let mut meta = rec.meta.clone();
            meta.etag = etag.clone();
            meta.size = off;
            meta.disk_id = created.on_disk_id();
            meta.parts = chosen.iter().map(|p| p.size).collect();
            meta.key = Some(key.to_string());
            meta.checksums.clear();
            let ea = [meta.to_ea()];
            tree.set_info(fid, SetFileInfo::FullEa(&ea)).await?;
            self.publish(&tree, fid, &Target::Object { bucket: bucket.into(), key: mapped.clone() }).await?;
            Ok(off)
        }
        .await;
        match result {
            Ok(size) => {
                let _ = tree.close(fid).await;
                self.remove_upload(id).await?;
                Ok(PutResult { etag, checksums: BTreeMap::new(), size })
            }
            Err(e) => {
                let _ = tree.set_info(fid, SetFileInfo::Disposition { delete_pending: true }).await;
                let _ = tree.close(fid).await;
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
