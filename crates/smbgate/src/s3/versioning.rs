//! Bucket versioning through S3: PutBucketVersioning, GetBucketVersioning
//! and ListObjectVersions, and what object answers say of versions (the
//! version ID of what was read or written, delete markers).

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::convert::{etag, owner, timestamp, url_encode};
use super::list::wants_url;
use super::{s3_error, Gateway};
use crate::store::types::ObjectInfo;
use crate::store::versions::list::{VersionItem, VersionsRequest};
use crate::store::versions::{version_of, Versioning};
use crate::store::StoreError;

/// Most entries one ListObjectVersions page holds, as on AWS.
const MAX_KEYS: i32 = 1000;

impl Gateway {
    /// `bucket`'s versioning state (a few seconds old at most).
    ///
    /// Errors: 503 SlowDown or 500 for a share that does not answer.
    pub(super) async fn versioning(&self, bucket: &str) -> S3Result<Versioning> {
        let root = self.store.root();
        let tree = root.tree().await.map_err(s3_error)?;
        root.versioning(&tree, bucket).await.map_err(s3_error)
    }

    /// A read of `bucket`/`key` that found no object: on a versioned
    /// bucket whose latest version of the key is a delete marker, the 404
    /// names it (`x-amz-delete-marker`, `x-amz-version-id`), as on AWS.
    pub(super) async fn not_found(&self, bucket: &str, key: &str, e: StoreError, state: Versioning) -> S3Error {
        if !matches!(e, StoreError::NoSuchKey) || !state.versioned() {
            return s3_error(e);
        }
        match self.store.reads().latest_marker(bucket, key).await {
            Ok(Some(m)) => s3_error(StoreError::DeleteMarker {
                version_id: m.version_id,
                last_modified: m.stored_at,
                requested: false,
            }),
            _ => s3_error(e),
        }
    }
}

/// The version ID an answer about `info` carries: on a bucket that was
/// ever versioned, or when the request named one.
pub(super) fn answer_version(info: &ObjectInfo, state: Versioning, asked: bool) -> Option<String> {
    (state.versioned() || asked).then(|| version_of(info))
}

pub async fn put_bucket_versioning(
    gw: &Gateway,
    req: S3Request<PutBucketVersioningInput>,
) -> S3Result<S3Response<PutBucketVersioningOutput>> {
    let i = req.input;
    let config = i.versioning_configuration;
    if config.mfa_delete.as_ref().is_some_and(|m| m.as_str() == MFADelete::ENABLED) {
        return Err(S3Error::with_message(
            S3ErrorCode::NotImplemented,
            "A header you provided implies functionality that is not implemented: MFA Delete.",
        ));
    }
    let state = match config.status.as_ref().map(|s| s.as_str()) {
        Some(BucketVersioningStatus::ENABLED) => Versioning::Enabled,
        Some(BucketVersioningStatus::SUSPENDED) => Versioning::Suspended,
        _ => {
            return Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema",
            ))
        }
    };
    gw.store.buckets().put_bucket_versioning(&i.bucket, state).await.map_err(s3_error)?;
    Ok(S3Response::new(PutBucketVersioningOutput::default()))
}

pub async fn get_bucket_versioning(
    gw: &Gateway,
    req: S3Request<GetBucketVersioningInput>,
) -> S3Result<S3Response<GetBucketVersioningOutput>> {
    let state = gw.store.buckets().bucket_versioning(&req.input.bucket).await.map_err(s3_error)?;
    // A bucket never versioned answers with no Status at all, as on AWS.
    let status = state.as_str().map(BucketVersioningStatus::from_static);
    Ok(S3Response::new(GetBucketVersioningOutput { status, ..Default::default() }))
}

pub async fn list_object_versions(
    gw: &Gateway,
    req: S3Request<ListObjectVersionsInput>,
) -> S3Result<S3Response<ListObjectVersionsOutput>> {
    let i = req.input;
    let encode = wants_url(&i.encoding_type)?;
    let max_keys = match i.max_keys {
        Some(n) if n < 0 => {
            return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "max-keys must not be negative"))
        }
        Some(n) => n.min(MAX_KEYS),
        None => MAX_KEYS,
    };
    let key_marker = i.key_marker.filter(|m| !m.is_empty());
    let version_id_marker = i.version_id_marker.filter(|m| !m.is_empty());
    if version_id_marker.is_some() && key_marker.is_none() {
        return Err(S3Error::with_message(
            S3ErrorCode::InvalidArgument,
            "A version-id marker cannot be specified without a key marker.",
        ));
    }
    let prefix = i.prefix.unwrap_or_default();
    let request = VersionsRequest {
        prefix: prefix.clone(),
        delimiter: i.delimiter.clone(),
        key_marker: key_marker.clone(),
        version_id_marker: version_id_marker.clone(),
        max_keys: max_keys as usize,
    };
    let page = gw.store.listings().list_versions(&i.bucket, &request).await.map_err(s3_error)?;
    let enc = |s: String| if encode { url_encode(&s) } else { s };
    let (mut versions, mut markers, mut prefixes) = (Vec::new(), Vec::new(), Vec::new());
    for item in page.items {
        match item {
            VersionItem::CommonPrefix(p) => prefixes.push(CommonPrefix { prefix: Some(enc(p)) }),
            VersionItem::Version(v) if v.delete_marker => markers.push(DeleteMarkerEntry {
                is_latest: Some(v.is_latest),
                key: Some(enc(v.key)),
                last_modified: Some(timestamp(v.last_modified)),
                owner: Some(owner()),
                version_id: Some(v.version_id),
            }),
            VersionItem::Version(v) => versions.push(ObjectVersion {
                e_tag: Some(etag(&v.etag)),
                is_latest: Some(v.is_latest),
                key: Some(enc(v.key)),
                last_modified: Some(timestamp(v.last_modified)),
                owner: Some(owner()),
                size: Some(v.size as i64),
                storage_class: Some(ObjectVersionStorageClass::from_static(ObjectVersionStorageClass::STANDARD)),
                version_id: Some(v.version_id),
                ..Default::default()
            }),
        }
    }
    Ok(S3Response::new(ListObjectVersionsOutput {
        name: Some(i.bucket),
        prefix: Some(enc(prefix)),
        delimiter: i.delimiter.map(enc),
        encoding_type: i.encoding_type,
        key_marker: Some(key_marker.map(enc).unwrap_or_default()),
        version_id_marker: Some(version_id_marker.unwrap_or_default()),
        max_keys: Some(max_keys),
        is_truncated: Some(page.is_truncated),
        next_key_marker: page.next_key_marker.map(enc),
        next_version_id_marker: page.next_version_id_marker,
        versions: (!versions.is_empty()).then_some(versions),
        delete_markers: (!markers.is_empty()).then_some(markers),
        common_prefixes: (!prefixes.is_empty()).then_some(prefixes),
        ..Default::default()
    }))
}
