//! Request bodies the answer did not need, read to their end so that the
//! client's connection carries its next request.
//!
//! An answer can be decided before the body is read: 403 AccessDenied for
//! a read-only user's PUT, a refused signature, a precheck. If hyper meets
//! a dropped body whose bytes have not all arrived yet, it closes the
//! connection after the answer, and a client that reused the connection
//! meanwhile (boto3 does, as soon as it has read the answer) sees it closed
//! before its next response. So an unfinished body is handed to a task
//! that reads and drops the rest, within a bound in bytes and in time;
//! past either, hyper closes the connection as before.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::conn_limits::RequestBody;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// Most bytes of an unread body read and dropped.
pub const DRAIN_MAX: u64 = 8 << 20;
/// Longest time spent reading an unread body.
pub const DRAIN_TIME: Duration = Duration::from_secs(5);

/// Reads and drops `body`, up to [`DRAIN_MAX`] bytes or [`DRAIN_TIME`].
pub async fn drain(mut body: RequestBody) {
    use http_body_util::BodyExt;
    let _ = tokio::time::timeout(DRAIN_TIME, async {
        let mut seen = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len() as u64);
            if seen > DRAIN_MAX {
                break;
            }
        }
    })
    .await;
}

/// A request body that, dropped before its end, drains the rest
/// ([`drain`]) on a task of its own. Frames, size hint and end pass
/// through unchanged.
pub struct DrainOnDrop {
    /// `None` once the body has ended (or failed): nothing left to drain.
    inner: Option<RequestBody>,
}

impl DrainOnDrop {
    /// `body`, drained when dropped unfinished.
    pub fn new(body: RequestBody) -> DrainOnDrop {
        DrainOnDrop { inner: Some(body) }
    }

    /// Wraps `body` as s3s's body type.
    pub fn wrap(body: RequestBody) -> s3s::Body {
        s3s::Body::http_body(DrainOnDrop::new(body))
    }
}

impl Body for DrainOnDrop {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let Some(inner) = self.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.inner = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take().filter(|b| !b.is_end_stream()) {
            // Dropped outside a runtime (never in the server): hyper closes.
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(drain(inner));
            }
        }
    }
}
