//! OpenTelemetry traces, exported over OTLP/HTTP with protobuf bodies
//! (`--otlp-endpoint`; off by default).
//!
//! Spans are ordinary `tracing` spans: the request's span (`front::answer`)
//! becomes the server span, named by the S3 operation and carrying the
//! stable HTTP semantic conventions and the `aws.s3.*` attributes; the
//! store's steps and the SMB client's round trips are DEBUG spans under it.
//! Only the exporter's layer enables those DEBUG spans, so with export off
//! they are never built, and the request span gets no extra attributes.
//!
//! A W3C `traceparent` on a request makes it the span's parent; the
//! parent's sampling decision is followed, and requests without one are
//! sampled at `--otlp-sample-ratio`.

use std::sync::atomic::{AtomicBool, Ordering};

use hyper::body::Body;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt as _, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

/// Set once traces are exported: the request path then records the
/// server span's attributes (a relaxed load otherwise).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// True if traces are exported.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The path OTLP/HTTP receivers take traces on.
const TRACES_PATH: &str = "/v1/traces";

/// The export running in the background: flush it with
/// [`Exporter::shutdown`] before the process exits.
pub struct Exporter {
    provider: SdkTracerProvider,
}

impl Exporter {
    /// Sends the spans still queued (waiting up to the exporter's timeout)
    /// and stops the export thread.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("smbgate: exporting the last traces: {e}");
        }
    }
}

/// The URL traces are POSTed to: `endpoint` as given if it names a path,
/// else with [`TRACES_PATH`] (as `OTEL_EXPORTER_OTLP_ENDPOINT` is read).
///
/// Errors: not an `http` or `https` URL with a host; a URL with
/// credentials in it (the exporter logs its URL when a send fails: they go
/// in `OTEL_EXPORTER_OTLP_HEADERS` instead).
pub fn traces_url(endpoint: &str) -> Result<String, String> {
    // The URL is not repeated: it may carry credentials.
    let bad = || "--otlp-endpoint: not an http:// or https:// URL with a host".to_string();
    let uri: http::Uri = endpoint.parse().map_err(|_| bad())?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(_)) => {}
        _ => return Err(bad()),
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err("--otlp-endpoint: credentials do not belong in the URL (it is logged when a send fails); \
                    give them as a header in OTEL_EXPORTER_OTLP_HEADERS"
            .to_string());
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}{TRACES_PATH}", endpoint.trim_end_matches('/')),
        _ => endpoint.to_string(),
    })
}

/// The layer that exports spans to `endpoint` (see [`traces_url`]),
/// sampling `ratio` (0 to 1) of the requests that come without a parent,
/// and the exporter to shut down at exit. Call outside any async runtime:
/// the export runs on its own thread with a blocking HTTP client.
///
/// The layer takes the gateway's and the SMB client's spans at DEBUG and
/// above, and their WARN and ERROR events as span events.
///
/// Errors: a bad endpoint, or an exporter that cannot be built.
pub fn layer<S>(endpoint: &str, ratio: f64) -> Result<(Box<dyn Layer<S> + Send + Sync>, Exporter), String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    let url = traces_url(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .build()
        .map_err(|e| format!("--otlp-endpoint: {e}"))?;
    let resource = Resource::builder()
        .with_service_name("smbgate")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio))))
        .with_resource(resource)
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("smbgate"))
        .with_tracked_inactivity(false)
        .with_threads(false)
        .with_location(false)
        .with_filter(tracing_subscriber::filter::filter_fn(traced));
    EXPORTING.store(true, Ordering::Relaxed);
    Ok((Box::new(layer), Exporter { provider }))
}

/// What the export layer takes: our crates' spans at DEBUG and above, and
/// their WARN and ERROR events (never the access log's lines).
fn traced(meta: &tracing::Metadata<'_>) -> bool {
    let ours = ["smbgate", "smb_client"].iter().any(|c| meta.target().starts_with(c))
        && meta.target() != crate::access_line::ACCESS_TARGET;
    // Spans, and `enabled!` hints about spans, at DEBUG.
    let level = if meta.is_event() { tracing::Level::WARN } else { tracing::Level::DEBUG };
    ours && *meta.level() <= level
}

/// What the server span of a request says, known once it is answered.
pub(crate) struct Answered<'a> {
    /// The S3 operation (`GetObject`), the span's name.
    pub operation: &'a str,
    /// The HTTP status sent.
    pub status: u16,
    /// The bucket and key the request named, if any.
    pub bucket: Option<&'a str>,
    pub key: Option<&'a str>,
    /// The S3 user that signed it (`None`: anonymous).
    pub user: Option<&'a str>,
    /// The request's query (for `uploadId`).
    pub query: Option<&'a str>,
}

/// Makes `span` the server span of `req`: its parent from a W3C
/// `traceparent`, and the attributes known before the answer. Does
/// nothing unless traces are exported.
pub(crate) fn start_server_span<B>(span: &tracing::Span, req: &http::Request<B>, request_id: &str) {
    if !exporting() || span.is_disabled() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&opentelemetry_http::HeaderExtractor(req.headers()));
    let _ = span.set_parent(parent);
    span.record("otel.kind", "server");
    span.set_attribute("http.request.method", req.method().as_str().to_string());
    let tls = req.extensions().get::<crate::conn_limits::OverTls>().is_some();
    span.set_attribute("url.scheme", if tls { "https" } else { "http" });
    if let Some(host) = req.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()) {
        let host = host.rsplit_once(':').filter(|(_, p)| p.parse::<u16>().is_ok()).map_or(host, |(h, _)| h);
        span.set_attribute("server.address", host.to_string());
    }
    if let Some(c) = req.extensions().get::<crate::conn_limits::ClientAddr>() {
        span.set_attribute("client.address", c.0.ip().to_string());
    }
    span.set_attribute("aws.request_id", request_id.to_string());
}

/// Names `span` by its operation and records what the answer says (called
/// only while traces are exported).
pub(crate) fn finish_server_span(span: &tracing::Span, a: &Answered<'_>) {
    if span.is_disabled() {
        return;
    }
    // By then the span has started (its children did): rename it in place.
    span.context().span().update_name(a.operation.to_string());
    span.set_attribute("http.response.status_code", a.status as i64);
    let route = match (a.bucket, a.key) {
        (Some(_), Some(_)) => "/{Bucket}/{Key+}",
        (Some(_), None) => "/{Bucket}",
        _ => "/",
    };
    span.set_attribute("http.route", route);
    if let Some(b) = a.bucket {
        span.set_attribute("aws.s3.bucket", b.to_string());
    }
    if let Some(k) = a.key {
        span.set_attribute("aws.s3.key", k.to_string());
    }
    let upload = a.query.into_iter().flat_map(|q| form_urlencoded::parse(q.as_bytes())).find(|(k, _)| k == "uploadId");
    if let Some((_, id)) = upload {
        span.set_attribute("aws.s3.upload_id", id.into_owned());
    }
    if let Some(u) = a.user {
        span.set_attribute("user.name", u.to_string());
    }
    if a.status >= 500 {
        span.set_status(opentelemetry::trace::Status::error(format!("HTTP {}", a.status)));
    }
}

/// `body`, holding `span` open until it ends or is dropped (a GET's
/// server span then covers its whole transfer).
pub(crate) fn traced_body(body: s3s::Body, span: tracing::Span) -> s3s::Body {
    if body.is_end_stream() {
        return body;
    }
    crate::body_end::on_end(body, move |_| drop(span))
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn an_endpoint_without_a_path_gets_the_traces_path() {
        assert_eq!(traces_url("http://collector:4318").unwrap(), "http://collector:4318/v1/traces");
        assert_eq!(traces_url("http://collector:4318/").unwrap(), "http://collector:4318/v1/traces");
        assert_eq!(traces_url("https://c.example/otlp/v1/traces").unwrap(), "https://c.example/otlp/v1/traces");
        assert!(traces_url("collector:4318").is_err());
        assert!(traces_url("ftp://collector").is_err());
        let e = traces_url("https://user:secret@c.example").unwrap_err();
        assert!(e.contains("OTEL_EXPORTER_OTLP_HEADERS") && !e.contains("secret"), "{e}");
    }
}
