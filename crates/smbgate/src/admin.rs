//! The operations listener (`--metrics-listen`): `/metrics` (Prometheus
//! text format, optionally behind a bearer token), `/health/live` and
//! `/health/ready`. It is a port of its own because every path on the S3
//! port names a bucket (`/metrics` is the bucket `metrics`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::conn_limits::RequestBody;
use crate::store::share::Pool;
use bytes::Bytes;
use http_body_util::Full;

use crate::metrics::Metrics;

/// The Content-Type of what prometheus-client writes: the OpenMetrics text
/// format, which Prometheus reads.
const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The operations service; cheap to clone.
#[derive(Clone)]
pub struct Admin {
    metrics: Arc<Metrics>,
    pool: Pool,
    /// `Authorization: Bearer <token>` that `/metrics` requires, if set.
    token: Option<Arc<str>>,
}

impl Admin {
    /// Serves `metrics`, and readiness from `pool`; `/metrics` requires
    /// `token` as a bearer token when one is given.
    pub fn new(metrics: Arc<Metrics>, pool: Pool, token: Option<String>) -> Admin {
        Admin { metrics, pool, token: token.map(Arc::from) }
    }

    /// Logs at WARN, once startup has succeeded, if `/metrics` is served
    /// at `addr`, an address other hosts can reach (not loopback), without
    /// a token: anyone who reaches it reads the gateway's figures (buckets'
    /// traffic, SMB identities' pool names).
    pub fn warn_if_open(&self, addr: std::net::SocketAddr) {
        if self.token.is_none() && !addr.ip().is_loopback() {
            tracing::warn!(
                listen = %addr,
                "/metrics is served to other hosts without a token; set --metrics-token-file, or listen on 127.0.0.1"
            );
        }
    }

    fn answer(&self, req: &http::Request<RequestBody>) -> http::Response<Full<Bytes>> {
        let reply = |status: http::StatusCode, body: &'static str| {
            let mut r = http::Response::new(Full::new(Bytes::from_static(body.as_bytes())));
            *r.status_mut() = status;
            r
        };
        if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
            return reply(http::StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD only\n");
        }
        match req.uri().path() {
            "/health/live" => reply(http::StatusCode::OK, "live\n"),
            // Ready: at least one pooled SMB connection reaches the share.
            "/health/ready" if self.pool.healthy() > 0 => reply(http::StatusCode::OK, "ready\n"),
            "/health/ready" => reply(http::StatusCode::SERVICE_UNAVAILABLE, "no SMB connection is up\n"),
            "/metrics" => {
                if !self.authorized(req.headers()) {
                    let mut r = reply(http::StatusCode::UNAUTHORIZED, "bearer token required\n");
                    r.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
                    return r;
                }
                let mut r = http::Response::new(Full::new(Bytes::from(self.metrics.encode())));
                r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(OPENMETRICS_TEXT));
                r
            }
            _ => reply(http::StatusCode::NOT_FOUND, "not found: /metrics, /health/live, /health/ready\n"),
        }
    }

    /// True if no token is set, or the request carries it (compared in
    /// constant time).
    fn authorized(&self, headers: &http::HeaderMap) -> bool {
        use subtle::ConstantTimeEq;
        let Some(token) = &self.token else { return true };
        let given = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        bool::from(given.as_bytes().ct_eq(token.as_bytes()))
    }
}

impl hyper::service::Service<http::Request<RequestBody>> for Admin {
    type Response = http::Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: http::Request<RequestBody>) -> Self::Future {
        let r = self.answer(&req);
        Box::pin(async move { Ok(r) })
    }
}
