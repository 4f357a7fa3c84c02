//! DeleteObjects' key list, read whole and checked against its Content-MD5
//! or `x-amz-checksum-*` header before s3s acts on it: s3s leaves those
//! unchecked, and a key list damaged on the way must delete nothing (AWS
//! answers 400 BadDigest). A body framed as aws-chunked (its checksum in a
//! trailer) goes on as read.
//!
//! The body is read only once the request's signature has been checked
//! (this is part of the custom route, `crate::routes`, which s3s calls
//! after the check) and its access decided: anyone can open a connection
//! and send the headers of a DeleteObjects, so a body read before that
//! would let unauthenticated clients hold memory and the XML body budget.
//! The read itself is paced by the front (`crate::paced_body`).

use s3s::{Body, S3Error, S3ErrorCode, S3Request, S3Result};

use crate::store::checksum::Algorithm;

/// True for DeleteObjects: a POST with the `delete` subresource (its
/// decoded name, as s3s reads it).
pub fn is_delete_objects(method: &http::Method, uri: &http::Uri) -> bool {
    method == http::Method::POST
        && uri.query().is_some_and(|q| q.split('&').any(|p| crate::precheck::decoded_name(p) == "delete"))
}

/// What checks a DeleteObjects request: who may send one, and the bucket
/// it names.
#[derive(Clone)]
pub struct DeleteObjects {
    access: crate::access_check::Access,
    domain: Option<crate::vhost::Domain>,
}

impl DeleteObjects {
    /// Checks with `access`, finding the bucket by Host under `domain`.
    pub fn new(access: crate::access_check::Access, domain: Option<crate::vhost::Domain>) -> DeleteObjects {
        DeleteObjects { access, domain }
    }

    /// Whether `req` (signature already checked) may delete in the bucket
    /// it names, decided before its body is read.
    ///
    /// Errors: 403 AccessDenied (see `Access::decide`); 400
    /// InvalidBucketName for a request that names no bucket.
    pub fn check_access(&self, req: &S3Request<Body>) -> S3Result<()> {
        let mut probe = http::Request::new(());
        *probe.method_mut() = req.method.clone();
        *probe.uri_mut() = req.uri.clone();
        *probe.headers_mut() = req.headers.clone();
        let bucket = crate::vhost::addressed(self.domain.as_ref(), &probe)
            .map(|a| a.bucket)
            .filter(|b| s3s::path::check_bucket_name(b))
            .ok_or_else(|| {
                S3Error::with_message(S3ErrorCode::InvalidBucketName, "The specified bucket is not valid.")
            })?;
        let key = req.credentials.as_ref().map(|c| c.access_key.as_str());
        self.access.decide("DeleteObjects", [bucket.as_str()], key).0
    }

    /// Reads `body` (at most [`crate::precheck::MAX_XML_BODY`] bytes) and
    /// checks it against the digests in `headers`; returns it as a body
    /// again.
    ///
    /// Errors: 400 MaxMessageLengthExceeded, BadDigest, InvalidDigest,
    /// IncompleteBody (the body ended early or could not be read; a body
    /// that stopped coming is answered RequestTimeout by the front).
    pub async fn read_checked(&self, mut body: Body, headers: &http::HeaderMap) -> S3Result<Body> {
        use futures::StreamExt;
        let mut bytes = bytes::BytesMut::new();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| S3Error::with_message(S3ErrorCode::IncompleteBody, e.to_string()))?;
            if bytes.len() + chunk.len() > crate::precheck::MAX_XML_BODY {
                return Err(S3Error::with_message(S3ErrorCode::MaxMessageLengthExceeded, "Your request was too big."));
            }
            bytes.extend_from_slice(&chunk);
        }
        let bytes = bytes.freeze();
        let framed = headers.contains_key("x-amz-trailer")
            || headers.get("x-amz-content-sha256").is_some_and(|v| v.as_bytes().starts_with(b"STREAMING-"));
        if !framed {
            let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
            let sums = Algorithm::ALL
                .into_iter()
                .filter_map(|a| Some((a, text(&format!("x-amz-checksum-{}", a.name().to_lowercase()))?.to_string())))
                .collect();
            crate::store::verify::verify_body(&bytes, text("content-md5"), &sums).map_err(crate::s3::s3_error)?;
        }
        Ok(Body::from(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_objects_is_found_by_its_decoded_subresource() {
        let post = http::Method::POST;
        assert!(is_delete_objects(&post, &"/b?delete".parse().unwrap()));
        assert!(is_delete_objects(&post, &"/b?delete=".parse().unwrap()));
        assert!(is_delete_objects(&post, &"/b?x-id=DeleteObjects&delet%65".parse().unwrap()));
        assert!(!is_delete_objects(&post, &"/b/k?uploads".parse().unwrap()));
        assert!(!is_delete_objects(&http::Method::GET, &"/b?delete".parse().unwrap()));
    }
}
