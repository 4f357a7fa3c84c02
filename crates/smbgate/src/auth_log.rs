//! Failed authentications and refused authorizations, made visible: each
//! is counted by reason in the metrics and logged at WARN (`authentication
//! failed`, or `authorization refused` for AccessDenied) with the access
//! key it named, the client's address and the request ID, at most
//! [`WARN_PER_SECOND`] lines a second so that a flood cannot fill the disk
//! (the lines left out are counted in the next one). Other client errors
//! stay at DEBUG.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// WARN lines about failed authentications written per second at most.
pub const WARN_PER_SECOND: u32 = 10;

/// Why a request was refused as unauthenticated or unauthorized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// SignatureDoesNotMatch: a wrong secret key, or a request changed on
    /// the way.
    BadSignature,
    /// InvalidAccessKeyId: no user has this access key.
    UnknownKey,
    /// A presigned URL past its expiry.
    Expired,
    /// A SigV4 scope naming another region than `--region`.
    WrongRegion,
    /// A signature whose parts do not parse.
    Malformed,
    /// RequestTimeTooSkewed: the client's clock is off.
    ClockSkew,
    /// AccessDenied: a known user (or anonymous) without the right.
    Denied,
}

impl AuthFailure {
    /// The failure an S3 error `code` with `message` reports, if it is one.
    pub fn of(code: &str, message: &str) -> Option<AuthFailure> {
        let says = |w: &str| message.to_ascii_lowercase().contains(w);
        Some(match code {
            "SignatureDoesNotMatch" => AuthFailure::BadSignature,
            "InvalidAccessKeyId" => AuthFailure::UnknownKey,
            "RequestTimeTooSkewed" => AuthFailure::ClockSkew,
            "AccessDenied" if says("expired") => AuthFailure::Expired,
            // Object Lock's refusal of a change to a protected version is
            // the rule working, not an authorization failed.
            "AccessDenied" if says("object lock") => return None,
            // Nor is a GET with another SSE-C key than the object's: the
            // request was authorised, its key opens nothing.
            "AccessDenied" if says("sse-c key") => return None,
            "AccessDenied" => AuthFailure::Denied,
            "AuthorizationHeaderMalformed" | "AuthorizationQueryParametersError" if says("region") => {
                AuthFailure::WrongRegion
            }
            "AuthorizationQueryParametersError" if says("expire") => AuthFailure::Expired,
            "AuthorizationHeaderMalformed" | "AuthorizationQueryParametersError" => AuthFailure::Malformed,
            _ => return None,
        })
    }

    /// The metrics label and log word: `bad_signature`, `unknown_key`,
    /// `expired`, `wrong_region`, `malformed`, `clock_skew`, `denied`.
    pub fn label(self) -> &'static str {
        match self {
            AuthFailure::BadSignature => "bad_signature",
            AuthFailure::UnknownKey => "unknown_key",
            AuthFailure::Expired => "expired",
            AuthFailure::WrongRegion => "wrong_region",
            AuthFailure::Malformed => "malformed",
            AuthFailure::ClockSkew => "clock_skew",
            AuthFailure::Denied => "denied",
        }
    }
}

/// The access key a request names, from its `Authorization` header and
/// query string: a SigV4 header's
/// `Credential=`, a SigV2 `AWS KEY:SIG` header, or a presigned URL's
/// `X-Amz-Credential` or `AWSAccessKeyId`. Never the secret or signature.
/// The client chose it, so it is cut to 128 characters and anything but
/// ASCII letters, digits, `-`, `_` and `.` becomes `?` (a log line is one
/// line, with no forged fields).
pub fn access_key_of(authorization: Option<&http::HeaderValue>, query: Option<&str>) -> Option<String> {
    named_key(authorization, query).map(|k| printable_key(&k))
}

/// An access key a client named, as a log line may show it: cut to 128
/// characters, anything but ASCII letters, digits, `-`, `_` and `.` as
/// `?` (see [`access_key_of`]; a form upload names its key in the form).
pub fn printable_key(key: &str) -> String {
    key.chars().take(128).map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '?' }).collect()
}

fn named_key(authorization: Option<&http::HeaderValue>, query: Option<&str>) -> Option<String> {
    if let Some(auth) = authorization.and_then(|v| v.to_str().ok()) {
        if let Some(rest) = auth.split("Credential=").nth(1) {
            return rest.split('/').next().map(str::to_owned);
        }
        if let Some(rest) = auth.strip_prefix("AWS ") {
            return rest.split(':').next().map(str::to_owned);
        }
    }
    for (name, value) in form_urlencoded::parse(query?.as_bytes()) {
        match &*name {
            "X-Amz-Credential" => return value.split('/').next().map(str::to_owned),
            "AWSAccessKeyId" => return Some(value.into_owned()),
            _ => {}
        }
    }
    None
}

/// One request's failed authentication, as logged.
pub struct Refused<'a> {
    /// Why.
    pub failure: AuthFailure,
    /// The access key it named, if any.
    pub access_key: Option<&'a str>,
    /// The client's address (the TCP peer).
    pub client: Option<SocketAddr>,
    /// The request ID sent back to the client.
    pub request_id: &'a str,
    /// The HTTP status answered.
    pub status: u16,
}

/// The WARN log of failed authentications, rate-limited.
#[derive(Default)]
pub struct AuthLog {
    window: Mutex<Window>,
}

#[derive(Default)]
struct Window {
    start: Option<Instant>,
    written: u32,
    left_out: u64,
}

impl AuthLog {
    /// Logs `r` at WARN unless [`WARN_PER_SECOND`] lines were written in
    /// the current second; the next line written says how many were left
    /// out meanwhile.
    pub fn warn(&self, r: &Refused<'_>) {
        let left_out = {
            let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if w.start.is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1)) {
                w.start = Some(now);
                w.written = 0;
            }
            if w.written >= WARN_PER_SECOND {
                w.left_out += 1;
                return;
            }
            w.written += 1;
            std::mem::take(&mut w.left_out)
        };
        // A known user (or an unsigned request) refused by what it may do
        // proved who it is, or needed not: that is no failed authentication.
        let what = match r.failure {
            AuthFailure::Denied => "authorization refused",
            _ => "authentication failed",
        };
        tracing::warn!(
            reason = %r.failure.label(),
            access_key = %r.access_key.unwrap_or("none"),
            client = %r.client.map_or_else(|| "unknown".to_string(), |c| c.ip().to_string()),
            request_id = %r.request_id,
            status = r.status,
            not_logged_before = left_out,
            "{what}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_from_s3_errors() {
        assert_eq!(AuthFailure::of("SignatureDoesNotMatch", ""), Some(AuthFailure::BadSignature));
        assert_eq!(AuthFailure::of("InvalidAccessKeyId", ""), Some(AuthFailure::UnknownKey));
        assert_eq!(AuthFailure::of("AccessDenied", "Request has expired"), Some(AuthFailure::Expired));
        assert_eq!(AuthFailure::of("AccessDenied", "Access Denied"), Some(AuthFailure::Denied));
        assert_eq!(
            AuthFailure::of("AuthorizationHeaderMalformed", "the region 'x' is wrong; expecting 'y'"),
            Some(AuthFailure::WrongRegion)
        );
        assert_eq!(AuthFailure::of("RequestTimeTooSkewed", ""), Some(AuthFailure::ClockSkew));
        assert_eq!(AuthFailure::of("NoSuchBucket", ""), None);
        let locked = "Access Denied because object protected by object lock.";
        assert_eq!(AuthFailure::of("AccessDenied", locked), None);
        let other_key = "the SSE-C key given is not the key the object was stored with";
        assert_eq!(AuthFailure::of("AccessDenied", other_key), None);
    }

    #[test]
    fn the_access_key_and_never_the_secret() {
        let mut h = http::HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261202/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=abcdef"
                .parse()
                .unwrap(),
        );
        assert_eq!(access_key_of(h.get(http::header::AUTHORIZATION), None).as_deref(), Some("AKIDEXAMPLE"));
        h.insert(http::header::AUTHORIZATION, "AWS AKV2:c2lnbmF0dXJl".parse().unwrap());
        assert_eq!(access_key_of(h.get(http::header::AUTHORIZATION), None).as_deref(), Some("AKV2"));
        let q = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKQ%2F20261202%2Fus-east-1%2Fs3%2Faws4_request";
        assert_eq!(access_key_of(None, Some(q)).as_deref(), Some("AKQ"));
        assert_eq!(access_key_of(None, Some("AWSAccessKeyId=AK2&Signature=x")).as_deref(), Some("AK2"));
        assert_eq!(access_key_of(None, Some("list-type=2")), None);
        let forged = "AWSAccessKeyId=AK%0A2026-12-02T00:00:00Z%20INFO%20fake";
        assert_eq!(access_key_of(None, Some(forged)).as_deref(), Some("AK?2026-12-02T00?00?00Z?INFO?fake"));
    }
}
