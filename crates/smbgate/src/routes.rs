//! The requests s3s hands to us once their signature holds, before it
//! decodes them (its one custom route): those it would decode wrongly, or
//! whose body must be checked before it acts. Each is sent on, without its
//! signature, to a second s3s service over the same gateway, users and
//! access check:
//!
//! - a GET or HEAD whose Range does not parse, without its Range
//!   (`crate::s3s_patches::ignored_range`);
//! - DeleteObjects, once its key list has been read and checked against
//!   its digest (`crate::s3s_patches::delete_objects`): s3s leaves that check to us,
//!   and the front must not read the body before the signature is checked.
//!
//! The access key the first service verified travels with the request as
//! [`Vouched`], and [`crate::access_check::Access`] decides on it as on a signed
//! request (the same user, buckets and SMB identity). Nothing outside the
//! process can reach the second service, nor set [`Vouched`].

use hyper::http::Extensions;
use hyper::{HeaderMap, Method, Uri};
use s3s::route::S3Route;
use s3s::service::S3Service;
use s3s::{Body, S3Request, S3Response, S3Result};

use crate::access_check::Vouched;

/// Which route took a request (a request extension set by `is_match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    IgnoredRange,
    DeleteObjects,
}

/// The custom route; see the module docs.
pub struct Routes {
    inner: S3Service,
    delete: crate::s3s_patches::delete_objects::DeleteObjects,
}

impl Routes {
    /// Routes that answer through `inner`, which must be built with the
    /// same auth, access check, host and config as the service this route
    /// is set on (s3s runs the access check only when auth is set);
    /// `delete` checks DeleteObjects bodies.
    pub fn new(inner: S3Service, delete: crate::s3s_patches::delete_objects::DeleteObjects) -> Routes {
        Routes { inner, delete }
    }
}

/// Query parameters that carry a presigned URL's signature (SigV4, SigV2).
const SIGNATURE_PARAMS: &[&str] = &[
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
    "AWSAccessKeyId",
    "Signature",
    "Expires",
];

/// `uri` without the query parameters of [`SIGNATURE_PARAMS`], compared
/// by their decoded names (`Signatur%65` is `Signature`, as s3s reads it);
/// kept byte-for-byte otherwise.
fn unsigned_uri(uri: &Uri) -> Uri {
    let Some(q) = uri.query() else { return uri.clone() };
    let kept: Vec<&str> = q
        .split('&')
        .filter(|p| {
            let name = crate::precheck::decoded_name(p);
            !SIGNATURE_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(&name))
        })
        .collect();
    let path_and_query = match kept.is_empty() {
        true => uri.path().to_string(),
        false => format!("{}?{}", uri.path(), kept.join("&")),
    };
    let mut parts = uri.clone().into_parts();
    // A path and query taken from a valid URI stay valid.
    parts.path_and_query = path_and_query.parse().ok();
    Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// Sends `req` on to `inner` with `body`, without its signature (the
/// Authorization header and the presigned query parameters) and without
/// the headers named in `drop`, vouching for the access key it was
/// signed with.
///
/// Errors: 500 InternalError if the inner service fails as HTTP.
pub async fn forward(
    inner: &S3Service,
    req: S3Request<Body>,
    body: Body,
    drop: &[http::HeaderName],
) -> S3Result<S3Response<Body>> {
    let mut headers = req.headers;
    headers.remove(hyper::header::AUTHORIZATION);
    for h in drop {
        headers.remove(h);
    }
    let mut extensions = req.extensions;
    extensions.insert(Vouched { access_key: req.credentials.map(|c| c.access_key) });
    let mut to = http::Request::new(body);
    *to.method_mut() = req.method;
    *to.uri_mut() = unsigned_uri(&req.uri);
    *to.headers_mut() = headers;
    *to.extensions_mut() = extensions;
    let resp = inner
        .call(to)
        .await
        .map_err(|e| s3s::S3Error::with_message(s3s::S3ErrorCode::InternalError, format!("{e:?}")))?;
    let (parts, body) = resp.into_parts();
    let mut out = S3Response::new(body);
    out.status = Some(parts.status);
    out.headers = parts.headers;
    out.extensions = parts.extensions;
    Ok(out)
}

#[async_trait::async_trait]
impl S3Route for Routes {
    fn is_match(&self, method: &Method, uri: &Uri, headers: &HeaderMap, extensions: &mut Extensions) -> bool {
        // Only GetObject and HeadObject read Range; another GET taken
        // here is answered the same through the inner service.
        let taken = if (method == Method::GET || method == Method::HEAD)
            && crate::s3s_patches::ignored_range::unusable_range(headers)
        {
            Taken::IgnoredRange
        } else if crate::s3s_patches::delete_objects::is_delete_objects(method, uri) {
            Taken::DeleteObjects
        } else {
            return false;
        };
        extensions.insert(taken);
        true
    }

    /// DeleteObjects is decided before its body is read; the inner
    /// service's access check decides the rest (it sees [`Vouched`]).
    async fn check_access(&self, req: &mut S3Request<Body>) -> S3Result<()> {
        match req.extensions.get::<Taken>() {
            Some(Taken::DeleteObjects) => self.delete.check_access(req),
            _ => Ok(()),
        }
    }

    async fn call(&self, mut req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        match req.extensions.get::<Taken>() {
            Some(Taken::DeleteObjects) => {
                let body = std::mem::take(&mut req.input);
                let checked = self.delete.read_checked(body, &req.headers).await?;
                forward(&self.inner, req, checked, &[]).await
            }
            _ => forward(&self.inner, req, Body::empty(), &[hyper::header::RANGE]).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_signature_parameters_leave_the_query() {
        let u: Uri =
            "/b/k?X-Amz-Signature=ab&partNumber=1&X-Amz-Credential=c%2Fd&response-content-type=a%2Fb".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k?partNumber=1&response-content-type=a%2Fb");
        let u: Uri = "/b/k?AWSAccessKeyId=a&Signature=s&Expires=1".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k");
        let u: Uri = "/b/k".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k");
        // Encoded names are the names s3s reads.
        let u: Uri = "/b/k?Signatur%65=s&X-Amz-Signatur%65=t&x-id=GetObject".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k?x-id=GetObject");
    }
}
