//! A GET or HEAD whose `Range` header does not parse as one byte range
//! (`bytes=5-2`, `bytes=0-1,4-5`, `chars=0-1`) is answered as if it had
//! none: 200 and the whole object, as AWS answers (RFC 9110 14.2 lets a
//! server ignore a Range it cannot use).
//!
//! s3s parses Range while it decodes GetObject and HeadObject, after it has
//! verified the signature, and refuses a bad one with 400. The header is
//! usually signed, so the front cannot drop it before. Instead
//! [`IgnoredRange`] is an s3s custom route: s3s offers it each request once
//! the signature holds, and it takes those with a Range that does not
//! parse. It sends them on, without Range and without their signature, to a
//! second s3s service over the same gateway, users and access check. The
//! access key the first one verified travels with the request as
//! [`Vouched`], and [`crate::front::Access`] decides on it as on a signed
//! request (the same user, buckets and SMB identity). Nothing outside the
//! process can reach the second service, nor set [`Vouched`].
//!
//! The store decides everything else about a GET's bytes
//! (`store::read_plan`), but it cannot ignore a Range that never reaches
//! it: s3s 0.14 refuses the request while decoding its input, before any
//! handler of ours runs. Hence this detour, until s3s can be told to drop
//! an unparsable Range itself.

use hyper::http::Extensions;
use hyper::{HeaderMap, Method, Uri};
use s3s::route::S3Route;
use s3s::service::S3Service;
use s3s::{Body, S3Request, S3Response, S3Result};

/// The access key whose signature the outer service verified (`None`: an
/// anonymous request), for the inner service's access check.
#[derive(Debug, Clone)]
pub struct Vouched {
    /// The verified access key.
    pub access_key: Option<String>,
}

/// The custom route; `inner` is the service without signature checks.
pub struct IgnoredRange {
    inner: S3Service,
}

impl IgnoredRange {
    /// A route that answers through `inner`, which must be built with the
    /// same auth, access check, host and config as the service this route
    /// is set on (s3s runs the access check only when auth is set).
    pub fn new(inner: S3Service) -> IgnoredRange {
        IgnoredRange { inner }
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

/// True if `headers` carry a Range that s3s's parser refuses.
fn unusable_range(headers: &HeaderMap) -> bool {
    headers.get(hyper::header::RANGE).is_some_and(|v| v.to_str().map_or(true, |r| s3s::dto::Range::parse(r).is_err()))
}

/// `uri` without the query parameters of [`SIGNATURE_PARAMS`] (kept
/// byte-for-byte otherwise).
fn unsigned_uri(uri: &Uri) -> Uri {
    let Some(q) = uri.query() else { return uri.clone() };
    let kept: Vec<&str> = q
        .split('&')
        .filter(|p| {
            let name = p.split_once('=').map_or(*p, |(n, _)| n);
            !SIGNATURE_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(name))
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

#[async_trait::async_trait]
impl S3Route for IgnoredRange {
    fn is_match(&self, method: &Method, uri: &Uri, headers: &HeaderMap, _: &mut Extensions) -> bool {
        // Only GetObject and HeadObject read Range; another GET taken
        // here is answered the same through the inner service.
        let _ = uri;
        (method == Method::GET || method == Method::HEAD) && unusable_range(headers)
    }

    /// The inner service's access check decides (it sees [`Vouched`]).
    async fn check_access(&self, _: &mut S3Request<Body>) -> S3Result<()> {
        Ok(())
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let mut headers = req.headers;
        headers.remove(hyper::header::RANGE);
        headers.remove(hyper::header::AUTHORIZATION);
        let mut extensions = req.extensions;
        extensions.insert(Vouched { access_key: req.credentials.map(|c| c.access_key) });
        let mut inner = http::Request::new(Body::empty());
        *inner.method_mut() = req.method;
        *inner.uri_mut() = unsigned_uri(&req.uri);
        *inner.headers_mut() = headers;
        *inner.extensions_mut() = extensions;
        let resp = self
            .inner
            .call(inner)
            .await
            .map_err(|e| s3s::S3Error::with_message(s3s::S3ErrorCode::InternalError, format!("{e:?}")))?;
        let (parts, body) = resp.into_parts();
        let mut out = S3Response::new(body);
        out.status = Some(parts.status);
        out.headers = parts.headers;
        out.extensions = parts.extensions;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_s3s_refuses_are_unusable() {
        let h = |r: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::RANGE, r.parse().unwrap());
            h
        };
        for bad in ["bytes=5-2", "bytes=0-1,4-5", "chars=0-1", "bytes=", "bytes=a-b"] {
            assert!(unusable_range(&h(bad)), "{bad}");
        }
        for good in ["bytes=0-1", "bytes=5-", "bytes=-3"] {
            assert!(!unusable_range(&h(good)), "{good}");
        }
        assert!(!unusable_range(&HeaderMap::new()));
    }

    #[test]
    fn only_signature_parameters_leave_the_query() {
        let u: Uri =
            "/b/k?X-Amz-Signature=ab&partNumber=1&X-Amz-Credential=c%2Fd&response-content-type=a%2Fb".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k?partNumber=1&response-content-type=a%2Fb");
        let u: Uri = "/b/k?AWSAccessKeyId=a&Signature=s&Expires=1".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k");
        let u: Uri = "/b/k".parse().unwrap();
        assert_eq!(unsigned_uri(&u).to_string(), "/b/k");
    }
}
