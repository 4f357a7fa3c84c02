//! `smbgate serve`: connects the SMB pool, opens the store, and serves the
//! S3 API over HTTP/1.1 and HTTP/2 until SIGINT or SIGTERM, then drains
//! in-flight requests.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use hyper_util::server::graceful::GracefulShutdown;
use smb_client::{ClientConfig, Pool, PoolConfig};
use smb_proto::NtStatus;
use tokio::net::TcpListener;

use crate::config::{secret, ServeArgs, ShareUrl};
use crate::s3::Gateway;
use crate::store::{Store, StoreError, StoreOptions};

/// How long in-flight requests may run after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything `serve` needs, resolved and connected; built by [`prepare`].
pub struct Prepared {
    listener: TcpListener,
    service: crate::front::Front,
    limits: HttpLimits,
}

/// Limits on the HTTP side (see `ServeArgs`).
#[derive(Debug, Clone, Copy)]
struct HttpLimits {
    max_connections: usize,
    header_read_timeout: Duration,
}

impl Prepared {
    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// Explains an SMB connection failure in one line.
fn smb_startup_error(url: &ShareUrl, user: &str, e: smb_client::Error) -> String {
    match e.status() {
        Some(NtStatus::STATUS_LOGON_FAILURE) | Some(NtStatus::STATUS_WRONG_PASSWORD) => {
            format!("SMB login to {}:{} as {user:?} failed: wrong user name or password", url.host, url.port)
        }
        Some(NtStatus::STATUS_BAD_NETWORK_NAME) => {
            format!("share {:?} does not exist on {}:{}", url.share, url.host, url.port)
        }
        Some(NtStatus::STATUS_ACCESS_DENIED) | Some(NtStatus::STATUS_NETWORK_ACCESS_DENIED) => {
            format!("access to share {:?} denied for {user:?}", url.share)
        }
        _ => match e {
            smb_client::Error::Io(m) => format!("cannot reach SMB server {}:{}: {m}", url.host, url.port),
            smb_client::Error::Timeout(m) => format!("SMB server {}:{} did not answer ({m})", url.host, url.port),
            other => format!("SMB server {}:{}: {other}", url.host, url.port),
        },
    }
}

/// Validates settings, connects to the share and binds the listener.
///
/// Errors: a one-line reason (bad URL, missing keys, unreachable server,
/// bad password, missing share or path, port in use).
pub async fn prepare(args: &ServeArgs) -> Result<Prepared, String> {
    let url = ShareUrl::parse(&args.share)?;
    let smb_password = secret(&args.smb_password, &args.smb_password_file)?.unwrap_or_default();
    let secret_key = secret(&args.secret_key, &args.secret_key_file)?;
    let auth = match (&args.access_key, &secret_key) {
        (Some(a), Some(s)) if !a.is_empty() && !s.is_empty() => Some((a.clone(), s.clone())),
        _ if args.anonymous => None,
        _ => {
            return Err("no S3 credentials: set --access-key and --secret-key (or --secret-key-file), \
                        or pass --anonymous to allow unsigned requests"
                .into())
        }
    };
    let addr = format!("{}:{}", url.host, url.port);
    let mut client = ClientConfig::new(&addr, &args.smb_user, &smb_password);
    client.domain = args.smb_domain.clone();
    client.require_signing = args.smb_sign;
    client.require_encryption = args.smb_encrypt;
    client.max_io_size = args.io_size.max(64 << 10);
    let pool = Pool::connect(PoolConfig::new(client, &url.share, args.pool_size))
        .await
        .map_err(|e| smb_startup_error(&url, &args.smb_user, e))?;
    let opts = StoreOptions {
        segment_size: args.segment_size,
        prefetch: args.prefetch,
        put_parallel: args.put_parallel,
        read_ahead_budget: args.read_ahead_budget,
        write_behind_budget: args.write_behind_budget,
        ..Default::default()
    };
    let store = Store::open(pool.clone(), &url.path, opts).await.map_err(|e| match e {
        StoreError::InvalidArgument(m) => m,
        other => format!("cannot open share root: {other}"),
    })?;
    let mut builder = s3s::service::S3ServiceBuilder::new(Gateway::new(store, &args.region));
    if let Some((ak, sk)) = auth {
        builder.set_auth(crate::front::SingleKey::new(ak, sk));
    }
    let listener =
        TcpListener::bind(args.listen).await.map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    // Once startup has succeeded, so that a failure stays one line.
    if let Ok(t) = pool.get().await {
        let n = &t.session().negotiated;
        tracing::info!(
            dialect = format_args!("{:#06x}", n.dialect),
            signing = ?n.signing,
            every_message_signed = n.sign_all,
            cipher = ?n.cipher,
            every_message_encrypted = n.encrypt_all || t.is_encrypted(),
            "SMB session"
        );
    }
    let limits = HttpLimits {
        max_connections: args.max_connections,
        header_read_timeout: Duration::from_secs(args.header_read_timeout),
    };
    Ok(Prepared { listener, service: crate::front::Front::new(builder.build(), pool), limits })
}

/// Serves until `shutdown` resolves, then stops accepting and waits (up to
/// 30 s) for in-flight requests.
pub async fn run(p: Prepared, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let mut builder = ConnBuilder::new(TokioExecutor::new());
    // hyper's header-read timeout needs a timer; without one it is off.
    builder.http1().timer(TokioTimer::new()).header_read_timeout(p.limits.header_read_timeout);
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(p.limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        // A free connection slot first: past the cap, clients wait in the
        // kernel's listen backlog instead of costing memory here.
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.expect("never closed"),
            _ = &mut shutdown => break,
        };
        tokio::select! {
            accepted = p.listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let conn = builder.serve_connection(TokioIo::new(stream), p.service.clone()).into_owned();
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                    }
                    drop(slot);
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(p.listener); // refuse new connections while draining
    tracing::info!("shutting down: draining in-flight requests");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("drain timed out; exiting with requests still open");
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
