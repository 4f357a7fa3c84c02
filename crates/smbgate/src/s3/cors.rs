//! PutBucketCors, GetBucketCors and DeleteBucketCors. The rules are
//! `crate::cors_rules`'s; the configuration is kept on the share as JSON.

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

use super::{s3_error, Gateway};
use crate::cors_rules::Config;

pub async fn put(gw: &Gateway, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
    let i = req.input;
    let config =
        Config::from_dto(i.cors_configuration).map_err(|m| S3Error::with_message(S3ErrorCode::InvalidRequest, m))?;
    let json =
        serde_json::to_vec(&config).map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?;
    gw.store.buckets().put_bucket_cors(&i.bucket, &json).await.map_err(s3_error)?;
    gw.cors.forget(&i.bucket);
    Ok(S3Response::new(PutBucketCorsOutput {}))
}

pub async fn get(gw: &Gateway, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
    let bucket = &req.input.bucket;
    gw.store.buckets().head_bucket(bucket).await.map_err(s3_error)?;
    let none = || S3Error::with_message(S3ErrorCode::NoSuchCORSConfiguration, "The CORS configuration does not exist");
    let bytes = gw.store.buckets().bucket_cors(bucket).await.map_err(s3_error)?.ok_or_else(none)?;
    let config: Config = serde_json::from_slice(&bytes).map_err(|_| none())?;
    Ok(S3Response::new(GetBucketCorsOutput { cors_rules: Some(config.to_dto()) }))
}

pub async fn delete(
    gw: &Gateway,
    req: S3Request<DeleteBucketCorsInput>,
) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
    gw.store.buckets().delete_bucket_cors(&req.input.bucket).await.map_err(s3_error)?;
    gw.cors.forget(&req.input.bucket);
    Ok(S3Response::new(DeleteBucketCorsOutput {}))
}
