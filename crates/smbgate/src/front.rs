//! The HTTP front door in front of the s3s service: answers load-balancer
//! probes (`HEAD /`), gives a ranged HEAD its 206, checks access keys so an
//! unknown key gets S3's InvalidAccessKeyId, gives every request an ID
//! (see `request_ids`: headers, error bodies, a field of every log line
//! about it), logs each answer once (server faults at ERROR, client errors
//! at DEBUG), routes form uploads to `post_object`, and records its metrics
//! under the operation s3s resolved.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::conn_limits::RequestBody;
use crate::store::share::Pool;
use s3s::service::S3Service;
use s3s::{HttpError, HttpResponse};
use tracing::Instrument;

use crate::access_check::{OperationSlot, Resolved};
use crate::metrics::{Metrics, UNKNOWN_OPERATION};
use crate::precheck;
use crate::request_ids::{error_with_ids, request_time, RequestIds};

/// The operation name of CORS preflights in metrics and the access log.
pub const PREFLIGHT_OPERATION: &str = "PreflightRequest";

/// The service hyper runs for each connection.
#[derive(Clone)]
pub struct Front {
    s3: S3Service,
    pool: Pool,
    metrics: Arc<Metrics>,
    rules: Arc<crate::precheck::Rules>,
    sigv2: Arc<crate::s3s_patches::sigv2::Verifier>,
    bodies: crate::body_budget::BodyBudget,
    cors: Arc<CorsFront>,
    auth_log: Arc<crate::auth_log::AuthLog>,
    post: Arc<crate::s3s_patches::post_object::PostObject>,
    /// How fast a body read whole must come.
    pace: crate::paced_body::Pace,
}

/// What the front needs for CORS: the buckets' rules, and the domain of
/// virtual-hosted-style names (to find a request's bucket).
struct CorsFront {
    cache: crate::cors::Cache,
    domain: Option<crate::vhost::Domain>,
}

impl CorsFront {
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
}

impl Front {
    /// Wraps the s3s service; `pool` answers health probes, `metrics`
    /// counts every request, `rules` are checked before s3s verifies a
    /// signature, `users` check SigV2 signatures in constant time before
    /// s3s does, `bodies` bounds the XML bodies held at once, `cors`
    /// answers preflights and decorates requests with an Origin, `domain`
    /// is `--domain`, `post` answers form uploads, `pace` holds the bodies
    /// read whole to a pace.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        s3: S3Service,
        pool: Pool,
        metrics: Arc<Metrics>,
        rules: crate::precheck::Rules,
        users: crate::users::Directory,
        bodies: crate::body_budget::BodyBudget,
        cors: crate::cors::Cache,
        domain: Option<crate::vhost::Domain>,
        post: crate::s3s_patches::post_object::PostObject,
        pace: crate::paced_body::Pace,
    ) -> Front {
        let sigv2 = Arc::new(crate::s3s_patches::sigv2::Verifier::new(users, domain.clone()));
        let cors = Arc::new(CorsFront { cache: cors, domain });
        let post = Arc::new(post);
        Front { s3, pool, metrics, rules: Arc::new(rules), sigv2, bodies, cors, auth_log: Arc::default(), post, pace }
    }
}

/// The answer to a CORS preflight (`OPTIONS`, never signed): the bucket's
/// rules decide it (see `crate::cors`).
async fn preflight(cors: &CorsFront, req: &http::Request<RequestBody>) -> HttpResponse {
    let ask = crate::cors::Preflight::of(req.headers());
    let config = match cors.bucket_of(req) {
        Some(b) => match cors.cache.get(&b).await {
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

impl hyper::service::Service<http::Request<RequestBody>> for Front {
    type Response = HttpResponse;
    type Error = HttpError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send>>;

    fn call(&self, mut req: http::Request<RequestBody>) -> Self::Future {
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
        let expects_continue = precheck::expects_continue(req.headers());
        let empty_body = !precheck::is_chunked(req.headers()) && precheck::content_length(req.headers()) == 0;
        let close_after = expects_continue && empty_body;
        let s3 = self.s3.clone();
        let slot = OperationSlot::default();
        req.extensions_mut().insert(slot.clone());
        let declared = precheck::declared_body_length(req.headers());
        let in_flight = self.metrics.start(declared);
        let ids = RequestIds::new();
        let span = tracing::info_span!("s3", request_id = %ids.request_id, operation = tracing::field::Empty);
        let (method, uri) = (req.method().clone(), req.uri().clone());
        let is_preflight = req.method() == http::Method::OPTIONS;
        // Before the rules may add an x-amz-date: the time as it was sent.
        let sent_at = request_time(&req);
        // A preflight is never signed; its answer is the bucket's CORS rules.
        let now = time::OffsetDateTime::now_utc();
        let refused = match is_preflight {
            true => None,
            false => precheck::refusal(&mut req, &self.rules, now)
                .or_else(|| self.sigv2.check(&req, now).err())
                .or_else(|| crate::s3s_patches::query_checksum::hoist(&mut req).err()),
        };
        if refused.is_none() && !is_preflight {
            precheck::admit_undeclared_length(&mut req);
            crate::s3s_patches::chunk_bounds::admit_unannounced_trailer(req.headers_mut());
        }
        // A body read whole takes its share of the budget first.
        let needs = refused.is_none().then(|| crate::body_budget::needed(&req)).flatten();
        let bodies = self.bodies.clone();
        // An actual cross-origin request: its answer gets the headers of
        // the rule allowing it (the method a preflight named, if sent).
        let origin = req.headers().get("origin").and_then(|v| v.to_str().ok()).map(str::to_string);
        // What only the access log (and CORS) needs is gathered only then.
        let logged = crate::access_line::enabled();
        let named_bucket = (logged || origin.is_some()).then(|| self.cors.bucket_of(&req)).flatten();
        let cors = origin.as_ref().and_then(|_| {
            let method = req
                .headers()
                .get("access-control-request-method")
                .and_then(|v| v.to_str().ok())
                .map_or_else(|| req.method().as_str().to_string(), str::to_string);
            Some((named_bucket.clone()?, method))
        });
        let cors_front = self.cors.clone();
        // Who asked, for the access log and the log of failed
        // authentications (behind a trusted proxy, as its PROXY header says).
        let client = req.extensions().get::<crate::conn_limits::ClientAddr>().map(|c| c.0);
        // The access key the request names, signed or not, read only for a
        // failed authentication or an access-log line (a form names its
        // key in the form: see `form_key`; `uri` is kept).
        let authorization = req.headers().get(http::header::AUTHORIZATION).cloned();
        let named_key = move |query: Option<&str>| crate::auth_log::access_key_of(authorization.as_ref(), query);
        let (auth_log, metrics) = (self.auth_log.clone(), self.metrics.clone());
        let post = self.post.clone();
        let pace = self.pace;
        let fut = async move {
            // A form upload names its access key in the form, not a header.
            let mut form_key = None;
            let mut refused = refused;
            let _held = match needs {
                Some(n) => match bodies.take(n).await {
                    Ok(held) => Some(held),
                    Err(r) => {
                        refused = Some(r);
                        None
                    }
                },
                None => None,
            };
            let mut resp = match refused {
                Some(r) => {
                    // Read what the client sends anyway (up to a bound), so
                    // that it is not reset mid-send before it reads the
                    // answer, and the connection stays usable. A client
                    // waiting for 100 Continue sends nothing more; hyper
                    // closes that connection instead.
                    if !expects_continue {
                        tokio::spawn(crate::unread_body::drain(req.into_body()));
                    }
                    r.to_response()
                }
                None if is_preflight => preflight(&cors_front, &req).await,
                None if precheck::is_form(&req) => {
                    tracing::Span::current().record("operation", crate::s3s_patches::post_object::OPERATION);
                    let (resp, posted) = post.answer(req).await;
                    form_key = posted.access_key.as_deref().map(crate::auth_log::printable_key);
                    let _ = slot.0.set(Resolved {
                        operation: crate::s3s_patches::post_object::OPERATION,
                        bucket: posted.bucket,
                        key: posted.key,
                        identity: posted.user.as_ref().map(|u| u.name.clone()),
                        smb_identity: posted.user.as_ref().and_then(|u| u.smb.as_ref()).map(|s| s.to_string()),
                    });
                    resp
                }
                // A body read whole holds its share of the budget: it must
                // keep coming (see paced_body).
                None if needs.is_some() => {
                    let (parts, body) = req.into_parts();
                    let (paced, cut) =
                        crate::paced_body::PacedBody::new(crate::unread_body::DrainOnDrop::new(body), pace);
                    let resp = s3.call(http::Request::from_parts(parts, s3s::Body::http_body_unsync(paced))).await?;
                    match cut.happened() {
                        true => precheck::Refusal::request_timeout().to_response(),
                        false => resp,
                    }
                }
                // An aws-chunked body's chunks are held to a size before
                // s3s buffers one (see chunk_bounds).
                None if crate::s3s_patches::chunk_bounds::is_aws_chunked(req.headers()) => {
                    let (parts, body) = req.into_parts();
                    let (bounded, oversized) = crate::s3s_patches::chunk_bounds::ChunkBounded::new(
                        crate::unread_body::DrainOnDrop::new(body),
                        &parts.headers,
                    );
                    let limit = bounded.limit();
                    let resp = s3.call(http::Request::from_parts(parts, s3s::Body::http_body_unsync(bounded))).await?;
                    match oversized.happened() {
                        true => precheck::Refusal::chunk_too_large(limit).to_response(),
                        false => resp,
                    }
                }
                None => s3.call(req.map(crate::unread_body::DrainOnDrop::wrap)).await?,
            };
            let resolved = slot.0.get();
            let operation = match is_preflight {
                true => PREFLIGHT_OPERATION,
                false => resolved.map_or(UNKNOWN_OPERATION, |r| r.operation),
            };
            if resp.status().is_client_error() || resp.status().is_server_error() {
                let (code, message);
                (resp, code, message) = error_with_ids(resp, &ids, &method, uri.path(), sent_at.as_deref()).await;
                if let Some(failure) = crate::auth_log::AuthFailure::of(&code, &message) {
                    metrics.auth_failure(failure.label());
                    auth_log.warn(&crate::auth_log::Refused {
                        failure,
                        access_key: form_key.clone().or_else(|| named_key(uri.query())).as_deref(),
                        client,
                        request_id: &ids.request_id,
                        status: resp.status().as_u16(),
                    });
                }
            }
            // What s3s writes otherwise than AWS (see s3s_patches::answers).
            resp = crate::s3s_patches::answers::as_aws_writes(operation, is_head, resp);
            if let (Some(origin), Some((bucket, method)), false) = (&origin, &cors, is_preflight) {
                if let Ok(Some(c)) = cors_front.cache.get(bucket).await {
                    crate::cors::decorate(resp.headers_mut(), &c, origin, method);
                }
            }
            ids.set_headers(resp.headers_mut());
            // An Expect: 100-continue request refused before its body was
            // wanted: the client never sends the body, so the connection
            // cannot carry another request (its next bytes might be taken
            // for this body). Close it after the answer.
            if close_after || (expects_continue && !resp.status().is_success()) {
                resp.headers_mut().insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
            }
            // One line per request for `--access-log` (a JSON layer on this
            // target); with no such layer the event is filtered out cheaply.
            // A request that named no bucket s3s resolved (its signature did
            // not match, say) is logged under the bucket its address names.
            let line = logged.then(|| crate::access_line::AccessLine {
                request_id: ids.request_id.clone(),
                client: client.map(|c| c.ip()),
                identity: resolved.and_then(|r| r.identity.clone()).unwrap_or_else(|| "anonymous".into()),
                smb_identity: resolved.and_then(|r| r.smb_identity.clone()).unwrap_or_default(),
                access_key: form_key.or_else(|| named_key(uri.query())),
                method,
                bucket: resolved.map_or(named_bucket, |r| r.bucket.clone()),
                key: resolved.and_then(|r| r.key.clone()),
                bytes_in: declared,
            });
            let answer = crate::access_line::Answer { operation, status: resp.status(), line };
            Ok(answer.record(in_flight, resp, is_head))
        };
        Box::pin(fut.instrument(span))
    }
}
