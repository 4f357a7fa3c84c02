//! CopyObject and UploadPartCopy: a server-side copy (FSCTL_SRV_COPYCHUNK)
//! into a temporary file, checked for a source that changed meanwhile
//! (failure class 15), then published like a PUT. A copy from or to an
//! object sealed with an SSE-C key goes through the gateway instead
//! (`sealed_copy`).

use super::server_copy::copy_range;
use crate::store::share_data::ShareData;
use crate::store::share_ops::ShareOps;
use crate::store::Writes;
use std::ops::Range;

use md5::{Digest, Md5};

use crate::store::checksum::{Algorithm, Checksums};
use crate::store::conditions::Conditions;
use crate::store::error::record_write_error;
use crate::store::meta::{ObjectMeta, Retention};
use crate::store::reads::sealed::check_customer_key;
use crate::store::share;
use crate::store::sse_c::CustomerKey;
use crate::store::tags::TagSet;
use crate::store::types::{ObjectInfo, PutRequest, PutResult, Target};
use crate::store::versions::lock::needs_seal;
use crate::store::{StoreError, StoreResult};

/// What a copy takes from its source and what it computes.
#[derive(Debug, Default)]
pub struct CopyRequest {
    /// New metadata (`None`: the source's).
    pub replace: Option<ObjectMeta>,
    /// New tags (`None`: the source's).
    pub tags: Option<TagSet>,
    /// The bytes of the source to copy (`None`: all).
    pub range: Option<Range<u64>>,
    /// Checksums the copy must carry (a part of an upload made with one),
    /// computed from the copied bytes unless the source has them for the
    /// same bytes.
    pub checksums: Vec<Algorithm>,
    /// The target's If-Match / If-None-Match.
    pub conditions: Conditions,
    /// The source's version (`None`: its current one).
    pub source_version: Option<String>,
    /// The copy's Object Lock retention (never the source's).
    pub retention: Option<Retention>,
    /// The copy's Object Lock legal hold (never the source's).
    pub legal_hold: bool,
    /// The source's SSE-C key (`x-amz-copy-source-server-side-encryption-
    /// customer-*`).
    pub source_sse_c: Option<CustomerKey>,
    /// The copy's SSE-C key (for a part: its upload's, checked already).
    pub sse_c: Option<CustomerKey>,
    /// For a part of an upload with an SSE-C key: the part's number (see
    /// [`crate::store::types::PutRequest`]).
    pub sse_c_part: Option<u32>,
}

impl Writes {
    /// Copies `src` (or `req.range` of it) to `target`, with metadata and
    /// tags from the source or replaced ([`CopyRequest`]). `check` sees the
    /// source first (copy-source conditions).
    ///
    /// Errors: NoSuchKey for the source, PreconditionFailed from `check`,
    /// InvalidRange, Busy (the source changed during the copy), and as
    /// [`Writes::put_object`].
    pub async fn copy_object(
        &self,
        src_bucket: &str,
        src_key: &str,
        target: Target,
        req: CopyRequest,
        check: impl FnOnce(&ObjectInfo) -> StoreResult<()>,
    ) -> StoreResult<(ObjectInfo, PutResult)> {
        let CopyRequest {
            replace,
            tags,
            range: src_range,
            checksums: want,
            conditions: target_conditions,
            source_version,
            retention,
            legal_hold,
            source_sse_c,
            sse_c,
            sse_c_part,
        } = req;
        let target_conditions = &target_conditions;
        let (src, info, _) = match &source_version {
            Some(v) => self.reads.open_version(src_bucket, src_key, v, None).await?,
            None => self.reads.open_object(src_bucket, src_key, None).await?,
        };
        check(&info)?;
        check_customer_key(&info, source_sse_c.as_ref())?;
        if src.create().times.is_directory() {
            return Err(StoreError::InvalidArgument("cannot copy a directory marker".into()));
        }
        if src_range.as_ref().is_some_and(|r| r.start >= r.end || r.end > info.size) {
            return Err(StoreError::InvalidRange);
        }
        let range = src_range.unwrap_or(0..info.size);
        if info.meta.sse_c.is_some() || sse_c.is_some() {
            // Sealed on either side: the bytes go through the gateway.
            let mut meta = replace.unwrap_or_else(|| info.meta.clone());
            meta.tags = tags.unwrap_or_else(|| info.meta.tags.clone());
            (meta.retention, meta.legal_hold) = (retention, legal_hold);
            let put = PutRequest {
                meta,
                checksum_algorithms: want,
                content_length: Some(range.end - range.start),
                conditions: target_conditions.clone(),
                sse_c,
                sse_c_part,
                ..Default::default()
            };
            let r = self.copy_through(src, &info, range, source_sse_c.as_ref(), target, put).await?;
            return Ok((info, r));
        }
        let tree = share::connection_of(&src.handle).clone();
        let live = self.root.live(&tree);
        let temp = live.create_temp(&self.root.temp_path()).await?;
        let result: StoreResult<(PutResult, bool)> = async {
            let len = copy_range(&live, &src.handle, &info, range.clone(), temp.handle()).await?;
            let whole = range.start == 0 && range.end == info.size;
            let mut meta = replace.unwrap_or_else(|| info.meta.clone());
            meta.tags = tags.unwrap_or_else(|| info.meta.tags.clone());
            meta.size = len;
            meta.disk_id = temp.handle().info().on_disk_id();
            meta.marker = false;
            // The copy is one object, whatever the source was.
            meta.parts.clear();
            meta.part_checksums.clear();
            meta.checksum_type = None;
            meta.key = target.key();
            (meta.retention, meta.legal_hold) = (retention, legal_hold);
            let version_id = self.root.stamp_version(&tree, &target, &mut meta).await?;
            let source_sums = info.meta.checksum_type.is_none().then_some(&info.meta.checksums);
            if whole && !info.etag.contains('-') && want.iter().all(|a| source_sums.is_some_and(|s| s.contains_key(a)))
            {
                meta.etag = info.etag.clone();
                meta.checksums = info.meta.checksums.clone();
            } else {
                // Range copies, foreign and multipart sources, and checksums
                // the source lacks: hash the copy.
                let (mut md5, mut sums) = (Md5::new(), Checksums::new(&want));
                live.read_all(temp.handle(), len, self.root.in_flight(), |b| {
                    md5.update(&b);
                    sums.update(&b);
                })
                .await?;
                meta.etag = hex::encode(md5.finalize());
                meta.checksums = sums.finish();
            }
            live.set_record(temp.handle(), temp.path(), &meta)
                .await
                .map_err(|e| record_write_error(e, meta.record_len()))?;
            let sealed = needs_seal(&meta);
            let r =
                PutResult { etag: meta.etag, checksums: meta.checksums, size: len, last_modified: None, version_id };
            Ok((r, sealed))
        }
        .await;
        // Close the source before publishing: a copy onto itself renames
        // over it.
        src.close().await;
        // The target's If-Match / If-None-Match are decided on the share,
        // as a PUT's (failure class 25).
        let published = match result {
            Ok((r, sealed)) => {
                let published = self.publish_sealed(
                    temp.handle(),
                    || temp.publishing(),
                    temp.path(),
                    &target,
                    target_conditions,
                    sealed,
                );
                published.await.map(|()| r)
            }
            Err(e) => Err(e),
        };
        match published {
            Ok(r) => {
                let closed = temp.keep().await;
                Ok((info, PutResult { last_modified: closed.map(|c| c.times.last_write), ..r }))
            }
            Err(e) => {
                temp.discard().await;
                Err(e)
            }
        }
    }
}
