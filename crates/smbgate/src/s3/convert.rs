//! Conversions between store values and s3s types: times, ETags, owners,
//! metadata headers, checksums and conditional requests.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Result};

use crate::store::checksum::Algorithm;
use crate::store::conditions::{Conditions, EtagCondition};
use crate::store::meta::ObjectMeta;
use crate::store::types::filetime_to_unix;

/// FILETIME to an s3s timestamp.
pub fn timestamp(ft: u64) -> Timestamp {
    let (secs, nanos) = filetime_to_unix(ft);
    let t = if secs >= 0 { UNIX_EPOCH + Duration::new(secs as u64, nanos) } else { UNIX_EPOCH };
    Timestamp::from(t)
}

/// Unix seconds of an s3s timestamp.
pub fn ts_secs(t: &Timestamp) -> i64 {
    let odt: time::OffsetDateTime = t.clone().into();
    odt.unix_timestamp()
}

/// A strong ETag.
pub fn etag(v: &str) -> ETag {
    ETag::Strong(v.to_string())
}

/// The single owner every bucket and object reports.
pub fn owner() -> Owner {
    Owner { display_name: Some("smbgate".into()), id: Some("smbgate".into()) }
}

/// Formats an s3s timestamp as an HTTP date, for storing Expires.
pub fn http_date(t: &Timestamp) -> Option<String> {
    let mut buf = Vec::new();
    t.format(TimestampFormat::HttpDate, &mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// Parses a stored HTTP date back.
pub fn parse_http_date(s: &str) -> Option<Timestamp> {
    Timestamp::parse(TimestampFormat::HttpDate, s).ok()
}

/// Most bytes of user metadata an object may carry: names (without
/// `x-amz-meta-`) plus values, in UTF-8, as S3 counts them.
pub const MAX_USER_METADATA: usize = 2048;

/// [`meta_from`] of an input that carries the Content-* headers, Expires
/// and user metadata (PutObject, CopyObject, CreateMultipartUpload): moves
/// those fields out of it.
macro_rules! meta_of {
    ($i:expr) => {
        meta_from(
            $i.content_type,
            $i.content_encoding,
            $i.content_disposition,
            $i.content_language,
            $i.cache_control,
            $i.expires,
            $i.metadata,
        )
    };
}
pub(super) use meta_of;

/// Content-* headers and user metadata from a request, as stored metadata.
/// `aws-chunked` in Content-Encoding says how the body was sent and is
/// never stored (`gzip, aws-chunked` is stored as `gzip`).
///
/// Errors: MetadataTooLarge for more than [`MAX_USER_METADATA`] bytes of
/// user metadata.
#[allow(clippy::too_many_arguments)]
pub fn meta_from(
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_disposition: Option<String>,
    content_language: Option<String>,
    cache_control: Option<String>,
    expires: Option<Timestamp>,
    metadata: Option<Metadata>,
) -> S3Result<ObjectMeta> {
    let user: BTreeMap<String, String> =
        metadata.map(|m| m.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect()).unwrap_or_default();
    let size: usize = user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_USER_METADATA {
        return Err(S3Error::with_message(
            S3ErrorCode::MetadataTooLarge,
            format!(
                "Your metadata headers exceed the maximum allowed metadata size ({size} bytes; at most \
                 {MAX_USER_METADATA})"
            ),
        ));
    }
    Ok(ObjectMeta {
        content_type,
        content_encoding: content_encoding.and_then(|e| without_aws_chunked(&e)),
        content_disposition,
        content_language,
        cache_control,
        expires: expires.as_ref().and_then(http_date),
        user,
        ..Default::default()
    })
}

/// A Content-Encoding list without its `aws-chunked` entries; None if
/// nothing else is left.
pub fn without_aws_chunked(e: &str) -> Option<String> {
    let kept: Vec<&str> =
        e.split(',').map(str::trim).filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("aws-chunked")).collect();
    (!kept.is_empty()).then(|| kept.join(", "))
}

/// Expected checksums from the x-amz-checksum-* request fields.
pub fn checksums_from(
    crc32: Option<String>,
    crc32c: Option<String>,
    crc64nvme: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
) -> BTreeMap<Algorithm, String> {
    Algorithm::ALL
        .into_iter()
        .zip([crc32, crc32c, crc64nvme, sha1, sha256])
        .filter_map(|(a, v)| Some((a, v?)))
        .collect()
}

/// The checksum fields of a response, in [`Algorithm::ALL`] order.
pub fn checksum_fields(c: &BTreeMap<Algorithm, String>) -> [Option<String>; 5] {
    Algorithm::ALL.map(|a| c.get(&a).cloned())
}

/// What an object's checksums cover, as S3 names it: `FULL_OBJECT` for a
/// single PUT's, or a multipart upload's type.
pub fn checksum_type_of(m: &crate::store::meta::ObjectMeta) -> ChecksumType {
    ChecksumType::from_static(m.checksum_type.map_or(ChecksumType::FULL_OBJECT, |t| t.name()))
}

/// Content-MD5 as sent: s3s drops an empty header, which S3 answers with
/// InvalidDigest, so a present but empty header comes back as `Some("")`.
pub fn content_md5(parsed: Option<String>, headers: &http::HeaderMap) -> Option<String> {
    parsed.or_else(|| headers.get("content-md5").map(|v| v.to_str().unwrap_or("").to_string()))
}

/// Checksum values that arrived in an aws-chunked trailer.
pub fn trailer_checksums(t: &Option<s3s::TrailingHeaders>) -> BTreeMap<Algorithm, String> {
    let mut m = BTreeMap::new();
    if let Some(h) = t.as_ref().and_then(|t| t.take()) {
        for (name, value) in h.iter() {
            let alg = name.as_str().strip_prefix("x-amz-checksum-").and_then(|a| Algorithm::parse(a).ok());
            if let (Some(alg), Ok(v)) = (alg, value.to_str()) {
                m.insert(alg, v.to_string());
            }
        }
    }
    m
}

/// Algorithms the client asked us to compute: the declared algorithm
/// (`x-amz-checksum-algorithm`, which s3s reads, or the SDKs'
/// `x-amz-sdk-checksum-algorithm`, which it does not) and any announced in
/// `x-amz-trailer`.
///
/// Errors: 400 InvalidRequest for a declared algorithm S3 does not define
/// (`CRC99`), as AWS answers, before any byte is stored.
pub fn requested_algorithms(alg: Option<&ChecksumAlgorithm>, headers: &http::HeaderMap) -> S3Result<Vec<Algorithm>> {
    let sdk = headers.get("x-amz-sdk-checksum-algorithm").map(|v| v.to_str().unwrap_or("?"));
    let mut v = Vec::new();
    for (header, name) in [("x-amz-checksum-algorithm", alg.map(|a| a.as_str())), ("x-amz-sdk-checksum-algorithm", sdk)]
    {
        if let Some(name) = name {
            let a = Algorithm::parse(name).map_err(|_| {
                S3Error::with_message(S3ErrorCode::InvalidRequest, format!("Value for {header} header is invalid."))
            })?;
            if !v.contains(&a) {
                v.push(a);
            }
        }
    }
    v.extend(trailer_algorithms(headers));
    Ok(v)
}

/// Algorithms announced in `x-amz-trailer` (`x-amz-checksum-crc32`, ...).
pub fn trailer_algorithms(headers: &http::HeaderMap) -> Vec<Algorithm> {
    headers
        .get("x-amz-trailer")
        .and_then(|v| v.to_str().ok())
        .map(|t| {
            t.split(',')
                .filter_map(|n| n.trim().strip_prefix("x-amz-checksum-").and_then(|a| Algorithm::parse(a).ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// The length of the request body in bytes: the decoded length of an
/// aws-chunked body, else Content-Length; None when not known (`undeclared`:
/// the front marked the request with
/// [`crate::precheck::UndeclaredLength`], its Content-Length a stand-in).
pub fn body_length(headers: &http::HeaderMap, content_length: Option<i64>, undeclared: bool) -> Option<u64> {
    if undeclared {
        return None;
    }
    if let Some(v) = headers.get("x-amz-decoded-content-length") {
        return v.to_str().ok().and_then(|v| v.parse().ok());
    }
    let chunked =
        headers.get("x-amz-content-sha256").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("STREAMING-"));
    (!chunked).then_some(content_length).flatten().and_then(|l| u64::try_from(l).ok())
}

/// The conditional headers of a request (or the x-amz-copy-source-if-*
/// ones), as the store evaluates them.
pub fn conditions(
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> Conditions {
    Conditions {
        if_match: if_match.map(etag_condition),
        if_none_match: if_none_match.map(etag_condition),
        if_modified_since: if_modified_since.map(ts_secs),
        if_unmodified_since: if_unmodified_since.map(ts_secs),
    }
}

fn etag_condition(c: &ETagCondition) -> EtagCondition {
    match c.as_etag() {
        None => EtagCondition::Any,
        Some(e) => EtagCondition::Tags(vec![e.value().to_string()]),
    }
}

/// Percent-encodes for `encoding-type=url` (everything but unreserved
/// characters and `/`).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
