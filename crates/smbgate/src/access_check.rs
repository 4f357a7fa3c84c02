//! The access check s3s runs for every request ([`Access`]), once its
//! signature holds: who may run the operation on its buckets, the promises
//! the gateway refuses, and what it resolved of the request (operation,
//! bucket, key, user) left for the front's metrics and access log
//! ([`OperationSlot`]). The custom routes' second service decides on the
//! access key the first one verified ([`Vouched`]).

use std::sync::{Arc, OnceLock};

use s3s::access::{S3Access, S3AccessContext};
use s3s::{S3Error, S3ErrorCode, S3Result};

/// The access key whose signature the outer service verified (`None`: an
/// anonymous request), for the inner service's access check.
#[derive(Debug, Clone)]
pub struct Vouched {
    /// The verified access key.
    pub access_key: Option<String>,
}

/// Where s3s's access check leaves what it resolved of a request (a
/// request extension the front reads back for metrics and the access log).
#[derive(Clone, Default)]
pub(crate) struct OperationSlot(pub(crate) Arc<OnceLock<Resolved>>);

/// What s3s's access check resolved: the operation, its bucket and key,
/// the user that signed it (`None`: anonymous) and the SMB account that
/// user acts as (`None`: the gateway's own).
pub(crate) struct Resolved {
    pub(crate) operation: &'static str,
    pub(crate) bucket: Option<String>,
    pub(crate) key: Option<String>,
    pub(crate) identity: Option<String>,
    pub(crate) smb_identity: Option<String>,
}

/// The access check s3s runs for every request once credentials are
/// configured: notes the operation, refuses unsigned requests unless
/// anonymous access was switched on, and holds a signed request to its
/// user's buckets and read-only flag. The user goes into the request's
/// extensions, where the S3 handlers find the SMB identity it acts as.
#[derive(Clone)]
pub struct Access {
    /// What unsigned requests may do.
    pub anonymous: crate::users::Anonymous,
    /// The users in force.
    pub users: crate::users::Directory,
    /// What the gateway refuses to promise (see `crate::promises`).
    pub promises: crate::promises::Promises,
}

/// The bucket of an `x-amz-copy-source` header (`/bucket/key` or
/// `bucket/key`, percent-encoded), if it has one.
fn copy_source_bucket(headers: &http::HeaderMap) -> Option<String> {
    let v = headers.get("x-amz-copy-source")?.to_str().ok()?;
    let decoded = percent_encoding::percent_decode_str(v).decode_utf8().ok()?;
    let bucket = decoded.trim_start_matches('/').split('/').next()?;
    (!bucket.is_empty()).then(|| bucket.to_string())
}

impl Access {
    /// Who may run `operation` on `buckets` (its bucket, and a copy's
    /// source) signed with `access_key` (`None`: unsigned): the verdict, and
    /// the user the request then runs as (`None`: the gateway's own
    /// account, for anonymous access without a grant).
    ///
    /// Errors: 403 AccessDenied (unsigned without `--anonymous`, a key the
    /// table no longer holds, a bucket or write the user is not granted).
    pub fn decide<'a>(
        &self,
        operation: &str,
        buckets: impl IntoIterator<Item = &'a str>,
        access_key: Option<&str>,
    ) -> (S3Result<()>, Option<Arc<crate::users::User>>) {
        // Unsigned: under the anonymous grant, if one limits it.
        let user = match access_key {
            Some(k) => self.users.get(k),
            None => self.anonymous.user(),
        };
        let verdict = match (access_key, &user) {
            (None, None) if self.anonymous.allowed() => Ok(()),
            (None, None) => Err(S3Error::with_message(S3ErrorCode::AccessDenied, "Signature is required")),
            // Signed with a key the table no longer holds (a reload between
            // the signature check and here).
            (Some(_), None) => Err(S3Error::with_message(S3ErrorCode::AccessDenied, "Access Denied")),
            (_, Some(u)) => u.authorize(operation, buckets),
        };
        (verdict, user)
    }
}

#[async_trait::async_trait]
impl S3Access for Access {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let name = crate::metrics::operation_name(cx.s3_op().name());
        tracing::Span::current().record("operation", tracing::field::display(name));
        let (bucket, key) = match cx.s3_path() {
            s3s::path::S3Path::Root => (None, None),
            s3s::path::S3Path::Bucket { bucket } => (Some(bucket.to_string()), None),
            s3s::path::S3Path::Object { bucket, key } => (Some(bucket.to_string()), Some(key.to_string())),
        };
        let bucket_name = bucket.clone();
        // A request one of the custom routes passed on carries the access
        // key whose signature the outer service verified (see routes).
        let vouched = cx.extensions_mut().get::<Vouched>().cloned();
        let access_key = match vouched {
            Some(v) => v.access_key,
            None => cx.credentials().map(|c| c.access_key.clone()),
        };
        let source = copy_source_bucket(cx.headers());
        let (mut verdict, user) =
            self.decide(name, bucket.iter().chain(source.iter()).map(String::as_str), access_key.as_deref());
        if verdict.is_ok() {
            let tls = cx.extensions_mut().get::<crate::conn_limits::OverTls>().is_some();
            let headers = cx.headers();
            if let Some(refused) = self.promises.refusal(name, tls, |n| headers.get(n).and_then(|v| v.to_str().ok())) {
                verdict = Err(refused);
            } else if access_key.is_none() && overrides_response_headers(name, cx.uri().query()) {
                verdict = Err(S3Error::with_message(
                    S3ErrorCode::InvalidRequest,
                    "Request specific response headers cannot be used for anonymous GET requests.",
                ));
            }
        }
        let identity = user.as_ref().map(|u| u.name.clone());
        let smb_identity = user.as_ref().and_then(|u| u.smb.as_ref()).map(|s| s.to_string());
        if let Some(slot) = cx.extensions_mut().get::<OperationSlot>() {
            let _ = slot.0.set(Resolved { operation: name, bucket, key, identity, smb_identity });
        }
        if verdict.is_ok() {
            if let Some(b) = bucket_name {
                cx.extensions_mut().insert(crate::s3::RequestBucket(b));
            }
            if let Some(u) = user {
                cx.extensions_mut().insert(u);
            }
        }
        verdict
    }
}

/// True for a GET or HEAD whose query sets one of the answer's headers
/// (`response-content-type` and the like, names read decoded): AWS takes
/// these only from signed requests, so that a link nobody signed cannot
/// make a bucket's object answer as, say, an HTML page.
fn overrides_response_headers(operation: &str, query: Option<&str>) -> bool {
    matches!(operation, "GetObject" | "HeadObject")
        && query.unwrap_or("").split('&').any(|p| crate::precheck::decoded_name(p).starts_with("response-"))
}
