//! PutObjectTagging, GetObjectTagging, DeleteObjectTagging and the bucket
//! forms. The tag rules are `store::tags`'s; an object's tags live in its
//! record, a bucket's in the gateway's folder on the share.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::{s3_error, Gateway};
use crate::store::tags::{self, TagSet};

/// The (key, value) pairs of a request's tag set; a tag without a key or
/// a value is malformed.
fn tag_set(t: Tagging) -> S3Result<TagSet> {
    t.tag_set
        .into_iter()
        .map(|t| match (t.key, t.value) {
            (Some(k), Some(v)) => Ok((k, v)),
            _ => Err(S3Error::with_message(
                S3ErrorCode::MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema",
            )),
        })
        .collect()
}

/// The tag set of an answer.
pub(super) fn to_dto(tags: TagSet) -> Vec<Tag> {
    tags.into_iter().map(|(k, v)| Tag { key: Some(k), value: Some(v) }).collect()
}

pub async fn put_object(
    gw: &Gateway,
    req: S3Request<PutObjectTaggingInput>,
) -> S3Result<S3Response<PutObjectTaggingOutput>> {
    let i = req.input;
    let tags = tag_set(i.tagging)?;
    tags::check_object(&tags).map_err(s3_error)?;
    let version = i.version_id.as_deref();
    gw.store.writes().put_object_tags(&i.bucket, &i.key, version, tags).await.map_err(s3_error)?;
    gw.emit(&req.extensions, "s3:ObjectTagging:Put", &i.bucket, &i.key, None, version).await;
    Ok(S3Response::new(PutObjectTaggingOutput { version_id: i.version_id }))
}

pub async fn get_object(
    gw: &Gateway,
    req: S3Request<GetObjectTaggingInput>,
) -> S3Result<S3Response<GetObjectTaggingOutput>> {
    let i = req.input;
    let mut tags = gw.store.writes().object_tags(&i.bucket, &i.key, i.version_id.as_deref()).await.map_err(s3_error)?;
    // Sorted by key, as AWS answers, whatever order they were given in
    // (keys are unique, so the order is total).
    tags.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(S3Response::new(GetObjectTaggingOutput { tag_set: to_dto(tags), version_id: i.version_id }))
}

pub async fn delete_object(
    gw: &Gateway,
    req: S3Request<DeleteObjectTaggingInput>,
) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
    let i = req.input;
    let version = i.version_id.as_deref();
    gw.store.writes().put_object_tags(&i.bucket, &i.key, version, TagSet::new()).await.map_err(s3_error)?;
    gw.emit(&req.extensions, "s3:ObjectTagging:Delete", &i.bucket, &i.key, None, version).await;
    Ok(S3Response::new(DeleteObjectTaggingOutput { version_id: i.version_id }))
}

pub async fn put_bucket(
    gw: &Gateway,
    req: S3Request<PutBucketTaggingInput>,
) -> S3Result<S3Response<PutBucketTaggingOutput>> {
    let i = req.input;
    let tags = tag_set(i.tagging)?;
    tags::check_bucket(&tags).map_err(s3_error)?;
    gw.store.buckets().put_bucket_tags(&i.bucket, &tags).await.map_err(s3_error)?;
    // 204, as on AWS: set by the front (s3s answers this operation 200).
    Ok(S3Response::new(PutBucketTaggingOutput::default()))
}

pub async fn get_bucket(
    gw: &Gateway,
    req: S3Request<GetBucketTaggingInput>,
) -> S3Result<S3Response<GetBucketTaggingOutput>> {
    let tags = gw.store.buckets().bucket_tags(&req.input.bucket).await.map_err(s3_error)?;
    let tags = tags.ok_or_else(|| S3Error::with_message(S3ErrorCode::NoSuchTagSet, "The TagSet does not exist"))?;
    Ok(S3Response::new(GetBucketTaggingOutput { tag_set: to_dto(tags) }))
}

pub async fn delete_bucket(
    gw: &Gateway,
    req: S3Request<DeleteBucketTaggingInput>,
) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
    gw.store.buckets().delete_bucket_tags(&req.input.bucket).await.map_err(s3_error)?;
    Ok(S3Response::new(DeleteBucketTaggingOutput::default()))
}
