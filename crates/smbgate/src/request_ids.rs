//! Every answer's IDs (`x-amz-request-id`, `x-amz-id-2`) and the S3 error
//! documents that carry them: `<RequestId>` and `<HostId>` added where s3s
//! leaves them out, AWS's message where s3s sends none, the times of a
//! RequestTimeTooSkewed, and the one log line of each failed request.

use s3s::HttpResponse;

use crate::precheck;

/// The IDs of one request: `x-amz-request-id` (16 hex digits, as AWS
/// writes it) and `x-amz-id-2` (the "host ID", base64).
pub(crate) struct RequestIds {
    pub(crate) request_id: String,
    host_id: String,
}

impl RequestIds {
    pub(crate) fn new() -> RequestIds {
        use base64::Engine;
        let host: [u8; 24] = rand::random();
        RequestIds {
            request_id: format!("{:016X}", rand::random::<u64>()),
            host_id: base64::engine::general_purpose::STANDARD.encode(host),
        }
    }

    /// The IDs and `client` (the client's address) as the events of the
    /// request's changes name them.
    pub(crate) fn origin(&self, client: Option<std::net::IpAddr>) -> crate::events::Origin {
        crate::events::Origin { request_id: self.request_id.clone(), host_id: self.host_id.clone(), source_ip: client }
    }

    pub(crate) fn set_headers(&self, h: &mut http::HeaderMap) {
        for (name, v) in [("x-amz-request-id", &self.request_id), ("x-amz-id-2", &self.host_id)] {
            if let Ok(v) = http::HeaderValue::from_str(v) {
                h.insert(name, v);
            }
        }
    }
}

/// Largest error body rewritten (S3 error documents are a few hundred
/// bytes; anything larger passes through untouched).
const MAX_ERROR_BODY: usize = 64 << 10;

/// An error answer as S3 writes it, and its one log line: `<RequestId>` and
/// `<HostId>` equal to the headers (s3s leaves them out), `<ServerTime>`
/// for RequestTimeTooSkewed (so a client with a wrong clock learns the
/// server's). Server faults (5xx) are logged at ERROR, client errors at
/// DEBUG, each once, inside the request's span. Returns the answer with
/// its S3 error code and message (empty when the body has none).
pub(crate) async fn error_with_ids(
    resp: HttpResponse,
    ids: &RequestIds,
    method: &http::Method,
    path: &str,
    sent_at: Option<&str>,
) -> (HttpResponse, String, String) {
    use http_body_util::BodyExt;
    let (mut parts, body) = resp.into_parts();
    let bytes = match body.bytes() {
        Some(b) if b.len() <= MAX_ERROR_BODY => b,
        Some(_) => return (http::Response::from_parts(parts, body), String::new(), String::new()),
        None => match body.collect().await {
            Ok(c) => c.to_bytes(),
            Err(_) => bytes::Bytes::new(),
        },
    };
    let text = String::from_utf8_lossy(&bytes);
    let field = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(text[start..end].to_string())
    };
    let (code, message) = (field("Code").unwrap_or_default(), field("Message").unwrap_or_default());
    let status = parts.status.as_u16();
    if parts.status.is_server_error() {
        tracing::error!(status, code, error = message, %method, path, "request failed");
    } else {
        tracing::debug!(status, code, error = message, %method, path, "client error");
    }
    let body = if text.contains("</Error>") && !text.contains("<RequestId>") {
        let mut extra = String::new();
        if message.is_empty() {
            if let Some(m) = aws_message(&code) {
                extra.push_str(&format!("<Message>{m}</Message>"));
            }
        }
        if code == "RequestTimeTooSkewed" {
            if let Some(t) = sent_at.filter(|_| !text.contains("<RequestTime>")) {
                extra.push_str(&format!("<RequestTime>{}</RequestTime>", precheck::xml_escape(t)));
            }
            if !text.contains("<ServerTime>") {
                let now = time::OffsetDateTime::now_utc()
                    .format(&time::format_description::well_known::Rfc3339)
                    .unwrap_or_default();
                extra.push_str(&format!("<ServerTime>{now}</ServerTime>"));
            }
            if !text.contains("<MaxAllowedSkewMilliseconds>") {
                let skew = precheck::MAX_SKEW * 1000;
                extra.push_str(&format!("<MaxAllowedSkewMilliseconds>{skew}</MaxAllowedSkewMilliseconds>"));
            }
        }
        extra.push_str(&format!("<RequestId>{}</RequestId><HostId>{}</HostId>", ids.request_id, ids.host_id));
        parts.headers.remove(http::header::CONTENT_LENGTH);
        bytes::Bytes::from(text.replacen("</Error>", &format!("{extra}</Error>"), 1))
    } else {
        bytes
    };
    let body = s3s::Body::from(body);
    (http::Response::from_parts(parts, body), code, message)
}

/// The time a request says it was made, as it was sent: `x-amz-date`, or
/// a presigned URL's `X-Amz-Date`, or `Date`.
pub(crate) fn request_time<B>(req: &http::Request<B>) -> Option<String> {
    let header = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let query = || {
        let q = req.uri().query().filter(|q| q.contains("X-Amz-Date"))?;
        form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "X-Amz-Date").map(|(_, v)| v.into_owned())
    };
    header("x-amz-date").or_else(query).or_else(|| header("date"))
}

/// AWS's message for an error code s3s sends without one (clients print
/// the message; without it aws-cli says "Unknown").
fn aws_message(code: &str) -> Option<&'static str> {
    Some(match code {
        "SignatureDoesNotMatch" => {
            "The request signature we calculated does not match the signature you provided. Check your key and \
             signing method."
        }
        "InvalidBucketName" => {
            "The specified bucket is not valid. Bucket names are 3 to 63 characters of lowercase letters, digits, \
             dots and hyphens, begin and end with a letter or digit, and are not formatted as an IP address."
        }
        "InvalidAccessKeyId" => "The AWS Access Key Id you provided does not exist in our records.",
        "AccessDenied" => "Access Denied",
        "MissingContentLength" => "You must provide the Content-Length HTTP header.",
        "NoSuchBucket" => "The specified bucket does not exist",
        "NoSuchKey" => "The specified key does not exist.",
        "MethodNotAllowed" => "The specified method is not allowed against this resource.",
        "NotImplemented" => "A header you provided implies functionality that is not implemented.",
        _ => return None,
    })
}
