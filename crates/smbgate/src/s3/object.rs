//! Object operations: PutObject, GetObject, HeadObject, DeleteObject(s),
//! CopyObject and the object ACL stubs.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::bucket::full_control;
use super::convert::*;
use super::object_lock::{check_lock_digest, read_lock, write_lock};
use super::sse_c::{answer_fields, answer_for, customer_key_of};
use super::versioning::answer_version;
use super::{s3_error, Gateway};
use crate::store::checksum::Algorithm;
use crate::store::conditions::EtagCondition;
use crate::store::keys::map_key;
use crate::store::reads::read_plan::{ByteRange, Read, ReadRequest};
use crate::store::sse_c::CustomerKey;
use crate::store::types::{ObjectInfo, PutRequest, Target};
use crate::store::writes::copy::CopyRequest;

/// Most keys one DeleteObjects request may name.
const MAX_DELETE_KEYS: usize = 1000;

/// The checksums a GET or HEAD answers with, when `enabled`
/// (`x-amz-checksum-mode: ENABLED`): the object's, for the whole object;
/// part `part`'s own, for `partNumber` of a multipart object made with a
/// checksum, as AWS answers; none for any other part of an object
/// (`partial`: a range or part), which no stored checksum covers.
fn checksum_fields(info: &ObjectInfo, enabled: bool, part: Option<i32>, partial: bool) -> [Option<String>; 5] {
    let m = &info.meta;
    match (enabled, part.and_then(|n| usize::try_from(n).ok())) {
        (false, _) => Default::default(),
        (true, Some(n)) if !m.parts.is_empty() => {
            let sum = n.checked_sub(1).and_then(|i| m.part_checksums.get(i));
            match (m.checksums.keys().next(), sum) {
                (Some(alg), Some(sum)) => Algorithm::ALL.map(|a| (a == *alg).then(|| sum.clone())),
                _ => Default::default(),
            }
        }
        (true, _) if partial => Default::default(),
        (true, _) => super::convert::checksum_fields(&m.checksums),
    }
}

/// The store's [`ReadRequest`] of a GetObject or HeadObject input: its
/// conditional headers, `partNumber`, `Range` and SSE-C key.
///
/// Errors: the SSE-C headers' ([`super::sse_c::customer_key`]).
macro_rules! read_request {
    ($i:expr) => {
        ReadRequest {
            sse_c: customer_key_of!($i)?,
            conditions: conditions(
                $i.if_match.as_ref(),
                $i.if_none_match.as_ref(),
                $i.if_modified_since.as_ref(),
                $i.if_unmodified_since.as_ref(),
            ),
            part_number: $i.part_number,
            range: $i.range.as_ref().map(byte_range),
        }
    };
}

/// An s3s Range as the store's [`ByteRange`].
fn byte_range(r: &Range) -> ByteRange {
    match *r {
        Range::Int { first, last } => ByteRange::FromTo { first, last },
        Range::Suffix { length } => ByteRange::Suffix { length },
    }
}

/// The tags of an `x-amz-tagging` header (none without one).
///
/// Errors: 400 InvalidTag.
pub(super) fn header_tags(header: Option<&str>) -> S3Result<crate::store::tags::TagSet> {
    header.map_or(Ok(Vec::new()), |h| crate::store::tags::parse_header(h).map_err(s3_error))
}

/// Builds a GetObjectOutput or HeadObjectOutput: the headers both share
/// (length, range, ETag, times, Content-* with response-* overrides, user
/// metadata, parts count, checksums when asked for and whole), plus extras.
macro_rules! object_output {
    ($ty:ident, $info:expr, $i:expr, $range:expr, $partial:expr, { $($extra:tt)* }) => {{
        let m = $info.meta.clone();
        let [crc32, crc32c, crc64, sha1, sha256] = checksum_fields(
            &$info,
            $i.checksum_mode.as_ref().is_some_and(|c| c.as_str() == ChecksumMode::ENABLED),
            $i.part_number,
            $partial,
        );
        let any_checksum = [&crc32, &crc32c, &crc64, &sha1, &sha256].iter().any(|c| c.is_some());
        let (object_lock_mode, object_lock_retain_until_date, object_lock_legal_hold_status) = read_lock(&m);
        let (sse_customer_algorithm, sse_customer_key_md5) = answer_fields(&m);
        $ty {
            $($extra)*
            sse_customer_algorithm,
            sse_customer_key_md5,
            object_lock_mode,
            object_lock_retain_until_date,
            object_lock_legal_hold_status,
            content_length: Some(($range.end - $range.start) as i64),
            content_range: $partial
                .then(|| format!("bytes {}-{}/{}", $range.start, $range.end.saturating_sub(1), $info.size)),
            accept_ranges: Some("bytes".into()),
            e_tag: Some(etag(&$info.etag)),
            last_modified: Some(timestamp($info.last_modified)),
            content_type: $i.response_content_type.or(m.content_type).or_else(|| Some("binary/octet-stream".into())),
            content_encoding: $i.response_content_encoding.or(m.content_encoding),
            content_disposition: $i.response_content_disposition.or(m.content_disposition),
            content_language: $i.response_content_language.or(m.content_language),
            cache_control: $i.response_cache_control.or(m.cache_control),
            expires: $i.response_expires.or_else(|| m.expires.as_deref().and_then(parse_http_date)),
            metadata: (!m.user.is_empty()).then(|| m.user.clone().into_iter().collect()),
            parts_count: (!m.parts.is_empty() && $i.part_number.is_some()).then_some(m.parts.len() as i32),
            checksum_crc32: crc32,
            checksum_crc32c: crc32c,
            checksum_crc64nvme: crc64,
            checksum_sha1: sha1,
            // A single PUT's checksums cover the whole object; a multipart
            // upload's (and its parts') are of its type.
            checksum_type: any_checksum.then(|| checksum_type_of(&$info.meta)),
            checksum_sha256: sha256,
            ..Default::default()
        }
    }};
}

pub async fn put_object(gw: &Gateway, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
    let trailers = req.trailing_headers.clone();
    let headers = req.headers.clone();
    let undeclared = req.extensions.get::<crate::precheck::UndeclaredLength>().is_some();
    let is_form = req.extensions.get::<super::FormUpload>().is_some();
    let event = match req.extensions.get::<super::FormUpload>() {
        Some(_) => "s3:ObjectCreated:Post",
        None => "s3:ObjectCreated:Put",
    };
    let i = req.input;
    // A client that waits for 100 Continue learns of a missing bucket
    // before it sends the body: the body is only polled (and so the 100
    // only sent) after this check.
    if crate::precheck::expects_continue(&headers) {
        gw.store.buckets().head_bucket(&i.bucket).await.map_err(s3_error)?;
    }
    let sse_c = customer_key_of!(i)?;
    let (sse_customer_algorithm, sse_customer_key_md5) = answer_for(sse_c.as_ref().map(CustomerKey::key_md5));
    let mut meta = meta_of!(i)?;
    meta.tags = header_tags(i.tagging.as_deref())?;
    let lock_hold = i.object_lock_legal_hold_status.as_ref();
    write_lock(&mut meta, i.object_lock_mode.as_ref(), i.object_lock_retain_until_date.as_ref(), lock_hold)?;
    if !is_form {
        check_lock_digest(gw, &i.bucket, &meta, &headers).await?;
    }
    let put = PutRequest {
        meta,
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
        conditions: conditions(i.if_match.as_ref(), i.if_none_match.as_ref(), None, None),
        pace: Default::default(),
        sse_c,
        sse_c_part: None,
    };
    let body = i.body.unwrap_or_else(|| {
        s3s::dto::StreamingBlob::wrap(futures::stream::empty::<Result<bytes::Bytes, std::io::Error>>())
    });
    let r = gw
        .store
        .writes()
        .put_object(&i.bucket, &i.key, body, put, || trailer_checksums(&trailers))
        .await
        .map_err(s3_error)?;
    gw.emit(&req.extensions, event, &i.bucket, &i.key, Some((r.size, &r.etag)), r.version_id.as_deref()).await;
    let c = |a: Algorithm| r.checksums.get(&a).cloned();
    Ok(S3Response::new(PutObjectOutput {
        e_tag: Some(etag(&r.etag)),
        checksum_crc32: c(Algorithm::Crc32),
        checksum_crc32c: c(Algorithm::Crc32c),
        checksum_crc64nvme: c(Algorithm::Crc64nvme),
        checksum_sha1: c(Algorithm::Sha1),
        checksum_sha256: c(Algorithm::Sha256),
        version_id: r.version_id,
        sse_customer_algorithm,
        sse_customer_key_md5,
        ..Default::default()
    }))
}

pub async fn get_object(gw: &Gateway, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
    let i = req.input;
    if let Some(v) = gw.sosapi_object(&i.bucket, &i.key).await {
        return Ok(S3Response::new(super::sosapi::get_output(v?)));
    }
    let req = read_request!(i);
    let state = gw.versioning(&i.bucket).await?;
    let reads = gw.store.reads();
    let read = match &i.version_id {
        Some(v) => reads.get_version(&i.bucket, &i.key, v, &req).await,
        None => reads.get_object(&i.bucket, &i.key, &req).await,
    };
    let Read { info, plan, body } = match read {
        Ok(read) => read,
        Err(e) => return Err(gw.not_found(&i.bucket, &i.key, e, state).await),
    };
    let (range, partial) = (plan.range, plan.partial);
    let tag_count = (!info.meta.tags.is_empty()).then_some(info.meta.tags.len() as i32);
    let version_id = answer_version(&info, state, i.version_id.is_some());
    let out = object_output!(GetObjectOutput, info, i, range, partial, {
        body: Some(StreamingBlob::wrap(body)),
        tag_count,
        version_id,
    });
    Ok(S3Response::new(out))
}

pub async fn head_object(gw: &Gateway, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
    let i = req.input;
    if let Some(v) = gw.sosapi_object(&i.bucket, &i.key).await {
        return Ok(S3Response::new(super::sosapi::head_output(v?)));
    }
    let req = read_request!(i);
    let state = gw.versioning(&i.bucket).await?;
    let reads = gw.store.reads();
    let head = match &i.version_id {
        Some(v) => reads.head_version(&i.bucket, &i.key, v, &req).await,
        None => reads.head_read(&i.bucket, &i.key, &req).await,
    };
    let (info, plan) = match head {
        Ok(head) => head,
        Err(e) => return Err(gw.not_found(&i.bucket, &i.key, e, state).await),
    };
    let (range, partial) = (plan.range, plan.partial);
    let tags = info.meta.tags.len();
    let version_id = answer_version(&info, state, i.version_id.is_some());
    let mut resp = S3Response::new(object_output!(HeadObjectOutput, info, i, range, partial, { version_id, }));
    resp.status = partial.then_some(http::StatusCode::PARTIAL_CONTENT);
    // s3s's HeadObjectOutput has no field for it; GET and HEAD both carry it.
    if tags > 0 {
        resp.headers.insert("x-amz-tagging-count", http::HeaderValue::from(tags));
    }
    Ok(resp)
}

pub async fn delete_object(
    gw: &Gateway,
    req: S3Request<DeleteObjectInput>,
) -> S3Result<S3Response<DeleteObjectOutput>> {
    let i = req.input;
    let cond = conditions(i.if_match.as_ref(), None, None, None);
    let bypass = gw.bypass(i.bypass_governance_retention);
    let version = i.version_id.as_deref();
    let removed = gw.delete_reported(&req.extensions, &i.bucket, &i.key, version, &cond, bypass).await?;
    Ok(S3Response::new(DeleteObjectOutput {
        delete_marker: removed.as_ref().and_then(|r| r.delete_marker.then_some(true)),
        version_id: removed.map(|r| r.version_id),
        ..Default::default()
    }))
}

pub async fn delete_objects(
    gw: &Gateway,
    req: S3Request<DeleteObjectsInput>,
) -> S3Result<S3Response<DeleteObjectsOutput>> {
    // S3 requires an integrity header on DeleteObjects (Content-MD5 or an
    // x-amz-checksum-*), so a corrupted key list never deletes the wrong
    // objects.
    let has_digest = req.headers.contains_key("content-md5")
        || req.headers.keys().any(|k| k.as_str().starts_with("x-amz-checksum-") && k != "x-amz-checksum-type")
        || req.headers.contains_key("x-amz-sdk-checksum-algorithm")
            && !super::convert::trailer_algorithms(&req.headers).is_empty();
    if !has_digest {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            "Missing required header for this request: Content-MD5 (or an x-amz-checksum-* header)",
        ));
    }
    let i = req.input;
    // S3 takes at most 1,000 keys per request and answers MalformedXML
    // beyond that, before deleting any.
    if i.delete.objects.len() > MAX_DELETE_KEYS {
        return Err(S3Error::with_message(
            S3ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema",
        ));
    }
    gw.store.buckets().head_bucket(&i.bucket).await.map_err(s3_error)?;
    let quiet = i.delete.quiet.unwrap_or(false);
    let bypass = gw.bypass(i.bypass_governance_retention);
    let mut deleted = Vec::new();
    let mut errors = Vec::new();
    for obj in i.delete.objects {
        let version = obj.version_id.as_deref();
        let none = Default::default();
        match gw.delete_reported(&req.extensions, &i.bucket, &obj.key, version, &none, bypass).await {
            Ok(removed) => {
                if !quiet {
                    deleted.push(deleted_entry(obj.key, obj.version_id, removed));
                }
            }
            Err(s) => {
                errors.push(Error {
                    code: Some(s.code().as_str().to_string()),
                    key: Some(obj.key),
                    message: s.message().map(|m| m.to_string()),
                    version_id: obj.version_id,
                });
            }
        }
    }
    Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
}

/// A DeleteObjects `<Deleted>` entry for `key` (asked as `version_id`), as
/// AWS writes it: a marker made carries `DeleteMarker` and its ID as
/// `DeleteMarkerVersionId`; a version removed by ID names it (and says if
/// it was a marker).
fn deleted_entry(
    key: String,
    version_id: Option<String>,
    removed: Option<crate::store::versions::removal::Removed>,
) -> DeletedObject {
    match (removed, version_id) {
        (Some(r), None) if r.delete_marker => DeletedObject {
            key: Some(key),
            delete_marker: Some(true),
            delete_marker_version_id: Some(r.version_id),
            ..Default::default()
        },
        (Some(r), Some(v)) => DeletedObject {
            key: Some(key),
            version_id: Some(v),
            delete_marker: r.delete_marker.then_some(true),
            delete_marker_version_id: r.delete_marker.then_some(r.version_id),
        },
        (_, version_id) => DeletedObject { key: Some(key), version_id, ..Default::default() },
    }
}

/// `(bucket, key, version ID)` of a copy source.
pub fn copy_source(src: &CopySource) -> S3Result<(String, String, Option<String>)> {
    match src {
        CopySource::Bucket { bucket, key, version_id } => {
            Ok((bucket.to_string(), key.to_string(), version_id.as_deref().map(str::to_string)))
        }
        _ => Err(S3Error::with_message(S3ErrorCode::NotImplemented, "access point copy sources are not supported")),
    }
}

/// Refuses a copy between buckets of different roots (a configured
/// bucket and another, or `--share`): the server copies only within one
/// share session, and smbgate does not stream copies through itself.
///
/// Errors: NotImplemented (501).
pub fn check_same_root(gw: &Gateway, source_bucket: &str, target_bucket: &str) -> S3Result<()> {
    if gw.identities.same_root(source_bucket, target_bucket) {
        return Ok(());
    }
    Err(S3Error::with_message(
        S3ErrorCode::NotImplemented,
        format!("copies between {source_bucket} and {target_bucket} are not supported: they are on different shares"),
    ))
}

pub async fn copy_object(gw: &Gateway, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
    let i = req.input;
    let (sb, sk, source_version) = copy_source(&i.copy_source)?;
    check_same_root(gw, &sb, &i.bucket)?;
    let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
    let sse_c = customer_key_of!(i)?;
    let (sse_customer_algorithm, sse_customer_key_md5) = answer_for(sse_c.as_ref().map(CustomerKey::key_md5));
    // A copy onto itself that changes its SSE-C key (or seals or opens
    // it) changes its encryption attributes, which AWS allows.
    let new_encryption = sse_c.is_some() || i.copy_source_sse_customer_key.is_some();
    if sb == i.bucket && sk == i.key && !replace && source_version.is_none() && !new_encryption {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidRequest,
            "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
        ));
    }
    let new_meta = match replace {
        true => Some(meta_of!(i)?),
        false => None,
    };
    // The copy's own lock settings: a source's never carry over.
    let mut lock = crate::store::meta::ObjectMeta::default();
    let hold = i.object_lock_legal_hold_status.as_ref();
    write_lock(&mut lock, i.object_lock_mode.as_ref(), i.object_lock_retain_until_date.as_ref(), hold)?;
    // x-amz-tagging-directive: COPY (the default) takes the source's tags,
    // REPLACE the request's (none without x-amz-tagging).
    let tags = match i.tagging_directive.as_ref().map(|d| d.as_str()) {
        Some(TaggingDirective::REPLACE) => Some(header_tags(i.tagging.as_deref())?),
        _ => None,
    };
    let cond = conditions(
        i.copy_source_if_match.as_ref(),
        i.copy_source_if_none_match.as_ref(),
        i.copy_source_if_modified_since.as_ref(),
        i.copy_source_if_unmodified_since.as_ref(),
    );
    let target = Target::Object { bucket: i.bucket.clone(), key: map_key(&i.key).map_err(|e| s3_error(e.into()))? };
    // The target's own If-Match / If-None-Match (s3s has no fields for
    // them on CopyObject): decided on the share when the copy is published.
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok()).map(EtagCondition::parse);
    let target_cond = crate::store::conditions::Conditions {
        if_match: header("if-match"),
        if_none_match: header("if-none-match"),
        ..Default::default()
    };
    let (_, r) = gw
        .store
        .writes()
        .copy_object(
            &sb,
            &sk,
            target,
            CopyRequest {
                replace: new_meta,
                tags,
                conditions: target_cond,
                source_version: source_version.clone(),
                retention: lock.retention,
                legal_hold: lock.legal_hold,
                source_sse_c: super::sse_c::source_key_of!(i)?,
                sse_c,
                ..Default::default()
            },
            |info| cond.check_copy_source(info.current()),
        )
        .await
        .map_err(s3_error)?;
    let created = Some((r.size, r.etag.as_str()));
    gw.emit(&req.extensions, "s3:ObjectCreated:Copy", &i.bucket, &i.key, created, r.version_id.as_deref()).await;
    Ok(S3Response::new(CopyObjectOutput {
        version_id: r.version_id,
        copy_source_version_id: source_version,
        sse_customer_algorithm,
        sse_customer_key_md5,
        copy_object_result: Some(CopyObjectResult {
            e_tag: Some(etag(&r.etag)),
            last_modified: r.last_modified.map(timestamp),
            ..Default::default()
        }),
        ..Default::default()
    }))
}

pub async fn get_object_acl(
    gw: &Gateway,
    req: S3Request<GetObjectAclInput>,
) -> S3Result<S3Response<GetObjectAclOutput>> {
    let i = &req.input;
    match &i.version_id {
        Some(v) => gw.store.reads().version_info(&i.bucket, &i.key, v).await.map_err(s3_error)?,
        None => gw.store.reads().head_object(&i.bucket, &i.key).await.map_err(s3_error)?,
    };
    Ok(S3Response::new(GetObjectAclOutput { grants: Some(full_control()), owner: Some(owner()), ..Default::default() }))
}

pub async fn put_object_acl(
    gw: &Gateway,
    req: S3Request<PutObjectAclInput>,
) -> S3Result<S3Response<PutObjectAclOutput>> {
    let i = &req.input;
    match &i.version_id {
        Some(v) => gw.store.reads().version_info(&i.bucket, &i.key, v).await.map_err(s3_error)?,
        None => gw.store.reads().head_object(&i.bucket, &i.key).await.map_err(s3_error)?,
    };
    Ok(S3Response::new(PutObjectAclOutput::default()))
}
