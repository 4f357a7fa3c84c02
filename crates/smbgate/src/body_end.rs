//! A response body that says when it ends: it counts the bytes it sends
//! and calls its callback once, when the body ends or is dropped (the
//! client went away), whichever comes first. The access log and metrics
//! (`access_line`) and the request's trace span (`traces`) close on it.

use std::pin::Pin;
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};

/// `body`, calling `then` with the bytes sent once it has ended or been
/// dropped.
pub fn on_end(body: s3s::Body, then: impl FnOnce(u64) + Send + Unpin + 'static) -> s3s::Body {
    s3s::Body::http_body_unsync(OnEnd { inner: body, sent: 0, then: Some(then) })
}

struct OnEnd<F: FnOnce(u64)> {
    inner: s3s::Body,
    sent: u64,
    then: Option<F>,
}

impl<F: FnOnce(u64)> OnEnd<F> {
    fn done(&mut self) {
        if let Some(then) = self.then.take() {
            then(self.sent);
        }
    }
}

impl<F: FnOnce(u64) + Unpin> Body for OnEnd<F> {
    type Data = bytes::Bytes;
    type Error = <s3s::Body as Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => self.sent += frame.data_ref().map_or(0, |d| d.len() as u64),
            Poll::Ready(None) => self.done(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<F: FnOnce(u64)> Drop for OnEnd<F> {
    fn drop(&mut self) {
        self.done();
    }
}
