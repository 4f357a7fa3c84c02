//! `smbgate serve`: connects the SMB pool, opens the store, and serves the
//! S3 API over HTTP/1.1 and HTTP/2 (HTTPS with `--tls-cert`, optionally
//! with a plain-HTTP listener beside it) until SIGINT or SIGTERM, then
//! drains in-flight requests. SIGHUP reloads the TLS certificate and the
//! S3 users of the config file.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::conn_slots::Slots;
use crate::connection::{http_builder, serve_admin, serve_one, Conn, HttpLimits};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::config::{ServeArgs, ShareUrl};
use crate::s3::Gateway;
use crate::smb_startup;
use crate::store::share::Pool;
use crate::store::{Store, StoreError, StoreOptions};
use crate::tls::Certificates;

/// How long temp files of failed requests may take to be deleted, once the
/// requests are done, before the process exits.
const CLEANUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long in-flight requests may run after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// Everything `serve` needs, resolved and connected; built by [`prepare`].
pub struct Prepared {
    listener: TcpListener,
    /// The operations listener and what it serves (`--metrics-listen`).
    admin: Option<(TcpListener, crate::admin::Admin)>,
    /// The plain-HTTP listener next to a TLS one (`--listen-plain`).
    plain: Option<TcpListener>,
    /// Set when `listener` serves HTTPS.
    tls: Option<(Arc<Certificates>, TlsAcceptor)>,
    service: crate::front::Front,
    limits: HttpLimits,
    /// The connection share of each client address.
    per_client: crate::conn_slots::PerClient,
    /// The S3 users, read again on SIGHUP.
    users: UsersReload,
    /// The access log file, reopened on SIGHUP.
    access_log: Option<crate::access_log::AccessLogFile>,
    /// SIGHUP, caught from before `listener` was bound: a signal sent by
    /// anyone who saw the port open is a reload, never the default action
    /// (the end of the process).
    reload: ReloadSignal,
}

impl Prepared {
    /// Reopens `log` by its name on each SIGHUP (for logrotate).
    pub fn reopen_on_sighup(&mut self, log: crate::access_log::AccessLogFile) {
        self.access_log = Some(log);
    }

    /// What SIGHUP reloads: the TLS certificate, the users, the access log,
    /// each logged; with none of them, a line says there was nothing to
    /// reload, so a SIGHUP is never silent. The service manager hears of it
    /// (RELOADING=1, then READY=1).
    fn reload(&self) {
        notify(&[sd_notify::NotifyState::Reloading]);
        let mut said = reload_certificates(&self.tls);
        said |= self.users.reload();
        if let Some(log) = &self.access_log {
            said = true;
            match log.reopen() {
                Ok(()) => tracing::info!("SIGHUP: access log reopened"),
                Err(e) => tracing::error!(error = %e, "SIGHUP: access log not reopened; lines go to the file in use"),
            }
        }
        if !said {
            tracing::info!(
                "SIGHUP: nothing to reload (no TLS certificate, config file or access log file); \
                 other settings take effect at restart"
            );
        }
        notify(&[sd_notify::NotifyState::Ready]);
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// True if the main listener serves HTTPS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The operations listener's address, if one was asked for.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.admin.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// The plain-HTTP listener's address, if one was asked for next to TLS.
    pub fn plain_addr(&self) -> Option<std::net::SocketAddr> {
        self.plain.as_ref().and_then(|l| l.local_addr().ok())
    }
}

/// Validates settings, connects to the share and binds the listener.
///
/// Errors: a one-line reason (bad URL, missing keys, unreachable server,
/// bad password, missing share or path, port in use).
pub async fn prepare(args: &ServeArgs) -> Result<Prepared, String> {
    let settled = crate::settings_check::settle(args)?;
    let (url, users, anonymous, bodies, domain) =
        (settled.url, settled.users, settled.anonymous, settled.bodies, settled.domain);
    let tls = match settled.tls {
        Some(certs) => {
            let acceptor = certs.acceptor()?;
            Some((certs, acceptor))
        }
        None => None,
    };
    args.kerberos.prepare()?;
    let own = crate::users::SmbIdentity {
        user: args.smb_user.clone(),
        domain: args.smb_domain.clone(),
        password: settled.smb_password,
        keytab: None,
    };
    // One client (and so one Kerberos credential) for the DFS question and
    // the pool.
    let asked = smb_startup::client_config(args, &url, &own);
    let (target, dfs) = smb_startup::follow_dfs(&asked, &url, &own.user).await?;
    let dfs_servers = smb_startup::dfs_servers(&url, &target, &dfs);
    let url = target;
    let client = asked.on_server(&url.host);
    let template = crate::identities::PoolTemplate {
        client: client.clone(),
        kerberos: args.kerberos.clone(),
        dfs: dfs.clone(),
        dfs_servers,
        share: url.share.clone(),
        size: args.pool_size,
        max_pools: args.user_pools,
        idle: args.user_pool_idle,
    };
    let pool = smb_startup::connect(client, &url, &args.smb_user, args.pool_size, dfs.clone()).await?;
    let opts = store_options(args);
    let store = Store::open(pool.clone(), &url.path, opts.clone()).await.map_err(|e| match e {
        StoreError::InvalidArgument(m) => m,
        other => format!("cannot open share root: {other}"),
    })?;
    let metrics_token = settled.metrics_token;
    let roots = open_bucket_roots(args, &own, &opts, &url, &pool).await?;
    log_unserved_folders(&store, &roots).await;
    let identities = crate::identities::Identities::new(store, template, roots);
    let events = crate::events::Events::start(identities.clone(), &settled.targets, &args.region)?;
    crate::events::watcher::start(&events);
    let metrics = Arc::new(crate::metrics::Metrics::new(identities.clone(), bodies.clone(), &events));
    let cors = crate::cors_rules::Cache::new(identities.primary().clone());
    let gateway = Gateway::new(identities.clone(), &args.region, cors.clone(), events).with_sosapi(args.veeam_sosapi);
    let directory = crate::users::Directory::new(users);
    // The service behind the custom route for unusable Ranges: the same
    // gateway, checks and config; its requests carry no signature (see
    // ignored_range).
    let promises =
        crate::promises::Promises { encrypted_at_rest: args.encrypted_at_rest, sse_c_over_http: args.sse_c_over_http };
    let inner = s3_builder(gateway.clone(), domain.as_ref(), &directory, anonymous.clone(), promises).build();
    let post = crate::s3s_patches::post_object::PostObject::new(
        gateway.clone(),
        directory.clone(),
        anonymous.clone(),
        &args.region,
        args.sigv2,
        domain.clone(),
        promises,
        args.header_read_timeout,
        args.anonymous_form_redirect,
    );
    let anonymous_for_routes = anonymous.clone();
    let mut builder = s3_builder(gateway, domain.as_ref(), &directory, anonymous, promises);
    let access = crate::access_check::Access { anonymous: anonymous_for_routes, users: directory.clone(), promises };
    let delete = crate::s3s_patches::delete_objects::DeleteObjects::new(access, domain.clone());
    builder.set_route(crate::routes::Routes::new(inner, delete));
    let reload = reload_signal();
    let listener =
        TcpListener::bind(args.listen).await.map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let admin = match args.metrics_listen {
        Some(a) => {
            let l = TcpListener::bind(a).await.map_err(|e| format!("cannot listen on {a}: {e}"))?;
            Some((l, crate::admin::Admin::new(metrics.clone(), pool.clone(), metrics_token)))
        }
        None => None,
    };
    let plain = match args.listen_plain {
        Some(a) => Some(TcpListener::bind(a).await.map_err(|e| format!("cannot listen on {a}: {e}"))?),
        None => None,
    };
    // Once startup has succeeded, so that a failure stays one line.
    log_opened(&identities);
    smb_startup::log_session(&pool).await;
    let limits = HttpLimits {
        max_connections: args.max_connections,
        header_read_timeout: args.header_read_timeout,
        send_timeout: args.send_timeout,
        send_min_rate: args.send_min_rate,
        proxy_protocol: args.proxy_protocol,
    };
    let rules = crate::precheck::Rules { region: args.region.clone(), sigv2: args.sigv2 };
    let pace = crate::paced_body::Pace { per_chunk: args.body_read_timeout, min_rate: args.body_min_rate };
    let service = crate::front::Front::new(
        builder.build(),
        pool,
        metrics,
        rules,
        directory.clone(),
        bodies,
        cors,
        domain,
        post,
        pace,
    );
    let users = UsersReload { directory, args: args.clone() };
    let per_client = crate::conn_slots::PerClient::new(
        args.max_connections_per_client.unwrap_or(args.max_connections / 4),
        args.trusted_proxies.clone(),
    );
    crate::config_file::warn_if_secrets_exposed(args);
    if let Some((l, admin)) = &admin {
        l.local_addr().map(|a| admin.warn_if_open(a)).ok();
    }
    Ok(Prepared { listener, admin, plain, tls, service, limits, per_client, users, access_log: None, reload })
}

/// The store's settings from the command line and config file.
fn store_options(args: &ServeArgs) -> StoreOptions {
    StoreOptions {
        segment_size: args.segment_size,
        prefetch: args.prefetch,
        put_parallel: args.put_parallel,
        read_ahead_budget: args.read_ahead_budget,
        write_behind_budget: args.write_behind_budget,
        multipart_expiry: args.multipart_expiry,
        sweep_interval: args.sweep_interval,
        body_read_timeout: args.body_read_timeout,
        body_min_rate: args.body_min_rate,
        list_max_dirs: args.list_max_dirs,
        list_window: args.list_window,
        list_spill: crate::store::listings::spill_runs::SpillBudget::new(args.list_spill_size),
        versions_per_folder: args.versions_per_folder,
        cache: crate::store::reads::object_cache::CacheOptions {
            enabled: args.cache,
            entries: args.cache_entries,
            bytes: usize::try_from(args.cache_size).unwrap_or(usize::MAX),
            object_max: args.cache_object_max as u32,
            max_age: args.cache_max_age,
        },
        listing_cache: crate::store::listings::listing_cache::ListingBudget::new(
            usize::try_from(args.listing_cache_size).unwrap_or(usize::MAX),
        ),
        ..Default::default()
    }
}

/// Says (at INFO) which folders of the share root no bucket name can reach
/// and no `[buckets.NAME]` of `roots` serves; a root that cannot be listed
/// is said at DEBUG only (startup goes on).
async fn log_unserved_folders(store: &Store, roots: &std::collections::HashMap<String, crate::identities::BucketRoot>) {
    match store.buckets().unservable_folders().await {
        Ok(folders) => {
            let folders: Vec<&String> = folders.iter().filter(|f| !roots.values().any(|r| r.folder == **f)).collect();
            if !folders.is_empty() {
                let names: Vec<String> = folders.iter().map(|f| format!("'{f}'")).collect();
                tracing::info!(
                    folders = %names.join(", "),
                    "folders of the share root that no bucket name can reach are not served; serve one under a \
                     name of your choice with [buckets.NAME] path = \"FOLDER\" in the config file"
                );
            }
        }
        Err(e) => tracing::debug!(error = %e, "the share root's folders could not be listed"),
    }
}

/// Says (at INFO) how the share root and each configured bucket keep
/// their records, and whether names are matched without case.
fn log_opened(identities: &crate::identities::Identities) {
    let primary = identities.primary();
    tracing::info!(
        case_insensitive = primary.root().case_insensitive(),
        metadata = primary.root().records().describe(),
        "store opened"
    );
    for name in identities.configured() {
        let metadata = identities.configured_store(name).map(|s| s.root().records().describe());
        tracing::info!(bucket = name, metadata, "configured bucket opened");
    }
}

/// An s3s service builder over `gateway` with smbgate's config, the
/// virtual-host `domain` if set, and `users` as its auth and access check,
/// serving unsigned requests as `anonymous` says and refusing what
/// `promises` says the gateway does not give.
fn s3_builder(
    gateway: Gateway,
    domain: Option<&crate::vhost::Domain>,
    users: &crate::users::Directory,
    anonymous: crate::users::Anonymous,
    promises: crate::promises::Promises,
) -> s3s::service::S3ServiceBuilder {
    let mut builder = s3s::service::S3ServiceBuilder::new(gateway);
    // XML bodies (CompleteMultipartUpload, DeleteObjects) are read whole:
    // 4 MiB holds 10,000 parts or 1,000 keys of 1,024 bytes with room to
    // spare, where s3s's default of 20 MB per request adds up fast over
    // --max-connections requests.
    let mut s3_config = s3s::config::S3Config::default();
    s3_config.xml_max_body_size = crate::precheck::MAX_XML_BODY;
    builder.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(s3_config))));
    if let Some(d) = domain {
        builder.set_host(d.clone());
    }
    // Always, even with no users: s3s runs the access check (which names
    // each request's operation, bucket and key for the logs and metrics)
    // only with auth set, and a signed request to a gateway without users
    // is then an unknown key (403 InvalidAccessKeyId, as AWS answers one)
    // rather than 501.
    builder.set_auth(users.clone());
    builder.set_access(crate::access_check::Access { anonymous, users: users.clone(), promises });
    builder
}

/// The configured buckets (`[buckets.NAME]` of the config file), each
/// connected with the gateway's own account on its server (the bucket's
/// `smb_user`, else `--smb-user`) and opened as a store of that one
/// bucket.
///
/// Errors: one line naming the bucket: the file, an unreachable server, a
/// refused login, a missing share or directory.
async fn open_bucket_roots(
    args: &ServeArgs,
    own: &crate::users::SmbIdentity,
    opts: &StoreOptions,
    main: &ShareUrl,
    main_pool: &Pool,
) -> Result<std::collections::HashMap<String, crate::identities::BucketRoot>, String> {
    let Some(path) = &args.config else { return Ok(Default::default()) };
    let mut roots = std::collections::HashMap::new();
    for mut b in crate::config_file::ConfigFile::load(path)?.buckets(main)? {
        let id = b.smb.as_ref().unwrap_or(own);
        let user = id.user.as_str();
        let mut client = smb_startup::client_config(args, &b.url, id);
        let (mut dfs, mut dfs_servers) = (None, None);
        let pool = match b.on_main_share {
            // A folder of --share: the gateway's own connections reach it.
            true => main_pool.clone(),
            false => {
                let (target, link) = smb_startup::follow_dfs(&client, &b.url, user)
                    .await
                    .map_err(|e| format!("bucket {}: {e}", b.name))?;
                client = client.on_server(&target.host);
                dfs_servers = smb_startup::dfs_servers(&b.url, &target, &link);
                b.url = target;
                dfs = link;
                smb_startup::connect(client.clone(), &b.url, user, args.pool_size, dfs.clone())
                    .await
                    .map_err(|e| format!("bucket {}: {e}", b.name))?
            }
        };
        let store = Store::open_bucket(pool, &b.url.path, &b.name, opts.clone()).await.map_err(|e| match e {
            StoreError::InvalidArgument(m) => format!("bucket {}: {m}", b.name),
            other => format!("bucket {}: cannot open its directory: {other}", b.name),
        })?;
        let template = crate::identities::PoolTemplate {
            client,
            kerberos: args.kerberos.clone(),
            dfs,
            dfs_servers,
            share: b.url.share.clone(),
            size: args.pool_size,
            max_pools: args.user_pools,
            idle: args.user_pool_idle,
        };
        // The folder's name in --share's root, for the startup notice.
        let folder = match b.on_main_share {
            true => {
                b.url.path.strip_prefix(main.path.as_str()).unwrap_or(&b.url.path).trim_start_matches('\\').to_string()
            }
            false => String::new(),
        };
        roots.insert(b.name, crate::identities::BucketRoot { store, template, folder });
    }
    Ok(roots)
}

/// What SIGHUP reloads of the users: the table in force and the settings
/// it is read from again.
struct UsersReload {
    directory: crate::users::Directory,
    args: ServeArgs,
}

impl UsersReload {
    /// Reads the users again. A file that does not load, or leaves no user
    /// where the gateway had some, is logged at ERROR and the users in
    /// force stay; requests in flight finish as the user they started as.
    /// A gateway that started with no user (unsigned requests only) reads
    /// none, which is logged. Returns false without a config file (nothing
    /// logged).
    fn reload(&self) -> bool {
        if self.args.config.is_none() {
            return false;
        }
        if self.directory.is_empty() {
            // Users would change what unsigned requests may do (see
            // `Anonymous::from_settings`), which is decided at startup.
            tracing::info!(
                "SIGHUP: the config file's users not read again: the gateway started with none (unsigned \
                 requests only), and adding some takes a restart"
            );
            return true;
        }
        match crate::config_file::users_of(&self.args) {
            Ok(t) if t.is_empty() => {
                tracing::error!("SIGHUP: the config file now lists no user; the users in force stay")
            }
            Ok(t) => {
                let n = t.len();
                self.directory.replace(t);
                tracing::info!(users = n, "SIGHUP: users reloaded (other settings take effect at restart)");
                crate::config_file::warn_if_secrets_exposed(&self.args);
            }
            Err(e) => tracing::error!(error = %e, "SIGHUP: users not reloaded; the ones in force stay"),
        }
        true
    }
}

/// Serves until `shutdown` resolves, then stops accepting and waits (up to
/// 30 s) for in-flight requests. SIGHUP meanwhile reloads the TLS
/// certificate and key.
pub async fn run(mut p: Prepared, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
    let builder = http_builder(&p.limits);
    let slots = Slots::new(p.limits.max_connections);
    let mut reload = std::mem::take(&mut p.reload);
    if let Some((listener, admin)) = p.admin.take() {
        tokio::spawn(serve_admin(listener, admin, builder.clone(), p.limits.header_read_timeout));
    }
    tokio::pin!(shutdown);
    // The share is open and every listener bound (see `prepare`): a
    // service manager may count the gateway started.
    notify(&[sd_notify::NotifyState::Ready]);
    loop {
        let (accepted, tls) = loop {
            tokio::select! {
                a = p.listener.accept() => break (a, p.tls.as_ref().map(|(_, acc)| acc.clone())),
                a = accept_plain(&p.plain) => break (a, None),
                _ = reload.recv() => p.reload(),
                _ = &mut shutdown => return drain(p, graceful).await,
            }
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(crate::connection::ACCEPT_RETRY).await;
                continue;
            }
        };
        let Some(client) = p.per_client.take(peer.ip()) else {
            tracing::debug!(%peer, "connection closed: its address holds its share of the connections");
            continue;
        };
        // Then a slot (see `Slots::admit`): while every slot is busy, this
        // one connection waits here and the rest in the kernel's listen
        // backlog, costing nothing. SIGHUP is heard meanwhile.
        let slot = loop {
            tokio::select! {
                s = slots.admit() => break s,
                _ = reload.recv() => p.reload(),
                _ = &mut shutdown => return drain(p, graceful).await,
            }
        };
        let _ = stream.set_nodelay(true);
        let (builder, service, watcher) = (builder.clone(), p.service.clone(), graceful.watcher());
        let limits = p.limits;
        // The client behind a trusted proxy takes its own share once its
        // address is read (see `serve_one`).
        let behind_proxy = (limits.proxy_protocol && p.per_client.is_trusted(peer.ip())).then(|| p.per_client.clone());
        tokio::spawn(async move {
            let conn = Conn { peer, tls, behind_proxy };
            serve_one(stream, conn, limits, builder, service, watcher, &slot).await;
            drop((client, slot));
        });
    }
}

/// Accepts on the plain-HTTP listener beside TLS; never resolves without one.
async fn accept_plain(l: &Option<TcpListener>) -> std::io::Result<(TcpStream, std::net::SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// Refuses new connections, then waits (up to 30 s) for in-flight requests.
/// Tells a service manager `state` (systemd's `Type=notify`, through
/// `$NOTIFY_SOCKET`); without one, nothing happens.
fn notify(state: &[sd_notify::NotifyState]) {
    if let Err(e) = sd_notify::notify(false, state) {
        tracing::warn!(error = %e, "could not notify the service manager");
    }
}

async fn drain(p: Prepared, graceful: GracefulShutdown) {
    notify(&[sd_notify::NotifyState::Stopping]);
    drop(p.listener);
    drop(p.plain);
    tracing::info!("shutting down: draining in-flight requests");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await.is_err() {
        tracing::warn!("drain timed out; exiting with requests still open");
    }
    crate::store::share::finish_cleanups(CLEANUP_TIMEOUT).await;
}

/// SIGHUP: reads the TLS files again. A bad file is logged and the
/// certificate in force stays. Returns false without TLS (nothing logged).
fn reload_certificates(tls: &Option<(Arc<Certificates>, TlsAcceptor)>) -> bool {
    let Some((certs, _)) = tls else { return false };
    match certs.reload() {
        Ok(()) => tracing::info!("SIGHUP: TLS certificate reloaded"),
        Err(e) => tracing::error!(error = %e, "SIGHUP: TLS certificate not reloaded; the previous one stays"),
    }
    true
}

/// SIGHUP as a stream of reload requests (never fires off Unix; the
/// default one never fires).
#[derive(Default)]
struct ReloadSignal(#[cfg(unix)] Option<tokio::signal::unix::Signal>);

impl ReloadSignal {
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = &mut self.0 {
            if s.recv().await.is_some() {
                return;
            }
        }
        std::future::pending::<()>().await
    }
}

fn reload_signal() -> ReloadSignal {
    #[cfg(unix)]
    {
        let s = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        if let Err(e) = &s {
            tracing::warn!(error = %e, "no SIGHUP handler; certificates cannot be reloaded");
        }
        ReloadSignal(s.ok())
    }
    #[cfg(not(unix))]
    ReloadSignal()
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
