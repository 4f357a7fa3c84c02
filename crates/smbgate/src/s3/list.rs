//! ListObjects (V1) and ListObjectsV2 on the store's S3-order walk, with
//! opaque continuation tokens and `encoding-type=url`.

use base64::Engine as _;
use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::convert::{etag, owner, timestamp, url_encode};
use super::{s3_error, Gateway};
use crate::store::listings::walk::{ListRequest, ListResult, Listed};

const MAX_KEYS: i32 = 1000;
const TOKEN_PREFIX: &str = "smbgate1:";

fn max_keys(v: Option<i32>) -> S3Result<usize> {
    match v {
        None => Ok(MAX_KEYS as usize),
        Some(n) if n < 0 => Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "max-keys must not be negative")),
        Some(n) => Ok(n.min(MAX_KEYS) as usize),
    }
}

/// An opaque continuation token naming the last key (or bucket) of a page.
pub(crate) fn encode_token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{TOKEN_PREFIX}{key}"))
}

/// The key a token of [`encode_token`] names.
///
/// Errors: InvalidArgument for a token it did not make.
pub(crate) fn decode_token(t: &str) -> S3Result<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.strip_prefix(TOKEN_PREFIX).map(str::to_string))
        .ok_or_else(|| {
            S3Error::with_message(S3ErrorCode::InvalidArgument, "The continuation token provided is incorrect")
        })
}

fn split(page: ListResult, encode: bool, fetch_owner: bool) -> (Vec<Object>, Vec<CommonPrefix>) {
    let enc = |s: String| if encode { url_encode(&s) } else { s };
    let mut objects = Vec::new();
    let mut prefixes = Vec::new();
    for e in page.entries {
        match e {
            Listed::Object { key, size, last_modified, etag_hint } => objects.push(Object {
                key: Some(enc(key)),
                size: Some(size as i64),
                last_modified: Some(timestamp(last_modified)),
                e_tag: etag_hint.as_deref().map(etag),
                storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
                owner: fetch_owner.then(owner),
                ..Default::default()
            }),
            Listed::CommonPrefix(p) => prefixes.push(CommonPrefix { prefix: Some(enc(p)) }),
        }
    }
    (objects, prefixes)
}

/// True for `encoding-type=url`; InvalidArgument for another type.
pub(crate) fn wants_url(e: &Option<EncodingType>) -> S3Result<bool> {
    match e {
        None => Ok(false),
        Some(e) if e.as_str() == EncodingType::URL => Ok(true),
        Some(_) => {
            Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "Invalid Encoding Method specified in Request"))
        }
    }
}

pub async fn list_objects_v2(
    gw: &Gateway,
    req: S3Request<ListObjectsV2Input>,
) -> S3Result<S3Response<ListObjectsV2Output>> {
    let i = req.input;
    let encode = wants_url(&i.encoding_type)?;
    // An empty token (`continuation-token=`) starts from the beginning, as
    // if absent, and is echoed back empty.
    let token = i.continuation_token.as_deref().filter(|t| !t.is_empty());
    let start_after = match token {
        Some(t) => Some(decode_token(t)?),
        None => i.start_after.clone().filter(|s| !s.is_empty()),
    };
    // An empty `delimiter=` is no delimiter, and no Delimiter element.
    let delimiter = i.delimiter.clone().filter(|d| !d.is_empty());
    let lr = ListRequest {
        prefix: i.prefix.clone().unwrap_or_default(),
        delimiter: delimiter.clone(),
        start_after,
        max_keys: max_keys(i.max_keys)?,
        max_dirs: None,
    };
    let page = gw.store.listings().list_objects(&i.bucket, &lr, token.is_some()).await.map_err(s3_error)?;
    let truncated = page.is_truncated;
    let next = page.next_marker.clone().filter(|_| truncated).map(|k| encode_token(&k));
    let (contents, prefixes) = split(page, encode, i.fetch_owner.unwrap_or(false));
    let enc = |s: Option<String>| if encode { s.map(|s| url_encode(&s)) } else { s };
    Ok(S3Response::new(ListObjectsV2Output {
        name: Some(i.bucket),
        prefix: Some(enc(i.prefix).unwrap_or_default()),
        delimiter: enc(delimiter),
        start_after: enc(i.start_after),
        max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
        key_count: Some((contents.len() + prefixes.len()) as i32),
        continuation_token: i.continuation_token,
        next_continuation_token: next,
        is_truncated: Some(truncated),
        contents: Some(contents),
        common_prefixes: Some(prefixes),
        encoding_type: i.encoding_type,
        ..Default::default()
    }))
}

pub async fn list_objects(gw: &Gateway, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
    let i = req.input;
    let encode = wants_url(&i.encoding_type)?;
    let delimiter = i.delimiter.clone().filter(|d| !d.is_empty());
    let lr = ListRequest {
        prefix: i.prefix.clone().unwrap_or_default(),
        delimiter: delimiter.clone(),
        start_after: i.marker.clone().filter(|m| !m.is_empty()),
        max_keys: max_keys(i.max_keys)?,
        max_dirs: None,
    };
    let page = gw
        .store
        .listings()
        .list_objects(&i.bucket, &lr, i.marker.as_deref().is_some_and(|m| !m.is_empty()))
        .await
        .map_err(s3_error)?;
    let truncated = page.is_truncated;
    // S3 gives NextMarker only with a delimiter; clients without one resume
    // after the last key. A page the store cut short (a bound on the
    // directories one page reads) may end before its last key's successor,
    // or hold no key: then NextMarker says where to resume.
    let cut_short = page.next_marker.as_deref() != page.entries.last().map(|e| e.name());
    let next = page.next_marker.clone().filter(|_| truncated && (delimiter.is_some() || cut_short));
    let (contents, prefixes) = split(page, encode, true);
    let enc = |s: Option<String>| if encode { s.map(|s| url_encode(&s)) } else { s };
    Ok(S3Response::new(ListObjectsOutput {
        name: Some(i.bucket),
        prefix: Some(enc(i.prefix).unwrap_or_default()),
        delimiter: enc(delimiter),
        marker: Some(enc(i.marker).unwrap_or_default()),
        next_marker: enc(next),
        max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
        is_truncated: Some(truncated),
        contents: Some(contents),
        common_prefixes: Some(prefixes),
        encoding_type: i.encoding_type,
        ..Default::default()
    }))
}
