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

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
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
                last_progress: AtomicU64::new(0),
            }),
        }
    }

    /// Resolves once the connection has had no request in flight for
    /// `idle` (counted from the end of its last request), or, before its
    /// first request's headers were complete, `first` after it was
    /// accepted (which covers a TLS handshake and the HTTP version sniff),
    /// or once its client has taken nothing of what is written to it for
    /// `send` (its socket full). Otherwise never while a request is in
    /// flight.
    pub async fn expired(&self, first: Duration, idle: Duration, send: Duration) {
        // Requests start and end meanwhile: looked at again at least this
        // often, so that no state is waited out with another's deadline.
        let every = (send.min(idle) / 4).max(CHECK_MIN);
        loop {
            let i = &self.inner;
            let now = Instant::now();
            let due = if !i.started.load(Ordering::Acquire) {
                Some(i.accepted + first)
            } else if i.in_flight.load(Ordering::Acquire) > 0 {
                // A request whose body is still coming in has its own
                // timeouts; one being sent, the client's reading.
                match i.write_blocked.load(Ordering::Acquire) {
                    0 => None,
                    n => Some(i.accepted + Duration::from_nanos(n - 1) + send),
                }
            } else {
                Some(*i.last_done.lock().unwrap_or_else(|e| e.into_inner()) + idle)
            };
            if due.is_some_and(|d| now >= d) {
                return;
            }
            let next = now + every;
            tokio::time::sleep_until(due.map_or(next, |d| d.min(next))).await;
        }
    }

    /// Resolves once [`Slots::admit`] gave this connection's slot to a
    /// new one: the connection should close.
    pub async fn evicted(&self) {
        self.inner.evict.notified().await
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
    fn idle_since(&self) -> Option<Instant> {
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

    fn begin(&self) -> Done {
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
struct Done(Activity);

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
            Ok(resp.map(|body| WatchedBody { body, _done: done }))
        })
    }
}

/// A request body whose waits for the client are noted in its
/// connection's [`Activity`]: a connection whose every request waits for
/// body bytes that do not come is making no progress, and can make way
/// for a new one like an idle connection (see [`Slots::admit`]). Frames,
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
            match waiting {
                true => a.inner.bodies_waiting.fetch_add(1, Ordering::AcqRel),
                false => a.inner.bodies_waiting.fetch_sub(1, Ordering::AcqRel),
            };
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
/// dropped (sent, or cut).
pub struct WatchedBody<B> {
    body: B,
    _done: Done,
}

impl<B: Body + Unpin> Body for WatchedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
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
        self.activity.note_write(r.is_pending());
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.activity.note_write(r.is_pending());
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

/// A connection idle for less than this is never closed to make room: a
/// client that has just connected is about to send its request.
const EVICT_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The connection slots of one listener (`--max-connections`), and the
/// connections holding them.
pub struct Slots {
    free: Arc<tokio::sync::Semaphore>,
    held: Arc<Mutex<HashMap<u64, Activity>>>,
    next_id: AtomicU64,
}

impl Slots {
    /// `n` slots (at least 1).
    pub fn new(n: usize) -> Slots {
        Slots {
            free: Arc::new(tokio::sync::Semaphore::new(n.max(1))),
            held: Arc::default(),
            next_id: AtomicU64::new(0),
        }
    }

    /// A slot for a connection just accepted, held until the returned
    /// value is dropped. At once if one is free; else the connection idle
    /// longest (at least [`EVICT_IDLE_AFTER`]) is told to close
    /// ([`Activity::evicted`]) and its slot taken; else this waits for a
    /// connection to end. So idle connections can delay a new client by at
    /// most about a second, never keep it out.
    pub async fn admit(&self) -> Slot {
        let permit = match self.free.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let mut pause = tokio::time::interval(EVICT_IDLE_AFTER / 4);
                loop {
                    tokio::select! {
                        p = self.free.clone().acquire_owned() => break p.expect("never closed"),
                        _ = pause.tick() => self.evict_idlest(),
                    }
                }
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Activity::new();
        self.held.lock().unwrap_or_else(|e| e.into_inner()).insert(id, activity.clone());
        Slot { id, activity, held: self.held.clone(), _permit: permit }
    }

    /// Tells the connection idle longest, if any has been idle long
    /// enough, to close.
    fn evict_idlest(&self) {
        let now = Instant::now();
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let idlest = held
            .values()
            .filter_map(|a| a.idle_since().map(|t| (t, a)))
            .filter(|(t, _)| now.saturating_duration_since(*t) >= EVICT_IDLE_AFTER)
            .min_by_key(|(t, _)| *t);
        if let Some((_, a)) = idlest {
            a.inner.evict.notify_one();
        }
    }
}

/// One connection's slot, and what it does ([`Slot::activity`]).
pub struct Slot {
    id: u64,
    activity: Activity,
    held: Arc<Mutex<HashMap<u64, Activity>>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Slot {
    /// The requests of the connection in this slot.
    pub fn activity(&self) -> &Activity {
        &self.activity
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// Connection slots per client address: at most `per_client` connections
/// from one address at once, except from the trusted addresses (a load
/// balancer in front of several instances connects from one address and
/// may use every slot).
#[derive(Clone)]
pub struct PerClient {
    per_client: usize,
    trusted: Vec<IpAddr>,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerClient {
    /// `per_client` connections per address (at least 1); `trusted`
    /// addresses have no share of their own.
    pub fn new(per_client: usize, trusted: Vec<IpAddr>) -> PerClient {
        PerClient { per_client: per_client.max(1), trusted, held: Arc::default() }
    }

    /// Whether `ip` is a trusted proxy's address (no share of its own).
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.contains(&canonical(ip))
    }

    /// A slot for a connection from `ip`, held until the returned value is
    /// dropped; `None` when `ip` already holds its share.
    pub fn take(&self, ip: IpAddr) -> Option<ClientSlot> {
        let ip = canonical(ip);
        if self.trusted.contains(&ip) {
            return Some(ClientSlot { ip, held: None });
        }
        let ip = share_of(ip);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= self.per_client {
            return None;
        }
        *n += 1;
        Some(ClientSlot { ip, held: Some(self.held.clone()) })
    }
}

/// One connection's place in its address's share.
pub struct ClientSlot {
    ip: IpAddr,
    held: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Some(held) = &self.held {
            let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = held.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&self.ip);
                }
            }
        }
    }
}

/// The address whose share a client takes: its IPv4 address, or the /64
/// its IPv6 address lies in (one host is commonly given a whole /64, so
/// counting single addresses would give it millions of shares).
fn share_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// An IPv4 client on a dual-stack socket arrives as `::ffff:a.b.c.d`;
/// it is the same client as `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;

    use super::*;

    #[test]
    fn one_address_holds_at_most_its_share_and_gets_it_back() {
        let slots = PerClient::new(2, vec!["10.0.0.9".parse().unwrap()]);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let (s1, s2) = (slots.take(a).unwrap(), slots.take(a).unwrap());
        assert!(slots.take(a).is_none());
        assert!(slots.take("::ffff:10.0.0.1".parse().unwrap()).is_none(), "the same client over IPv6");
        assert!(slots.take("10.0.0.2".parse().unwrap()).is_some(), "another address has its own share");
        // IPv6 clients are counted by their /64.
        let v6: Vec<ClientSlot> = ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9"]
            .iter()
            .map(|a| slots.take(a.parse().unwrap()).unwrap())
            .collect();
        assert!(slots.take("2001:db8:1:2:abcd::1".parse().unwrap()).is_none(), "the same /64");
        assert!(slots.take("2001:db8:1:3::1".parse().unwrap()).is_some(), "another /64");
        drop(v6);
        drop(s1);
        let s3 = slots.take(a).unwrap();
        let trusted: Vec<ClientSlot> = (0..10).map(|_| slots.take("10.0.0.9".parse().unwrap()).unwrap()).collect();
        assert_eq!(trusted.len(), 10);
        drop((s2, s3));
        assert!(slots.held.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_gives_the_longest_idle_slot_to_a_new_connection() {
        let slots = Slots::new(2);
        let busy = slots.admit().await;
        let _request = busy.activity().begin();
        let idle = slots.admit().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let evicted = tokio::spawn({
            let a = idle.activity().clone();
            async move { a.evicted().await }
        });
        let t0 = Instant::now();
        let admit = tokio::spawn(async move {
            let slots = slots;
            let s = slots.admit().await;
            (slots, s)
        });
        evicted.await.unwrap();
        assert!(busy.activity().inner.evict.notified().now_or_never().is_none(), "a busy connection is kept");
        drop(idle);
        let (slots, _new) = admit.await.unwrap();
        assert!(t0.elapsed() <= EVICT_IDLE_AFTER);
        assert_eq!(slots.held.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_a_body_that_does_not_come_makes_way() {
        let slots = Slots::new(2);
        let working = slots.admit().await;
        let _working_request = working.activity().begin();
        let stalled = slots.admit().await;
        let _stalled_request = stalled.activity().begin();
        // Its body is waiting for bytes (as RequestBody notes on Pending).
        stalled.activity().inner.bodies_waiting.fetch_add(1, Ordering::AcqRel);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(stalled.activity().idle_since().is_some() && working.activity().idle_since().is_none());
        let evicted = tokio::spawn({
            let a = stalled.activity().clone();
            async move { a.evicted().await }
        });
        let t0 = Instant::now();
        let admit = tokio::spawn(async move {
            let s = slots.admit().await;
            (slots, s)
        });
        evicted.await.unwrap();
        assert!(t0.elapsed() <= EVICT_IDLE_AFTER, "{:?}", t0.elapsed());
        assert!(working.activity().inner.evict.notified().now_or_never().is_none(), "a request being worked on stays");
        drop(stalled);
        admit.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_taking_what_is_written_expires_a_slow_share_does_not() {
        let (hour, send) = (Duration::from_secs(3600), Duration::from_secs(2));
        let a = Activity::new();
        // Watched from its acceptance: the first request comes after.
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.expired(hour, hour, send).await }
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
    async fn a_connection_expires_without_a_request_and_when_idle_never_mid_request() {
        let (first, idle) = (Duration::from_secs(5), Duration::from_secs(20));
        let a = Activity::new();
        let t0 = Instant::now();
        a.expired(first, idle, idle).await;
        assert_eq!(t0.elapsed(), first, "no request: the first-request deadline");

        let a = Activity::new();
        let done = a.begin();
        let waiter = tokio::spawn({
            let a = a.clone();
            async move { a.expired(first, idle, idle).await }
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
