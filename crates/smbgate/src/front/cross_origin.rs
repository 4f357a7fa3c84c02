//! CORS: a preflight (`OPTIONS`, never signed, never seen by s3s) is
//! answered from the bucket's rules; an actual cross-origin request's
//! answer gets the headers of the rule that allows it (see `crate::cors_rules`).

use std::sync::Arc;

use s3s::HttpResponse;
use tower::Service;

use super::{always_ready, Answering, Layer, Request};

/// What the layer needs: the buckets' rules, and the domain of
/// virtual-hosted-style names (to find a request's bucket).
pub(super) struct CorsRules {
    pub(super) cache: crate::cors_rules::Cache,
    pub(super) domain: Option<crate::vhost::Domain>,
}

impl CorsRules {
    /// The bucket a request names: by its Host under `--domain`, else the
    /// first segment of its path; `None` unless it is a valid S3 bucket
    /// name. A preflight is never signed and s3s never sees it, so this is
    /// the check that keeps `..`, separators and other names no bucket can
    /// have away from the share (the answer is then that of a bucket
    /// without CORS, whatever the path names).
    fn bucket_of<B>(&self, req: &http::Request<B>) -> Option<String> {
        let b = crate::vhost::addressed(self.domain.as_ref(), req)?.bucket;
        s3s::path::check_bucket_name(&b).then_some(b)
    }

    /// The answer to a CORS preflight: the bucket's rules decide it.
    async fn preflight(&self, req: &Request) -> HttpResponse {
        let ask = crate::cors_rules::Preflight::of(req.headers());
        let config = match self.bucket_of(req) {
            Some(b) => match self.cache.get(&b).await {
                Ok(c) => c,
                Err(e) => {
                    return crate::s3::s3_error(e).to_http_response().unwrap_or_else(|_| {
                        let mut r = http::Response::new(s3s::Body::empty());
                        *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
                        r
                    })
                }
            },
            None => None,
        };
        let (status, headers, body) = ask.answer(config.as_deref());
        let mut resp = http::Response::new(s3s::Body::from(body));
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        if status != http::StatusCode::OK {
            resp.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
        }
        resp
    }
}

/// The CORS layer; see the module docs.
#[derive(Clone)]
pub(super) struct Cors<S> {
    pub(super) inner: S,
    pub(super) rules: Arc<CorsRules>,
}

impl<S> Service<Request> for Cors<S>
where
    S: Layer,
{
    always_ready!();

    fn call(&mut self, req: Request) -> Answering {
        let rules = self.rules.clone();
        if req.method() == http::Method::OPTIONS {
            return Box::pin(async move { Ok(rules.preflight(&req).await) });
        }
        // An actual cross-origin request: its answer gets the headers of
        // the rule allowing it (the method a preflight named, if sent).
        let origin = req.headers().get("origin").and_then(|v| v.to_str().ok()).map(str::to_string);
        let asked = origin.and_then(|origin| {
            let method = req
                .headers()
                .get("access-control-request-method")
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| req.method().as_str().to_string(), str::to_string);
            Some((origin, rules.bucket_of(&req)?, method))
        });
        let answering = self.inner.call(req);
        let Some((origin, bucket, method)) = asked else { return answering };
        Box::pin(async move {
            let mut resp = answering.await?;
            if let Ok(Some(c)) = rules.cache.get(&bucket).await {
                crate::cors_rules::decorate(resp.headers_mut(), &c, &origin, &method);
            }
            Ok(resp)
        })
    }
}
