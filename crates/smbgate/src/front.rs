//! The HTTP front door in front of the s3s service: answers load-balancer
//! probes (`HEAD /`), gives a ranged HEAD its 206, checks access keys so an
//! unknown key gets S3's InvalidAccessKeyId, and records each request's
//! metrics under the operation s3s resolved.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use hyper::body::Incoming;
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::service::S3Service;
use s3s::{HttpError, HttpResponse, S3Error, S3ErrorCode, S3Result};
use smb_client::Pool;

use crate::metrics::{Metrics, UNKNOWN_OPERATION};

/// SigV4 credentials: one access key and its secret.
pub struct SingleKey {
    access_key: String,
    secret_key: SecretKey,
}

impl SingleKey {
    /// The only key pair this gateway accepts.
    pub fn new(access_key: String, secret_key: String) -> SingleKey {
        SingleKey { access_key, secret_key: SecretKey::from(secret_key) }
    }
}

#[async_trait::async_trait]
impl S3Auth for SingleKey {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if access_key == self.access_key {
            Ok(self.secret_key.clone())
        } else {
            Err(S3Error::with_message(
                S3ErrorCode::InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records.",
            ))
        }
    }
}

/// Where s3s's access check leaves the name of the operation it resolved
/// (a request extension the front reads back for metrics).
#[derive(Clone, Default)]
struct OperationSlot(Arc<OnceLock<&'static str>>);

/// The access check s3s runs for every request once credentials are
/// configured: notes the operation, then refuses unsigned requests unless
/// anonymous access was switched on.
pub struct Access {
    /// `--anonymous`: unsigned requests are served.
    pub anonymous: bool,
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let name = crate::metrics::operation_name(cx.s3_op().name());
        if let Some(slot) = cx.extensions_mut().get::<OperationSlot>() {
            let _ = slot.0.set(name);
        }
        if cx.credentials().is_none() && !self.anonymous {
            return Err(S3Error::with_message(S3ErrorCode::AccessDenied, "Signature is required"));
        }
        Ok(())
    }
}

/// The service hyper runs for each connection.
#[derive(Clone)]
pub struct Front {
    s3: S3Service,
    pool: Pool,
    metrics: Arc<Metrics>,
}

impl Front {
    /// Wraps the s3s service; `pool` answers health probes, `metrics`
    /// counts every request.
    pub fn new(s3: S3Service, pool: Pool, metrics: Arc<Metrics>) -> Front {
        Front { s3, pool, metrics }
    }
}

/// A Content-Length header's value in bytes (0 when absent or malformed).
fn content_length(headers: &http::HeaderMap) -> u64 {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

impl hyper::service::Service<http::Request<Incoming>> for Front {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>;

    fn call(&self, mut req: http::Request<Incoming>) -> Self::Future {
        if req.method() == http::Method::HEAD && req.uri().path() == "/" {
            // Health probe: 200 while an SMB connection is up, else 503.
            let status =
                if self.pool.healthy() > 0 { http::StatusCode::OK } else { http::StatusCode::SERVICE_UNAVAILABLE };
            let mut resp = http::Response::new(s3s::Body::empty());
            *resp.status_mut() = status;
            return Box::pin(async move { Ok(resp) });
        }
        let is_head = req.method() == http::Method::HEAD;
        // An empty body with Expect: 100-continue is never read, so hyper
        // sends no 100; some clients then misread the next response on the
        // connection (failure class 23). Close it after this answer instead.
        let expects_continue =
            req.headers().get(http::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        let empty_body = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .is_none_or(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) == Some(0));
        let close_after = expects_continue && empty_body;
        let s3 = self.s3.clone();
        let slot = OperationSlot::default();
        req.extensions_mut().insert(slot.clone());
        let in_flight = self.metrics.start(content_length(req.headers()));
        Box::pin(async move {
            let mut resp = hyper::service::Service::call(&s3, req).await?;
            // s3s answers a ranged HEAD with 200; S3 says 206 like a GET.
            if is_head
                && resp.status() == http::StatusCode::OK
                && resp.headers().contains_key(http::header::CONTENT_RANGE)
            {
                *resp.status_mut() = http::StatusCode::PARTIAL_CONTENT;
            }
            if resp.status() == http::StatusCode::FORBIDDEN {
                resp = with_server_time(resp).await;
            }
            if close_after {
                resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            }
            let operation = slot.0.get().copied().unwrap_or(UNKNOWN_OPERATION);
            in_flight.finish(operation, resp.status(), if is_head { 0 } else { content_length(resp.headers()) });
            Ok(resp)
        })
    }
}

/// S3 tells a client whose clock is off what time the server has
/// (`<ServerTime>` in RequestTimeTooSkewed); s3s leaves it out, so it is
/// added here. Other 403 bodies pass through unchanged.
async fn with_server_time(resp: HttpResponse) -> HttpResponse {
    use http_body_util::BodyExt;
    let (mut parts, body) = resp.into_parts();
    let bytes = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => bytes::Bytes::new(),
    };
    let text = String::from_utf8_lossy(&bytes);
    let body = if text.contains("<Code>RequestTimeTooSkewed</Code>") && text.contains("</Error>") {
        let now =
            time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        parts.headers.remove(http::header::CONTENT_LENGTH);
        bytes::Bytes::from(text.replace("</Error>", &format!("<ServerTime>{now}</ServerTime></Error>")))
    } else {
        bytes
    };
    http::Response::from_parts(parts, s3s::Body::from(body))
}
