//! The PROXY protocol (HAProxy's, versions 1 and 2) on connections from a
//! trusted proxy (`--proxy-protocol` with `--trusted-proxy`): the header
//! the proxy sends before anything else names the client's own address,
//! which then stands for the connection in logs, the access log and the
//! per-client connection share. Only trusted proxies' connections are read
//! this way (from anyone else a header would be a forged address, and is
//! just a malformed request), and from them a header is required. The
//! parsing is the `ppp` crate's; this module reads exactly the header's
//! bytes off the connection, so that what follows (TLS, HTTP) is untouched.
//! A trusted proxy's connection without a usable header is logged at WARN,
//! rate-limited ([`log_closed`]).

use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The 12 bytes a version 2 header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 header, CRLF included.
const V1_MAX: usize = 107;
/// The most bytes of a version 2 header after its 16 fixed ones: the
/// addresses (at most 216 bytes, for UNIX sockets) and a few TLVs. A
/// header claiming more is refused rather than read.
const V2_MAX_BODY: usize = 1024;

/// Why a trusted proxy's connection did not start with a usable header.
#[derive(Debug)]
pub enum ProxyHeaderError {
    /// The first bytes are no PROXY header (the proxy is not set to send
    /// one: HAProxy's `send-proxy` or `send-proxy-v2`).
    Missing,
    /// A version 1 line over 107 bytes, or a version 2 header claiming more
    /// than [`V2_MAX_BODY`] bytes.
    TooLong,
    /// The header does not parse: what the parser said.
    Malformed(String),
    /// The connection failed or closed before the header was complete.
    Io(std::io::Error),
}

impl std::fmt::Display for ProxyHeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyHeaderError::Missing => write!(f, "no PROXY protocol header from a trusted proxy"),
            ProxyHeaderError::TooLong => write!(f, "PROXY protocol header too long"),
            ProxyHeaderError::Malformed(why) => write!(f, "malformed PROXY protocol header: {why}"),
            ProxyHeaderError::Io(e) => write!(f, "PROXY protocol header not read: {e}"),
        }
    }
}

impl std::error::Error for ProxyHeaderError {}

impl From<std::io::Error> for ProxyHeaderError {
    fn from(e: std::io::Error) -> Self {
        ProxyHeaderError::Io(e)
    }
}

/// Reads one PROXY protocol header (version 1 or 2) from the start of
/// `stream`, and no byte past it. Returns the client's address, or `None`
/// where the header names none: a version 2 LOCAL command (the proxy's own
/// health check), version 1 `UNKNOWN`, or an address family other than
/// IPv4 and IPv6; the connection's peer then stands for itself.
///
/// Errors: [`ProxyHeaderError`].
pub async fn read_client_addr<S: AsyncRead + Unpin>(stream: &mut S) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await?;
    if &head == V2_SIGNATURE {
        let mut fixed = [0u8; 4];
        stream.read_exact(&mut fixed).await?;
        let len = usize::from(u16::from_be_bytes([fixed[2], fixed[3]]));
        if len > V2_MAX_BODY {
            return Err(ProxyHeaderError::TooLong);
        }
        let mut header = Vec::with_capacity(16 + len);
        header.extend_from_slice(&head);
        header.extend_from_slice(&fixed);
        header.resize(16 + len, 0);
        stream.read_exact(&mut header[16..]).await?;
        let parsed = ppp::v2::Header::try_from(header.as_slice()).map_err(|e| malformed(&e))?;
        return Ok(match (parsed.command, parsed.addresses) {
            (ppp::v2::Command::Local, _) => None,
            (_, ppp::v2::Addresses::IPv4(a)) => Some(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port)),
            (_, ppp::v2::Addresses::IPv6(a)) => Some(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port)),
            _ => None,
        });
    }
    if !head.starts_with(b"PROXY ") {
        return Err(ProxyHeaderError::Missing);
    }
    // A line: read up to its CRLF, a byte at a time, so nothing after it
    // is taken from the connection.
    let mut line = head.to_vec();
    while !line.ends_with(b"\r\n") {
        if line.len() == V1_MAX {
            return Err(ProxyHeaderError::TooLong);
        }
        line.push(stream.read_u8().await?);
    }
    let parsed = ppp::v1::Header::try_from(line.as_slice()).map_err(|e| malformed(&e))?;
    Ok(match parsed.addresses {
        ppp::v1::Addresses::Tcp4(a) => Some(SocketAddr::new(IpAddr::V4(a.source_address), a.source_port)),
        ppp::v1::Addresses::Tcp6(a) => Some(SocketAddr::new(IpAddr::V6(a.source_address), a.source_port)),
        ppp::v1::Addresses::Unknown => None,
    })
}

/// The least time between two WARN lines about trusted proxies'
/// connections closed for their header.
pub const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Logs a trusted proxy's connection from `peer`, closed because it did not
/// start with a usable PROXY header (`e`). A missing, too long or malformed
/// header means the proxy and the gateway disagree about the protocol (one
/// has `send-proxy`, the other not), which fails every request through it:
/// WARN, at most one line per [`WARN_INTERVAL`], which counts the ones left
/// out since the last. A connection that closed before its header was
/// complete (a port check) stays at DEBUG.
pub fn log_closed(peer: SocketAddr, e: &ProxyHeaderError) {
    if let ProxyHeaderError::Io(_) = e {
        tracing::debug!(%peer, error = %e, "connection from a trusted proxy closed");
        return;
    }
    static WARNED: Mutex<WarnWindow> = Mutex::new(WarnWindow { last: None, left_out: 0 });
    let logged = WARNED.lock().unwrap_or_else(|p| p.into_inner()).admit(Instant::now(), WARN_INTERVAL);
    match logged {
        Some(not_logged) => tracing::warn!(
            %peer, error = %e, not_logged_before = not_logged,
            "connection from a trusted proxy closed: it must start with a PROXY header (HAProxy's send-proxy or \
             send-proxy-v2 on its server lines), since --proxy-protocol is on"
        ),
        None => tracing::debug!(%peer, error = %e, "connection from a trusted proxy closed"),
    }
}

/// When a rate-limited line was last written, and how many were left out
/// since.
struct WarnWindow {
    last: Option<Instant>,
    left_out: u64,
}

impl WarnWindow {
    /// Whether a line may be written at `now`, `interval` after the last:
    /// `Some(lines left out since the last)` if so (and the count starts
    /// again), else `None` (and the line is counted).
    fn admit(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        if self.last.is_some_and(|l| now.saturating_duration_since(l) < interval) {
            self.left_out += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.left_out))
    }
}

fn malformed(e: &dyn std::fmt::Debug) -> ProxyHeaderError {
    ProxyHeaderError::Malformed(format!("{e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8]) -> (Result<Option<SocketAddr>, ProxyHeaderError>, Vec<u8>) {
        let mut r = bytes;
        let got = read_client_addr(&mut r).await;
        (got, r.to_vec())
    }

    fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend_from_slice(&[0x20 | command, family]);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[tokio::test]
    async fn version_1_names_the_client_and_leaves_the_request() {
        let (got, rest) = read(b"PROXY TCP4 192.0.2.7 10.0.0.1 51234 9000\r\nGET / HTTP/1.1\r\n").await;
        assert_eq!(got.unwrap(), Some("192.0.2.7:51234".parse().unwrap()));
        assert_eq!(rest, b"GET / HTTP/1.1\r\n");
        let (got, _) = read(b"PROXY TCP6 2001:db8::7 2001:db8::1 51234 9000\r\n").await;
        assert_eq!(got.unwrap(), Some("[2001:db8::7]:51234".parse().unwrap()));
        let (got, rest) = read(b"PROXY UNKNOWN\r\nGET").await;
        assert_eq!((got.unwrap(), rest.as_slice()), (None, b"GET".as_slice()));
    }

    #[tokio::test]
    async fn version_2_names_the_client_and_leaves_the_request() {
        let body = [[192, 0, 2, 7], [10, 0, 0, 1]].concat();
        let body = [body, 51234u16.to_be_bytes().to_vec(), 9000u16.to_be_bytes().to_vec()].concat();
        let mut bytes = v2(1, 0x11, &body);
        bytes.extend_from_slice(b"\x16\x03\x01");
        let (got, rest) = read(&bytes).await;
        assert_eq!(got.unwrap(), Some("192.0.2.7:51234".parse().unwrap()));
        assert_eq!(rest, b"\x16\x03\x01", "the TLS ClientHello after it is untouched");
        // LOCAL: the proxy's own connection (a health check).
        let (got, rest) = read(&[v2(0, 0, &[]), b"HEAD".to_vec()].concat()).await;
        assert_eq!((got.unwrap(), rest.as_slice()), (None, b"HEAD".as_slice()));
    }

    #[test]
    fn warnings_are_one_per_interval_and_count_the_ones_left_out() {
        let mut w = WarnWindow { last: None, left_out: 0 };
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(w.admit(t0, s(10)), Some(0));
        assert_eq!(w.admit(t0 + s(1), s(10)), None);
        assert_eq!(w.admit(t0 + s(9), s(10)), None);
        assert_eq!(w.admit(t0 + s(10), s(10)), Some(2));
        assert_eq!(w.admit(t0 + s(11), s(10)), None);
        assert_eq!(w.admit(t0 + s(30), s(10)), Some(1));
    }

    #[tokio::test]
    async fn anything_else_is_refused_with_a_reason() {
        let (got, _) = read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(matches!(got, Err(ProxyHeaderError::Missing)), "{got:?}");
        let long = [b"PROXY TCP4 ".as_slice(), &[b'1'; 200]].concat();
        assert!(matches!(read(&long).await.0, Err(ProxyHeaderError::TooLong)));
        let huge = v2(1, 0x11, &vec![0; 2000]);
        assert!(matches!(read(&huge).await.0, Err(ProxyHeaderError::TooLong)));
        assert!(matches!(read(b"PROXY TCP4 nonsense\r\n").await.0, Err(ProxyHeaderError::Malformed(_))));
        // Cut short: an I/O error, never a hang or a panic.
        assert!(matches!(read(b"PROXY TCP4 1.2.3.4").await.0, Err(ProxyHeaderError::Io(_))));
        assert!(matches!(read(&v2(1, 0x11, &[1, 2, 3])[..18]).await.0, Err(ProxyHeaderError::Io(_))));
    }
}
