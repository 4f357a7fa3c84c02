//! A pool of N connections to one share, each with its own session and
//! tree. Requests go to the least-loaded healthy connection; a broken one is
//! replaced in the background, and idle ones are probed with ECHO; a
//! Kerberos session is replaced before its ticket ends. A
//! connection lost with requests outstanding halves the pool's in-flight
//! budget ([`Pool::in_flight_budget`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use crate::aimd::Aimd;
use crate::error::{Error, Result};
use crate::pipeline::DEFAULT_IN_FLIGHT_BYTES;
use crate::session::{ClientConfig, Session};
use crate::tree::Tree;
use crate::waits;

/// Pool settings.
#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// How to reach and authenticate.
    pub client: ClientConfig,
    /// Share name.
    pub share: String,
    /// Number of connections.
    pub size: usize,
    /// Idle connections are probed with ECHO this often.
    pub echo_interval: Duration,
    /// How long [`Pool::get`] waits for a healthy connection.
    pub acquire_timeout: Duration,
    /// Largest in-flight budget per stream, in bytes (the AIMD ceiling).
    pub max_in_flight: usize,
    /// Smallest in-flight budget per stream, in bytes (the AIMD floor).
    pub min_in_flight: usize,
    /// The DFS link `client` and `share` were found through, if any: each
    /// new connection goes where it points now (its server and share
    /// replace `client`'s and `share`).
    pub dfs: Option<std::sync::Arc<crate::dfs::DfsLink>>,
    /// With `dfs`, the only servers (as referrals name them, in any case)
    /// this pool's connections may go to; a link that comes to name
    /// another is refused ([`Error::DfsTargetRefused`]), so that a
    /// referral cannot send this pool's credentials to a server nobody
    /// named. `None`: wherever the link points.
    pub dfs_servers: Option<Vec<String>>,
}

/// A connection lost with no more than this outstanding was not lost to
/// load (an idle drop, an ECHO probe, one small GET's 1 MiB first READ):
/// the budget stays.
const LOSS_UNDER_LOAD: usize = 4 << 20;

impl PoolConfig {
    /// `size` connections to `share`, ECHO every 30 s.
    pub fn new(client: ClientConfig, share: &str, size: usize) -> PoolConfig {
        PoolConfig {
            client,
            share: share.to_string(),
            size: size.max(1),
            echo_interval: Duration::from_secs(30),
            acquire_timeout: Duration::from_secs(10),
            max_in_flight: DEFAULT_IN_FLIGHT_BYTES,
            min_in_flight: 1 << 20,
            dfs: None,
            dfs_servers: None,
        }
    }
}

struct Slot {
    tree: RwLock<Option<Tree>>,
    reconnecting: AtomicBool,
}

struct PoolInner {
    cfg: PoolConfig,
    slots: Vec<Slot>,
    aimd: Mutex<Aimd>,
    /// Connections replaced after a loss, since the pool opened.
    reconnects: std::sync::atomic::AtomicU64,
    /// The spare connection ([`Pool::spare`]), opened on first use.
    spare: tokio::sync::Mutex<Spare>,
}

/// The spare connection, and when it last could not be made.
#[derive(Default)]
struct Spare {
    tree: Option<Tree>,
    failed_at: Option<Instant>,
}

/// What a pool's connections are doing now, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Slots in the pool ([`PoolConfig`]'s size).
    pub size: usize,
    /// Connections up and usable.
    pub healthy: usize,
    /// Slots whose connection is down and being re-established.
    pub reconnecting: usize,
    /// Connections replaced after a loss, since the pool opened.
    pub reconnects: u64,
}

/// A pool of authenticated tree connections. Clone to share.
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

async fn open_tree(cfg: &PoolConfig) -> Result<Tree> {
    let Some(link) = &cfg.dfs else {
        let s = Session::connect(&cfg.client).await?;
        return s.tree_connect(&cfg.share).await;
    };
    let target = link.target().await;
    if let Some(allowed) = &cfg.dfs_servers {
        if !allowed.iter().any(|s| s.eq_ignore_ascii_case(&target.server)) {
            link.warn_refused(&target.server, &cfg.client.user);
            return Err(Error::DfsTargetRefused(target.server));
        }
    }
    let client = crate::dfs::DfsLink::client_for(&cfg.client, &target);
    let opened = match Session::connect(&client).await {
        Ok(s) => s.tree_connect(&target.share).await,
        Err(e) => Err(e),
    };
    if opened.as_ref().is_err_and(|e| e.is_connection_error() || e.status().is_some()) {
        // The namespace may name another target by now.
        link.expire();
    }
    opened
}

impl Pool {
    /// Opens all connections. Fails with the first connection's error (so a
    /// bad password or missing share is reported at startup); later ones
    /// that fail are retried in the background.
    pub async fn connect(cfg: PoolConfig) -> Result<Pool> {
        let first = open_tree(&cfg).await?;
        let mut slots = vec![Slot { tree: RwLock::new(Some(first)), reconnecting: AtomicBool::new(false) }];
        let rest = futures_join(&cfg, cfg.size - 1).await;
        for t in rest {
            slots.push(Slot { tree: RwLock::new(t.ok()), reconnecting: AtomicBool::new(false) });
        }
        let aimd = Mutex::new(Aimd::new(cfg.max_in_flight, cfg.min_in_flight, Instant::now()));
        let inner = Arc::new(PoolInner { cfg, slots, aimd, reconnects: Default::default(), spare: Default::default() });
        tokio::spawn(maintain(Arc::downgrade(&inner)));
        Ok(Pool { inner })
    }

    /// The least-loaded healthy tree, waiting up to the acquire timeout for
    /// one to come back if all are broken.
    ///
    /// Errors: [`Error::ConnectionLost`] if none recovers in time.
    pub async fn get(&self) -> Result<Tree> {
        let deadline = tokio::time::Instant::now() + self.inner.cfg.acquire_timeout;
        loop {
            if let Some(t) = self.try_get() {
                return Ok(t);
            }
            self.kick();
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::ConnectionLost("no healthy SMB connection in the pool".into()));
            }
            tokio::time::sleep(waits::POOL_GET_POLL).await;
        }
    }

    /// The least-loaded healthy tree right now, if any.
    pub fn try_get(&self) -> Option<Tree> {
        let mut best: Option<(usize, Tree)> = None;
        for slot in &self.inner.slots {
            let g = slot.tree.read().unwrap();
            if let Some(t) = g.as_ref() {
                if t.conn().is_poisoned() {
                    continue;
                }
                let load = t.conn().in_flight();
                if best.as_ref().is_none_or(|(l, _)| load < *l) {
                    best = Some((load, t.clone()));
                }
            }
        }
        best.map(|(_, t)| t)
    }

    /// Up to `n` distinct healthy trees, least loaded first (for spreading
    /// segments of one transfer over several connections).
    pub fn spread(&self, n: usize) -> Vec<Tree> {
        let mut v: Vec<Tree> = self
            .inner
            .slots
            .iter()
            .filter_map(|s| s.tree.read().unwrap().clone())
            .filter(|t| !t.conn().is_poisoned())
            .collect();
        v.sort_by_key(|t| t.conn().in_flight());
        v.truncate(n);
        v
    }

    /// A connection to the share outside the pool's slots: [`Pool::get`],
    /// [`Pool::try_get`] and [`Pool::spread`] never hand it out, so no
    /// handle their callers keep open lives on it. Opened on first use and
    /// kept; opened again once it is lost, or its Kerberos session is due
    /// for renewal (the old session serves on if that logon fails). It is
    /// for an operation the server refuses while a handle in the same
    /// server process is open: Samba runs one smbd per connection and
    /// refuses (STATUS_ACCESS_DENIED) a rename over a file that process
    /// holds open. Not counted in [`PoolStats`].
    ///
    /// Errors: as [`Pool::connect`] for a new connection; for
    /// [`waits::SPARE_RETRY`] after that, [`Error::ConnectionLost`] at once,
    /// so that callers do not each wait for a server that takes no new
    /// connection.
    pub async fn spare(&self) -> Result<Tree> {
        let mut spare = self.inner.spare.lock().await;
        let now = Instant::now();
        let live = spare.tree.clone().filter(|t| !t.conn().is_poisoned());
        match &live {
            Some(t) if t.session().renew_at().is_none_or(|at| at > now) => return Ok(t.clone()),
            None if spare.failed_at.is_some_and(|at| now.duration_since(at) < waits::SPARE_RETRY) => {
                return Err(Error::ConnectionLost("the spare SMB connection could not be made just now".into()));
            }
            _ => {}
        }
        match open_tree(&self.inner.cfg).await {
            Ok(t) => {
                *spare = Spare { tree: Some(t.clone()), failed_at: None };
                Ok(t)
            }
            Err(e) => {
                spare.failed_at = Some(now);
                live.ok_or(e)
            }
        }
    }

    /// True if `conn` is one of the pool's connections now (a slot's, or
    /// the spare's): false once it was replaced, lost or renewed before its
    /// Kerberos ticket ended, so that a caller keeping a handle open on it
    /// can let it go (the pool expects a renewed connection to close when
    /// its last user does). While the spare is being changed it counts as
    /// held.
    pub fn holds(&self, conn: &crate::connection::Connection) -> bool {
        let in_slot =
            self.inner.slots.iter().any(|s| s.tree.read().unwrap().as_ref().is_some_and(|t| t.conn().same_as(conn)));
        in_slot || self.inner.spare.try_lock().map_or(true, |s| s.tree.as_ref().is_some_and(|t| t.conn().same_as(conn)))
    }

    /// Number of healthy connections with no request in flight.
    pub fn idle(&self) -> usize {
        self.inner
            .slots
            .iter()
            .filter(|s| {
                s.tree.read().unwrap().as_ref().is_some_and(|t| !t.conn().is_poisoned() && t.conn().in_flight() == 0)
            })
            .count()
    }

    /// Number of healthy connections.
    pub fn healthy(&self) -> usize {
        self.inner
            .slots
            .iter()
            .filter(|s| s.tree.read().unwrap().as_ref().is_some_and(|t| !t.conn().is_poisoned()))
            .count()
    }

    /// Healthy, reconnecting and replaced connections (a snapshot).
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            size: self.inner.slots.len(),
            healthy: self.healthy(),
            reconnecting: self.inner.slots.iter().filter(|s| s.reconnecting.load(Ordering::Acquire)).count(),
            reconnects: self.inner.reconnects.load(Ordering::Relaxed),
        }
    }

    /// Bytes one stream may keep in flight now: [`PoolConfig::max_in_flight`]
    /// until a connection is lost with more than 4 MiB outstanding, then
    /// halved per loss (at most once a second, down to
    /// [`PoolConfig::min_in_flight`]) and regained at a sixteenth of the
    /// maximum per second once every connection is back (failure class 7).
    pub fn in_flight_budget(&self) -> usize {
        let now = Instant::now();
        self.note_losses(now);
        self.inner.aimd.lock().unwrap().window(now)
    }

    /// Feeds connection losses and replacements to the AIMD budget.
    fn note_losses(&self, now: Instant) {
        let mut aimd = self.inner.aimd.lock().unwrap();
        let mut broken = false;
        for (i, slot) in self.inner.slots.iter().enumerate() {
            let g = slot.tree.read().unwrap();
            match g.as_ref() {
                Some(t) if !t.conn().is_poisoned() => {}
                Some(t) => {
                    broken = true;
                    let lost = t.conn().take_lost_in_flight();
                    if lost > LOSS_UNDER_LOAD {
                        if let Some(w) = aimd.on_loss(now) {
                            tracing::warn!(
                                slot = i,
                                lost_mib = lost >> 20,
                                budget_mib = w >> 20,
                                "SMB connection lost with requests in flight; in-flight budget per stream lowered"
                            );
                        }
                    }
                }
                None => broken = true,
            }
        }
        let reconnecting = self.inner.slots.iter().any(|s| s.reconnecting.load(Ordering::Acquire));
        aimd.observe(now, broken || reconnecting);
    }

    /// Runs `f` on a pooled tree, retrying once on another connection when
    /// the first fails with a connection error. Use for idempotent work.
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T>
    where
        F: Fn(Tree) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut last = None;
        for _ in 0..3 {
            let t = self.get().await?;
            match f(t).await {
                Err(e) if e.is_connection_error() => {
                    self.kick();
                    last = Some(e);
                }
                r => return r,
            }
        }
        Err(last.expect("tried"))
    }

    /// Starts background replacement of broken connections now.
    pub fn kick(&self) {
        self.note_losses(Instant::now());
        for (i, slot) in self.inner.slots.iter().enumerate() {
            let broken = slot.tree.read().unwrap().as_ref().is_none_or(|t| t.conn().is_poisoned());
            if broken && !slot.reconnecting.swap(true, Ordering::AcqRel) {
                let weak = Arc::downgrade(&self.inner);
                tokio::spawn(reconnect(weak, i));
            }
        }
    }
}

async fn futures_join(cfg: &PoolConfig, n: usize) -> Vec<Result<Tree>> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..n {
        let c = cfg.clone();
        set.spawn(async move { open_tree(&c).await });
    }
    let mut out = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        out.push(r.unwrap_or_else(|e| Err(Error::Io(e.to_string()))));
    }
    out
}

async fn reconnect(pool: Weak<PoolInner>, i: usize) {
    let mut backoff = waits::RECONNECT_FIRST;
    loop {
        let Some(p) = pool.upgrade() else { return };
        match open_tree(&p.cfg).await {
            Ok(t) => {
                *p.slots[i].tree.write().unwrap() = Some(t);
                p.slots[i].reconnecting.store(false, Ordering::Release);
                p.reconnects.fetch_add(1, Ordering::Relaxed);
                tracing::info!(slot = i, "SMB connection replaced");
                return;
            }
            Err(e) => {
                tracing::warn!(slot = i, error = %e, "SMB reconnect failed");
                if e.status() == Some(smb_proto::NtStatus::STATUS_TOO_MANY_SESSIONS) {
                    backoff = waits::TOO_MANY_SESSIONS_PAUSE;
                }
            }
        }
        drop(p);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(waits::RECONNECT_CAP);
    }
}

/// Replaces slot `i`'s session, still healthy, with a new logon before
/// its Kerberos ticket ends (make before break: requests already on the old
/// connection finish there, and it closes when the last of them lets go).
/// A failed logon is tried again after a pause; the old session serves on.
async fn renew(pool: Weak<PoolInner>, i: usize) {
    let Some(p) = pool.upgrade() else { return };
    match open_tree(&p.cfg).await {
        Ok(t) => {
            *p.slots[i].tree.write().unwrap() = Some(t);
            tracing::info!(slot = i, "SMB session renewed before its Kerberos ticket ends");
        }
        Err(e) => {
            tracing::warn!(slot = i, error = %e, "SMB session renewal failed; trying again shortly");
            drop(p);
            tokio::time::sleep(waits::RENEW_RETRY).await;
            let Some(p) = pool.upgrade() else { return };
            p.slots[i].reconnecting.store(false, Ordering::Release);
            return;
        }
    }
    p.slots[i].reconnecting.store(false, Ordering::Release);
}

/// Starts [`renew`] for every healthy slot whose session is due.
fn renew_due(inner: &Arc<PoolInner>) {
    let now = Instant::now();
    for (i, slot) in inner.slots.iter().enumerate() {
        let due = slot
            .tree
            .read()
            .unwrap()
            .as_ref()
            .is_some_and(|t| !t.conn().is_poisoned() && t.session().renew_at().is_some_and(|at| at <= now));
        if due && !slot.reconnecting.swap(true, Ordering::AcqRel) {
            tokio::spawn(renew(Arc::downgrade(inner), i));
        }
    }
}

async fn maintain(pool: Weak<PoolInner>) {
    let mut tick = tokio::time::interval(waits::MAINTAIN_TICK);
    let mut since_echo = Duration::ZERO;
    loop {
        tick.tick().await;
        let Some(p) = pool.upgrade() else { return };
        let handle = Pool { inner: p.clone() };
        handle.kick();
        renew_due(&p);
        since_echo += waits::MAINTAIN_TICK;
        if since_echo >= p.cfg.echo_interval {
            since_echo = Duration::ZERO;
            for slot in &p.slots {
                let t = slot.tree.read().unwrap().clone();
                if let Some(t) = t.filter(|t| !t.conn().is_poisoned() && t.conn().in_flight() == 0) {
                    tokio::spawn(async move {
                        if let Err(e) = tokio::time::timeout(waits::ECHO_TIMEOUT, t.session().echo())
                            .await
                            .unwrap_or(Err(Error::Timeout("ECHO")))
                        {
                            t.conn().poison(e);
                        }
                    });
                }
            }
        }
    }
}
