//! The S3 front: a thin adapter from the s3s `S3` trait (which parses
//! requests, checks SigV4 and writes XML) to the [`Store`]. Each handler
//! translates types and errors; the S3 rules on the share live in the store.

mod attributes;
mod bucket;
mod convert;
mod cors;
mod list;
mod multipart;
mod notification;
mod object;
mod object_lock;
mod sosapi;
mod sse_c;
mod tagging;
mod versioning;

use s3s::dto::*;
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, S3};

use crate::identities::Identities;
use crate::store::{Store, StoreError};
use crate::users::User;

/// The bucket a request names, as the access check found it (a request
/// extension; absent for ListBuckets).
#[derive(Clone)]
pub struct RequestBucket(pub String);

/// A PutObject made for a browser form (POST Object): its event is
/// `s3:ObjectCreated:Post` (a request extension).
#[derive(Clone, Copy)]
pub struct FormUpload;

/// The S3 service over the share. Each request runs on the store of its
/// bucket's root and of the SMB identity its user acts as
/// ([`Gateway::scoped`]).
#[derive(Clone)]
pub struct Gateway {
    store: Store,
    region: std::sync::Arc<str>,
    identities: Identities,
    /// Buckets' CORS configurations (forgotten here when changed).
    cors: crate::cors_rules::Cache,
    /// Bucket notifications: the changes made are reported here.
    events: crate::events::Events,
    /// The user that signed the request (`None`: anonymous, or a gateway
    /// not yet scoped to a request).
    user: Option<std::sync::Arc<User>>,
    /// Veeam's two SOSAPI objects are served in every bucket
    /// (`--veeam-sosapi`, see `sosapi`).
    sosapi: bool,
}

impl Gateway {
    /// A gateway answering for `region` over `identities`; `cors` is the
    /// CORS cache the front reads; `events` takes the changes it makes.
    pub fn new(
        identities: Identities,
        region: &str,
        cors: crate::cors_rules::Cache,
        events: crate::events::Events,
    ) -> Gateway {
        Gateway {
            store: identities.primary().clone(),
            region: region.into(),
            identities,
            cors,
            events,
            user: None,
            sosapi: false,
        }
    }

    /// This gateway, serving Veeam's SOSAPI objects if `on`
    /// (`--veeam-sosapi`).
    pub fn with_sosapi(self, on: bool) -> Gateway {
        Gateway { sosapi: on, ..self }
    }

    /// This gateway for one request: on the store of the request's
    /// bucket's root (`--share`, or a configured bucket's own directory),
    /// as the SMB identity of the user that the access check put in the
    /// request's extensions (the gateway's own for anonymous requests and
    /// for users without one).
    ///
    /// Errors: that identity's pool cannot connect (AccessDenied for a
    /// refused login, else 503 SlowDown).
    async fn scoped<T>(&self, req: &S3Request<T>) -> S3Result<Gateway> {
        let user = req.extensions.get::<std::sync::Arc<User>>().cloned();
        let bucket = req.extensions.get::<RequestBucket>().map(|b| b.0.as_str());
        let id = user.as_ref().and_then(|u| u.smb.as_ref());
        if let (Some(u), Some(b)) = (&user, bucket) {
            if self.identities.on_another_server(b) && !u.may_log_on_for(b) {
                return Err(credentials_not_sent(&u.name, b));
            }
        }
        let store = match bucket {
            // ListBuckets: it reaches each root as the user itself.
            None => self.store.clone(),
            Some(_) => self.identities.store(bucket, id).await.map_err(s3_error)?,
        };
        Ok(Gateway {
            store,
            region: self.region.clone(),
            identities: self.identities.clone(),
            cors: self.cors.clone(),
            events: self.events.clone(),
            user,
            sosapi: self.sosapi,
        })
    }
}

/// 403 for a user whose SMB account would be sent to `bucket`'s server,
/// another than `--share`'s, that its table does not name (`buckets =
/// ["*"]`); logged at WARN, naming the fix.
pub(crate) fn credentials_not_sent(user: &str, bucket: &str) -> S3Error {
    tracing::warn!(
        user,
        bucket,
        "not logging on to bucket {bucket}'s server as user {user}'s SMB account: the bucket is on another server \
         than --share's, and the user's buckets do not name it (add it to the user's buckets)"
    );
    S3Error::with_message(S3ErrorCode::AccessDenied, "Access Denied")
}

/// A header map of one header (a value that is not a valid header value is
/// left out).
fn one_header(name: http::header::HeaderName, value: &str) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    if let Ok(v) = http::HeaderValue::from_str(value) {
        h.insert(name, v);
    }
    h
}

/// Maps a store error to the S3 error clients expect: the code, and the
/// headers a 304 (ETag) or a 416 (Content-Range) carries.
pub fn s3_error(e: StoreError) -> S3Error {
    use S3ErrorCode as C;
    let msg = e.to_string();
    let code = match &e {
        StoreError::NoSuchBucket => C::NoSuchBucket,
        StoreError::NoSuchKey => C::NoSuchKey,
        StoreError::BucketAlreadyOwnedByYou => C::BucketAlreadyOwnedByYou,
        StoreError::BucketNotEmpty => C::BucketNotEmpty,
        StoreError::InvalidKey(k) => match k.s3_code() {
            "KeyTooLongError" => C::KeyTooLongError,
            _ => C::InvalidArgument,
        },
        StoreError::NameTooLong => C::KeyTooLongError,
        StoreError::Conflict(_) => {
            let mut err = S3Error::with_message(C::Custom("KeyConflict".into()), msg);
            err.set_status_code(http::StatusCode::CONFLICT);
            return err;
        }
        StoreError::MissingTrailer(_) => {
            let mut err = S3Error::with_message(C::Custom("MalformedTrailerError".into()), msg);
            err.set_status_code(http::StatusCode::BAD_REQUEST);
            return err;
        }
        StoreError::PreconditionFailed => C::PreconditionFailed,
        StoreError::NotModified { etag } => {
            let mut err = S3Error::with_message(C::NotModified, msg);
            err.set_headers(one_header(http::header::ETAG, &format!("\"{etag}\"")));
            return err;
        }
        StoreError::NoSuchVersion => C::NoSuchVersion,
        StoreError::InvalidBucketState(_) => C::InvalidBucketState,
        StoreError::DeleteMarker { version_id, last_modified, requested } => {
            let code = if *requested { C::MethodNotAllowed } else { C::NoSuchKey };
            let mut err = S3Error::with_message(code, msg);
            let mut h = one_header(http::header::HeaderName::from_static("x-amz-delete-marker"), "true");
            h.extend(one_header(http::header::HeaderName::from_static("x-amz-version-id"), version_id));
            if *requested {
                let date = convert::http_date(&convert::timestamp(*last_modified)).unwrap_or_default();
                h.extend(one_header(http::header::LAST_MODIFIED, &date));
            }
            err.set_headers(h);
            return err;
        }
        StoreError::RangeNotSatisfiable { size } => {
            let mut err = S3Error::with_message(C::InvalidRange, msg);
            err.set_headers(one_header(http::header::CONTENT_RANGE, &format!("bytes */{size}")));
            return err;
        }
        StoreError::BadDigest(_) => C::BadDigest,
        StoreError::InvalidDigest(_) => C::InvalidDigest,
        StoreError::IncompleteBody => C::IncompleteBody,
        StoreError::RequestTimeout => C::RequestTimeout,
        StoreError::InvalidRange => C::InvalidRange,
        StoreError::NoSuchUpload => C::NoSuchUpload,
        StoreError::InvalidPart(_) => C::InvalidPart,
        StoreError::InvalidPartOrder => C::InvalidPartOrder,
        StoreError::EntityTooSmall => C::EntityTooSmall,
        StoreError::EntityTooLarge => C::EntityTooLarge,
        StoreError::InvalidArgument(_) => C::InvalidArgument,
        StoreError::InvalidTag(_) => C::InvalidTag,
        StoreError::MetadataTooLarge(_) => C::MetadataTooLarge,
        StoreError::InvalidRequest(_) => C::InvalidRequest,
        StoreError::AccessDenied | StoreError::Refused(_) => C::AccessDenied,
        StoreError::Busy(_) => C::SlowDown,
        // s3s reports a bad aws-chunked chunk signature only as a body
        // stream error; it is a signature failure to the client.
        StoreError::Body(m) if m.contains("SignatureMismatch") => C::SignatureDoesNotMatch,
        StoreError::Body(_) => C::IncompleteBody,
        // Logged once, at ERROR, by the front with the request's ID and
        // operation (the message names the SMB command and NTSTATUS).
        StoreError::Smb(_) | StoreError::Damaged(_) => C::InternalError,
    };
    S3Error::with_message(code, msg)
}

#[async_trait::async_trait]
impl S3 for Gateway {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        bucket::list_buckets(&self.scoped(&req).await?, req).await
    }
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        bucket::create_bucket(&self.scoped(&req).await?, req).await
    }
    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        bucket::head_bucket(&self.scoped(&req).await?, req).await
    }
    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        bucket::delete_bucket(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        bucket::get_bucket_location(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_versioning(
        &self,
        req: S3Request<GetBucketVersioningInput>,
    ) -> S3Result<S3Response<GetBucketVersioningOutput>> {
        versioning::get_bucket_versioning(&self.scoped(&req).await?, req).await
    }
    async fn put_bucket_versioning(
        &self,
        req: S3Request<PutBucketVersioningInput>,
    ) -> S3Result<S3Response<PutBucketVersioningOutput>> {
        versioning::put_bucket_versioning(&self.scoped(&req).await?, req).await
    }
    async fn put_object_lock_configuration(
        &self,
        req: S3Request<PutObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<PutObjectLockConfigurationOutput>> {
        object_lock::put_configuration(&self.scoped(&req).await?, req).await
    }
    async fn get_object_lock_configuration(
        &self,
        req: S3Request<GetObjectLockConfigurationInput>,
    ) -> S3Result<S3Response<GetObjectLockConfigurationOutput>> {
        object_lock::get_configuration(&self.scoped(&req).await?, req).await
    }
    async fn put_object_retention(
        &self,
        req: S3Request<PutObjectRetentionInput>,
    ) -> S3Result<S3Response<PutObjectRetentionOutput>> {
        object_lock::put_retention(&self.scoped(&req).await?, req).await
    }
    async fn get_object_retention(
        &self,
        req: S3Request<GetObjectRetentionInput>,
    ) -> S3Result<S3Response<GetObjectRetentionOutput>> {
        object_lock::get_retention(&self.scoped(&req).await?, req).await
    }
    async fn put_object_legal_hold(
        &self,
        req: S3Request<PutObjectLegalHoldInput>,
    ) -> S3Result<S3Response<PutObjectLegalHoldOutput>> {
        object_lock::put_legal_hold(&self.scoped(&req).await?, req).await
    }
    async fn get_object_legal_hold(
        &self,
        req: S3Request<GetObjectLegalHoldInput>,
    ) -> S3Result<S3Response<GetObjectLegalHoldOutput>> {
        object_lock::get_legal_hold(&self.scoped(&req).await?, req).await
    }
    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        versioning::list_object_versions(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_acl(&self, req: S3Request<GetBucketAclInput>) -> S3Result<S3Response<GetBucketAclOutput>> {
        bucket::get_bucket_acl(&self.scoped(&req).await?, req).await
    }
    async fn put_bucket_acl(&self, req: S3Request<PutBucketAclInput>) -> S3Result<S3Response<PutBucketAclOutput>> {
        bucket::put_bucket_acl(&self.scoped(&req).await?, req).await
    }
    async fn put_bucket_cors(&self, req: S3Request<PutBucketCorsInput>) -> S3Result<S3Response<PutBucketCorsOutput>> {
        cors::put(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_cors(&self, req: S3Request<GetBucketCorsInput>) -> S3Result<S3Response<GetBucketCorsOutput>> {
        cors::get(&self.scoped(&req).await?, req).await
    }
    async fn delete_bucket_cors(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        cors::delete(&self.scoped(&req).await?, req).await
    }
    async fn put_bucket_notification_configuration(
        &self,
        req: S3Request<PutBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<PutBucketNotificationConfigurationOutput>> {
        notification::put(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_notification_configuration(
        &self,
        req: S3Request<GetBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
        notification::get(&self.scoped(&req).await?, req).await
    }
    async fn get_object_attributes(
        &self,
        req: S3Request<GetObjectAttributesInput>,
    ) -> S3Result<S3Response<GetObjectAttributesOutput>> {
        attributes::get(&self.scoped(&req).await?, req).await
    }
    async fn put_object_tagging(
        &self,
        req: S3Request<PutObjectTaggingInput>,
    ) -> S3Result<S3Response<PutObjectTaggingOutput>> {
        tagging::put_object(&self.scoped(&req).await?, req).await
    }
    async fn get_object_tagging(
        &self,
        req: S3Request<GetObjectTaggingInput>,
    ) -> S3Result<S3Response<GetObjectTaggingOutput>> {
        tagging::get_object(&self.scoped(&req).await?, req).await
    }
    async fn delete_object_tagging(
        &self,
        req: S3Request<DeleteObjectTaggingInput>,
    ) -> S3Result<S3Response<DeleteObjectTaggingOutput>> {
        tagging::delete_object(&self.scoped(&req).await?, req).await
    }
    async fn put_bucket_tagging(
        &self,
        req: S3Request<PutBucketTaggingInput>,
    ) -> S3Result<S3Response<PutBucketTaggingOutput>> {
        tagging::put_bucket(&self.scoped(&req).await?, req).await
    }
    async fn get_bucket_tagging(
        &self,
        req: S3Request<GetBucketTaggingInput>,
    ) -> S3Result<S3Response<GetBucketTaggingOutput>> {
        tagging::get_bucket(&self.scoped(&req).await?, req).await
    }
    async fn delete_bucket_tagging(
        &self,
        req: S3Request<DeleteBucketTaggingInput>,
    ) -> S3Result<S3Response<DeleteBucketTaggingOutput>> {
        tagging::delete_bucket(&self.scoped(&req).await?, req).await
    }
    async fn get_object_acl(&self, req: S3Request<GetObjectAclInput>) -> S3Result<S3Response<GetObjectAclOutput>> {
        object::get_object_acl(&self.scoped(&req).await?, req).await
    }
    async fn put_object_acl(&self, req: S3Request<PutObjectAclInput>) -> S3Result<S3Response<PutObjectAclOutput>> {
        object::put_object_acl(&self.scoped(&req).await?, req).await
    }
    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        object::put_object(&self.scoped(&req).await?, req).await
    }
    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        object::get_object(&self.scoped(&req).await?, req).await
    }
    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        object::head_object(&self.scoped(&req).await?, req).await
    }
    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        object::delete_object(&self.scoped(&req).await?, req).await
    }
    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        object::delete_objects(&self.scoped(&req).await?, req).await
    }
    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        object::copy_object(&self.scoped(&req).await?, req).await
    }
    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        list::list_objects(&self.scoped(&req).await?, req).await
    }
    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        list::list_objects_v2(&self.scoped(&req).await?, req).await
    }
    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        multipart::create(&self.scoped(&req).await?, req).await
    }
    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(&self.scoped(&req).await?, req).await
    }
    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        multipart::upload_part_copy(&self.scoped(&req).await?, req).await
    }
    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        multipart::complete(&self.scoped(&req).await?, req).await
    }
    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        multipart::abort(&self.scoped(&req).await?, req).await
    }
    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        multipart::list_parts(&self.scoped(&req).await?, req).await
    }
    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        multipart::list_uploads(&self.scoped(&req).await?, req).await
    }
}
