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
use std::future::Future;

use crate::store::share::FullEa;
use crate::store::share::Tree;
use bytes::Bytes;
use futures::Stream;
use serde::{Deserialize, Serialize};

use super::part_checksums::UploadChecksum;
use super::removal::remove_upload_on;
use crate::store::checksum::Algorithm;
use crate::store::keys::map_key;
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::share::is_not_found;
use crate::store::share::Failure;
use crate::store::share::TempFile;
use crate::store::share_data::ShareData;
use crate::store::share_ops::ShareOps;
use crate::store::sse_c::{CustomerKey, SseCRecord};
use crate::store::types::{ObjectInfo, PutRequest, PutResult, Target};
use crate::store::verify::verified_meta;
use crate::store::writes::copy::CopyRequest;
use crate::store::writes::spread::SpreadWriter;
use crate::store::{StoreError, StoreResult, Uploads};

/// Minimum size of every part but the last (S3: 5 MiB).
pub const MIN_PART_SIZE: u64 = 5 << 20;
/// Highest part number S3 allows.
pub const MAX_PART_NUMBER: i32 = 10_000;
/// Largest part (and single PUT) S3 allows, in bytes: 5 GiB. With at most
/// [`MAX_PART_NUMBER`] parts, every offset in the data file fits in a u64
/// many times over.
pub const MAX_PART_SIZE: u64 = 5 << 30;

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
    /// The checksum the upload was created with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<UploadChecksum>,
    /// For an upload created with an SSE-C key: the key's MD5 and the salt
    /// every part is sealed under (`store::sse_c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_c: Option<SseCRecord>,
}

/// A stored part.
#[derive(Debug, Clone, Default)]
pub struct PartInfo {
    /// Where the part's bytes are in the upload's `data` file, if there.
    pub data_offset: Option<u64>,
    /// Part number (1..=10000).
    pub number: i32,
    /// Size in bytes.
    pub size: u64,
    /// Bytes of its file: `size`, or more for a part sealed with an SSE-C
    /// key (its packages' tags).
    pub stored: u64,
    /// The salt a part sealed with an SSE-C key was sealed under.
    pub salt: Option<String>,
    /// ETag (MD5 hex).
    pub etag: String,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
    /// The on-disk id of a part's own file (`None` in the data file, or
    /// where the share gives none).
    pub disk_id: Option<u64>,
    /// The checksums computed of the part (base64, by algorithm).
    pub checksums: BTreeMap<Algorithm, String>,
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
pub(crate) const PART_EA: &str = "smbgate.part";

/// The record of a part written into the `data` file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PartRecord {
    pub(crate) etag: String,
    pub(crate) size: u64,
    pub(crate) offset: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) checksums: BTreeMap<Algorithm, String>,
}

/// The part number part `n` of `upload` is sealed under, given the SSE-C
/// key the request brought: `None` for an upload without one.
///
/// Errors: InvalidRequest for a key to an upload without one, or none to
/// an upload with one; InvalidArgument for another key than the upload's.
fn part_sealing(upload: &UploadRecord, key: Option<&CustomerKey>, n: i32) -> StoreResult<Option<u32>> {
    match (&upload.sse_c, key) {
        (None, None) => Ok(None),
        (None, Some(_)) => {
            Err(StoreError::InvalidRequest("The encryption parameters are not applicable to this upload.".into()))
        }
        (Some(_), None) => Err(StoreError::InvalidRequest(
            "The multipart upload initiate requested encryption. Subsequent part requests must include the \
             appropriate encryption parameters."
                .into(),
        )),
        (Some(r), Some(k)) if r.key_md5 == k.key_md5() => Ok(Some(n as u32)),
        (Some(_), Some(_)) => Err(StoreError::InvalidArgument(
            "The provided encryption parameters did not match the ones used originally.".into(),
        )),
    }
}

pub(crate) fn valid_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Uploads {
    pub(crate) fn upload_dir(&self, id: &str) -> SharePath {
        self.root.internal("uploads").join(id)
    }

    /// The file that in-place parts are written into.
    pub(crate) fn data_path(&self, id: &str) -> SharePath {
        self.upload_dir(id).join("data")
    }

    pub(crate) fn part_path(&self, id: &str, n: i32) -> SharePath {
        self.upload_dir(id).join(&format!("part-{n:05}"))
    }

    /// Checks that `id` is an upload for `bucket`/`key`.
    pub(crate) async fn check_upload(&self, bucket: &str, key: &str, id: &str) -> StoreResult<UploadRecord> {
        let rec = self.upload_record(id).await?;
        if rec.bucket != bucket || rec.key != key {
            return Err(StoreError::NoSuchUpload);
        }
        Ok(rec)
    }

    /// Claims part `n` for the data file by creating its record (empty,
    /// without the record EA, so listings skip it until it is filled).
    /// Returns the open record, or `None` if part `n` already has a record
    /// (an earlier or concurrent upload): the bytes of that upload may be in
    /// the data file, so this one must not write there. The claim deletes
    /// itself unless it is kept (filled), also when the request is dropped.
    ///
    /// Errors: NoSuchUpload.
    async fn claim_part(&self, tree: &Tree, id: &str, n: i32) -> StoreResult<Option<TempFile>> {
        let record = self.part_path(id, n);
        match self.root.live(tree).create_claim(&record).await {
            Ok(c) => Ok(Some(TempFile::with_shared_name(self.root.pool(), c, &record))),
            Err(e) if e.failure() == Failure::Collision => Ok(None),
            Err(e) if is_not_found(&e) => Err(StoreError::NoSuchUpload),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes part `n` into the data file at (n-1) x stride, then fills its
    /// claimed record (see [`Uploads::claim_part`]); on failure the claim is
    /// deleted, so the part reads as not uploaded, never torn.
    #[allow(clippy::too_many_arguments)]
    async fn upload_part_in_place<S, E>(
        &self,
        tree: &Tree,
        id: &str,
        n: i32,
        len: u64,
        stride: u64,
        mut claim: TempFile,
        mut body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<crate::store::checksum::Algorithm, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let data_path = self.data_path(id);
        let f = match self.root.live(tree).open_upload_file(&data_path).await {
            Ok(f) => f,
            Err(e) => {
                claim.discard().await;
                return Err(if is_not_found(&e) { StoreError::NoSuchUpload } else { e.into() });
            }
        };
        // Bounded by MAX_PART_NUMBER x MAX_PART_SIZE; checked all the same,
        // since a wrapped offset would land on another part's bytes.
        let Some(offset) = (n as u64 - 1).checked_mul(stride).filter(|o| o.checked_add(len).is_some()) else {
            claim.discard().await;
            return Err(StoreError::InvalidArgument(format!("part {n} of {len} bytes does not fit the upload")));
        };
        let result: StoreResult<(PutResult, PartRecord)> = async {
            let writer = SpreadWriter::new(&self.writes, &f, &data_path, offset);
            let (md5, sums, size, _reopened) =
                self.writes.stream_body(writer, &mut body, &req, Some(len), None).await?;
            let meta = verified_meta(&req, md5, sums, size, trailer)?;
            let rec = PartRecord { etag: meta.etag.clone(), size, offset, checksums: meta.checksums.clone() };
            let result =
                PutResult { etag: meta.etag, checksums: meta.checksums, size, last_modified: None, version_id: None };
            Ok((result, rec))
        }
        .await;
        drop(f);
        let filled = match result {
            Err(e) => Err(e),
            Ok((put, rec)) => {
                let ea = [FullEa { name: PART_EA.into(), value: serde_json::to_vec(&rec).expect("serialisable") }];
                // The claim shares the data file's connection: after a loss
                // the part's bytes are in, so reopen the claim to record them.
                let revived = claim.revive(None).await;
                match revived.and(self.root.live(tree).set_records(claim.handle(), claim.path(), &ea).await) {
                    Ok(()) => Ok(put),
                    // A concurrent upload of this part published its own file
                    // over the claim (Samba allows that while the claim is
                    // open with share-delete): that one is the part now.
                    Err(e) if is_not_found(&e) || e.failure() == Failure::AccessDenied => {
                        Err(StoreError::Busy("a concurrent upload of this part replaced it; retry the request".into()))
                    }
                    Err(e) => Err(e.into()),
                }
            }
        };
        // Filled: the record stays. Failed: the claim is deleted, so the
        // part reads as not uploaded, never torn.
        match &filled {
            Ok(_) => {
                claim.keep().await;
            }
            Err(_) => claim.discard().await,
        }
        filled
    }

    /// Removes the upload `id`'s folder and files in the upload's turn
    /// ([`Uploads::in_turn`]); done if it is gone already.
    ///
    /// Errors: Busy (503) while a part upload still writes into it, or a
    /// complete of it holds the turn; the share's failures.
    pub(crate) async fn remove_upload(&self, id: &str) -> StoreResult<()> {
        self.in_turn(id, self.remove_upload_files(id)).await
    }

    /// Runs `work` in the upload `id`'s turn and returns what it answers.
    /// CompleteMultipartUpload, AbortMultipartUpload and the sweep of one
    /// upload take turns (the creation lock of its folder), so that an
    /// abort never removes the parts a complete is joining (it published
    /// an object of zeros, or one cut short) and a complete never publishes
    /// an aborted upload. Waited for as a key's creation lock is (10 s).
    ///
    /// Errors: Busy (503) after the wait; the share's failures; `work`'s.
    pub(crate) async fn in_turn<T>(&self, id: &str, work: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let tree = self.root.tree().await?;
        let turn = self.root.create_lock(&tree, &self.upload_dir(id)).await?;
        let done = work.await;
        turn.release().await;
        done
    }

    /// [`Uploads::remove_upload`] for a caller in the upload's turn.
    pub(crate) async fn remove_upload_files(&self, id: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        let dir = self.upload_dir(id);
        // Sidecars are found by id, which only an open or a listing tells:
        // the directory's own record may have spilled to one on any share.
        let live = self.root.live(&tree);
        let dir_key = live.open_read(&dir).await.ok().and_then(|h| live.record_key(&h));
        remove_upload_on(&live, &dir).await?;
        self.root.records().forget_any(&tree, dir_key);
        Ok(())
    }
}

/// The record named `name` of the file or directory at `path` on `s`,
/// decoded; `None` if nothing is there or it carries no such record (or
/// one that does not decode).
///
/// Errors: SMB failures other than a missing name.
pub(in crate::store) async fn read_named_record<T: serde::de::DeserializeOwned>(
    s: &impl ShareData,
    path: &str,
    name: &str,
) -> StoreResult<Option<T>> {
    let f = match s.open_read(path).await {
        Ok(f) => f,
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let records = s.query_records(&f, path, &[name]).await;
    drop(f);
    Ok(records?.iter().find(|e| e.name.eq_ignore_ascii_case(name)).and_then(|e| serde_json::from_slice(&e.value).ok()))
}

impl Uploads {
    /// CreateMultipartUpload: a new upload directory with its record (the
    /// object's metadata, the `checksum` its parts and the object get, if
    /// any, see `store::part_checksums`, and the SSE-C key `sse_c` its
    /// parts are sealed with, if any). Returns the UploadId.
    ///
    /// Errors: NoSuchBucket, InvalidKey.
    pub async fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        meta: ObjectMeta,
        checksum: Option<UploadChecksum>,
        sse_c: Option<&CustomerKey>,
    ) -> StoreResult<String> {
        map_key(key)?;
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let id = format!("{:032x}", rand::random::<u128>());
        let rec = UploadRecord {
            bucket: bucket.into(),
            key: key.into(),
            meta,
            checksum,
            sse_c: sse_c.map(SseCRecord::for_upload),
            initiated: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
        };
        let ea = [FullEa { name: UPLOAD_EA.into(), value: serde_json::to_vec(&rec).expect("serialisable") }];
        self.root.live(&tree).create_dir_with_records(&self.upload_dir(&id), &ea).await?;
        Ok(id)
    }

    /// Reads an upload's record.
    ///
    /// Errors: NoSuchUpload.
    pub async fn upload_record(&self, id: &str) -> StoreResult<UploadRecord> {
        if !valid_upload_id(id) {
            return Err(StoreError::NoSuchUpload);
        }
        let tree = self.root.tree().await?;
        let dir = self.upload_dir(id);
        read_named_record(&self.root.live(&tree), &dir, UPLOAD_EA).await?.ok_or(StoreError::NoSuchUpload)
    }

    /// Fails with NoSuchUpload (or NoSuchBucket) unless upload `id` of
    /// `key` exists; changes nothing.
    pub async fn upload_exists(&self, bucket: &str, key: &str, id: &str) -> StoreResult<()> {
        self.check_upload(bucket, key, id).await.map(|_| ())
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
        mut req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<crate::store::checksum::Algorithm, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        if !(1..=MAX_PART_NUMBER).contains(&n) {
            return Err(StoreError::InvalidArgument("part number must be an integer between 1 and 10000".into()));
        }
        let upload = self.check_upload(bucket, key, id).await?;
        req.sse_c_part = part_sealing(&upload, req.sse_c.as_ref(), n)?;
        // Every part of an upload with a checksum gets one of its
        // algorithm, sent by the client or not.
        if let Some(c) = upload.checksum.filter(|c| !req.checksum_algorithms.contains(&c.algorithm)) {
            req.checksum_algorithms.push(c.algorithm);
        }
        let tree = self.root.tree().await?;
        if req.content_length.is_some_and(|l| l > MAX_PART_SIZE) {
            return Err(StoreError::EntityTooLarge);
        }
        crate::store::verify::check_content_md5(req.content_md5.as_deref())?;
        // A sealed part is a file of its own: the data file's stride is in
        // the parts' own bytes.
        if let Some(len) = req.content_length.filter(|&l| l > 0 && req.sse_c.is_none()) {
            let stride_file = self.upload_dir(id).join("stride");
            let may_fix = len >= MIN_PART_SIZE;
            if let Some(stride) = super::stride::stride(&self.root.live(&tree), &stride_file, len, may_fix).await? {
                // A stride over the part limit (a damaged or foreign stride
                // file) is never used for offsets.
                if len <= stride && stride <= MAX_PART_SIZE {
                    if let Some(claim) = self.claim_part(&tree, id, n).await? {
                        return self.upload_part_in_place(&tree, id, n, len, stride, claim, body, req, trailer).await;
                    }
                }
            }
        }
        // The part is a file of its own, published by a rename over the
        // part's record: an earlier upload of this number stays valid until
        // this one is verified and replaces it.
        self.writes.put_to(&tree, Target::Part(self.part_path(id, n).to_string()), body, req, trailer).await
    }

    /// UploadPartCopy: part `n` from a (range of a) source object, or of
    /// its version `src_version`; `(source_key, key)` are the SSE-C keys
    /// the request brought for the source and for the upload.
    ///
    /// Errors: NoSuchUpload, NoSuchKey, NoSuchVersion, InvalidRange,
    /// PreconditionFailed; a key missing, wrong or not applicable (as for
    /// GET and UploadPart).
    #[allow(clippy::too_many_arguments)]
    pub async fn upload_part_copy(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        n: i32,
        (src_bucket, src_key, src_version): (&str, &str, Option<String>),
        src_range: Option<std::ops::Range<u64>>,
        (source_key, sse_c): (Option<CustomerKey>, Option<CustomerKey>),
        check: impl FnOnce(&ObjectInfo) -> StoreResult<()>,
    ) -> StoreResult<(ObjectInfo, PutResult)> {
        if !(1..=MAX_PART_NUMBER).contains(&n) {
            return Err(StoreError::InvalidArgument("part number must be an integer between 1 and 10000".into()));
        }
        let upload = self.check_upload(bucket, key, id).await?;
        let sse_c_part = part_sealing(&upload, sse_c.as_ref(), n)?;
        let target = Target::Part(self.part_path(id, n).to_string());
        let req = CopyRequest {
            replace: Some(ObjectMeta::default()),
            tags: Some(Vec::new()),
            range: src_range,
            checksums: upload.checksum.map(|c| c.algorithm).into_iter().collect(),
            source_version: src_version,
            source_sse_c: source_key,
            sse_c,
            sse_c_part,
            ..Default::default()
        };
        self.writes.copy_object(src_bucket, src_key, target, req, check).await
    }

    /// The record of an upload and its stored parts, by part number.
    ///
    /// Errors: NoSuchUpload.
    pub async fn list_parts(&self, bucket: &str, key: &str, id: &str) -> StoreResult<(UploadRecord, Vec<PartInfo>)> {
        let upload = self.check_upload(bucket, key, id).await?;
        let tree = self.root.tree().await?;
        let dir = self.upload_dir(id);
        let mut parts = Vec::new();
        for e in self.root.live(&tree).list_dir(dir.as_str()).await? {
            let Some(n) = e.name.strip_prefix("part-").and_then(|n| n.parse::<i32>().ok()) else { continue };
            let path = dir.join(&e.name);
            if (e.ea_size > 0 || !self.root.records().shown_in_listings()) && e.times.end_of_file == 0 {
                // Possibly a record of a part in the data file.
                if let Some(rec) = read_named_record::<PartRecord>(&self.root.live(&tree), &path, PART_EA).await? {
                    parts.push(PartInfo {
                        number: n,
                        size: rec.size,
                        stored: rec.size,
                        salt: None,
                        etag: rec.etag,
                        last_modified: e.times.last_write,
                        disk_id: None,
                        data_offset: Some(rec.offset),
                        checksums: rec.checksums,
                    });
                    continue;
                }
            }
            let (c, meta) = match self.root.live(&tree).stat_with_meta(path.as_str(), false).await {
                Ok(r) => r,
                Err(err) if is_not_found(&err) => continue,
                Err(err) => return Err(err.into()),
            };
            let Some(meta) = meta else { continue };
            parts.push(PartInfo {
                number: n,
                size: meta.sse_c.as_ref().map_or(c.times.end_of_file, |e| e.size),
                stored: c.times.end_of_file,
                salt: meta.sse_c.as_ref().map(|e| e.salt.clone()),
                etag: meta.etag,
                last_modified: c.times.last_write,
                disk_id: c.on_disk_id(),
                data_offset: None,
                checksums: meta.checksums,
            });
        }
        parts.sort_by_key(|p| p.number);
        Ok((upload, parts))
    }

    /// AbortMultipartUpload.
    ///
    /// Errors: NoSuchUpload.
    pub async fn abort_upload(&self, bucket: &str, key: &str, id: &str) -> StoreResult<()> {
        self.check_upload(bucket, key, id).await?;
        // Looked at again in the turn: a complete before it took the upload.
        let remove = async {
            self.check_upload(bucket, key, id).await?;
            self.remove_upload_files(id).await
        };
        self.in_turn(id, remove).await
    }
}
