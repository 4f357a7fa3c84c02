//! PUT: stream the body into a temporary file, verify it, store the
//! metadata record and publish it by rename. Small bodies are buffered,
//! verified before any SMB I/O and written with two compounds; empty
//! directory markers are directories with a record, markers with a body
//! files beside their directory (see `beside`).

use crate::store::share_data::ShareData;
use std::collections::BTreeMap;

use crate::store::share::{Handle, Tree};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use md5::{Digest, Md5};
use tracing::Instrument;

use super::parents::key_folders;
use super::place::record_marker_on;
use super::spread::SpreadWriter;
use crate::store::beside::nothing_beside;
use crate::store::body_pace::BodyPace;
use crate::store::case::Seen;
use crate::store::checksum::{Algorithm, Checksums};
use crate::store::error::record_write_error;
use crate::store::keys::{map_key, MappedKey};
use crate::store::meta::ObjectMeta;
use crate::store::share::is_not_found;
use crate::store::share::{self, TempFile};
use crate::store::share_ops::ShareOps;
use crate::store::sse_c::{self, CustomerKey, Sealer};
use crate::store::types::{ObjectInfo, PutRequest, PutResult, Target};
use crate::store::verify::{hash_now, verified_meta, HashWorker};
use crate::store::versions::lock::needs_seal;
use crate::store::{StoreError, StoreResult, Writes};

/// Bodies up to this size are buffered and written with one compound.
const SMALL_PUT: usize = 1 << 20;

/// The sealer of a body `req` stores under `key`: a new object's, or an
/// upload's part's.
fn sealer_for(key: &CustomerKey, req: &PutRequest) -> Sealer {
    match req.sse_c_part {
        None => Sealer::new(key),
        Some(n) => Sealer::for_part(key, n),
    }
}

/// Marks `meta` (verified for a body of `size` bytes whose MD5 is `md5`)
/// as the record of that body sealed by `sealer` under `key`: the file's
/// size, the SSE-C record, and an ETag that is not the body's MD5.
fn sealed_meta(meta: &mut ObjectMeta, sealer: &Sealer, key: &CustomerKey, md5: &[u8; 16], size: u64) {
    let record = sealer.record(key, size);
    meta.etag = sse_c::etag(key, &record.salt, md5);
    meta.size = sse_c::stored_len(size);
    meta.sse_c = Some(record);
}

impl Writes {
    /// Streams `body` into `writer` (an open file, from some offset, spread
    /// over several connections once it passes one segment) while MD5 and
    /// the requested checksums are computed on a second core.
    /// Returns (MD5, checksums, bytes, and the file's handle reopened on
    /// another connection if the writer's own was lost). A body longer than
    /// `limit` bytes stops with IncompleteBody. With `sealer`, the file
    /// gets the body's packages sealed (SSE-C) and the sums are the body's.
    pub(crate) async fn stream_body<S, E>(
        &self,
        mut writer: SpreadWriter,
        body: &mut S,
        req: &PutRequest,
        limit: Option<u64>,
        mut sealer: Option<&mut Sealer>,
    ) -> StoreResult<([u8; 16], Checksums, u64, Option<Handle>)>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let hasher = HashWorker::start(Checksums::new(&req.algorithms()));
        let sealing = sealer.is_some();
        let mut size = 0u64;
        while let Some(chunk) = self.next_chunk(body, &req.pace).await? {
            size += chunk.len() as u64;
            if limit.is_some_and(|l| size > l) {
                return Err(StoreError::IncompleteBody);
            }
            if size > crate::store::uploads::multipart::MAX_PART_SIZE {
                return Err(StoreError::EntityTooLarge);
            }
            match sealer.as_deref_mut() {
                None => writer.write(&chunk).await?,
                Some(s) => {
                    for package in s.push(&chunk) {
                        writer.write(&package).await?;
                    }
                }
            }
            hasher.feed(chunk).await;
        }
        if let Some(last) = sealer.and_then(Sealer::finish_last) {
            writer.write(&last).await?;
        }
        let (written, replacement) = writer.finish().await?;
        let stored = if sealing { sse_c::stored_len(size) } else { size };
        if written != stored {
            return Err(StoreError::IncompleteBody);
        }
        let (md5, sums) = hasher.finish().await?;
        Ok((md5, sums, size, replacement))
    }

    /// The small-object PUT: checks first, then CREATE(temp, metadata in an
    /// EA context) + WRITE in one compound; the WRITE's count is checked
    /// before SET_INFO(rename) + CLOSE publish it in a second.
    async fn put_small(
        &self,
        tree: &Tree,
        target: &Target,
        chunks: Vec<Bytes>,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<Algorithm, String>,
    ) -> StoreResult<PutResult> {
        let data: Bytes = match chunks.len() {
            0 => Bytes::new(),
            1 => chunks.into_iter().next().expect("one"),
            _ => chunks.concat().into(),
        };
        let (md5, sums) = hash_now(&data, &req.algorithms())?;
        let mut meta = verified_meta(&req, md5, sums, data.len() as u64, trailer)?;
        meta.key = target.key();
        let size = data.len() as u64;
        let data = match &req.sse_c {
            None => data,
            Some(key) => {
                let mut sealer = sealer_for(key, &req);
                let stored = sealer.seal_all(&data);
                sealed_meta(&mut meta, &sealer, key, &md5, size);
                stored
            }
        };
        let version_id = self.root.stamp_version(tree, target, &mut meta).await?;
        let versioned = version_id.is_some();
        let (target_path, seen) = match target {
            Target::Object { bucket, key } => {
                self.check_write_conditions(tree, bucket, key, &req).await?;
                // A versioned publish checks the key's case itself.
                let seen = match versioned {
                    true => Seen::Unchecked,
                    false => self.root.check_case_seen(tree, bucket, key).await?,
                };
                self.root.forget_listing(bucket, key);
                (self.root.write_path(bucket, key).to_string(), seen)
            }
            Target::Part(p) => (p.clone(), Seen::Unchecked),
        };
        let temp_path = self.root.temp_path();
        let (temp, written) = self
            .root
            .live(tree)
            .write_temp_with_records(&temp_path, &[meta.to_ea()], &data)
            .await
            .map_err(|e| record_write_error(e, meta.record_len()))?;
        if written as usize != data.len() {
            temp.discard().await;
            return Err(StoreError::Busy(format!("short write: {written} of {} bytes; retry", data.len())));
        }
        let sealed = needs_seal(&meta);
        let result = PutResult { etag: meta.etag, checksums: meta.checksums, size, last_modified: None, version_id };
        // Conditional writes go through the creation lock (publish_with), and
        // so do markers with a body (which replace an empty marker's record);
        // the one-compound rename below is for plain PUTs.
        let marker = matches!(target, Target::Object { key, .. } if key.dir_marker);
        if req.conditions.if_match.is_some() || req.conditions.forbids_existing() || marker || versioned {
            let published =
                self.publish_sealed(temp.handle(), || temp.publishing(), temp.path(), target, &req.conditions, sealed);
            let published = published.await.map(|()| result);
            return temp.settle(published).await;
        }
        let replace = true;
        let old = self.key_before_replace(tree, &target_path).await;
        let new_id = temp.handle().info().on_disk_id();
        let warning = match seen {
            // The case check just found nothing there: no holder to warn
            // (a look of a missing name is a directory scan on a
            // case-insensitive Samba share), and the rename may not
            // replace, so a file that came meanwhile is warned about on
            // the slow path.
            Seen::Absent => self.root.absent_for_cache(&target_path),
            _ => self.root.warn_holders(&share::connection_of(temp.handle()), &target_path).await,
        };
        // A failed compound (a file came where none was warned about, a
        // missing parent) publishes the slow way, which warns again.
        let published = self
            .root
            .live(tree)
            .publish_or_keep(temp, &target_path, warning.may_replace(replace))
            .instrument(tracing::debug_span!("store.publish"))
            .await;
        self.root.warned(warning).await;
        match published {
            Ok(()) => {
                self.forget_replaced(tree, old, new_id);
                Ok(result)
            }
            Err((err, temp)) => {
                // Usually a missing parent directory: publish the slow way
                // (creating parents), which also retries a rename refused
                // while the target is open, and explains what still fails.
                tracing::debug!(error = %err, "compound rename failed; publishing the temp file the slow way");
                let Some(temp) = temp else { return Err(err.into()) };
                let published = self.publish_temp_if(&temp, target, replace).await.map(|()| result);
                temp.settle(published).await
            }
        }
    }

    async fn fill_and_publish<S, E>(
        &self,
        target: &Target,
        temp: &mut TempFile,
        mut body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<Algorithm, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let writer = SpreadWriter::new(self, temp.handle(), temp.path(), 0);
        let mut sealer = req.sse_c.as_ref().map(|k| sealer_for(k, &req));
        let (md5, sums, size, replacement) = self.stream_body(writer, &mut body, &req, None, sealer.as_mut()).await?;
        // The body survived a lost connection: go on with a live handle.
        temp.revive(replacement).await?;
        let mut meta = verified_meta(&req, md5, sums, size, trailer)?;
        meta.key = target.key();
        if let (Some(sealer), Some(key)) = (&sealer, &req.sse_c) {
            sealed_meta(&mut meta, sealer, key, &md5, size);
        }
        meta.disk_id = temp.handle().info().on_disk_id();
        let tree = share::connection_of(temp.handle());
        let version_id = self.root.stamp_version(&tree, target, &mut meta).await?;
        self.root
            .live(&tree)
            .set_record(temp.handle(), temp.path(), &meta)
            .await
            .map_err(|e| record_write_error(e, meta.record_len()))?;
        if let Target::Object { bucket, key } = target {
            self.check_write_conditions(&tree, bucket, key, &req).await?;
        }
        let sealed = needs_seal(&meta);
        self.publish_sealed(temp.handle(), || temp.publishing(), temp.path(), target, &req.conditions, sealed).await?;
        Ok(PutResult { etag: meta.etag, checksums: meta.checksums, size, last_modified: None, version_id })
    }

    /// The next chunk of a request body, counted in `pace`, waiting at most
    /// the body-read timeout for it, and never past the moment the body's
    /// average rate falls below the minimum (see [`BodyPace::next_wait`]).
    ///
    /// Errors: RequestTimeout when nothing arrives in time; Body when the
    /// stream fails (the client went away, a bad chunk signature).
    pub(crate) async fn next_chunk<S, E>(&self, body: &mut S, pace: &BodyPace) -> StoreResult<Option<Bytes>>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let o = self.root.options();
        let wait = pace.next_wait(tokio::time::Instant::now(), o.body_read_timeout, o.body_min_rate);
        match tokio::time::timeout(wait, body.next()).await {
            Err(_) => Err(StoreError::RequestTimeout),
            Ok(None) => Ok(None),
            Ok(Some(Ok(c))) => {
                pace.add(c.len());
                Ok(Some(c))
            }
            Ok(Some(Err(e))) => Err(StoreError::Body(e.to_string())),
        }
    }

    /// If-Match / If-None-Match for writes, checked right before publish.
    pub(crate) async fn check_write_conditions(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        req: &PutRequest,
    ) -> StoreResult<()> {
        if !req.conditions.needs_current() {
            return Ok(());
        }
        let stat = || async {
            match self.root.stat_object(tree, bucket, mapped, false).await {
                Ok(Some(found)) => Ok(found),
                // Absent: as a not-found, so that If-Match looks again.
                Ok(None) => Err(share::not_found()),
                Err(e) => Err(e),
            }
        };
        // Only If-Match turns a missing key into an answer (NoSuchKey), and a
        // key inside another writer's If-Match swap is absent for an
        // instant: only then look again. `If-None-Match: *` on a new key,
        // the lock-file case, pays no wait.
        let found = if req.conditions.if_match.is_some() { crate::store::retry_swap(stat).await } else { stat().await };
        let current = match found {
            Ok((c, m, path)) => Some(ObjectInfo::new(&c, m, &path)),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e.into()),
        };
        req.conditions.check_write(current.as_ref().map(ObjectInfo::current))
    }

    /// Checks, without changing anything, that `mapped` could be published:
    /// the bucket exists and no case-variant of the key does. (A prefix of
    /// the key that is an object, or a key that is a directory, moves
    /// beside; see `beside`.)
    ///
    /// Errors: NoSuchBucket, Conflict.
    pub(crate) async fn preflight(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) -> StoreResult<()> {
        self.root.check_bucket(tree, bucket).await?;
        self.root.check_case(tree, bucket, mapped).await
    }

    /// An empty marker (`a/b/`): the directory (made first, an object of
    /// its name moving beside it) with a marker record; a body kept beside
    /// it by an earlier write goes. Conditions are checked under the key's
    /// creation lock.
    async fn put_marker(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        req: PutRequest,
    ) -> StoreResult<PutResult> {
        crate::store::versions::aside::refuse_marker_lock(&req.meta)?;
        self.root.check_bucket(tree, bucket).await?;
        self.root.check_case(tree, bucket, mapped).await?;
        self.root.forget_listing(bucket, mapped);
        self.make_parents(tree, bucket, mapped, true).await?;
        let mut meta = req.meta.clone();
        meta.etag = hex::encode(Md5::digest(b""));
        meta.size = 0;
        meta.marker = true;
        meta.key = Some(mapped.original());
        // The record and the old body change under the key's creation lock,
        // as a body's publish does (see `publish`): one form or the other.
        let dir = self.root.object_path(bucket, mapped);
        let creating = self.root.create_lock(tree, &dir).await?;
        // If-Match / If-None-Match against what the key is now (a marker,
        // a body beside, an empty folder), under the lock every write of
        // the key takes.
        if let Err(e) = self.check_write_conditions(tree, bucket, mapped, &req).await {
            creating.release().await;
            return Err(e);
        }
        let folders = key_folders(&self.root.bucket_path(bucket), mapped, true);
        let recorded = record_marker_on(&self.root.live(tree), &dir, &folders, &meta, |d| self.root.lock_name(d)).await;
        if recorded.is_ok() {
            match self.root.live(tree).delete_file(self.root.beside_path(bucket, mapped).as_str()).await {
                Err(e) if !nothing_beside(&e) => {
                    tracing::debug!(error = %e, "a marker's old body could not be removed")
                }
                _ => {}
            }
        }
        creating.release().await;
        recorded?;
        Ok(PutResult { etag: meta.etag, checksums: BTreeMap::new(), size: 0, last_modified: None, version_id: None })
    }
}

impl Writes {
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
        trailer: impl FnOnce() -> BTreeMap<Algorithm, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let mapped = map_key(key)?;
        let tree = self.root.tree().await?;
        if !mapped.dir_marker {
            return self
                .put_to(&tree, Target::Object { bucket: bucket.to_string(), key: mapped }, body, req, trailer)
                .await;
        }
        // A marker: the directory itself with a record while it is empty,
        // a file beside the directory once it has a body.
        let mut body = body;
        let first = loop {
            match self.next_chunk(&mut body, &req.pace).await? {
                Some(c) if c.is_empty() => continue,
                next => break next,
            }
        };
        let Some(first) = first else { return self.put_marker(&tree, bucket, &mapped, req).await };
        let body = futures::stream::iter([Ok::<Bytes, E>(first)]).chain(body);
        self.put_to(&tree, Target::Object { bucket: bucket.to_string(), key: mapped }, body, req, trailer).await
    }

    /// Streams `body` into a temporary file, verifies it and publishes it
    /// at `target`; see [`Writes::put_object`].
    pub async fn put_to<S, E>(
        &self,
        tree: &Tree,
        target: Target,
        mut body: S,
        req: PutRequest,
        trailer: impl FnOnce() -> BTreeMap<Algorithm, String>,
    ) -> StoreResult<PutResult>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        // Refused from the declared length and digest, before a byte is read.
        if req.content_length.is_some_and(|l| l > crate::store::uploads::multipart::MAX_PART_SIZE) {
            return Err(StoreError::EntityTooLarge);
        }
        crate::store::verify::check_content_md5(req.content_md5.as_deref())?;
        let mut prefix = Vec::new();
        let mut buffered = 0usize;
        let mut ended = false;
        while buffered <= SMALL_PUT {
            match self.next_chunk(&mut body, &req.pace).await? {
                Some(c) => {
                    buffered += c.len();
                    prefix.push(c);
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        // Sealed (SSE-C), the body grows by its packages' tags: the one
        // WRITE of a small PUT must still fit.
        let written = if req.sse_c.is_some() { sse_c::stored_len(buffered as u64) as usize } else { buffered };
        if ended && written <= tree.max_write() as usize {
            return self.put_small(tree, &target, prefix, req, trailer).await;
        }
        // A large body: make sure it has somewhere to go before writing it
        // out (publish checks again; this only spares a wasted upload).
        if let Target::Object { bucket, .. } = &target {
            self.root.check_bucket(tree, bucket).await?;
        }
        let body = futures::stream::iter(prefix.into_iter().map(Ok::<Bytes, E>)).chain(body);
        let mut temp = self.root.live(tree).create_temp(&self.root.temp_path()).await?;
        let result = self.fill_and_publish(&target, &mut temp, body, req, trailer).await;
        temp.settle(result).await
    }
}
