//! Multipart uploads: Create, UploadPart, UploadPartCopy, Complete (with
//! whitespace keep-alive while the parts are joined), Abort, ListParts and
//! ListMultipartUploads.

use std::time::{Duration, UNIX_EPOCH};

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use tracing::Instrument;

use super::convert::*;
use super::object::copy_source;
use super::sse_c::answer_for;
use super::{s3_error, Gateway};
use crate::store::checksum::Algorithm;
use crate::store::sse_c::CustomerKey;
use crate::store::types::PutRequest;
use crate::store::types::PutResult;
use crate::store::uploads::complete::RequestedPart;
use crate::store::uploads::part_checksums::{self, UploadChecksum};
use crate::store::uploads::upload_listing::UploadMarker;
use crate::store::StoreError;

pub async fn create(
    gw: &Gateway,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let i = req.input;
    let sse_c = super::sse_c::customer_key_of!(i)?;
    let mut meta = meta_of!(i)?;
    // Kept in the upload's record until the object is completed.
    meta.tags = super::object::header_tags(i.tagging.as_deref())?;
    let hold = i.object_lock_legal_hold_status.as_ref();
    let until = i.object_lock_retain_until_date.as_ref();
    super::object_lock::write_lock(&mut meta, i.object_lock_mode.as_ref(), until, hold)?;
    super::object_lock::check_bucket_locks(gw, &i.bucket, &meta).await?;
    let checksum = part_checksums::of_create(
        i.checksum_algorithm.as_ref().map(|a| a.as_str()),
        i.checksum_type.as_ref().map(|t| t.as_str()),
    )
    .map_err(s3_error)?;
    let uploads = gw.store.uploads();
    let id = uploads.create_upload(&i.bucket, &i.key, meta, checksum, sse_c.as_ref()).await.map_err(s3_error)?;
    let (algorithm, kind) = checksum_dto(checksum);
    let (sse_customer_algorithm, sse_customer_key_md5) = answer_for(sse_c.as_ref().map(CustomerKey::key_md5));
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(id),
        checksum_algorithm: algorithm,
        checksum_type: kind,
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}

pub async fn upload_part(gw: &Gateway, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
    let trailers = req.trailing_headers.clone();
    let headers = req.headers.clone();
    let undeclared = req.extensions.get::<crate::precheck::UndeclaredLength>().is_some();
    let i = req.input;
    // As for PutObject: a missing upload is told before the body is sent.
    if crate::precheck::expects_continue(&headers) {
        gw.store.uploads().upload_exists(&i.bucket, &i.key, &i.upload_id).await.map_err(s3_error)?;
    }
    let put = PutRequest {
        content_md5: content_md5(i.content_md5, &headers),
        checksums: checksums_from(
            i.checksum_crc32,
            i.checksum_crc32c,
            i.checksum_crc64nvme,
            i.checksum_sha1,
            i.checksum_sha256,
        ),
        checksum_algorithms: requested_algorithms(i.checksum_algorithm.as_ref(), &headers)?,
        trailer_checksums: trailer_algorithms(&headers),
        content_length: body_length(&headers, i.content_length, undeclared),
        sse_c: super::sse_c::customer_key_of!(i)?,
        ..Default::default()
    };
    let (sse_customer_algorithm, sse_customer_key_md5) = answer_for(put.sse_c.as_ref().map(CustomerKey::key_md5));
    let body =
        i.body.unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>()));
    let r = gw
        .store
        .uploads()
        .upload_part(&i.bucket, &i.key, &i.upload_id, i.part_number, body, put, || trailer_checksums(&trailers))
        .await
        .map_err(s3_error)?;
    let c = |a: Algorithm| r.checksums.get(&a).cloned();
    Ok(S3Response::new(UploadPartOutput {
        e_tag: Some(etag(&r.etag)),
        checksum_crc32: c(Algorithm::Crc32),
        checksum_crc32c: c(Algorithm::Crc32c),
        checksum_crc64nvme: c(Algorithm::Crc64nvme),
        checksum_sha1: c(Algorithm::Sha1),
        checksum_sha256: c(Algorithm::Sha256),
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}

/// Parses `bytes=first-last` of x-amz-copy-source-range.
fn copy_range(r: &str) -> S3Result<std::ops::Range<u64>> {
    let bad = || {
        S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last",
        )
    };
    let (a, b) = r.strip_prefix("bytes=").and_then(|s| s.split_once('-')).ok_or_else(bad)?;
    let first: u64 = a.trim().parse().map_err(|_| bad())?;
    let last: u64 = b.trim().parse().map_err(|_| bad())?;
    if last < first {
        return Err(bad());
    }
    // u64::MAX as `last` would wrap; no object is that large anyway.
    let end = last.checked_add(1).ok_or_else(bad)?;
    Ok(first..end)
}

pub async fn upload_part_copy(
    gw: &Gateway,
    req: S3Request<UploadPartCopyInput>,
) -> S3Result<S3Response<UploadPartCopyOutput>> {
    let i = req.input;
    let (sb, sk, source_version) = copy_source(&i.copy_source)?;
    super::object::check_same_root(gw, &sb, &i.bucket)?;
    let range = i.copy_source_range.as_deref().map(copy_range).transpose()?;
    let sse_c = super::sse_c::customer_key_of!(i)?;
    let (sse_customer_algorithm, sse_customer_key_md5) = answer_for(sse_c.as_ref().map(CustomerKey::key_md5));
    let source_key = super::sse_c::source_key_of!(i)?;
    let cond = conditions(
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
    );
    let (info, r) = gw
        .store
        .uploads()
        .upload_part_copy(
            &i.bucket,
            &i.key,
            &i.upload_id,
            i.part_number,
            (&sb, &sk, source_version.clone()),
            range,
            (source_key, sse_c),
            |info| cond.check_copy_source(info.current()),
        )
        .await
        .map_err(s3_error)?;
    Ok(S3Response::new(UploadPartCopyOutput {
        copy_source_version_id: source_version,
        sse_customer_algorithm,
        sse_customer_key_md5,
        copy_part_result: Some({
            let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&r.checksums);
            CopyPartResult {
                e_tag: Some(etag(&r.etag)),
                last_modified: Some(timestamp(info.last_modified)),
                checksum_crc32: crc32,
                checksum_crc32c: crc32c,
                checksum_crc64nvme: crc64nvme,
                checksum_sha1: sha1,
                checksum_sha256: sha256,
            }
        }),
        ..Default::default()
    }))
}

/// An upload's checksum as s3s writes it (`x-amz-checksum-algorithm`,
/// `x-amz-checksum-type` or their XML elements).
fn checksum_dto(c: Option<UploadChecksum>) -> (Option<ChecksumAlgorithm>, Option<ChecksumType>) {
    match c {
        Some(c) => {
            (Some(ChecksumAlgorithm::from_static(c.algorithm.name())), Some(ChecksumType::from_static(c.kind.name())))
        }
        None => (None, None),
    }
}

pub async fn complete(
    gw: &Gateway,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let i = req.input;
    let parts: Vec<RequestedPart> = i
        .multipart_upload
        .and_then(|m| m.parts)
        .unwrap_or_default()
        .into_iter()
        .map(|p| RequestedPart {
            number: p.part_number.unwrap_or(0),
            etag: p.e_tag.map(|e| e.value().to_string()).unwrap_or_default(),
            checksums: checksums_from(
                p.checksum_crc32,
                p.checksum_crc32c,
                p.checksum_crc64nvme,
                p.checksum_sha1,
                p.checksum_sha256,
            ),
        })
        .collect();
    let expected =
        checksums_from(i.checksum_crc32, i.checksum_crc32c, i.checksum_crc64nvme, i.checksum_sha1, i.checksum_sha256);
    let sse_c = super::sse_c::customer_key_of!(i)?;
    if parts.is_empty() {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema",
        ));
    }
    // Validate before committing to a 200 with keep-alive whitespace, so
    // request errors get their own status code.
    let cond = conditions(i.if_match.as_ref(), i.if_none_match.as_ref(), None, None);
    let plan = match gw.store.uploads().plan_complete(&i.bucket, &i.key, &i.upload_id, &parts, &expected, cond).await {
        Ok(p) => p,
        // Completed already: S3 answers the same again.
        Err(StoreError::NoSuchUpload) => match gw.store.uploads().completed_from(&i.bucket, &i.key, &i.upload_id).await
        {
            Ok(Some(m)) => {
                let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&m.checksums);
                return Ok(S3Response::new(CompleteMultipartUploadOutput {
                    location: Some(format!("/{}/{}", i.bucket, i.key)),
                    bucket: Some(i.bucket),
                    key: Some(i.key),
                    e_tag: Some(etag(&m.etag)),
                    checksum_crc32: crc32,
                    checksum_crc32c: crc32c,
                    checksum_crc64nvme: crc64nvme,
                    checksum_sha1: sha1,
                    checksum_sha256: sha256,
                    checksum_type: (!m.checksums.is_empty()).then(|| checksum_type_of(&m)),
                    ..Default::default()
                }));
            }
            Ok(None) => return Err(s3_error(StoreError::NoSuchUpload)),
            Err(e) => return Err(s3_error(e)),
        },
        Err(e) => return Err(s3_error(e)),
    };
    // A key is not needed here (the parts are sealed already), but one
    // given must be the upload's, as AWS checks it.
    if let (Some(given), Some(upload)) = (&sse_c, &plan.record.sse_c) {
        if given.key_md5() != upload.key_md5 {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "The provided encryption parameters did not match the ones used originally.",
            ));
        }
    }
    let (gw, extensions) = (gw.clone(), req.extensions.clone());
    let (bucket, key) = (i.bucket, i.key);
    let kind = plan.checksum.as_ref().map(|(c, _)| ChecksumType::from_static(c.kind.name()));
    let version_id = plan.version_id.clone();
    // Completed and reported in a task of its own: a client that goes
    // while the keep-alive answer runs drops this future, and a retry of
    // a completed upload answers without reporting it again.
    let completing = tokio::spawn(
        async move {
            let (upload_id, uploads) = (plan.upload_id.clone(), gw.store.uploads());
            let r = match uploads.complete_upload(plan).await {
                Ok(r) => r,
                // Completed by another request meanwhile (an SDK's retry
                // of this one): S3 answers the same, reported once.
                Err(StoreError::NoSuchUpload) => {
                    let done = uploads.completed_from(&bucket, &key, &upload_id).await?;
                    let m = done.ok_or(StoreError::NoSuchUpload)?;
                    let size = m.sse_c.as_ref().map_or(m.size, |e| e.size);
                    let (etag, checksums, version_id) = (m.etag, m.checksums, m.version_id);
                    let r = PutResult { size, etag, checksums, last_modified: None, version_id };
                    return Ok((r, bucket, key));
                }
                Err(e) => return Err(e),
            };
            let created = Some((r.size, r.etag.as_str()));
            let (name, version) = ("s3:ObjectCreated:CompleteMultipartUpload", r.version_id.as_deref());
            gw.emit(&extensions, name, &bucket, &key, created, version).await;
            Ok::<_, StoreError>((r, bucket, key))
        }
        .in_current_span(),
    );
    let fut = async move {
        let joined = completing.await.map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?;
        let (r, bucket, key) = joined.map_err(s3_error)?;
        let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&r.checksums);
        Ok(CompleteMultipartUploadOutput {
            bucket: Some(bucket.clone()),
            key: Some(key.clone()),
            e_tag: Some(etag(&r.etag)),
            location: Some(format!("/{bucket}/{key}")),
            checksum_crc32: crc32,
            checksum_crc32c: crc32c,
            checksum_crc64nvme: crc64nvme,
            checksum_sha1: sha1,
            checksum_sha256: sha256,
            checksum_type: kind,
            ..Default::default()
        })
    };
    Ok(S3Response::new(CompleteMultipartUploadOutput { future: Some(Box::pin(fut)), version_id, ..Default::default() }))
}

pub async fn abort(
    gw: &Gateway,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let i = req.input;
    gw.store.uploads().abort_upload(&i.bucket, &i.key, &i.upload_id).await.map_err(s3_error)?;
    Ok(S3Response::new(AbortMultipartUploadOutput::default()))
}

pub async fn list_parts(gw: &Gateway, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let i = req.input;
    let max = i.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
    let marker = i.part_number_marker.unwrap_or(0);
    let (upload, all) = gw.store.uploads().list_parts(&i.bucket, &i.key, &i.upload_id).await.map_err(s3_error)?;
    let (checksum_algorithm, checksum_type) = checksum_dto(upload.checksum);
    let after: Vec<_> = all.into_iter().filter(|p| p.number > marker).collect();
    let truncated = after.len() > max;
    let page: Vec<_> = after.into_iter().take(max).collect();
    let next = page.last().map(|p| p.number).filter(|_| truncated);
    Ok(S3Response::new(ListPartsOutput {
        bucket: Some(i.bucket),
        key: Some(i.key),
        upload_id: Some(i.upload_id),
        max_parts: Some(max as i32),
        part_number_marker: i.part_number_marker,
        next_part_number_marker: next,
        is_truncated: Some(truncated),
        owner: Some(owner()),
        parts: Some(
            page.into_iter()
                .map(|p| {
                    let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&p.checksums);
                    Part {
                        part_number: Some(p.number),
                        size: Some(p.size as i64),
                        e_tag: Some(etag(&p.etag)),
                        last_modified: Some(timestamp(p.last_modified)),
                        checksum_crc32: crc32,
                        checksum_crc32c: crc32c,
                        checksum_crc64nvme: crc64nvme,
                        checksum_sha1: sha1,
                        checksum_sha256: sha256,
                    }
                })
                .collect(),
        ),
        checksum_algorithm,
        checksum_type,
        ..Default::default()
    }))
}

pub async fn list_uploads(
    gw: &Gateway,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let i = req.input;
    // encoding-type=url encodes every key-like field exactly once.
    let encode = super::list::wants_url(&i.encoding_type)?;
    let enc = |s: Option<String>| if encode { s.map(|s| url_encode(&s)) } else { s };
    let prefix = i.prefix.clone().unwrap_or_default();
    let max = i.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
    // An upload-id-marker counts only with a key-marker, as on AWS.
    let marker = i
        .key_marker
        .as_ref()
        .map(|k| UploadMarker { key: k.clone(), upload_id: i.upload_id_marker.clone().filter(|id| !id.is_empty()) });
    let (all, truncated) =
        gw.store.uploads().list_uploads(&i.bucket, &prefix, marker.as_ref(), max).await.map_err(s3_error)?;
    let (nk, nu) = match all.last() {
        Some(u) if truncated => (Some(u.record.key.clone()), Some(u.upload_id.clone())),
        _ => (None, None),
    };
    let uploads = all
        .into_iter()
        .map(|u| MultipartUpload {
            key: enc(Some(u.record.key)),
            upload_id: Some(u.upload_id),
            initiated: Some(Timestamp::from(UNIX_EPOCH + Duration::from_secs(u.record.initiated.max(0) as u64))),
            owner: Some(owner()),
            initiator: Some(Initiator { display_name: Some("smbgate".into()), id: Some("smbgate".into()) }),
            storage_class: Some(StorageClass::from_static(StorageClass::STANDARD)),
            ..Default::default()
        })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(i.bucket),
        prefix: enc(i.prefix),
        key_marker: enc(i.key_marker),
        upload_id_marker: i.upload_id_marker,
        next_key_marker: enc(nk),
        next_upload_id_marker: nu,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        uploads: Some(uploads),
        encoding_type: i.encoding_type,
        ..Default::default()
    }))
}
