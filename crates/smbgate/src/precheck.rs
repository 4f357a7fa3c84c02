//! Checks made on a request before s3s reads it: requests refused outright
//! (an HTTP/1 PUT that declares no body length, a POST body over the XML
//! limit), a
//! chunked UNSIGNED-PAYLOAD PUT let through to be streamed, and the
//! rules on signature parameters that s3s leaves to us, checked before s3s
//! verifies the signature itself:
//!
//! - the SigV4 credential scope must name this gateway's region
//!   (AuthorizationHeaderMalformed, or AuthorizationQueryParametersError
//!   for a presigned URL, naming the expected region);
//! - a SigV4 presigned URL lives at most 604800 s (7 days), never a
//!   negative time, and not past its expiry (403, as AWS answers);
//! - a SigV4 request dated only by `Date` (what SDKs send when a caller set
//!   that header) is dated by it: s3s reads only `x-amz-date`;
//! - SigV2 can be switched off (`--sigv2 off`), and a header-signed SigV2
//!   request must be dated within 15 minutes of the server's clock, as
//!   SigV4 is, so a captured request cannot be replayed forever.

use time::format_description::well_known::Rfc2822;
use time::{Duration, OffsetDateTime, PrimitiveDateTime};

/// Largest XML request body (CompleteMultipartUpload, DeleteObjects) read
/// into memory, in bytes: 10,000 parts or 1,000 keys of 1,024 bytes with
/// room to spare.
pub const MAX_XML_BODY: usize = 4 << 20;

/// Longest lifetime of a SigV4 presigned URL, in seconds.
pub const MAX_PRESIGNED_EXPIRES: i64 = 604_800;

/// How far a request's date may be from the server's clock (SigV2 and
/// SigV4 alike), in seconds.
pub const MAX_SKEW: i64 = 15 * 60;

/// A request refused before its signature is verified: the HTTP status and
/// the S3 error code and message to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// HTTP status.
    pub status: http::StatusCode,
    /// S3 error code.
    pub code: &'static str,
    /// AWS's message for it.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(status: http::StatusCode, code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal { status, code, message: message.into() }
    }

    /// 411 MissingContentLength.
    pub fn missing_content_length() -> Refusal {
        Refusal::new(
            http::StatusCode::LENGTH_REQUIRED,
            "MissingContentLength",
            "You must provide the Content-Length HTTP header.",
        )
    }

    /// 400 InvalidURI: the request path does not decode to UTF-8 (a key
    /// such as `%AE%8A-`).
    pub fn invalid_uri() -> Refusal {
        Refusal::new(http::StatusCode::BAD_REQUEST, "InvalidURI", "Couldn't parse the specified URI.")
    }

    /// 400 MaxMessageLengthExceeded: an XML body over the limit.
    pub fn too_big() -> Refusal {
        Refusal::new(http::StatusCode::BAD_REQUEST, "MaxMessageLengthExceeded", "Your request was too big.")
    }

    /// 400 RequestTimeout: a body stopped coming, or came too slowly.
    pub fn request_timeout() -> Refusal {
        Refusal::new(
            http::StatusCode::BAD_REQUEST,
            "RequestTimeout",
            "Your socket connection to the server was not read from or written to within the timeout period. Idle \
             connections will be closed.",
        )
    }

    /// 400 InvalidChunkSizeError: an aws-chunked body's size line claims
    /// a chunk over `limit` bytes (the decoded length, at most 16 MiB).
    pub fn chunk_too_large(limit: u64) -> Refusal {
        Refusal::new(
            http::StatusCode::BAD_REQUEST,
            "InvalidChunkSizeError",
            format!(
                "A chunk of an aws-chunked body may be at most {limit} bytes: the decoded content length, and no more \
                 than 16 MiB."
            ),
        )
    }

    /// 503 SlowDown: a shared budget is spent; SDKs retry with backoff.
    pub fn slow_down() -> Refusal {
        Refusal::new(http::StatusCode::SERVICE_UNAVAILABLE, "SlowDown", "Please reduce your request rate.")
    }

    /// 403 SignatureDoesNotMatch.
    pub fn signature_does_not_match() -> Refusal {
        Refusal::new(
            http::StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your key and \
             signing method.",
        )
    }

    /// The S3 error document (the front adds RequestId and HostId).
    pub fn to_response(&self) -> s3s::HttpResponse {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>{}</Message></Error>",
            self.code,
            xml_escape(&self.message)
        );
        let mut r = http::Response::new(s3s::Body::from(body));
        *r.status_mut() = self.status;
        r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/xml"));
        r
    }
}

/// The refusal, if any, of `req` before s3s reads it, in this order: a path
/// that is not UTF-8, an HTTP/1 PUT that declares no body length, a POST
/// body over [`MAX_XML_BODY`], then the signature
/// rules (which may add `x-amz-date`, see [`Rules::check`]).
pub fn refusal<B>(req: &mut http::Request<B>, rules: &Rules, now: OffsetDateTime) -> Option<Refusal> {
    if !path_is_utf8(req.uri().path()) {
        return Some(Refusal::invalid_uri());
    }
    if missing_content_length(req) {
        return Some(Refusal::missing_content_length());
    }
    // Every other POST carries an XML body read whole (a form upload
    // streams its file, see post_object).
    if req.method() == http::Method::POST && !is_form(req) && content_length(req.headers()) > MAX_XML_BODY as u64 {
        return Some(Refusal::too_big());
    }
    rules.check(req, now).err()
}

/// True for a browser form upload (POST Object): a POST whose body is
/// `multipart/form-data`, answered by `post_object`, not s3s.
pub fn is_form<B>(req: &http::Request<B>) -> bool {
    req.method() == http::Method::POST
        && req
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().to_ascii_lowercase().starts_with("multipart/form-data"))
}

/// Marks a request whose body length was not declared (see
/// [`admit_undeclared_length`]); its Content-Length header is a stand-in.
#[derive(Debug, Clone, Copy)]
pub struct UndeclaredLength;

/// Lets a PUT body of unknown length through to be streamed: sent chunked
/// (or framed by HTTP/2) with no Content-Length, and signed with
/// `UNSIGNED-PAYLOAD`. s3s refuses such a body with 411 before any handler
/// runs, so the request gets a stand-in `Content-Length: 0` and the
/// [`UndeclaredLength`] mark, by which the handler knows to take the body
/// as it comes. The stand-in is not signed (a client signs only headers it
/// sends), so the signature still holds. A request whose signature covers
/// `content-length` is left as sent: it was signed with a length, and a
/// stand-in `0` would let a captured request (one that signed
/// `content-length: 0`) be replayed chunked with any body. A body signed
/// with its SHA-256 still needs its length, which that hash covers: s3s
/// answers 411. Returns true if the request was marked.
pub fn admit_undeclared_length<B>(req: &mut http::Request<B>) -> bool {
    let h = req.headers();
    let undeclared = req.method() == http::Method::PUT
        && !h.contains_key(http::header::CONTENT_LENGTH)
        && (is_chunked(h) || req.version() >= http::Version::HTTP_2)
        && h.get("x-amz-content-sha256").is_some_and(|v| v.as_bytes() == b"UNSIGNED-PAYLOAD")
        && is_object_or_part_put(req)
        && !signs_content_length(req);
    if undeclared {
        req.headers_mut().insert(http::header::CONTENT_LENGTH, http::HeaderValue::from_static("0"));
        req.extensions_mut().insert(UndeclaredLength);
    }
    undeclared
}

/// True if the request's SigV4 Authorization header names
/// `content-length` among its signed headers. (A presigned URL's query is
/// never admitted: see [`is_object_or_part_put`].)
fn signs_content_length<B>(req: &http::Request<B>) -> bool {
    let names = |list: &str| list.split(';').any(|n| n.trim().eq_ignore_ascii_case("content-length"));
    let header = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    header
        .and_then(|a| a.strip_prefix("AWS4-HMAC-SHA256 "))
        .is_some_and(|fields| fields.split(',').filter_map(|f| f.trim().strip_prefix("SignedHeaders=")).any(names))
}

/// True if `Transfer-Encoding` names `chunked`.
pub fn is_chunked(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::TRANSFER_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|c| c.trim().eq_ignore_ascii_case("chunked")))
}

/// True if a path-style `uri` names a key (`/bucket/key`), not only a
/// bucket.
fn names_key(uri: &http::Uri) -> bool {
    uri.path().trim_start_matches('/').split_once('/').is_some_and(|(_, key)| !key.is_empty())
}

/// True for a PUT of an object or a part with a body: a path-style key
/// ([`names_key`]), no copy source, and no query
/// but `partNumber`, `uploadId` (and the `x-id` some SDKs add). A PUT of a
/// subresource (`?cors`, `?tagging`) carries XML that s3s reads whole
/// against its Content-Length, so it is not admitted.
fn is_object_or_part_put<B>(req: &http::Request<B>) -> bool {
    let plain_query = req.uri().query().unwrap_or("").split('&').filter(|p| !p.is_empty()).all(|p| {
        let name = p.split_once('=').map_or(p, |(n, _)| n);
        matches!(name, "partNumber" | "uploadId" | "x-id")
    });
    names_key(req.uri()) && plain_query && !req.headers().contains_key("x-amz-copy-source")
}

/// True if the request carries `Expect: 100-continue`.
pub fn expects_continue(headers: &http::HeaderMap) -> bool {
    headers.get(http::header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// A Content-Length header's value in bytes (0 when absent or malformed).
pub fn content_length(headers: &http::HeaderMap) -> u64 {
    headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The body length a request declares, in bytes: an aws-chunked body (what
/// aws-cli and boto3 send) in `x-amz-decoded-content-length`, else
/// Content-Length (0 when neither says).
pub fn declared_body_length(headers: &http::HeaderMap) -> u64 {
    headers
        .get("x-amz-decoded-content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| content_length(headers))
}

/// True for an HTTP/1 PUT of an object or part that says neither how long
/// its body is nor that it is chunked: HTTP reads that as an empty body,
/// S3 answers 411 MissingContentLength rather than store an empty object.
/// (HTTP/2 frames its body itself; a copy has no body.)
fn missing_content_length<B>(req: &http::Request<B>) -> bool {
    let h = req.headers();
    req.method() == http::Method::PUT
        && req.version() < http::Version::HTTP_2
        && !h.contains_key(http::header::CONTENT_LENGTH)
        && !h.contains_key(http::header::TRANSFER_ENCODING)
        && !h.contains_key("x-amz-copy-source")
        && names_key(req.uri())
}

/// True if the request's path percent-decodes to valid UTF-8, as every S3
/// bucket name and key must.
pub fn path_is_utf8(path: &str) -> bool {
    percent_encoding::percent_decode_str(path).decode_utf8().is_ok()
}

/// `s` escaped for XML text and attribute values.
pub(crate) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// What the rules need to know about this gateway.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The region SigV4 scopes must name.
    pub region: String,
    /// Whether SigV2 (header or presigned) is accepted.
    pub sigv2: bool,
}

impl Rules {
    /// Checks `req` at `now`; may add `x-amz-date` from `Date` (see the
    /// module docs).
    ///
    /// Errors: the [`Refusal`] to answer with.
    pub fn check<B>(&self, req: &mut http::Request<B>, now: OffsetDateTime) -> Result<(), Refusal> {
        // A presigned URL sent with any Authorization header as well: AWS
        // refuses it, and letting the header win would skip the query's
        // checks (its lifetime, its region, SigV2 being off).
        if req.headers().contains_key(http::header::AUTHORIZATION) && is_presigned(req.uri().query().unwrap_or("")) {
            return Err(Refusal::new(
                http::StatusCode::BAD_REQUEST,
                "InvalidArgument",
                "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string \
                 parameter or the Authorization header should be specified",
            ));
        }
        if let Some(a) = req.headers().get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            if let Some(rest) = a.strip_prefix("AWS4-HMAC-SHA256 ") {
                let fields = rest.to_string();
                return self.check_sigv4_header(req, &fields);
            }
            if a.starts_with("AWS ") {
                return self.check_sigv2_header(req.headers(), now);
            }
            return Ok(());
        }
        // A query is read only if it may be a presigned URL's: most
        // requests carry the Authorization header, or no signature at all.
        let q = req.uri().query().unwrap_or("");
        if !may_name_signature(q) {
            return Ok(());
        }
        let query: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes()).into_owned().collect();
        let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        if param("X-Amz-Algorithm") == Some("AWS4-HMAC-SHA256") {
            return self.check_sigv4_query(&param, now);
        }
        if param("AWSAccessKeyId").is_some() && param("Signature").is_some() && !self.sigv2 {
            return Err(sigv2_off());
        }
        Ok(())
    }

    fn check_sigv4_header<B>(&self, req: &mut http::Request<B>, fields: &str) -> Result<(), Refusal> {
        let credential = fields
            .split(',')
            .map(str::trim)
            .find_map(|f| f.strip_prefix("Credential="))
            .ok_or_else(|| malformed("the Credential field is missing"))?;
        if let Some(region) = credential.split('/').nth(2) {
            if region != self.region {
                return Err(malformed(&format!("the region '{region}' is wrong; expecting '{}'", self.region)));
            }
        }
        let h = req.headers_mut();
        if !h.contains_key("x-amz-date") {
            let date = h.get(http::header::DATE).and_then(|v| v.to_str().ok()).and_then(parse_http_date);
            if let Some(d) = date {
                if let Ok(v) = http::HeaderValue::from_str(&amz_date(d)) {
                    h.insert("x-amz-date", v);
                }
            }
        }
        Ok(())
    }

    fn check_sigv4_query<'q>(
        &self,
        param: &impl Fn(&str) -> Option<&'q str>,
        now: OffsetDateTime,
    ) -> Result<(), Refusal> {
        let forbidden = http::StatusCode::FORBIDDEN;
        let query_error = |m: String| Refusal::new(forbidden, "AuthorizationQueryParametersError", m);
        if let Some(region) = param("X-Amz-Credential").and_then(|c| c.split('/').nth(2)) {
            if region != self.region {
                return Err(query_error(format!(
                    "Error parsing the X-Amz-Credential parameter; the region '{region}' is wrong; expecting '{}'",
                    self.region
                )));
            }
        }
        let Some(expires) = param("X-Amz-Expires") else { return Ok(()) };
        let expires: i64 = expires.parse().map_err(|_| query_error("X-Amz-Expires should be a number".to_string()))?;
        if expires < 0 {
            return Err(query_error("X-Amz-Expires must be non-negative".to_string()));
        }
        if expires > MAX_PRESIGNED_EXPIRES {
            return Err(query_error(format!(
                "X-Amz-Expires must be less than a week (in seconds) that is {MAX_PRESIGNED_EXPIRES}"
            )));
        }
        if let Some(signed_at) = param("X-Amz-Date").and_then(parse_amz_date) {
            if now > signed_at + Duration::seconds(expires) {
                return Err(Refusal::new(forbidden, "AccessDenied", "Request has expired"));
            }
        }
        Ok(())
    }

    fn check_sigv2_header(&self, h: &http::HeaderMap, now: OffsetDateTime) -> Result<(), Refusal> {
        if !self.sigv2 {
            return Err(sigv2_off());
        }
        // x-amz-date wins over Date in SigV2, as in AWS.
        let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
        let date = text("x-amz-date").or_else(|| text("date")).and_then(parse_http_date);
        match date {
            Some(d) if (now - d).whole_seconds().abs() <= MAX_SKEW => Ok(()),
            Some(_) => Err(Refusal::new(
                http::StatusCode::FORBIDDEN,
                "RequestTimeTooSkewed",
                "The difference between the request time and the current time is too large.",
            )),
            None => Err(Refusal::new(
                http::StatusCode::FORBIDDEN,
                "AccessDenied",
                "AWS authentication requires a valid Date or x-amz-date header",
            )),
        }
    }
}

/// True if the query string `q` carries a presigned signature: SigV4's
/// `X-Amz-Algorithm` or `X-Amz-Signature`, or SigV2's `Signature`.
fn is_presigned(q: &str) -> bool {
    if !may_name_signature(q) {
        return false;
    }
    form_urlencoded::parse(q.as_bytes())
        .any(|(k, _)| matches!(k.as_ref(), "X-Amz-Algorithm" | "X-Amz-Signature" | "Signature"))
}

/// False only if the query `q` surely names no signature parameter:
/// most requests carry none, and are not parsed. A percent-encoded name
/// (`Signatur%65`) is what s3s decodes and reads, so any `%` counts.
fn may_name_signature(q: &str) -> bool {
    q.contains("X-Amz-") || q.contains("Signature") || q.contains('%')
}

/// The decoded name of one `name=value` pair of a query string (what s3s
/// and AWS read: `Signatur%65` is `Signature`).
pub fn decoded_name(pair: &str) -> String {
    let raw = pair.split_once('=').map_or(pair, |(n, _)| n);
    form_urlencoded::parse(raw.as_bytes()).next().map(|(k, _)| k.into_owned()).unwrap_or_default()
}

fn malformed(detail: &str) -> Refusal {
    Refusal::new(
        http::StatusCode::BAD_REQUEST,
        "AuthorizationHeaderMalformed",
        format!("The authorization header is malformed; {detail}"),
    )
}

fn sigv2_off() -> Refusal {
    Refusal::new(
        http::StatusCode::BAD_REQUEST,
        "InvalidRequest",
        "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.",
    )
}

/// An HTTP date (`Tue, 01 Dec 2026 10:00:00 GMT`, RFC 7231's IMF-fixdate,
/// which RFC 2822 parsing reads).
fn parse_http_date(s: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(s.trim(), &Rfc2822).ok()
}

/// `20261201T100000Z`, SigV4's date format.
fn parse_amz_date(s: &str) -> Option<OffsetDateTime> {
    let f = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    PrimitiveDateTime::parse(s, &f).ok().map(PrimitiveDateTime::assume_utc)
}

fn amz_date(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!("{:04}{:02}{:02}T{:02}{:02}{:02}Z", t.year(), t.month() as u8, t.day(), t.hour(), t.minute(), t.second())
}

#[cfg(test)]
#[path = "precheck_test.rs"]
mod tests;
