//! What one client connection may hold, on the S3 and the operations
//! listeners alike: a deadline for its first request, an idle timeout
//! between requests (HTTP/1 and HTTP/2), a send timeout for a client that
//! stops taking its response body, a share of the connection slots
//! per client address (an IPv6 client's /64), and, when every slot is
//! taken, its slot given to a new connection if it has made no progress
//! longest: idle, or with every request waiting for body bytes its client
//! does not send ([`RequestBody`]).
//!
//! hyper alone leaves gaps that idle connections fill: its header timeout
//! starts only once the HTTP version has been sniffed, and an HTTP/2
//! connection with no streams has no timeout at all. So every connection
//! here is watched from the moment it is accepted: [`Activity`] sees each
//! request start and each response end, and [`Activity::expired`]
//! resolves when the connection has had no request in flight for too long.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// The requests of one connection: whether one has started, how many are
/// in flight (a request counts until its response body is done or
/// dropped), and when the last one ended.
#[derive(Clone)]
pub struct Activity {
    inner: Arc<ActivityInner>,
}

struct ActivityInner {
    accepted: Instant,
    started: AtomicBool,
    in_flight: AtomicUsize,
    last_done: Mutex<Instant>,
    evict: tokio::sync::Notify,
    /// Since when the client's socket has taken no more of what we write
    /// (a write or flush pending), in nanoseconds after `accepted` plus
    /// one; 0 while it takes it. An atomic: every write notes itself.
    write_blocked: AtomicU64,
    /// Request bodies waiting now for bytes the client has not sent.
    bodies_waiting: AtomicUsize,
    /// Response bodies whose last frame (or headers) the client has not
    /// yet made room for: hyper has not asked them for more since.
    bodies_owed: AtomicUsize,
    /// Bytes the client's socket has taken, in all.
    sent: AtomicU64,
    /// When a request last started or a body last brought bytes, in
    /// nanoseconds after `accepted`.
    last_progress: AtomicU64,
}
impl Activity {
    /// A connection accepted now, with no request yet.
    pub fn new() -> Activity {
        let now = Instant::now();
        Activity {
            inner: Arc::new(ActivityInner {
                accepted: now,
                started: AtomicBool::new(false),
                in_flight: AtomicUsize::new(0),
                last_done: Mutex::new(now),
                evict: tokio::sync::Notify::new(),
                write_blocked: AtomicU64::new(0),
                bodies_waiting: AtomicUsize::new(0),
                bodies_owed: AtomicUsize::new(0),
                sent: AtomicU64::new(0),
                last_progress: AtomicU64::new(0),
            }),
        }
    }

    /// Resolves once the connection has had no request in flight for
    /// `idle` (counted from the end of its last request), or, before its
    /// first request's headers were complete, `first` after it was
    /// accepted (which covers a TLS handshake and the HTTP version sniff),
    /// or once its client has held up its responses for a whole `send`
    /// window (its socket full, or an HTTP/2 stream given no room) and its
    /// socket took fewer than `send_min_rate` bytes a second in it (at
    /// least one byte; 0: nothing at all). Otherwise never while a request
    /// is in flight: a response whose bytes the share is slow to give is
    /// not its client's doing.
    pub async fn expired(&self, first: Duration, idle: Duration, send: Duration, send_min_rate: u64) {
        // Requests start and end meanwhile: looked at again at least this
        // often, so that no state is waited out with another's deadline.
        let every = (send.min(idle) / 4).max(CHECK_MIN);
        let need = ((send_min_rate as f64 * send.as_secs_f64()) as u64).max(1);
        // Since when the client has held up every look, and what its
        // socket had taken then.
        let mut held_up: Option<(Instant, u64)> = None;
        loop {
            let i = &self.inner;
            let now = Instant::now();
            let due = if !i.started.load(Ordering::Acquire) {
                Some(i.accepted + first)
            } else if i.in_flight.load(Ordering::Acquire) > 0 {
                // A request whose body is still coming in has its own
                // timeouts; one being sent, the client's reading.
                let waits_on_client =
                    i.write_blocked.load(Ordering::Acquire) != 0 || i.bodies_owed.load(Ordering::Acquire) > 0;
                let sent = i.sent.load(Ordering::Acquire);
                match (waits_on_client, held_up) {
                    (false, _) => {
                        held_up = None;
                        None
                    }
                    (true, None) => {
                        held_up = Some((now, sent));
                        Some(now + send)
                    }
                    (true, Some((since, at))) if now >= since + send => {
                        if sent - at < need {
                            return;
                        }
                        // It kept up this window: the next one is judged
                        // on its own.
                        held_up = Some((now, sent));
                        Some(now + send)
                    }
                    (true, Some((since, _))) => Some(since + send),
                }
            } else {
                held_up = None;
                Some(*i.last_done.lock().unwrap_or_else(|e| e.into_inner()) + idle)
            };
            if due.is_some_and(|d| now >= d) && i.in_flight.load(Ordering::Acquire) == 0 {
                return;
            }
            let next = now + every;
            tokio::time::sleep_until(due.map_or(next, |d| d.min(next))).await;
        }
    }

    /// Resolves once [`crate::conn_slots::Slots::admit`] gave this connection's slot to a
    /// new one: the connection should close.
    pub async fn evicted(&self) {
        self.inner.evict.notified().await
    }

    /// Tells the connection to close to make room ([`Activity::evicted`]).
    pub(crate) fn evict(&self) {
        self.inner.evict.notify_one();
    }

    /// Counts one of its bodies as waiting for the client (`true`) or no
    /// longer waiting (`false`).
    pub(crate) fn note_body_waiting(&self, waiting: bool) {
        match waiting {
            true => self.inner.bodies_waiting.fetch_add(1, Ordering::AcqRel),
            false => self.inner.bodies_waiting.fetch_sub(1, Ordering::AcqRel),
        };
    }

    /// `Some` if the connection has been told to close (tests only).
    #[cfg(test)]
    pub(crate) fn told_to_close(&self) -> Option<()> {
        use futures::FutureExt;
        self.inner.evict.notified().now_or_never()
    }

    /// Notes a write to the client: how much its socket took, or that it
    /// took nothing for now.
    fn note_written(&self, r: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r {
            self.inner.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        self.note_write(r.is_pending());
    }

    /// Notes a write to the client that was taken (`blocked` false) or
    /// that its socket refused for now.
    fn note_write(&self, blocked: bool) {
        let i = &self.inner;
        match blocked {
            true => {
                let since = i.accepted.elapsed().as_nanos().min(u128::from(u64::MAX - 1)) as u64 + 1;
                // The first refusal counts; later ones leave it.
                let _ = i.write_blocked.compare_exchange(0, since, Ordering::AcqRel, Ordering::Acquire);
            }
            // Written: cheap when it was not blocked (the usual case).
            false if i.write_blocked.load(Ordering::Acquire) != 0 => i.write_blocked.store(0, Ordering::Release),
            false => {}
        }
    }

    /// Since when the connection has made no progress: had no request in
    /// flight (since its acceptance, or the end of its last request), or
    /// had every request in flight waiting for body bytes its client does
    /// not send (since the last start or bytes); `None` while a request is
    /// being worked on or answered.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        let i = &self.inner;
        let in_flight = i.in_flight.load(Ordering::Acquire);
        if in_flight > 0 {
            if i.bodies_waiting.load(Ordering::Acquire) < in_flight {
                return None;
            }
            return Some(i.accepted + Duration::from_nanos(i.last_progress.load(Ordering::Acquire)));
        }
        Some(if i.started.load(Ordering::Acquire) {
            *i.last_done.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            i.accepted
        })
    }

    /// Notes progress: a request started, or a body brought bytes.
    fn note_progress(&self) {
        let i = &self.inner;
        let now = i.accepted.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        i.last_progress.fetch_max(now, Ordering::AcqRel);
    }

    /// Starts one request; it ends when the returned value is dropped.
    pub(crate) fn begin(&self) -> Done {
        self.note_progress();
        self.inner.in_flight.fetch_add(1, Ordering::AcqRel);
        self.inner.started.store(true, Ordering::Release);
        Done(self.clone())
    }
}

impl Default for Activity {
    fn default() -> Self {
        Activity::new()
    }
}

/// Ends one request when dropped.
pub(crate) struct Done(Activity);

impl Drop for Done {
    fn drop(&mut self) {
        let i = &self.0.inner;
        *i.last_done.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        i.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A hyper service whose requests are counted in an [`Activity`], each
/// marked with its connection's [`ClientAddr`].
#[derive(Clone)]
pub struct Watched<S> {
    /// The service that answers.
    pub service: S,
    /// The connection's requests.
    pub activity: Activity,
    /// The client's address (the TCP peer), if known.
    pub peer: Option<SocketAddr>,
    /// The connection came over TLS (its requests are marked with
    /// [`OverTls`]).
    pub tls: bool,
}

/// A request extension: the request came over TLS.
#[derive(Debug, Clone, Copy)]
pub struct OverTls;

/// A request extension: the address of the client that sent it (the TCP
/// peer of its connection).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

impl<S, ResBody> hyper::service::Service<http::Request<Incoming>> for Watched<S>
where
    S: hyper::service::Service<http::Request<RequestBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
{
    type Response = http::Response<WatchedBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        let activity = self.activity.clone();
        let mut req = req.map(|inner| RequestBody { inner, activity: Some(activity), waiting: false });
        if let Some(peer) = self.peer {
            req.extensions_mut().insert(ClientAddr(peer));
        }
        if self.tls {
            req.extensions_mut().insert(OverTls);
        }
        let done = self.activity.begin();
        let answer = self.service.call(req);
        Box::pin(async move {
            let resp = answer.await?;
            // Until hyper first asks for its body, the response waits on
            // the client's room for its headers.
            done.0.inner.bodies_owed.fetch_add(1, Ordering::AcqRel);
            Ok(resp.map(|body| WatchedBody { body, owed: true, _done: done }))
        })
    }
}

/// A request body whose waits for the client are noted in its
/// connection's [`Activity`]: a connection whose every request waits for
/// body bytes that do not come is making no progress, and can make way
/// for a new one like an idle connection (see [`crate::conn_slots::Slots::admit`]). Frames,
/// size hint and end pass through unchanged.
pub struct RequestBody {
    inner: Incoming,
    activity: Option<Activity>,
    /// Counted in `bodies_waiting` now.
    waiting: bool,
}

impl RequestBody {
    fn set_waiting(&mut self, waiting: bool) {
        if self.waiting == waiting {
            return;
        }
        self.waiting = waiting;
        if let Some(a) = &self.activity {
            a.note_body_waiting(waiting);
        }
    }
}

impl Body for RequestBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<bytes::Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Pending => self.set_waiting(true),
            Poll::Ready(frame) => {
                self.set_waiting(false);
                if let (Some(Ok(_)), Some(a)) = (frame, &self.activity) {
                    a.note_progress();
                }
            }
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

impl Drop for RequestBody {
    fn drop(&mut self) {
        self.set_waiting(false);
    }
}

/// A response body that ends its request in the [`Activity`] when it is
/// dropped (sent, or cut), and notes there while it waits on its client:
/// from each frame it gives until hyper asks for the next.
pub struct WatchedBody<B> {
    body: B,
    /// Counted in `bodies_owed` now.
    owed: bool,
    _done: Done,
}

impl<B> WatchedBody<B> {
    fn set_owed(&mut self, owed: bool) {
        if self.owed != owed {
            self.owed = owed;
            let n = &self._done.0.inner.bodies_owed;
            match owed {
                true => n.fetch_add(1, Ordering::AcqRel),
                false => n.fetch_sub(1, Ordering::AcqRel),
            };
        }
    }
}

impl<B> Drop for WatchedBody<B> {
    fn drop(&mut self) {
        self.set_owed(false);
    }
}

impl<B: Body + Unpin> Body for WatchedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        self.set_owed(false);
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(&polled, Poll::Ready(Some(Ok(f))) if f.is_data()) {
            self.set_owed(true);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A client's connection whose writes are watched: a write the socket
/// refuses (the client stopped reading and its buffers are full) starts
/// the send timeout of [`Activity::expired`]; one it takes stops it.
pub struct WatchedIo<T> {
    io: T,
    activity: Activity,
}

impl<T> WatchedIo<T> {
    /// `io`, its writes noted in `activity`.
    pub fn new(io: T, activity: Activity) -> WatchedIo<T> {
        WatchedIo { io, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WatchedIo<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WatchedIo<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.activity.note_written(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.activity.note_written(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.activity.note_write(r.is_pending());
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The least time between two looks at a connection's state.
const CHECK_MIN: Duration = Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_taking_what_is_written_expires_a_slow_share_does_not() {
        let (hour, send) = (Duration::from_secs(3600), Duration::from_secs(2));
        let a = Activity::new();
        // Watched from its acceptance: the first request comes after.
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.expired(hour, hour, send, 0).await }
        });
        tokio::task::yield_now().await;
        let _request = a.begin();
        tokio::time::sleep(send * 5).await;
        assert!(!waiter.is_finished(), "nothing written yet: waiting on the share is not the client's stall");
        a.note_write(false);
        a.note_write(true);
        let t0 = Instant::now();
        tokio::time::sleep(send / 2).await;
        a.note_write(true); // still full: the stall counts from the first refusal
        waiter.await.unwrap();
        assert!(t0.elapsed() >= send && t0.elapsed() <= send + send / 2, "{:?}", t0.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_its_response_too_slowly_expires_one_at_the_rate_does_not() {
        let (hour, send, rate) = (Duration::from_secs(3600), Duration::from_secs(4), 1024);
        let trickle = |per_second: usize| {
            let a = Activity::new();
            let request = a.begin();
            let waiter = tokio::spawn({
                let a = a.clone();
                async move { a.expired(hour, hour, send, rate).await }
            });
            let feeder = tokio::spawn({
                let a = a.clone();
                async move {
                    // The socket is full; each second it takes a little.
                    loop {
                        a.note_written(&Poll::Ready(Ok(per_second)));
                        a.note_written(&Poll::Pending);
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            });
            (waiter, feeder, request)
        };
        let (slow, f1, _r1) = trickle(100);
        let (fast, f2, _r2) = trickle(2048);
        let t0 = Instant::now();
        slow.await.unwrap();
        assert!(t0.elapsed() <= send * 2 + Duration::from_secs(1), "{:?}", t0.elapsed());
        tokio::time::sleep(send * 10).await;
        assert!(!fast.is_finished(), "2 KiB a second is above the rate");
        f1.abort();
        f2.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_expires_without_a_request_and_when_idle_never_mid_request() {
        let (first, idle) = (Duration::from_secs(5), Duration::from_secs(20));
        let a = Activity::new();
        let t0 = Instant::now();
        a.expired(first, idle, idle, 0).await;
        assert_eq!(t0.elapsed(), first, "no request: the first-request deadline");

        let a = Activity::new();
        let done = a.begin();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.expired(first, idle, idle, 0).await }
        });
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!waiter.is_finished(), "a request in flight keeps the connection");
        drop(done);
        let t1 = Instant::now();
        waiter.await.unwrap();
        assert!(t1.elapsed() <= idle, "idle after the request: {:?}", t1.elapsed());
        assert!(t1.elapsed() >= idle - Duration::from_secs(1));
    }
}
