//! GetObjectAttributes: what HEAD tells, chosen by `x-amz-object-attributes`
//! (ETag, Checksum, ObjectParts, StorageClass, ObjectSize), under the same
//! conditional headers and errors. As on AWS, the ETag is unquoted (the
//! front takes off the quotes s3s writes), and a multipart object's parts
//! are counted but not listed: AWS lists them only for an object uploaded
//! with additional checksums, which this gateway does not keep per part.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::convert::*;
use super::{s3_error, Gateway};
use crate::store::conditions::{Conditions, EtagCondition};
use crate::store::read_plan::ReadRequest;

/// The attributes a request may name.
const KNOWN: [&str; 5] = [
    ObjectAttributes::ETAG,
    ObjectAttributes::CHECKSUM,
    ObjectAttributes::OBJECT_PARTS,
    ObjectAttributes::STORAGE_CLASS,
    ObjectAttributes::OBJECT_SIZE,
];

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
    let read = ReadRequest { conditions, part_number: None, range: None };
    let (info, _) = gw.store.head_read(&i.bucket, &i.key, &read).await.map_err(s3_error)?;
    let m = &info.meta;
    let checksum = (wants(ObjectAttributes::CHECKSUM) && !m.checksums.is_empty()).then(|| {
        let [crc32, crc32c, crc64nvme, sha1, sha256] = checksum_fields(&m.checksums);
        Checksum {
            checksum_crc32: crc32,
            checksum_crc32c: crc32c,
            checksum_crc64nvme: crc64nvme,
            checksum_sha1: sha1,
            checksum_sha256: sha256,
            // Checksums of a single PUT cover the whole object.
            checksum_type: Some(ChecksumType::from_static(ChecksumType::FULL_OBJECT)),
        }
    });
    let object_parts = (wants(ObjectAttributes::OBJECT_PARTS) && !m.parts.is_empty())
        .then(|| GetObjectAttributesParts { total_parts_count: Some(m.parts.len() as i32), ..Default::default() });
    Ok(S3Response::new(GetObjectAttributesOutput {
        e_tag: wants(ObjectAttributes::ETAG).then(|| etag(&info.etag)),
        checksum,
        object_parts,
        storage_class: wants(ObjectAttributes::STORAGE_CLASS)
            .then(|| StorageClass::from_static(StorageClass::STANDARD)),
        object_size: wants(ObjectAttributes::OBJECT_SIZE).then_some(info.size as i64),
        last_modified: Some(timestamp(info.last_modified)),
        ..Default::default()
    }))
}
