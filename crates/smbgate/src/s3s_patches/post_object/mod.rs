//! POST Object: uploads from an HTML form (`multipart/form-data` to a
//! bucket's URL), as AWS's browser-based uploads define them. The front
//! sends such a request here rather than to s3s, whose POST Object reads the
//! whole file into memory; here the file part streams to the share like a
//! PUT body.
//!
//! One request: the fields before the file part (`form`), their signature
//! (`signature`: SigV4, SigV2, or none for an anonymous upload), the
//! policy's expiry and conditions (`policy`), the user's grants as for
//! PutObject, then the PUT itself through the gateway's own handler, with
//! the file bounded by `content-length-range` (`body`); the answer is a
//! redirect, 200, 201 with a `PostResponse`, or 204, as the form asks.

mod body;
mod form;
mod policy;
mod signature;

use std::collections::HashMap;
use std::sync::Arc;

use futures::TryStreamExt;
use s3s::dto::{ChecksumAlgorithm, ObjectLockLegalHoldStatus, ObjectLockMode, PutObjectInput, StreamingBlob};
use s3s::dto::{Tagging, Timestamp, TimestampFormat};
use s3s::{HttpResponse, S3Error, S3ErrorCode, S3Request, S3Result, S3};

use crate::s3::{Gateway, RequestBucket};
use crate::users::{Directory, User};

use form::Fields;
use signature::Scheme;

/// The operation name of form uploads in metrics and the access log.
pub const OPERATION: &str = "PostObject";

/// Largest file a form may upload without a `content-length-range`, in
/// bytes (AWS's limit for POST, 5 GB).
const MAX_FILE: u64 = 5 * 1024 * 1024 * 1024;

/// Most bytes of a form besides its file: the data before the file part
/// (see `form`) and the fields after it, which are ignored.
const MAX_AROUND_FILE: u64 = 1 << 20;

/// What serves form uploads: the gateway the S3 handlers run on, the users,
/// and the rules of the endpoint.
#[derive(Clone)]
pub struct PostObject {
    gateway: Gateway,
    users: Directory,
    /// What unsigned forms may do (`--anonymous` and its grant).
    anonymous: crate::users::Anonymous,
    region: Arc<str>,
    sigv2: bool,
    domain: Option<crate::vhost::Domain>,
    /// What the gateway refuses to promise (see `crate::promises`).
    promises: crate::promises::Promises,
    /// How long a form may take to reach its file part.
    fields_timeout: std::time::Duration,
    /// Unsigned forms may redirect (`--anonymous-form-redirect`).
    anonymous_redirect: bool,
}

/// What a form upload resolved, for metrics and the access log.
#[derive(Default)]
pub struct Posted {
    /// The bucket posted to, once known.
    pub bucket: Option<String>,
    /// The object's key, once the form named it.
    pub key: Option<String>,
    /// The user that signed the form (`None`: anonymous or not verified).
    pub user: Option<Arc<User>>,
    /// The access key the form names, checked or not (for the log of
    /// failed authentications).
    pub access_key: Option<String>,
}

impl PostObject {
    /// Form uploads on `gateway` for `users` (reloaded with them), in
    /// `region`, with SigV2 forms if `sigv2`, unsigned forms if
    /// `anonymous`, buckets named by Host under `domain` if set, refusing
    /// the fields `promises` refuses as headers, and reading no longer
    /// than `fields_timeout` up to the file part (`--header-read-timeout`:
    /// nothing before it is authenticated); unsigned forms may redirect if
    /// `anonymous_redirect`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gateway: Gateway,
        users: Directory,
        anonymous: crate::users::Anonymous,
        region: &str,
        sigv2: bool,
        domain: Option<crate::vhost::Domain>,
        promises: crate::promises::Promises,
        fields_timeout: std::time::Duration,
        anonymous_redirect: bool,
    ) -> PostObject {
        PostObject {
            gateway,
            users,
            anonymous,
            region: region.into(),
            sigv2,
            domain,
            promises,
            fields_timeout,
            anonymous_redirect,
        }
    }

    /// Answers the form upload `req` (see `precheck::is_form`); the answer is an S3
    /// error document on failure, and nothing is stored then.
    pub async fn answer(&self, req: http::Request<crate::conn_limits::RequestBody>) -> (HttpResponse, Posted) {
        let mut posted = Posted::default();
        let resp = match self.upload(req, &mut posted).await {
            Ok(r) => r,
            Err(e) => e.to_http_response().unwrap_or_else(|_| {
                let mut r = http::Response::new(s3s::Body::empty());
                *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                r
            }),
        };
        (resp, posted)
    }

    /// The bucket `req` posts to: its Host under `--domain` (the path must
    /// then be `/`), else the path's one segment.
    ///
    /// Returns the bucket, and whether the Host named it.
    ///
    /// Errors: 405 MethodNotAllowed for a path that names a key;
    /// InvalidBucketName.
    fn bucket_of<B>(&self, req: &http::Request<B>) -> S3Result<(String, bool)> {
        let to = crate::vhost::addressed(self.domain.as_ref(), req).ok_or(S3ErrorCode::InvalidURI)?;
        if !to.rest.is_empty() {
            return Err(S3Error::with_message(
                S3ErrorCode::MethodNotAllowed,
                "The specified method is not allowed against this resource.",
            ));
        }
        if !s3s::path::check_bucket_name(&to.bucket) {
            return Err(S3Error::with_message(S3ErrorCode::InvalidBucketName, "The specified bucket is not valid."));
        }
        Ok((to.bucket, to.by_host))
    }

    async fn upload(
        &self,
        req: http::Request<crate::conn_limits::RequestBody>,
        posted: &mut Posted,
    ) -> S3Result<HttpResponse> {
        let deadline = tokio::time::Instant::now() + self.fields_timeout;
        let (bucket, by_host) = self.bucket_of(&req)?;
        if crate::precheck::content_length(req.headers()) > MAX_FILE + MAX_AROUND_FILE {
            return Err(S3Error::with_message(
                S3ErrorCode::EntityTooLarge,
                "Your proposed upload exceeds the maximum allowed size",
            ));
        }
        posted.bucket = Some(bucket.clone());
        let location_base = location_base(&req, &bucket, by_host);
        let (parts, body) = req.into_parts();
        let content_type = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let body = http_body_util::BodyStream::new(body).try_filter_map(|f| async move { Ok(f.into_data().ok()) });
        let form::Form { mut fields, filename, file } = form::read(content_type, body, deadline).await?;

        // `${filename}` in the key is the file part's name.
        let key = fields.get("key").ok_or_else(|| {
            S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.",
            )
        })?;
        let key = key.replace("${filename}", &filename);
        fields.set("key", key.clone());
        posted.key = Some(key.clone());
        if fields.get("bucket").is_some_and(|b| b != bucket) {
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "the form's bucket field names another bucket than the one posted to",
            ));
        }

        let scheme = Scheme::of(&fields, self.sigv2)?;
        posted.access_key = scheme.access_key().map(str::to_string);
        let user = match scheme.access_key() {
            None => None,
            Some(k) => Some(self.users.get(k).ok_or_else(|| {
                S3Error::with_message(
                    S3ErrorCode::InvalidAccessKeyId,
                    "The AWS Access Key Id you provided does not exist in our records.",
                )
            })?),
        };
        let (min, max) = match fields.get("policy") {
            Some(encoded) => {
                if let Some(u) = &user {
                    scheme.verify(encoded, u.secret_key(), &self.region)?;
                }
                let policy = policy::parse(encoded, time::OffsetDateTime::now_utc())?;
                policy::check_fields(&policy, &fields, &bucket)?;
                policy.content_length_range().map_or((0, MAX_FILE), |(lo, hi)| (lo, hi.min(MAX_FILE)))
            }
            None => (0, MAX_FILE),
        };
        let signed = user.is_some();
        // Unsigned: under the anonymous grant, if one limits it.
        let user = user.or_else(|| self.anonymous.user());
        match &user {
            None if !self.anonymous.allowed() => {
                return Err(S3Error::with_message(S3ErrorCode::AccessDenied, "Signature is required"));
            }
            None => {}
            Some(u) => u.authorize(OPERATION, [bucket.as_str()])?,
        }
        posted.user = user.clone();
        // A form's SSE-C fields are refused whatever the transport.
        if let Some(refused) = self.promises.refusal(OPERATION, true, |n| fields.get(n)) {
            return Err(refused);
        }
        let redirects = fields.get("success_action_redirect").or_else(|| fields.get("redirect")).is_some();
        if !signed && redirects && !self.anonymous_redirect {
            return Err(S3Error::with_message(
                S3ErrorCode::AccessDenied,
                "An unsigned form may not redirect on this gateway (see --anonymous-form-redirect).",
            ));
        }

        let (file, cut) = body::Bounded::new(file, min, max);
        let mut input = put_input(&fields, &bucket, &key)?;
        input.body = Some(StreamingBlob::wrap(file));
        let mut extensions = http::Extensions::new();
        extensions.insert(RequestBucket(bucket.clone()));
        // Its event is s3:ObjectCreated:Post, naming the form's request.
        extensions.insert(crate::s3::FormUpload);
        if let Some(o) = parts.extensions.get::<crate::events::Origin>() {
            extensions.insert(o.clone());
        }
        if let Some(u) = user {
            extensions.insert(u);
        }
        let put = S3Request {
            input,
            method: http::Method::PUT,
            uri: parts.uri,
            headers: http::HeaderMap::new(),
            extensions,
            credentials: None,
            region: None,
            service: None,
            trailing_headers: None,
        };
        let out = match self.gateway.put_object(put).await {
            Ok(out) => out.output,
            Err(e) => return Err(cut.lock().unwrap_or_else(|p| p.into_inner()).map_or(e, body::Cut::error)),
        };
        let etag = out.e_tag.map(|e| e.as_strong().unwrap_or_default().to_string()).unwrap_or_default();
        let mut resp = answer(&fields, &bucket, &key, &format!("\"{etag}\""), &location_base);
        // On a versioned bucket, as on AWS: the posted object's version.
        if let Some(v) = out.version_id.and_then(|v| http::HeaderValue::from_str(&v).ok()) {
            resp.headers_mut().insert("x-amz-version-id", v);
        }
        Ok(resp)
    }
}

/// The URL of the posted object without its key: `scheme://host/bucket/`
/// (path style) or `scheme://host/` (virtual-hosted).
fn location_base<B>(req: &http::Request<B>, bucket: &str, by_host: bool) -> String {
    let scheme = if req.extensions().get::<crate::conn_limits::OverTls>().is_some() { "https" } else { "http" };
    let host = crate::vhost::host_of(req).unwrap_or("localhost");
    match by_host {
        true => format!("{scheme}://{host}/"),
        false => format!("{scheme}://{host}/{bucket}/"),
    }
}

/// The PutObject a form asks for: its standard header fields, user
/// metadata, tags and checksums.
///
/// Errors: 400 MalformedXML for a `tagging` field that does not parse.
fn put_input(fields: &Fields, bucket: &str, key: &str) -> S3Result<PutObjectInput> {
    let text = |name: &str| fields.get(name).map(str::to_string);
    let metadata: HashMap<String, String> = fields
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("x-amz-meta-").map(|m| (m.to_string(), v.to_string())))
        .collect();
    let expires = fields.get("expires").and_then(|v| Timestamp::parse(TimestampFormat::HttpDate, v).ok());
    let tagging = fields.get("tagging").map(tags_as_header).transpose()?;
    let mut input = PutObjectInput::builder()
        .bucket(bucket.to_string())
        .key(key.to_string())
        .build()
        .map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, e.to_string()))?;
    input.content_type = text("content-type");
    input.cache_control = text("cache-control");
    input.content_disposition = text("content-disposition");
    input.content_encoding = text("content-encoding");
    input.content_language = text("content-language");
    input.expires = expires;
    input.metadata = (!metadata.is_empty()).then_some(metadata);
    input.tagging = tagging;
    input.checksum_algorithm = text("x-amz-checksum-algorithm").map(ChecksumAlgorithm::from);
    input.checksum_crc32 = text("x-amz-checksum-crc32");
    input.checksum_crc32c = text("x-amz-checksum-crc32c");
    input.checksum_crc64nvme = text("x-amz-checksum-crc64nvme");
    input.checksum_sha1 = text("x-amz-checksum-sha1");
    input.checksum_sha256 = text("x-amz-checksum-sha256");
    // Object Lock fields, judged as a PUT's headers are (a form that asks
    // for a lock on a bucket without one is refused, never ignored).
    input.object_lock_mode = text("x-amz-object-lock-mode").map(ObjectLockMode::from);
    input.object_lock_retain_until_date = match fields.get("x-amz-object-lock-retain-until-date") {
        Some(v) => Some(Timestamp::parse(TimestampFormat::DateTime, v).map_err(|_| {
            S3Error::with_message(S3ErrorCode::InvalidArgument, "x-amz-object-lock-retain-until-date is not a date")
        })?),
        None => None,
    };
    input.object_lock_legal_hold_status = text("x-amz-object-lock-legal-hold").map(ObjectLockLegalHoldStatus::from);
    Ok(input)
}

/// A form's `tagging` field (a `Tagging` XML document) as the
/// `x-amz-tagging` header PutObject takes (URL-encoded pairs), so that one
/// rule checks both.
///
/// Errors: 400 MalformedXML.
fn tags_as_header(xml: &str) -> S3Result<String> {
    let malformed = || {
        S3Error::with_message(
            S3ErrorCode::MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema",
        )
    };
    let mut d = s3s::xml::Deserializer::new(xml.as_bytes());
    let tagging = <Tagging as s3s::xml::Deserialize>::deserialize(&mut d).map_err(|_| malformed())?;
    let mut header = form_urlencoded::Serializer::new(String::new());
    for tag in tagging.tag_set {
        header.append_pair(&tag.key.unwrap_or_default(), &tag.value.unwrap_or_default());
    }
    Ok(header.finish())
}

/// The answer to a stored upload, as the form asks: a 303 to
/// `success_action_redirect` (or the older `redirect`) with the bucket, key
/// and ETag in its query; else `success_action_status` 200, 201 (with a
/// `PostResponse` document) or 204 (anything else).
fn answer(fields: &Fields, bucket: &str, key: &str, etag: &str, base: &str) -> HttpResponse {
    // The key as a URL path: every byte but the unreserved ones and `/`
    // percent-encoded.
    const PATH: &percent_encoding::AsciiSet =
        &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~').remove(b'/');
    let location = format!("{base}{}", percent_encoding::utf8_percent_encode(key, PATH));
    let redirect = fields.get("success_action_redirect").or_else(|| fields.get("redirect"));
    let redirect = redirect.filter(|r| r.starts_with("http://") || r.starts_with("https://"));
    let (status, body, to) = match (redirect, fields.get("success_action_status")) {
        (Some(url), _) => {
            let query = form_urlencoded::Serializer::new(String::new())
                .append_pair("bucket", bucket)
                .append_pair("key", key)
                .append_pair("etag", etag)
                .finish();
            let sep = if url.contains('?') { '&' } else { '?' };
            (http::StatusCode::SEE_OTHER, String::new(), format!("{url}{sep}{query}"))
        }
        (None, Some("200")) => (http::StatusCode::OK, String::new(), location.clone()),
        (None, Some("201")) => {
            let e = |s: &str| crate::precheck::xml_escape(s);
            let doc = format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse><Location>{}</Location>\
                 <Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></PostResponse>",
                e(&location),
                e(bucket),
                e(key),
                e(etag)
            );
            (http::StatusCode::CREATED, doc, location.clone())
        }
        (None, _) => (http::StatusCode::NO_CONTENT, String::new(), location.clone()),
    };
    let mut resp = http::Response::new(s3s::Body::from(body.clone()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    if let Ok(v) = http::HeaderValue::from_str(etag) {
        h.insert(http::header::ETAG, v);
    }
    if let Ok(v) = http::HeaderValue::from_str(&to) {
        h.insert(http::header::LOCATION, v);
    }
    if !body.is_empty() {
        h.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
    }
    resp
}
