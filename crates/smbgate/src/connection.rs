//! Serving one accepted HTTP connection: a trusted proxy's PROXY header,
//! the TLS handshake, HTTP/1.1 or HTTP/2 with their limits, and the
//! deadlines that close a connection (first request, idle, a client that
//! stops taking a response, the slot going to a newer connection). The
//! accept loop that hands connections here is `server`'s.

use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::conn_limits::{Watched, WatchedIo};
use crate::conn_slots::{Slot, Slots};

/// Limits on the HTTP side (see `ServeArgs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpLimits {
    pub(crate) max_connections: usize,
    /// The deadline for a connection's first request, and its idle timeout.
    pub(crate) header_read_timeout: Duration,
    /// The window over which a client that holds up its responses must
    /// take at least `send_min_rate` bytes a second.
    pub(crate) send_timeout: Duration,
    /// Least rate, in bytes a second, a client must take its responses at
    /// while it holds them up (0: anything but nothing).
    pub(crate) send_min_rate: u64,
    /// Connections from trusted proxies start with a PROXY header.
    pub(crate) proxy_protocol: bool,
}

/// HTTP/2 streams one connection may have open at once: each may buffer a
/// request body, so hyper's 200 would multiply every per-request limit.
const H2_MAX_STREAMS: u32 = 32;
/// How often an idle HTTP/2 connection is pinged, and how long the answer
/// may take before the connection is closed.
/// The pause after a failed accept (out of file descriptors, say) before
/// the next: the loop must not spin while the cause lasts, and a short
/// pause costs new clients little once it is gone.
pub(crate) const ACCEPT_RETRY: Duration = Duration::from_millis(50);

const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// The HTTP/1 and HTTP/2 server settings every connection is served with.
pub(crate) fn http_builder(limits: &HttpLimits) -> ConnBuilder<TokioExecutor> {
    let mut builder = ConnBuilder::new(TokioExecutor::new());
    // hyper's timeouts need a timer; without one they are off.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .keep_alive_interval(Some(H2_PING_INTERVAL))
        .keep_alive_timeout(H2_PING_TIMEOUT);
    builder
}

/// Serves one accepted connection until it ends, until it has had no
/// request in flight for the header-read timeout (counted from its
/// acceptance until its first request's headers are in: TLS handshake,
/// version sniff and headers together), until its client has held up its
/// responses for a send-timeout window while taking less than the least
/// send rate, or until its slot goes to a new connection. Dropping the connection drops its requests, which
/// closes their SMB handles.
pub(crate) async fn serve_one(
    mut stream: TcpStream,
    conn: Conn,
    limits: HttpLimits,
    builder: ConnBuilder<TokioExecutor>,
    service: crate::front::Front,
    watcher: hyper_util::server::graceful::Watcher,
    slot: &Slot,
) {
    let activity = slot.activity().clone();
    let Conn { peer, tls, behind_proxy } = conn;
    let serve = async {
        let mut peer = peer;
        // Behind a trusted proxy: its PROXY header first, within the
        // deadline of the first request, then the client's own share.
        let _client = match &behind_proxy {
            None => None,
            Some(per_client) => {
                match crate::proxy_protocol::read_client_addr(&mut stream).await {
                    Ok(client) => peer = client.unwrap_or(peer),
                    Err(e) => return crate::proxy_protocol::log_closed(peer, &e),
                }
                let Some(share) = per_client.take(peer.ip()) else {
                    tracing::debug!(%peer, "connection closed: its address holds its share of the connections");
                    return;
                };
                Some(share)
            }
        };
        let service = Watched { service, activity: activity.clone(), peer: Some(peer), tls: tls.is_some() };
        let stream = WatchedIo::new(stream, activity.clone());
        let result = match tls {
            None => watcher.watch(builder.serve_connection(TokioIo::new(stream), service).into_owned()).await,
            Some(acceptor) => match acceptor.accept(stream).await {
                Ok(s) => watcher.watch(builder.serve_connection(TokioIo::new(s), service).into_owned()).await,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            },
        };
        if let Err(e) = result {
            tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
        }
    };
    tokio::select! {
        _ = serve => {}
        _ = activity.expired(limits.header_read_timeout, limits.header_read_timeout, limits.send_timeout, limits.send_min_rate) => {
            tracing::debug!(%peer, "connection closed: no request in flight, or a response the client stopped taking")
        }
        _ = activity.evicted() => tracing::debug!(%peer, "connection closed: idle longest while every slot was taken"),
    }
}

/// Who an accepted connection is: its peer, the TLS acceptor of its
/// listener, and, for a trusted proxy's connection with `--proxy-protocol`,
/// the per-client shares its client takes from once the header names it.
pub(crate) struct Conn {
    pub(crate) peer: std::net::SocketAddr,
    pub(crate) tls: Option<TlsAcceptor>,
    pub(crate) behind_proxy: Option<crate::conn_slots::PerClient>,
}

/// Serves the operations listener until the process exits (it is not
/// drained: a scrape in progress at shutdown is simply cut). At most 64
/// connections at once (scrapers and probes need few), each closed after
/// `timeout` with no request in flight and making way for a new one when
/// idle, as on the S3 listener, so idle connections cannot keep a
/// readiness probe out.
pub(crate) async fn serve_admin(
    listener: TcpListener,
    admin: crate::admin::Admin,
    builder: ConnBuilder<TokioExecutor>,
    timeout: Duration,
) {
    let slots = Slots::new(64);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: accept failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let slot = slots.admit().await;
        let activity = slot.activity().clone();
        let service = Watched { service: admin.clone(), activity: activity.clone(), peer: None, tls: false };
        let conn = builder.serve_connection(TokioIo::new(stream), service).into_owned();
        tokio::spawn(async move {
            tokio::select! {
                _ = conn => {}
                _ = activity.expired(timeout, timeout, timeout, 0) => {}
                _ = activity.evicted() => {}
            }
            drop(slot);
        });
    }
}
