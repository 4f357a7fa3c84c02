//! What one answer adds to the metrics and the access log, and when: at
//! once when its body's length is known as its headers go (Content-Length,
//! or a body of known size, as s3s's XML answers are), else when its body
//! has been sent or dropped (a streamed CompleteMultipartUpload answer, one
//! rewritten on its way out), counting the bytes that went. Either way
//! `bytes_out` and `smbgate_s3_sent_bytes_total` count every body.

use hyper::body::Body;

use crate::metrics::InFlight;

/// The tracing target of access-log lines (`--access-log`): a JSON layer
/// on it writes them; with none, the events are filtered out cheaply.
pub const ACCESS_TARGET: &str = "smbgate::access";

/// True if access-log lines are written (`--access-log`): the fields
/// only a line needs are gathered only then.
pub fn enabled() -> bool {
    tracing::enabled!(target: ACCESS_TARGET, tracing::Level::INFO)
}

/// The fields of one access-log line other than the operation, the
/// status, the bytes sent and the time taken.
pub struct AccessLine {
    /// The `x-amz-request-id` the client got.
    pub request_id: String,
    /// The client's address (behind a trusted proxy, the one it names).
    pub client: Option<std::net::IpAddr>,
    /// The user that signed the request, or `anonymous`.
    pub identity: String,
    /// The SMB account the user acts as; empty for the gateway's own.
    pub smb_identity: String,
    /// The access key the request named (header, query or form), made
    /// printable; also when its signature did not match.
    pub access_key: Option<String>,
    /// The HTTP method.
    pub method: http::Method,
    /// The bucket the request named.
    pub bucket: Option<String>,
    /// The key the request named.
    pub key: Option<String>,
    /// The body length the request declared, in bytes.
    pub bytes_in: u64,
}

/// One answer, as the metrics count it and (when [`enabled`]) the access
/// log writes it.
pub struct Answer {
    /// The S3 operation.
    pub operation: &'static str,
    /// The HTTP status answered.
    pub status: http::StatusCode,
    /// The access-log line's other fields; `None` when no line is written.
    pub line: Option<AccessLine>,
}

impl Answer {
    /// Records the answer in `in_flight`'s metrics and writes its line, if
    /// any, with `sent` body bytes.
    fn finish(self, in_flight: InFlight, sent: u64) {
        let took = in_flight.finish(self.operation, self.status, sent);
        let Some(l) = self.line else { return };
        tracing::info!(
            target: ACCESS_TARGET,
            request_id = %l.request_id,
            client = l.client.map(|c| c.to_string()),
            identity = %l.identity,
            smb_identity = %l.smb_identity,
            access_key = l.access_key.as_deref(),
            operation = self.operation,
            method = %l.method,
            bucket = l.bucket.as_deref(),
            key = l.key.as_deref(),
            status = self.status.as_u16(),
            bytes_in = l.bytes_in,
            bytes_out = sent,
            duration_ms = took.as_secs_f64() * 1000.0,
            "request"
        );
    }

    /// Records `resp` once its body's length is known: now, when its
    /// headers or its body say it (0 for a HEAD, `head`), else as its body
    /// ends. Returns the answer to send.
    pub fn record(self, in_flight: InFlight, resp: s3s::HttpResponse, head: bool) -> s3s::HttpResponse {
        let declared = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok());
        match if head { Some(0) } else { declared.or_else(|| resp.body().size_hint().exact()) } {
            Some(sent) => {
                self.finish(in_flight, sent);
                resp
            }
            None => resp.map(|body| crate::body_end::on_end(body, move |sent| self.finish(in_flight, sent))),
        }
    }
}
