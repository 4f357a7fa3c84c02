//! Conversions between store values and s3s types: times, ETags, owners,
//! metadata headers, checksums and conditional requests.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use s3s::dto::*;

use crate::store::meta::ObjectMeta;
use crate::store::object::{filetime_to_unix, ObjectInfo};
use crate::store::StoreError;

/// FILETIME to an s3s timestamp.
pub fn timestamp(ft: u64) -> Timestamp {
    let (secs, nanos) = filetime_to_unix(ft);
    let t = if secs >= 0 { UNIX_EPOCH + Duration::new(secs as u64, nanos) } else { UNIX_EPOCH };
    Timestamp::from(t)
}

/// Unix seconds of a FILETIME (HTTP dates have second precision).
pub fn unix_secs(ft: u64) -> i64 {
    filetime_to_unix(ft).0
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

/// Content-* headers and user metadata from a request, as stored metadata.
#[allow(clippy::too_many_arguments)]
pub fn meta_from(
    content_type: Option<String>,
    content_encoding: Option<String>,
    content_disposition: Option<String>,
    content_language: Option<String>,
    cache_control: Option<String>,
    expires: Option<Timestamp>,
    metadata: Option<Metadata>,
) -> ObjectMeta {
    ObjectMeta {
        content_type,
        content_encoding,
        content_disposition,
        content_language,
        cache_control,
        expires: expires.as_ref().and_then(http_date),
        user: metadata.map(|m| m.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect()).unwrap_or_default(),
        ..Default::default()
    }
}

/// Expected checksums from the x-amz-checksum-* request fields.
pub fn checksums_from(
    crc32: Option<String>,
    crc32c: Option<String>,
    crc64nvme: Option<String>,
    sha1: Option<String>,
    sha256: Option<String>,
) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for (k, v) in [("CRC32", crc32), ("CRC32C", crc32c), ("CRC64NVME", crc64nvme), ("SHA1", sha1), ("SHA256", sha256)] {
        if let Some(v) = v {
            m.insert(k.to_string(), v);
        }
    }
    m
}

/// Checksum values that arrived in an aws-chunked trailer.
pub fn trailer_checksums(t: &Option<s3s::TrailingHeaders>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Some(h) = t.as_ref().and_then(|t| t.take()) {
        for (name, value) in h.iter() {
            if let Some(alg) = name.as_str().strip_prefix("x-amz-checksum-") {
                if let Ok(v) = value.to_str() {
                    m.insert(alg.to_ascii_uppercase(), v.to_string());
                }
            }
        }
    }
    m
}

/// Algorithms the client asked us to compute: the SDK's declared
/// algorithm and any announced in `x-amz-trailer`.
pub fn requested_algorithms(alg: Option<&ChecksumAlgorithm>, headers: &http::HeaderMap) -> Vec<String> {
    let mut v: Vec<String> = alg.map(|a| a.as_str().to_ascii_uppercase()).into_iter().collect();
    if let Some(t) = headers.get("x-amz-trailer").and_then(|v| v.to_str().ok()) {
        for name in t.split(',') {
            if let Some(a) = name.trim().strip_prefix("x-amz-checksum-") {
                v.push(a.to_ascii_uppercase());
            }
        }
    }
    v
}

/// The length of the request body in bytes: the decoded length of an
/// aws-chunked body, else Content-Length.
pub fn body_length(headers: &http::HeaderMap, content_length: Option<i64>) -> Option<u64> {
    if let Some(v) = headers.get("x-amz-decoded-content-length") {
        return v.to_str().ok().and_then(|v| v.parse().ok());
    }
    let chunked =
        headers.get("x-amz-content-sha256").and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("STREAMING-"));
    (!chunked).then_some(content_length).flatten().and_then(|l| u64::try_from(l).ok())
}

/// Conditional request headers (RFC 9110 13.2.2 order, as S3 applies it).
pub struct Conditions<'a> {
    /// If-Match.
    pub if_match: Option<&'a ETagCondition>,
    /// If-None-Match.
    pub if_none_match: Option<&'a ETagCondition>,
    /// If-Modified-Since.
    pub if_modified_since: Option<&'a Timestamp>,
    /// If-Unmodified-Since.
    pub if_unmodified_since: Option<&'a Timestamp>,
}

impl<'a> Conditions<'a> {
    /// The x-amz-copy-source-if-* conditions of CopyObject/UploadPartCopy.
    pub fn copy_source(
        if_match: Option<&'a ETagCondition>,
        if_none_match: Option<&'a ETagCondition>,
        if_modified_since: Option<&'a Timestamp>,
        if_unmodified_since: Option<&'a Timestamp>,
    ) -> Self {
        Conditions { if_match, if_none_match, if_modified_since, if_unmodified_since }
    }
}

fn cond_matches(c: &ETagCondition, etag: &str) -> bool {
    match c.as_etag() {
        None => true, // "*"
        Some(e) => e.value() == etag,
    }
}

impl Conditions<'_> {
    /// Evaluates the conditions against an object. `read` selects the
    /// outcome of a failed If-None-Match / If-Modified-Since: 304 for
    /// GET/HEAD, 412 for a copy source.
    pub fn check(&self, info: &ObjectInfo, read: bool) -> Result<(), StoreError> {
        let modified = unix_secs(info.last_modified);
        if let Some(c) = self.if_match {
            if !cond_matches(c, &info.etag) {
                return Err(StoreError::PreconditionFailed);
            }
        } else if let Some(t) = self.if_unmodified_since {
            if modified > ts_secs(t) {
                return Err(StoreError::PreconditionFailed);
            }
        }
        let not_modified = if read { StoreError::NotModified } else { StoreError::PreconditionFailed };
        if let Some(c) = self.if_none_match {
            if cond_matches(c, &info.etag) {
                return Err(not_modified);
            }
        } else if let Some(t) = self.if_modified_since {
            if modified <= ts_secs(t) {
                return Err(not_modified);
            }
        }
        Ok(())
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
