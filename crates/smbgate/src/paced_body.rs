//! Request bodies the gateway reads whole (the XML of DeleteObjects,
//! CompleteMultipartUpload, tagging, CORS, ...) must keep coming while
//! they hold their share of the XML body budget: the next chunk within
//! `--body-read-timeout`, and, once that long has passed, at an average of
//! at least `--body-min-rate` (the rule is `store::body_pace`, the same as
//! for object bodies). A body that falls behind ends with an error, and
//! the front answers 400 RequestTimeout, as AWS does, whatever s3s made of
//! the error.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::store::body_pace::BodyPace;

/// How fast a body must come (`--body-read-timeout`, `--body-min-rate`).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Longest wait for the next chunk.
    pub per_chunk: Duration,
    /// Least average rate once `per_chunk` has passed, in bytes a second
    /// (0: none).
    pub min_rate: u64,
}

/// Set once a [`PacedBody`] gave up on its client.
#[derive(Debug, Clone, Default)]
pub struct TimedOut(Arc<AtomicBool>);

impl TimedOut {
    /// True if the body stopped for falling behind its pace.
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A request body held to a [`Pace`]; see the module docs.
pub struct PacedBody<B> {
    inner: B,
    pace: Pace,
    progress: BodyPace,
    sleep: Pin<Box<Sleep>>,
    timed_out: TimedOut,
}

impl<B> PacedBody<B> {
    /// `inner` held to `pace` from now; the returned flag tells whether it
    /// was cut.
    pub fn new(inner: B, pace: Pace) -> (PacedBody<B>, TimedOut) {
        let progress = BodyPace::default();
        let first = progress.next_wait(Instant::now(), pace.per_chunk, pace.min_rate);
        let timed_out = TimedOut::default();
        let body = PacedBody {
            inner,
            pace,
            progress,
            sleep: Box::pin(tokio::time::sleep(first)),
            timed_out: timed_out.clone(),
        };
        (body, timed_out)
    }
}

impl<B> Body for PacedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<s3s::StdError>,
{
    type Data = Bytes;
    type Error = s3s::StdError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, s3s::StdError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.progress.add(d.len());
                }
                let now = Instant::now();
                let wait = this.progress.next_wait(now, this.pace.per_chunk, this.pace.min_rate);
                this.sleep.as_mut().reset(now + wait);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.timed_out.0.store(true, Ordering::Release);
                    Poll::Ready(Some(Err("the request body stopped coming or came too slowly".into())))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A body that yields `chunks` (each after its delay), then nothing ever.
    fn trickle(
        chunks: Vec<(Duration, &'static [u8])>,
    ) -> http_body_util::StreamBody<impl futures::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Unpin> {
        let s = futures::stream::iter(chunks)
            .then(|(d, b)| async move {
                tokio::time::sleep(d).await;
                Ok(Frame::data(Bytes::from_static(b)))
            })
            .chain(futures::stream::pending());
        http_body_util::StreamBody::new(Box::pin(s))
    }

    use futures::StreamExt;

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_is_cut_after_the_timeout_and_says_so() {
        let pace = Pace { per_chunk: Duration::from_secs(10), min_rate: 0 };
        let (mut body, cut) = PacedBody::new(trickle(vec![(Duration::from_secs(9), b"abc")]), pace);
        let t0 = Instant::now();
        assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap(), &b"abc"[..]);
        assert!(body.frame().await.unwrap().is_err());
        assert_eq!(t0.elapsed(), Duration::from_secs(19), "10 s after the last chunk");
        assert!(cut.happened());
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_once_its_average_is_too_slow() {
        let pace = Pace { per_chunk: Duration::from_secs(10), min_rate: 100 };
        let chunks = (0..100).map(|_| (Duration::from_secs(5), &b"x"[..])).collect();
        let (mut body, cut) = PacedBody::new(trickle(chunks), pace);
        let t0 = Instant::now();
        while let Some(Ok(_)) = body.frame().await {}
        assert!(cut.happened());
        assert!(t0.elapsed() <= Duration::from_secs(11), "{:?}", t0.elapsed());
    }
}
