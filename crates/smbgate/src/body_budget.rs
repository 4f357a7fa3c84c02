//! One budget, across all connections and HTTP/2 streams, for the request
//! bodies read whole into memory: the XML of DeleteObjects,
//! CompleteMultipartUpload and the bucket and object configurations
//! (tagging, CORS, ...). Each may be up to [`crate::precheck::MAX_XML_BODY`]
//! bytes; without a shared bound, many connections (or the streams of one
//! HTTP/2 connection) could hold that much each at once.
//!
//! A request takes its declared length (the most an XML body may be, if it
//! declares none) before its body is read, and gives it back when its
//! answer is made. One that cannot get its share within [`WAIT`] is
//! answered 503 SlowDown, which SDKs retry with backoff. Object bodies
//! (PUT, UploadPart, a form's file) stream and are bounded elsewhere (the
//! write-behind budget).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::precheck::{Refusal, MAX_XML_BODY};

/// Longest a request waits for its share of the budget.
pub const WAIT: Duration = Duration::from_secs(5);

/// The budget: a byte count shared by every request holding a body.
#[derive(Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    capacity: usize,
}

/// A request's share of the budget, given back when dropped.
pub struct Held(#[allow(dead_code)] OwnedSemaphorePermit);

impl BodyBudget {
    /// A budget of `capacity` bytes.
    ///
    /// Errors: a capacity under one largest XML body ([`MAX_XML_BODY`]),
    /// which could never be read.
    pub fn new(capacity: u64) -> Result<BodyBudget, String> {
        if capacity < MAX_XML_BODY as u64 {
            return Err(format!(
                "--xml-body-budget must be at least {} MiB (one largest XML body)",
                MAX_XML_BODY >> 20
            ));
        }
        let capacity = usize::try_from(capacity).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        Ok(BodyBudget { bytes: Arc::new(Semaphore::new(capacity)), capacity })
    }

    /// The budget's size, in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of the budget not held now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }

    /// Takes `bytes` of the budget, waiting up to [`WAIT`] for them.
    ///
    /// Errors: 503 SlowDown if they did not come free in time.
    pub async fn take(&self, bytes: u32) -> Result<Held, Refusal> {
        match tokio::time::timeout(WAIT, self.bytes.clone().acquire_many_owned(bytes)).await {
            Ok(Ok(permit)) => Ok(Held(permit)),
            _ => Err(Refusal::slow_down()),
        }
    }
}

/// The bytes of the budget `req` needs: the declared length of a body the
/// gateway reads whole (capped at [`MAX_XML_BODY`], which is refused
/// beyond), the cap itself for a chunked one or an HTTP/2 one that
/// declares none; `None` for a request whose body streams or that has
/// none.
pub fn needed<B>(req: &http::Request<B>) -> Option<u32> {
    let m = req.method();
    let whole = match *m {
        http::Method::POST => !crate::precheck::is_form(req),
        // A PUT with a sub-resource (?tagging, ?cors, ...) carries XML; an
        // object's or part's body streams.
        http::Method::PUT => req.uri().query().is_some_and(|q| {
            form_urlencoded::parse(q.as_bytes()).any(|(k, _)| !matches!(k.as_ref(), "partNumber" | "uploadId"))
                && !req.headers().contains_key("x-amz-copy-source")
        }),
        _ => false,
    };
    if !whole {
        return None;
    }
    let h = req.headers();
    let declared = h.get(http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    match declared {
        Some(0u64) => None,
        Some(n) => Some(n.min(MAX_XML_BODY as u64) as u32),
        // Chunked, or HTTP/2 without a length: as long as it may be. An
        // HTTP/1 request with neither has no body.
        None if crate::precheck::is_chunked(h) || req.version() == http::Version::HTTP_2 => Some(MAX_XML_BODY as u32),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str, headers: &[(&str, &str)]) -> http::Request<()> {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn only_bodies_read_whole_count() {
        assert_eq!(needed(&req("POST", "/b?delete", &[("content-length", "300")])), Some(300));
        assert_eq!(needed(&req("POST", "/b/k?uploadId=x", &[("content-length", "9999999")])), Some(4 << 20));
        let chunked = [("transfer-encoding", "chunked")];
        assert_eq!(needed(&req("POST", "/b?delete", &chunked)), Some(4 << 20), "chunked: the most it may be");
        assert_eq!(needed(&req("POST", "/b?delete", &[])), None, "HTTP/1 with neither: no body");
        assert_eq!(needed(&req("PUT", "/b/k?tagging", &[("content-length", "120")])), Some(120));
        assert_eq!(needed(&req("PUT", "/b?cors", &[("content-length", "500")])), Some(500));
        assert_eq!(needed(&req("PUT", "/b/k", &[("content-length", "5000000")])), None, "an object streams");
        assert_eq!(needed(&req("PUT", "/b/k?partNumber=1&uploadId=u", &[("content-length", "500")])), None);
        let copy = [("content-length", "0"), ("x-amz-copy-source", "/b/a")];
        assert_eq!(needed(&req("PUT", "/b/k?partNumber=1&uploadId=u", &copy)), None);
        assert_eq!(needed(&req("POST", "/b", &[("content-type", "multipart/form-data; boundary=x")])), None);
        assert_eq!(needed(&req("GET", "/b?tagging", &[])), None);
        assert_eq!(needed(&req("POST", "/b/k?uploads", &[("content-length", "0")])), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_past_the_budget_waits_then_gets_slow_down() {
        assert!(BodyBudget::new(1 << 20).is_err(), "smaller than one XML body");
        let budget = BodyBudget::new(8 << 20).unwrap();
        let a = budget.take(4 << 20).await.expect("first half");
        let _b = budget.take(4 << 20).await.expect("second half");
        assert_eq!(budget.available(), 0);
        let t0 = tokio::time::Instant::now();
        let refused = budget.take(1).await.err().expect("past the budget");
        assert_eq!((refused.status.as_u16(), refused.code), (503, "SlowDown"));
        assert_eq!(t0.elapsed(), WAIT);
        // One waiting while another finishes gets its share.
        let waiter = tokio::spawn({
            let budget = budget.clone();
            async move { budget.take(3 << 20).await.is_ok() }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(a);
        assert!(waiter.await.unwrap(), "a share freed within the wait is taken");
    }
}
