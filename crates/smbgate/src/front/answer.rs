//! Every request's account: its IDs (in the answer's headers and error
//! body, and a field of every log line about it through its span), its
//! metrics, the log of its answer (server faults at ERROR, client errors
//! at DEBUG), a failed authentication's line, its access-log line, and the
//! fixes to what s3s writes otherwise than AWS (`s3s_patches::answers`).
//! It also closes a connection that cannot carry another request.

use std::sync::Arc;

use tower::Service;
use tracing::Instrument;

use super::{always_ready, Answering, Layer, Request};
use crate::access_check::OperationSlot;
use crate::metrics::{Metrics, UNKNOWN_OPERATION};
use crate::precheck;
use crate::request_ids::{error_with_ids, request_time, RequestIds};

/// The operation name of CORS preflights in metrics and the access log.
pub const PREFLIGHT_OPERATION: &str = "PreflightRequest";

/// The access key a form upload named in its form (a response extension
/// set by the forms layer: a form names its key in the form, not a
/// header).
#[derive(Clone)]
pub(super) struct FormKey(pub(super) String);

/// The answer layer; see the module docs.
#[derive(Clone)]
pub(super) struct Answer<S> {
    inner: S,
    metrics: Arc<Metrics>,
    auth_log: Arc<crate::auth_log::AuthLog>,
    /// `--domain`: a request's bucket by its Host, for the access log of a
    /// request s3s resolved no bucket for (shared: the stack is cloned per
    /// request).
    domain: Option<Arc<crate::vhost::Domain>>,
}

impl<S> Answer<S> {
    pub(super) fn new(inner: S, metrics: Arc<Metrics>, domain: Option<crate::vhost::Domain>) -> Answer<S> {
        Answer { inner, metrics, auth_log: Arc::default(), domain: domain.map(Arc::new) }
    }
}

impl<S> Service<Request> for Answer<S>
where
    S: Layer,
{
    always_ready!();

    fn call(&mut self, mut req: Request) -> Answering {
        let is_head = req.method() == http::Method::HEAD;
        let is_preflight = req.method() == http::Method::OPTIONS;
        // An empty body with Expect: 100-continue is never read, so hyper
        // sends no 100; some clients then misread the next response on the
        // connection (failure class 23). Close it after this answer instead.
        let expects_continue = precheck::expects_continue(req.headers());
        let empty_body = !precheck::is_chunked(req.headers()) && precheck::content_length(req.headers()) == 0;
        let close_after = expects_continue && empty_body;
        let slot = OperationSlot::default();
        req.extensions_mut().insert(slot.clone());
        let declared = precheck::declared_body_length(req.headers());
        let in_flight = self.metrics.start(declared);
        let ids = RequestIds::new();
        let span = tracing::info_span!(
            "s3",
            request_id = %ids.request_id,
            operation = tracing::field::Empty,
            otel.kind = tracing::field::Empty,
        );
        crate::traces::start_server_span(&span, &req, &ids.request_id);
        let (method, uri) = (req.method().clone(), req.uri().clone());
        // Before the rules may add an x-amz-date: the time as it was sent.
        let sent_at = request_time(&req);
        // What only the access log needs is gathered only then.
        let logged = crate::access_line::enabled();
        let named_bucket = logged
            .then(|| crate::vhost::addressed(self.domain.as_deref(), &req).map(|a| a.bucket))
            .flatten()
            .filter(|b| s3s::path::check_bucket_name(b));
        // Who asked, for the access log and the log of failed
        // authentications (behind a trusted proxy, as its PROXY header says).
        let client = req.extensions().get::<crate::conn_limits::ClientAddr>().map(|c| c.0);
        // For the events of the changes the request makes, if any are sent.
        if crate::events::enabled() {
            req.extensions_mut().insert(ids.origin(client.map(|c| c.ip())));
        }
        // The access key the request names, signed or not, read only for a
        // failed authentication or an access-log line (`uri` is kept).
        let authorization = req.headers().get(http::header::AUTHORIZATION).cloned();
        let named_key = move |query: Option<&str>| crate::auth_log::access_key_of(authorization.as_ref(), query);
        let (auth_log, metrics) = (self.auth_log.clone(), self.metrics.clone());
        let answering = {
            let _entered = span.enter();
            self.inner.call(req)
        };
        // Only when traces are exported: the span then outlives the answer.
        let server_span = crate::traces::exporting().then(|| span.clone());
        let fut = async move {
            let mut resp = answering.await?;
            let form_key = resp.extensions_mut().remove::<FormKey>().map(|k| k.0);
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
            if let Some(server_span) = server_span {
                crate::traces::finish_server_span(
                    &server_span,
                    &crate::traces::Answered {
                        operation,
                        status: resp.status().as_u16(),
                        bucket: resolved.and_then(|r| r.bucket.as_deref()),
                        key: resolved.and_then(|r| r.key.as_deref()),
                        user: resolved.and_then(|r| r.identity.as_deref()),
                        query: uri.query(),
                    },
                );
                // The server span ends with the body, not with its head.
                resp = resp.map(|body| crate::traces::traced_body(body, server_span));
            }
            let answer = crate::access_line::Answer { operation, status: resp.status(), line };
            Ok(answer.record(in_flight, resp, is_head))
        };
        Box::pin(fut.instrument(span))
    }
}
