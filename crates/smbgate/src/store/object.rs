//! Objects: PUT (stream to a temporary file, verify, set metadata, rename
//! over the target), GET/HEAD (one compound for the open and the metadata),
//! DELETE and server-side COPY.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use smb_client::Tree;
use smb_proto::create::{
    access, attributes, options, share, CreateContext, CreateRequest, CreateResponse, Disposition, FileId,
};
use smb_proto::info::SetFileInfo;
use smb_proto::NtStatus;

use super::error::{is_bad_path, is_not_found};
use super::keys::{map_key, MappedKey};
use super::meta::{derived_etag, ObjectMeta};
use super::spread::SpreadWriter;
use super::{open_with_meta, retry_sharing, Opened, Store, StoreError, StoreResult};

/// What a client sent with a PUT, besides the body.
#[derive(Debug, Default, Clone)]
pub struct PutRequest {
    /// Content-* headers and user metadata to store (etag/size are filled in).
    pub meta: ObjectMeta,
    /// Content-MD5 (base64) to verify.
    pub content_md5: Option<String>,
    /// Expected checksums by algorithm (`CRC32`, `CRC32C`, `CRC64NVME`,
    /// `SHA1`, `SHA256`), base64, from headers.
    pub checksums: BTreeMap<String, String>,
    /// Algorithms to compute and store even if no value came in a header
    /// (x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm, or one
    /// that arrives in a trailer).
    pub checksum_algorithms: Vec<String>,
    /// Content-Length in bytes, if declared.
    pub content_length: Option<u64>,
    /// If-Match: the current ETag must equal this.
    pub if_match: Option<String>,
    /// If-None-Match: `*` (no object may exist).
    pub if_none_match: bool,
}

impl PutRequest {
    /// Every checksum algorithm to compute for this body.
    pub fn algorithms(&self) -> Vec<String> {
        self.checksums.keys().chain(&self.checksum_algorithms).cloned().collect()
    }
}

/// Where a verified temporary file is published.
#[derive(Debug, Clone)]
pub enum Target {
    /// An object key in a bucket (parents created as needed).
    Object {
        /// Bucket name.
        bucket: String,
        /// The mapped key.
        key: MappedKey,
    },
    /// A share-relative path whose parent must already exist (multipart
    /// parts); a missing parent means the upload is gone.
    Part(String),
}

impl Target {
    /// The S3 key of an object target.
    pub fn key(&self) -> Option<String> {
        match self {
            Target::Object { key, .. } => Some(original_key(key)),
            Target::Part(_) => None,
        }
    }
}

/// The S3 key a mapped key came from.
pub fn original_key(m: &MappedKey) -> String {
    let comps: Vec<&str> = m.components.iter().map(String::as_str).collect();
    super::keys::key_from_components(&comps, m.dir_marker)
}

/// Checks the record's key against the requested one: `Err(NoSuchKey)` if
/// the open landed on a case-variant of the key (case-insensitive share),
/// and drops a record written for another key (file renamed by someone
/// else: treat it as foreign).
fn check_record_key(meta: Option<ObjectMeta>, key: &str) -> StoreResult<Option<ObjectMeta>> {
    match meta {
        Some(m) => match m.key.as_deref() {
            None => Ok(Some(m)),
            Some(k) if k == key => Ok(Some(m)),
            Some(k) if k.to_lowercase() == key.to_lowercase() => Err(StoreError::NoSuchKey),
            Some(_) => Ok(None),
        },
        None => Ok(None),
    }
}

/// What a successful PUT stored.
#[derive(Debug, Clone)]
pub struct PutResult {
    /// ETag value (unquoted).
    pub etag: String,
    /// Checksums stored, by algorithm.
    pub checksums: BTreeMap<String, String>,
    /// Bytes stored.
    pub size: u64,
    /// LastWriteTime of the new object (FILETIME), where the write learnt it.
    pub last_modified: Option<u64>,
}

/// An object's externally visible state.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    /// Size in bytes.
    pub size: u64,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
    /// ETag value (unquoted).
    pub etag: String,
    /// Stored metadata (default for foreign files).
    pub meta: ObjectMeta,
    /// Share-relative path of the file.
    pub path: String,
    /// The server's on-disk file id (QFid context), if it reports one: a
    /// file renamed over the key has another, even at the same size and
    /// LastWriteTime.
    pub disk_id: Option<u64>,
}

/// Converts a FILETIME (100 ns since 1601) to Unix seconds and nanoseconds.
pub fn filetime_to_unix(ft: u64) -> (i64, u32) {
    let t = ft as i128 - 116_444_736_000_000_000;
    let secs = t.div_euclid(10_000_000) as i64;
    let nanos = (t.rem_euclid(10_000_000) * 100) as u32;
    (secs, nanos)
}

/// Incremental checksums for the algorithms S3 defines.
pub struct Checksums {
    inner: s3s::checksum::ChecksumHasher,
}

impl Checksums {
    /// Hashers for `algs` (unknown names are ignored).
    pub fn new(algs: &[String]) -> Checksums {
        use s3s::crypto::Checksum as _;
        let mut h = s3s::checksum::ChecksumHasher::default();
        for a in algs {
            match a.to_ascii_uppercase().as_str() {
                "CRC32" => h.crc32 = Some(s3s::crypto::Crc32::new()),
                "CRC32C" => h.crc32c = Some(s3s::crypto::Crc32c::new()),
                "CRC64NVME" => h.crc64nvme = Some(s3s::crypto::Crc64Nvme::new()),
                "SHA1" => h.sha1 = Some(s3s::crypto::Sha1::new()),
                "SHA256" => h.sha256 = Some(s3s::crypto::Sha256::new()),
                _ => {}
            }
        }
        Checksums { inner: h }
    }

    /// Feeds bytes.
    pub fn update(&mut self, b: &[u8]) {
        self.inner.update(b);
    }

    /// Final values, base64, by algorithm name.
    pub fn finish(self) -> BTreeMap<String, String> {
        let c = self.inner.finalize();
        let mut m = BTreeMap::new();
        for (k, v) in [
            ("CRC32", c.checksum_crc32),
            ("CRC32C", c.checksum_crc32c),
            ("CRC64NVME", c.checksum_crc64nvme),
            ("SHA1", c.checksum_sha1),
            ("SHA256", c.checksum_sha256),
        ] {
            if let Some(v) = v {
                m.insert(k.to_string(), v);
            }
        }
        m
    }
}

/// Deletes an unpublished temporary file unless disarmed, also when the
/// request future is dropped (client gone).
pub(crate) struct TempGuard {
    tree: Tree,
    file_id: FileId,
    /// The temp file's path, to delete it over another connection when
    /// its own connection died (the likeliest reason the request failed).
    path: String,
    pool: smb_client::Pool,
    armed: bool,
}

impl TempGuard {
    pub(crate) fn new(store: &Store, tree: &Tree, file_id: FileId, path: &str) -> TempGuard {
        TempGuard { tree: tree.clone(), file_id, path: path.to_string(), pool: store.pool().clone(), armed: true }
    }

    /// The file was published (or is kept): closes the handle, leaving the
    /// file. Returns the CLOSE's post-query, if it succeeded.
    pub(crate) async fn keep(mut self) -> Option<smb_proto::create::CloseResponse> {
        self.armed = false;
        self.tree.close(self.file_id).await.ok()
    }

    /// Deletes the file (see [`discard_temp`]).
    pub(crate) async fn discard(mut self) {
        self.armed = false;
        discard_temp(self.tree.clone(), self.file_id, self.pool.clone(), std::mem::take(&mut self.path)).await;
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let (tree, pool, path) = (self.tree.clone(), self.pool.clone(), std::mem::take(&mut self.path));
                rt.spawn(discard_temp(tree, self.file_id, pool, path));
            }
        }
    }
}

/// Marks the temp file delete-on-close through its handle; if that
/// handle's connection is gone, deletes it by name over another pooled
/// connection (by name, so a temp file already renamed into place is never
/// touched).
async fn discard_temp(tree: Tree, file_id: FileId, pool: smb_client::Pool, path: String) {
    let r = tree.set_info(file_id, SetFileInfo::Disposition { delete_pending: true }).await;
    let _ = tree.close(file_id).await;
    if matches!(&r, Err(e) if e.is_connection_error()) {
        match pool.get().await {
            Ok(t) => {
                if let Err(e) = t.delete(&path, false).await {
                    tracing::debug!(error = %e, "temp file not deleted; the daily sweep will remove it");
                }
            }
            Err(e) => tracing::debug!(error = %e, "temp file not deleted; the daily sweep will remove it"),
        }
    }
}

pub(crate) fn temp_create(name: &str) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        // Share-delete, so that once renamed into place the still-open file
        // does not block the next writer's rename over it; share-write, so
        // that a large body can be written over several connections
        // (store::spread). Other instances' cleanup only removes temp files
        // a day old (BUG-CLASSES 16).
        share_access: share::ALL,
        disposition: Disposition::Create,
        options: options::NON_DIRECTORY_FILE,
        contexts: &TEMP_CONTEXTS,
    }
}

static TEMP_CONTEXTS: [CreateContext<'static>; 1] = [CreateContext::QueryOnDiskId];

pub(crate) fn read_create(name: &str) -> CreateRequest<'_> {
    // The QFid context makes derived ETags use the on-disk id.
    CreateRequest { contexts: &TEMP_CONTEXTS, ..smb_client::tree::read_open(name, &[]) }
}

impl Store {
    /// Opens `key` for reading: CREATE + metadata (+ the first READ of
    /// `read = (offset, length)`) in one round trip, the handle left open on
    /// its connection. A directory-marker key (`a/`)
    /// opens the directory and requires its marker record.
    ///
    /// Errors: NoSuchKey (also for a key naming a plain directory),
    /// NoSuchBucket, InvalidKey.
    pub async fn open_object(
        &self,
        bucket: &str,
        key: &str,
        read: Option<(u64, u32)>,
    ) -> StoreResult<(Opened, ObjectInfo, Option<Bytes>)> {
        let mapped = map_key(key)?;
        let path = self.object_path(bucket, &mapped);
        let tree = self.tree().await?;
        let req = read_create(&path);
        let res = retry_sharing(|| open_with_meta(&tree, &req, read, false)).await;
        let (create, meta, data) = match res {
            Ok((c, m, d)) => match check_record_key(m, key) {
                Ok(m) => (c, m, d),
                Err(e) => {
                    let _ = tree.close(c.file_id).await;
                    return Err(e);
                }
            },
            Err(e) if is_not_found(&e) => {
                self.check_bucket(&tree, bucket).await?;
                return Err(StoreError::NoSuchKey);
            }
            Err(e) => return Err(e.into()),
        };
        let opened = Opened { tree, file_id: create.file_id, create: create.clone(), meta: meta.clone() };
        let info = object_info(&create, meta, &path);
        let is_dir = create.times.is_directory();
        if is_dir != mapped.dir_marker || (is_dir && !info.meta.marker) {
            opened.close().await;
            return Err(StoreError::NoSuchKey);
        }
        Ok((opened, info, data))
    }

    /// HEAD: the object's info with CREATE + metadata + CLOSE in one round
    /// trip.
    ///
    /// Errors: as [`Store::open_object`].
    pub async fn head_object(&self, bucket: &str, key: &str) -> StoreResult<ObjectInfo> {
        let mapped = map_key(key)?;
        let path = self.object_path(bucket, &mapped);
        let tree = self.tree().await?;
        let req = read_create(&path);
        match retry_sharing(|| open_with_meta(&tree, &req, None, true)).await {
            Ok((create, meta, _)) => {
                let meta = check_record_key(meta, key)?;
                let info = object_info(&create, meta, &path);
                let is_dir = create.times.is_directory();
                if is_dir != mapped.dir_marker || (is_dir && !info.meta.marker) {
                    return Err(StoreError::NoSuchKey);
                }
                Ok(info)
            }
            Err(e) if is_not_found(&e) => {
                self.check_bucket(&tree, bucket).await?;
                Err(StoreError::NoSuchKey)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Streams `range` of an opened object. The handle is closed when the
    /// stream ends or is dropped. Large ranges are split into segments
    /// fetched ahead on other pooled connections (see `crate::stream`).
    /// `head`, if given, holds bytes already read from `range.start`.
    pub fn stream_object(
        &self,
        opened: Opened,
        info: &ObjectInfo,
        range: Range<u64>,
        head: Option<Bytes>,
    ) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + Sync + 'static {
        crate::stream::object_stream(self.clone(), opened, info.clone(), range, head)
    }

    /// PUT: streams `body` into a temporary file, verifies length, MD5 and
    /// checksums, stores the metadata EA and renames over the target.
    /// A failure at any step leaves the previous object untouched and
    /// removes the temporary file.
    ///
    /// Errors: BadDigest, IncompleteBody, PreconditionFailed, NoSuchBucket,
    /// NoSuchKey (If-Match on a missing key), Conflict, InvalidKey, Body.
    pub async fn put_object<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mapped = map_key(key)?;
        let tree = self.tree().await?;
        if mapped.dir_marker {
            return self.put_marker(&tree, bucket, &mapped, body, req).await;
        }
        self.put_to(&tree, Target::Object { bucket: bucket.to_string(), key: mapped }, body, req, trailer).await
    }

    /// Streams `body` into a temporary file, verifies it and publishes it
    /// at `target`; see [`Store::put_object`].
    pub async fn put_to<S, E>(
        &self,
        tree: &Tree,
        target: Target,
        body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let tree = tree.clone();
        let mut body = body;
        // Small bodies are buffered, verified before any SMB I/O, and
        // written with one compound.
        let mut prefix = Vec::new();
        let mut buffered = 0usize;
        let mut ended = false;
        while buffered <= SMALL_PUT {
            match body.next().await {
                Some(c) => {
                    let c = c.map_err(|e| StoreError::Body(e.to_string()))?;
                    buffered += c.len();
                    prefix.push(c);
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if ended && buffered <= tree.max_write() as usize {
            return self.put_small(&tree, &target, prefix, req, trailer).await;
        }
        // A large body: make sure it has somewhere to go before writing it
        // out (publish checks again; this only spares a wasted upload).
        if let Target::Object { bucket, .. } = &target {
            self.check_bucket(&tree, bucket).await?;
        }
        let body = futures::stream::iter(prefix.into_iter().map(Ok::<Bytes, E>)).chain(body);
        let temp = self.temp_path();
        let created = tree.create(&temp_create(&temp)).await?;
        let guard = TempGuard::new(self, &tree, created.file_id, &temp);
        match self.fill_and_publish(&tree, &target, &temp, &created, body, req, trailer).await {
            Ok(r) => {
                guard.keep().await;
                Ok(r)
            }
            Err(e) => {
                guard.discard().await;
                Err(e)
            }
        }
    }

    /// Streams `body` into `writer` (an open file, from some offset, spread
    /// over several connections once it passes one segment) while MD5 and
    /// the requested checksums are computed on a second core.
    /// Returns (MD5, checksums, bytes). A body longer than `limit` bytes
    /// stops with IncompleteBody.
    pub(crate) async fn stream_body<S, E>(
        &self,
        mut writer: SpreadWriter,
        body: &mut S,
        req: &PutRequest,
        limit: Option<u64>,
    ) -> StoreResult<([u8; 16], Checksums, u64)>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let hasher = HashWorker::start(Checksums::new(&req.algorithms()));
        let mut size = 0u64;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| StoreError::Body(e.to_string()))?;
            size += chunk.len() as u64;
            if limit.is_some_and(|l| size > l) {
                return Err(StoreError::IncompleteBody);
            }
            writer.write(&chunk).await?;
            hasher.feed(chunk).await;
        }
        if writer.finish().await? != size {
            return Err(StoreError::IncompleteBody);
        }
        let (md5, sums) = hasher.finish().await?;
        Ok((md5, sums, size))
    }

    /// The small-object PUT: checks first, then CREATE(temp, metadata in an
    /// ExtA context) + WRITE + SET_INFO(rename) + CLOSE in one compound.
    async fn put_small(
        &self,
        tree: &Tree,
        target: &Target,
        chunks: Vec<Bytes>,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult> {
        let data: Bytes = match chunks.len() {
            0 => Bytes::new(),
            1 => chunks.into_iter().next().expect("one"),
            _ => chunks.concat().into(),
        };
        let mut sums = Checksums::new(&req.algorithms());
        sums.update(&data);
        let mut meta = verified_meta(&req, Md5::digest(&data).into(), sums, data.len() as u64, trailer)?;
        meta.key = target.key();
        let target_path = match target {
            Target::Object { bucket, key } => {
                self.check_write_conditions(tree, bucket, key, &req).await?;
                self.check_case(tree, bucket, key).await?;
                self.forget_listing(bucket, key);
                self.object_path(bucket, key)
            }
            Target::Part(p) => p.clone(),
        };
        let temp = self.temp_path();
        let ea = [meta.to_ea()];
        let ctx = [CreateContext::EaBuffer(&ea)];
        let create = CreateRequest { contexts: &ctx, ..temp_create(&temp) };
        let write = smb_proto::io::WriteRequest { file_id: FileId::RELATED, offset: 0, data: &data };
        let t = smb_client::tree::smb_path(&target_path);
        let rename = smb_proto::query::SetInfoRequest {
            file_id: FileId::RELATED,
            info: SetFileInfo::Rename { target: &t, replace_if_exists: true },
        };
        let close = smb_proto::create::CloseRequest { file_id: FileId::RELATED, post_query: false };
        let chain: Vec<&dyn smb_proto::Request> =
            if data.is_empty() { vec![&create, &rename, &close] } else { vec![&create, &write, &rename, &close] };
        let rs = tree.compound(&chain).await?;
        rs[0].clone().ok_or_status(&[])?;
        let renamed = &rs[rs.len() - 2];
        if !data.is_empty() {
            let w = rs[1].clone().ok_or_status(&[])?;
            let n = smb_proto::io::WriteResponse::decode(&w.msg).map_err(smb_client::Error::from)?.count;
            if n as usize != data.len() {
                let _ = tree.delete(&temp, false).await;
                return Err(StoreError::Busy(format!("short write: {n} of {} bytes", data.len())));
            }
        }
        if renamed.status() != smb_proto::NtStatus::STATUS_SUCCESS {
            // Usually a missing parent directory: publish the temp file the
            // slow way (creating parents), which also explains conflicts.
            let err = smb_client::Error::Status { command: renamed.header.command, status: renamed.status() };
            let f = tree.create(&super::publish::delete_open(&temp, share::ALL)).await?;
            let guard = TempGuard::new(self, tree, f.file_id, &temp);
            // publish retries a rename refused while the target is open and
            // explains what still fails.
            tracing::debug!(error = %err, "compound rename failed; publishing the temp file the slow way");
            let r = self.publish(tree, f.file_id, &temp, target).await;
            match r {
                Ok(()) => {
                    guard.keep().await;
                }
                Err(e) => {
                    guard.discard().await;
                    return Err(e);
                }
            }
        }
        Ok(PutResult { etag: meta.etag, checksums: meta.checksums, size: data.len() as u64, last_modified: None })
    }

    #[allow(clippy::too_many_arguments)]
    async fn fill_and_publish<S, E>(
        &self,
        tree: &Tree,
        target: &Target,
        temp: &str,
        created: &CreateResponse,
        mut body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<String, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let fid = created.file_id;
        let writer = SpreadWriter::new(self, tree, fid, temp, 0);
        let (md5, sums, size) = self.stream_body(writer, &mut body, &req, None).await?;
        let mut meta = verified_meta(&req, md5, sums, size, trailer)?;
        meta.key = target.key();
        meta.disk_id = created.on_disk_id();
        let computed = meta.checksums.clone();
        let ea = [meta.to_ea()];
        tree.set_info(fid, SetFileInfo::FullEa(&ea)).await?;
        if let Target::Object { bucket, key } = target {
            self.check_write_conditions(tree, bucket, key, &req).await?;
        }
        self.publish(tree, fid, temp, target).await?;
        Ok(PutResult { etag: meta.etag, checksums: computed, size, last_modified: None })
    }

    /// If-Match / If-None-Match for writes, checked right before publish.
    async fn check_write_conditions(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        req: &PutRequest,
    ) -> StoreResult<()> {
        if req.if_match.is_none() && !req.if_none_match {
            return Ok(());
        }
        let path = self.object_path(bucket, mapped);
        let current = match open_with_meta(tree, &read_create(&path), None, true).await {
            Ok((c, m, _)) if !c.times.is_directory() => Some(object_info(&c, m, &path)),
            Ok(_) => None,
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e.into()),
        };
        if req.if_none_match && current.is_some() {
            return Err(StoreError::PreconditionFailed);
        }
        if let Some(want) = &req.if_match {
            match &current {
                None => return Err(StoreError::NoSuchKey),
                Some(c) if !etag_matches(want, &c.etag) => return Err(StoreError::PreconditionFailed),
                _ => {}
            }
        }
        Ok(())
    }

    /// Checks, without changing anything, that `mapped` could be published:
    /// the bucket exists, no case-variant exists, no prefix of the key is a
    /// file and the key itself is not a directory.
    ///
    /// Errors: NoSuchBucket, Conflict.
    pub(crate) async fn preflight(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) -> StoreResult<()> {
        self.check_bucket(tree, bucket).await?;
        self.check_case(tree, bucket, mapped).await?;
        let mut path = self.bucket_path(bucket);
        for (i, c) in mapped.components.iter().enumerate() {
            path.push('\\');
            path.push_str(c);
            let last = i + 1 == mapped.components.len();
            match tree.stat(&path).await {
                Ok(t) if !last && !t.is_directory() => {
                    return Err(StoreError::Conflict("a prefix of the key is an existing object".into()))
                }
                Ok(t) if last && t.is_directory() && !mapped.dir_marker => {
                    return Err(StoreError::Conflict(
                        "the key is also a prefix of other keys (a directory on the share)".into(),
                    ))
                }
                Ok(_) => {}
                Err(e) if is_not_found(&e) || is_bad_path(&e) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    async fn put_marker<S, E>(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        mut body: S,
        req: PutRequest,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        while let Some(c) = body.next().await {
            if !c.map_err(|e| StoreError::Body(e.to_string()))?.is_empty() {
                return Err(StoreError::InvalidArgument(
                    "a key ending in '/' is a directory on the share and cannot hold data".into(),
                ));
            }
        }
        self.check_bucket(tree, bucket).await?;
        self.check_case(tree, bucket, mapped).await?;
        self.forget_listing(bucket, mapped);
        self.make_parents(tree, bucket, mapped).await?;
        let mut meta = req.meta.clone();
        meta.etag = hex::encode(Md5::digest(b""));
        meta.size = 0;
        meta.marker = true;
        meta.key = Some(original_key(mapped));
        set_dir_ea(tree, &self.object_path(bucket, mapped), meta.to_ea()).await?;
        Ok(PutResult { etag: meta.etag, checksums: BTreeMap::new(), size: 0, last_modified: None })
    }

    /// DELETE: removes the object (idempotent: a missing key is success, as
    /// in S3), then prunes directories it leaves empty.
    ///
    /// Errors: NoSuchBucket, InvalidKey, SMB failures.
    pub async fn delete_object(&self, bucket: &str, key: &str) -> StoreResult<()> {
        let mapped = map_key(key)?;
        let tree = self.tree().await?;
        let path = self.object_path(bucket, &mapped);
        self.forget_listing(bucket, &mapped);
        if mapped.dir_marker {
            // Drop the marker record; remove the directory if it is empty.
            match tree.delete(&path, true).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(NtStatus::STATUS_DIRECTORY_NOT_EMPTY) => {
                    let drop_record = smb_proto::info::FullEa { name: super::meta::META_EA.into(), value: vec![] };
                    set_dir_ea(&tree, &path, drop_record).await?;
                    return Ok(());
                }
                Err(e) if is_not_found(&e) => {
                    self.check_bucket(&tree, bucket).await?;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            let del = || async {
                if !self.case_insensitive() {
                    return tree.delete(&path, false).await.map(|_| true);
                }
                // Open first to read the record's key: on a case-insensitive
                // share `mixed` would otherwise delete `Mixed`.
                let open = CreateRequest {
                    desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA,
                    options: options::NON_DIRECTORY_FILE,
                    ..read_create(&path)
                };
                let (c, meta, _) = open_with_meta(&tree, &open, None, false).await?;
                if check_record_key(meta, key).is_err() {
                    let _ = tree.close(c.file_id).await;
                    return Ok(false);
                }
                let r = tree.set_info(c.file_id, SetFileInfo::Disposition { delete_pending: true }).await;
                let _ = tree.close(c.file_id).await;
                r.map(|_| true)
            };
            match retry_sharing(del).await {
                Ok(true) => {}
                Ok(false) => return Ok(()), // only a case-variant exists
                Err(e) if is_not_found(&e) || e.status() == Some(NtStatus::STATUS_FILE_IS_A_DIRECTORY) => {
                    self.check_bucket(&tree, bucket).await?;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.prune_parents(&tree, bucket, &mapped).await;
        Ok(())
    }

    /// Removes now-empty parent directories that are not markers, deepest
    /// first; stops at the first that is not empty (best effort).
    async fn prune_parents(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) {
        let n = mapped.components.len() - 1;
        for depth in (1..=n).rev() {
            let path = format!("{}\\{}", self.bucket_path(bucket), mapped.components[..depth].join("\\"));
            let req = read_create(&path);
            match open_with_meta(tree, &req, None, true).await {
                Ok((_, Some(m), _)) if m.marker => return,
                Ok(_) => {}
                Err(_) => return,
            }
            if tree.delete(&path, true).await.is_err() {
                return;
            }
        }
    }

    /// CopyObject: server-side copy (COPYCHUNK) of `src` into a temporary
    /// file, metadata from the source (`replace` = None) or replaced, then
    /// published like a PUT. The source is checked for change during the
    /// copy.
    ///
    /// Errors: NoSuchKey for the source, PreconditionFailed for failed
    /// copy-source conditions (checked by the caller through `check`), and
    /// as [`Store::put_object`].
    #[allow(clippy::too_many_arguments)]
    pub async fn copy_object(
        &self,
        src_bucket: &str,
        src_key: &str,
        target: Target,
        replace: Option<ObjectMeta>,
        src_range: Option<Range<u64>>,
        check: impl FnOnce(&ObjectInfo) -> StoreResult<()>,
    ) -> StoreResult<(ObjectInfo, PutResult)> {
        if let Target::Object { key, .. } = &target {
            if key.dir_marker {
                return Err(StoreError::InvalidArgument("cannot copy onto a key ending in '/'".into()));
            }
        }
        let (src, info, _) = self.open_object(src_bucket, src_key, None).await?;
        if let Err(e) = check(&info) {
            src.close().await;
            return Err(e);
        }
        if src.create.times.is_directory() {
            src.close().await;
            return Err(StoreError::InvalidArgument("cannot copy a directory marker".into()));
        }
        if src_range.as_ref().is_some_and(|r| r.start >= r.end || r.end > info.size) {
            src.close().await;
            return Err(StoreError::InvalidRange);
        }
        let range = src_range.unwrap_or(0..info.size);
        let tree = src.tree.clone();
        let temp = self.temp_path();
        let created = match tree.create(&temp_create(&temp)).await {
            Ok(c) => c,
            Err(e) => {
                src.close().await;
                return Err(e.into());
            }
        };
        let guard = TempGuard::new(self, &tree, created.file_id, &temp);
        let result: StoreResult<PutResult> = async {
            let len = range.end - range.start;
            if len > 0 {
                let n = tree.copy_chunks(src.file_id, range.start, created.file_id, 0, len).await?;
                if n != len {
                    return Err(StoreError::Busy(format!("copy stopped after {n} of {len} bytes")));
                }
            }
            // The source must not have changed while we copied (BUG-CLASSES 15).
            let now = tree.query_times(src.file_id).await?;
            if now.end_of_file != info.size || now.last_write != info.last_modified {
                return Err(StoreError::Busy("the source changed during the copy; retry".into()));
            }
            let whole = range.start == 0 && range.end == info.size;
            let mut meta = replace.unwrap_or_else(|| info.meta.clone());
            meta.size = len;
            meta.disk_id = created.on_disk_id();
            meta.marker = false;
            meta.parts.clear();
            meta.key = target.key();
            if whole && !info.etag.contains('-') {
                meta.etag = info.etag.clone();
                meta.checksums = info.meta.checksums.clone();
            } else {
                // Range copies and foreign/multipart sources: hash the copy.
                let mut md5 = Md5::new();
                tree.read_pipelined(created.file_id, 0, len, self.in_flight(), |b| {
                    md5.update(&b);
                    Ok(())
                })
                .await?;
                meta.etag = hex::encode(md5.finalize());
                meta.checksums.clear();
            }
            let ea = [meta.to_ea()];
            tree.set_info(created.file_id, SetFileInfo::FullEa(&ea)).await?;
            // Close the source first: a copy onto itself renames over it.
            let _ = tree.close(src.file_id).await;
            self.publish(&tree, created.file_id, &temp, &target).await?;
            Ok(PutResult { etag: meta.etag, checksums: meta.checksums, size: len, last_modified: None })
        }
        .await;
        if result.is_err() {
            src.close().await;
        }
        match result {
            Ok(r) => {
                let closed = guard.keep().await;
                Ok((info, PutResult { last_modified: closed.map(|c| c.times.last_write), ..r }))
            }
            Err(e) => {
                guard.discard().await;
                Err(e)
            }
        }
    }
}

impl Opened {
    /// Closes the handle (errors ignored: the handle dies with its session
    /// anyway).
    pub async fn close(self) {
        let _ = self.tree.close(self.file_id).await;
    }
}

/// Sets (or, with an empty value, removes) one EA on a directory.
async fn set_dir_ea(tree: &Tree, path: &str, ea: smb_proto::info::FullEa) -> StoreResult<()> {
    let open = CreateRequest {
        name: path,
        oplock_level: 0,
        desired_access: access::FILE_WRITE_EA | access::FILE_READ_ATTRIBUTES,
        file_attributes: 0,
        share_access: share::ALL,
        disposition: Disposition::Open,
        options: options::DIRECTORY_FILE,
        contexts: &[],
    };
    let d = tree.create(&open).await?;
    let r = tree.set_info(d.file_id, SetFileInfo::FullEa(&[ea])).await;
    let _ = tree.close(d.file_id).await;
    r?;
    Ok(())
}

/// Builds the visible info from a CREATE response and a matching record.
pub fn object_info(create: &CreateResponse, meta: Option<ObjectMeta>, path: &str) -> ObjectInfo {
    let size = create.times.end_of_file;
    let last_modified = create.times.last_write;
    let disk_id = create.on_disk_id();
    match meta {
        Some(m) => ObjectInfo { size, last_modified, etag: m.etag.clone(), meta: m, path: path.to_string(), disk_id },
        None => ObjectInfo {
            size,
            last_modified,
            etag: derived_etag(size, last_modified, disk_id.unwrap_or(create.file_id.persistent)),
            meta: ObjectMeta::default(),
            path: path.to_string(),
            disk_id,
        },
    }
}

/// Compares an If-Match / If-None-Match value (quoted or not, `*`, or a
/// comma list) with an ETag value.
pub fn etag_matches(cond: &str, etag: &str) -> bool {
    cond.split(',').map(|c| c.trim().trim_start_matches("W/").trim_matches('"')).any(|c| c == "*" || c == etag)
}

/// MD5 and checksums of a streamed body, computed on a blocking thread (a
/// second core) while the body is written to the share.
struct HashWorker {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    done: tokio::task::JoinHandle<([u8; 16], Checksums)>,
}

impl HashWorker {
    fn start(mut sums: Checksums) -> HashWorker {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        let done = tokio::task::spawn_blocking(move || {
            let mut md5 = Md5::new();
            while let Some(b) = rx.blocking_recv() {
                md5.update(&b);
                sums.update(&b);
            }
            (md5.finalize().into(), sums)
        });
        HashWorker { tx, done }
    }

    async fn feed(&self, b: Bytes) {
        let _ = self.tx.send(b).await;
    }

    async fn finish(self) -> StoreResult<([u8; 16], Checksums)> {
        drop(self.tx);
        self.done.await.map_err(|e| StoreError::Body(format!("hashing failed: {e}")))
    }
}

/// Bodies up to this size are buffered and written with one compound.
const SMALL_PUT: usize = 1 << 20;

/// Checks Content-MD5 and checksums of a received body and builds the
/// metadata record to store.
pub(crate) fn verified_meta(
    req: &PutRequest,
    md5: [u8; 16],
    sums: Checksums,
    size: u64,
    trailer: impl FnOnce() -> BTreeMap<String, String>,
) -> StoreResult<ObjectMeta> {
    if req.content_length.is_some_and(|l| l != size) {
        return Err(StoreError::IncompleteBody);
    }
    if let Some(want) = &req.content_md5 {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD.decode(want.trim()).ok();
        if decoded.as_ref().is_none_or(|d| d.len() != 16) {
            return Err(StoreError::InvalidDigest("The Content-MD5 you specified was invalid.".into()));
        }
        let got = base64::engine::general_purpose::STANDARD.encode(md5);
        if want.trim() != got {
            return Err(StoreError::BadDigest("The Content-MD5 you specified did not match what we received.".into()));
        }
    }
    let computed = sums.finish();
    let mut expected = req.checksums.clone();
    expected.extend(trailer());
    verify_checksums(&expected, &computed)?;
    let mut meta = req.meta.clone();
    meta.etag = hex::encode(md5);
    meta.size = size;
    meta.checksums = computed;
    meta.marker = false;
    Ok(meta)
}

fn verify_checksums(expected: &BTreeMap<String, String>, computed: &BTreeMap<String, String>) -> StoreResult<()> {
    for (alg, want) in expected {
        let alg = alg.to_ascii_uppercase();
        match computed.get(&alg) {
            Some(got) if got == want.trim() => {}
            Some(_) => {
                return Err(StoreError::BadDigest(format!(
                    "The {alg} you specified did not match the calculated checksum."
                )))
            }
            None => return Err(StoreError::InvalidDigest(format!("checksum algorithm {alg} is not supported"))),
        }
    }
    Ok(())
}
