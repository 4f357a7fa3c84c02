//! CompleteMultipartUpload: check the requested parts once (a
//! [`CompletePlan`]), then assemble the object: in place when the parts
//! are 1..N of one size (a truncate and a rename of the upload's data
//! file), else by server-side copies (COPYCHUNK) into a temp file.

use crate::store::share_data::ShareData;
use std::collections::BTreeMap;

use md5::{Digest, Md5};

use super::join::{join_by_copy, join_in_place};
use super::multipart::{PartInfo, UploadRecord, MIN_PART_SIZE};
use super::part_checksums::UploadChecksum;
use super::record_fit::set_record_fitting;
use crate::store::checksum::{Algorithm, ChecksumType};
use crate::store::conditions::Conditions;
use crate::store::keys::{map_key, MappedKey};
use crate::store::meta::ObjectMeta;
use crate::store::share::is_not_found;
use crate::store::sse_c::{SealedPart, SseCRecord};
use crate::store::types::{PutRequest, PutResult, Target};
use crate::store::versions::lock::needs_seal;
use crate::store::{StoreError, StoreResult, Uploads};

/// A checked CompleteMultipartUpload: what will be published.
#[derive(Debug, Clone)]
pub struct CompletePlan {
    /// Target bucket.
    pub bucket: String,
    /// Target key, mapped.
    pub key: MappedKey,
    /// The UploadId.
    pub upload_id: String,
    /// The upload's record (metadata for the object).
    pub record: UploadRecord,
    /// The chosen parts, in order.
    pub parts: Vec<PartInfo>,
    /// The multipart ETag (`md5-of-part-md5s-N`), unquoted.
    pub etag: String,
    /// The object's checksum (base64), for an upload created with one.
    pub checksum: Option<(UploadChecksum, String)>,
    /// If-Match / If-None-Match of the request, decided again when the
    /// object is published (failure class 25).
    pub conditions: Conditions,
    /// The version the object is stored as: its record's ID (`None`: the
    /// `null` version), decided when the plan is made so that the answer's
    /// headers, sent before the object is complete, can name it.
    pub record_version: Option<String>,
    /// The version ID the answer names (`None` on a bucket that was never
    /// versioned).
    pub version_id: Option<String>,
    /// The object's Object Lock retention: the upload's, or the bucket's
    /// default when the plan was made.
    pub retention: Option<crate::store::meta::Retention>,
}

/// A part as CompleteMultipartUpload names it.
#[derive(Debug, Clone, Default)]
pub struct RequestedPart {
    /// Its part number.
    pub number: i32,
    /// Its ETag, quoted or not.
    pub etag: String,
    /// Its checksums (base64) as the client lists them.
    pub checksums: BTreeMap<Algorithm, String>,
}

impl Uploads {
    /// Parts stored apart (e.g. a small last part that came first) are
    /// copied into the data file at their offset; then the data file is cut
    /// to size, gets the record and is renamed into place.
    async fn complete_in_place(
        &self,
        plan: &CompletePlan,
        stride: u64,
        target: &Target,
        mut meta: ObjectMeta,
    ) -> StoreResult<()> {
        let id = &plan.upload_id;
        let tree = self.root.tree().await?;
        let live = self.root.live(&tree);
        let data_path = self.data_path(id);
        // A data file that holds parts is opened, never made again: one
        // made anew would publish zeros where they were.
        let create = plan.parts.iter().all(|p| p.data_offset.is_none());
        let d = match live.open_data_file(&data_path, create).await {
            Ok(d) => d,
            Err(e) if is_not_found(&e) => return Err(StoreError::NoSuchUpload),
            Err(e) => return Err(e.into()),
        };
        join_in_place(&live, &d, &plan.parts, |n| self.part_path(id, n), stride, meta.size).await?;
        meta.disk_id = d.info().on_disk_id();
        let sealed = needs_seal(&meta);
        set_record_fitting(&live, &d, data_path.as_str(), meta, &plan.key.original()).await?;
        self.writes.publish_sealed(&d, || {}, &data_path, target, &plan.conditions, sealed).await?;
        let _ = d.close().await;
        Ok(())
    }

    /// Joins the parts into a temp file with server-side copies, checks its
    /// size and publishes it.
    async fn complete_by_copy(
        &self,
        plan: &CompletePlan,
        target: &Target,
        meta: impl FnOnce(Option<u64>) -> ObjectMeta,
    ) -> StoreResult<()> {
        let id = &plan.upload_id;
        let tree = self.root.tree().await?;
        let live = self.root.live(&tree);
        let temp = live.create_temp(&self.root.temp_path()).await?;
        let result = async {
            join_by_copy(&live, temp.handle(), &plan.parts, &self.data_path(id), |n| self.part_path(id, n)).await?;
            let record = meta(temp.handle().info().on_disk_id());
            let sealed = needs_seal(&record);
            set_record_fitting(&live, temp.handle(), temp.path(), record, &plan.key.original()).await?;
            self.writes
                .publish_sealed(temp.handle(), || temp.publishing(), temp.path(), target, &plan.conditions, sealed)
                .await
        }
        .await;
        temp.settle(result).await
    }
}

impl Uploads {
    /// Checks a CompleteMultipartUpload request without changing anything.
    /// `requested` are the parts in request order; `expected` the object's
    /// checksums the client sent (`x-amz-checksum-*`).
    ///
    /// Errors: NoSuchUpload, InvalidPart, BadDigest (a part checksum that
    /// is not the stored one), InvalidPartOrder, EntityTooSmall,
    /// InvalidArgument (no parts), InvalidRequest (a part of a `COMPOSITE`
    /// upload listed without its checksum), BadDigest (an object checksum
    /// that is not the one the parts make), and conflicts with existing
    /// names (found now, not after a 200 has started).
    pub async fn plan_complete(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        requested: &[RequestedPart],
        expected: &BTreeMap<Algorithm, String>,
        conditions: Conditions,
    ) -> StoreResult<CompletePlan> {
        if requested.is_empty() {
            return Err(StoreError::InvalidArgument("you must specify at least one part".into()));
        }
        if requested.windows(2).any(|w| w[0].number >= w[1].number) {
            return Err(StoreError::InvalidPartOrder);
        }
        let (record, stored) = self.list_parts(bucket, key, id).await?;
        let stored: BTreeMap<i32, PartInfo> = stored.into_iter().map(|p| (p.number, p)).collect();
        let mut parts = Vec::with_capacity(requested.len());
        for (i, r) in requested.iter().enumerate() {
            let n = r.number;
            let Some(p) = stored.get(&n) else {
                // An abort may be removing the parts (it deletes the
                // upload's record last): once its turn is over, the upload
                // is what is missing.
                self.in_turn(id, self.upload_record(id)).await?;
                return Err(StoreError::InvalidPart(format!("part {n} was not uploaded")));
            };
            if r.etag.trim().trim_matches('"') != p.etag {
                return Err(StoreError::InvalidPart(format!("part {n} has ETag {}, not {}", p.etag, r.etag)));
            }
            if record.sse_c.is_some() != p.salt.is_some() {
                // A part not sealed as its upload is (a file put there by
                // hand): the object could not be opened whole.
                return Err(StoreError::InvalidPart(format!("part {n} is not sealed as its upload is")));
            }
            for (alg, want) in &r.checksums {
                // As AWS answers a part checksum that is not the one the
                // part was uploaded with.
                if p.checksums.get(alg).map(String::as_str) != Some(want.trim()) {
                    return Err(StoreError::BadDigest(format!(
                        "The {} you specified for part {n} did not match what we received.",
                        alg.name().to_ascii_lowercase()
                    )));
                }
            }
            if let Some(c) = record.checksum.filter(|c| c.kind == ChecksumType::Composite) {
                if !r.checksums.contains_key(&c.algorithm) {
                    return Err(StoreError::InvalidRequest(format!(
                        "The upload was created using a {} checksum. The complete request must include the checksum \
                         for each part. It was missing for part {n} in the request.",
                        c.algorithm.name().to_ascii_lowercase()
                    )));
                }
            }
            if i + 1 < requested.len() && p.size < MIN_PART_SIZE {
                return Err(StoreError::EntityTooSmall);
            }
            parts.push(p.clone());
        }
        let checksum = match record.checksum {
            Some(c) => {
                let of: Vec<_> = parts
                    .iter()
                    .map(|p| (p.number, p.checksums.get(&c.algorithm).map(String::as_str), p.size))
                    .collect();
                Some((c, c.of_parts(&of)?))
            }
            None => None,
        };
        for (alg, want) in expected {
            if let Some((c, got)) = checksum.as_ref().filter(|(c, _)| c.algorithm == *alg) {
                if got != want.trim() {
                    return Err(StoreError::BadDigest(format!(
                        "The {} you specified did not match the calculated checksum.",
                        c.algorithm.name()
                    )));
                }
            }
        }
        let mut md5 = Md5::new();
        for p in &parts {
            md5.update(hex::decode(&p.etag).unwrap_or_default());
        }
        let etag = format!("{}-{}", hex::encode(md5.finalize()), parts.len());
        let mapped = map_key(key)?;
        let tree = self.root.tree().await?;
        self.writes.preflight(&tree, bucket, &mapped).await?;
        // The conditions now, so that a failed one gets its own status
        // (412, 404) before the 200 starts; they are decided again, on the
        // share, when the object is published.
        let check = PutRequest { conditions: conditions.clone(), ..Default::default() };
        self.writes.check_write_conditions(&tree, bucket, &mapped, &check).await?;
        // The upload's lock settings, or the bucket's default retention.
        let mut stamp =
            ObjectMeta { retention: record.meta.retention, legal_hold: record.meta.legal_hold, ..Default::default() };
        let target = Target::Object { bucket: bucket.into(), key: mapped.clone() };
        let version_id = self.root.stamp_version(&tree, &target, &mut stamp).await?;
        Ok(CompletePlan {
            bucket: bucket.into(),
            key: mapped,
            upload_id: id.into(),
            record,
            parts,
            etag,
            checksum,
            conditions,
            record_version: stamp.version_id,
            version_id,
            retention: stamp.retention,
        })
    }

    /// The record of `key` if it is the object upload `id` completed (and
    /// nothing has replaced it since): its ETag and checksums are what a
    /// repeated CompleteMultipartUpload answers, as S3 does, once the
    /// upload itself is gone.
    ///
    /// Errors: NoSuchBucket; SMB errors.
    pub async fn completed_from(&self, bucket: &str, key: &str, id: &str) -> StoreResult<Option<ObjectMeta>> {
        match self.writes.reads.head_uncached(bucket, key).await {
            Ok(info) if info.meta.upload_id.as_deref() == Some(id) => Ok(Some(info.meta)),
            Ok(_) | Err(StoreError::NoSuchKey) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Publishes a checked upload and removes it, in the upload's turn
    /// ([`Uploads::in_turn`]; an upload whose files cannot be removed
    /// is logged and left to the sweep: the object is published).
    ///
    /// Errors: NoSuchUpload (aborted, or completed by another request,
    /// since the check); publish errors; Busy if a part's copy came up
    /// short, or the turn stayed taken.
    pub async fn complete_upload(&self, plan: CompletePlan) -> StoreResult<PutResult> {
        let id = plan.upload_id.clone();
        // Looked at again in the turn: an abort before it removed it all.
        let complete = async {
            self.upload_record(&id).await?;
            self.complete_in_turn(plan).await
        };
        self.in_turn(&id, complete).await
    }

    /// [`Uploads::complete_upload`] in the upload's turn.
    async fn complete_in_turn(&self, plan: CompletePlan) -> StoreResult<PutResult> {
        let target = Target::Object { bucket: plan.bucket.clone(), key: plan.key.clone() };
        // The completed object's record: the upload's metadata, the
        // multipart ETag, the part sizes (for partNumber GETs) and, for an
        // upload with a checksum, the object's and the parts'.
        let checksums: BTreeMap<Algorithm, String> =
            plan.checksum.iter().map(|(c, v)| (c.algorithm, v.clone())).collect();
        let part_checksums: Vec<String> = match &plan.checksum {
            Some((c, _)) => {
                plan.parts.iter().map(|p| p.checksums.get(&c.algorithm).cloned().unwrap_or_default()).collect()
            }
            None => Vec::new(),
        };
        let plain: u64 = plan.parts.iter().map(|p| p.size).sum();
        // Sealed parts (SSE-C): the object is their stored bytes, and its
        // record says which part holds which of its bytes.
        let sse_c = plan.record.sse_c.as_ref().map(|upload| SseCRecord {
            size: plain,
            parts: plan
                .parts
                .iter()
                .map(|p| SealedPart { n: p.number as u32, size: p.size, salt: p.salt.clone().unwrap_or_default() })
                .collect(),
            ..upload.clone()
        });
        let final_meta = |size: u64, disk_id: Option<u64>| ObjectMeta {
            etag: plan.etag.clone(),
            size,
            disk_id,
            sse_c: sse_c.clone(),
            parts: plan.parts.iter().map(|p| p.size).collect(),
            key: Some(plan.key.original()),
            upload_id: Some(plan.upload_id.clone()),
            checksums: checksums.clone(),
            checksum_type: plan.checksum.as_ref().map(|(c, _)| c.kind),
            part_checksums: part_checksums.clone(),
            version_id: plan.record_version.clone(),
            retention: plan.retention,
            ..plan.record.meta.clone()
        };
        let stride = plan.parts[0].size;
        let last = plan.parts.len() - 1;
        let in_place = stride > 0
            && plan.record.sse_c.is_none()
            && plan.parts.iter().enumerate().all(|(i, p)| {
                p.number == i as i32 + 1
                    && (if i == last { p.size <= stride } else { p.size == stride })
                    && p.data_offset.is_none_or(|o| o == i as u64 * stride)
            });
        let size: u64 = plan.parts.iter().map(|p| p.stored).sum();
        if in_place {
            self.complete_in_place(&plan, stride, &target, final_meta(size, None)).await?;
        } else {
            self.complete_by_copy(&plan, &target, |d| final_meta(size, d)).await?;
        }
        // The object is published: that is the answer (and its event),
        // whatever becomes of the upload's own files, which the sweep
        // removes once the upload expires.
        if let Err(e) = self.remove_upload_files(&plan.upload_id).await {
            tracing::warn!(upload_id = plan.upload_id, error = %e,
                "upload completed, but its files stay until the sweep removes them");
        }
        Ok(PutResult { etag: plan.etag, checksums, size: plain, last_modified: None, version_id: plan.version_id })
    }
}
