//! GetObjectAttributes: what HEAD tells, chosen by `x-amz-object-attributes`
//! (ETag, Checksum, ObjectParts, StorageClass, ObjectSize), under the same
//! conditional headers and errors. As on AWS, the ETag is unquoted (the
//! front takes off the quotes s3s writes), and a multipart object's parts
//! are listed (sizes and checksums, a page at a time) only for an upload
//! made with a checksum, as on AWS; otherwise they are only counted.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::convert::*;
use super::Gateway;
use crate::store::checksum::Algorithm;
use crate::store::conditions::{Conditions, EtagCondition};
use crate::store::meta::ObjectMeta;
use crate::store::reads::read_plan::ReadRequest;

/// The attributes a request may name.
const KNOWN: [&str; 5] = [
    ObjectAttributes::ETAG,
    ObjectAttributes::CHECKSUM,
    ObjectAttributes::OBJECT_PARTS,
    ObjectAttributes::STORAGE_CLASS,
    ObjectAttributes::OBJECT_SIZE,
];

/// The parts of a multipart object: their count, and, for an upload made
/// with a checksum, a page of them (after `marker`, at most `max`, 1,000 by
/// default) with their sizes and checksums.
fn object_parts(m: &ObjectMeta, max: Option<i32>, marker: Option<i32>) -> GetObjectAttributesParts {
    let total = Some(m.parts.len() as i32);
    let (Some(alg), false) = (m.checksums.keys().next(), m.part_checksums.is_empty()) else {
        return GetObjectAttributesParts { total_parts_count: total, ..Default::default() };
    };
    let max = max.unwrap_or(1000).clamp(0, 1000) as usize;
    let after = marker.unwrap_or(0).max(0) as usize;
    let listed: Vec<ObjectPart> = m
        .parts
        .iter()
        .zip(&m.part_checksums)
        .enumerate()
        .skip(after)
        .take(max)
        .map(|(i, (size, sum))| {
            let mut p = ObjectPart { part_number: Some(i as i32 + 1), size: Some(*size as i64), ..Default::default() };
            let sum = Some(sum.clone());
            match alg {
                Algorithm::Crc32 => p.checksum_crc32 = sum,
                Algorithm::Crc32c => p.checksum_crc32c = sum,
                Algorithm::Crc64nvme => p.checksum_crc64nvme = sum,
                Algorithm::Sha1 => p.checksum_sha1 = sum,
                Algorithm::Sha256 => p.checksum_sha256 = sum,
            }
            p
        })
        .collect();
    let truncated = after + listed.len() < m.parts.len();
    GetObjectAttributesParts {
        total_parts_count: total,
        part_number_marker: marker,
        next_part_number_marker: listed.last().and_then(|p| p.part_number).filter(|_| truncated),
        max_parts: Some(max as i32),
        is_truncated: Some(truncated),
        parts: Some(listed),
    }
}

pub async fn get(
    gw: &Gateway,
    req: S3Request<GetObjectAttributesInput>,
) -> S3Result<S3Response<GetObjectAttributesOutput>> {
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
    let date = |name: &str| header(name).and_then(parse_http_date).map(|t| ts_secs(&t));
    let conditions = Conditions {
        if_match: header("if-match").map(EtagCondition::parse),
        if_none_match: header("if-none-match").map(EtagCondition::parse),
        if_modified_since: date("if-modified-since"),
        if_unmodified_since: date("if-unmodified-since"),
    };
    let i = req.input;
    // One header may hold several names, comma-separated.
    let wanted: Vec<String> = i
        .object_attributes
        .iter()
        .flat_map(|a| a.as_str().split(','))
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    if wanted.is_empty() || wanted.iter().any(|a| !KNOWN.contains(&a.as_str())) {
        return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "Invalid attribute name specified."));
    }
    let wants = |a: &str| wanted.iter().any(|w| w == a);
    let sse_c = super::sse_c::customer_key_of!(i)?;
    let read = ReadRequest { conditions, part_number: None, range: None, sse_c };
    let state = gw.versioning(&i.bucket).await?;
    let head = match &i.version_id {
        Some(v) => gw.store.reads().head_version(&i.bucket, &i.key, v, &read).await,
        None => gw.store.reads().head_read(&i.bucket, &i.key, &read).await,
    };
    let (info, _) = match head {
        Ok(head) => head,
        Err(e) => return Err(gw.not_found(&i.bucket, &i.key, e, state).await),
    };
    let m = &info.meta;
    let checksum = (wants(ObjectAttributes::CHECKSUM) && !m.checksums.is_empty()).then(|| {
        let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&m.checksums);
        Checksum {
            checksum_crc32: crc32,
            checksum_crc32c: crc32c,
            checksum_crc64nvme: crc64nvme,
            checksum_sha1: sha1,
            checksum_sha256: sha256,
            checksum_type: Some(checksum_type_of(m)),
        }
    });
    let object_parts = (wants(ObjectAttributes::OBJECT_PARTS) && !m.parts.is_empty())
        .then(|| object_parts(m, i.max_parts, i.part_number_marker));
    Ok(S3Response::new(GetObjectAttributesOutput {
        e_tag: wants(ObjectAttributes::ETAG).then(|| etag(&info.etag)),
        checksum,
        object_parts,
        storage_class: wants(ObjectAttributes::STORAGE_CLASS)
            .then(|| StorageClass::from_static(StorageClass::STANDARD)),
        object_size: wants(ObjectAttributes::OBJECT_SIZE).then_some(info.size as i64),
        last_modified: Some(timestamp(info.last_modified)),
        version_id: super::versioning::answer_version(&info, state, i.version_id.is_some()),
        ..Default::default()
    }))
}
