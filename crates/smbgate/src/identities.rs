//! One SMB connection pool, and a store over it, per root and SMB
//! identity. The roots are `--share` (each top-level directory a bucket)
//! and each configured `[buckets.NAME]` (one directory, one bucket,
//! possibly on another server); each has the gateway's own pool, opened at
//! startup. Each S3 user that acts as another account ([`crate::users`])
//! gets a pool per root it uses: connected on its first request there, at
//! most `max_pools` of them open at once (the least recently used is
//! closed to make room), closed when unused for `idle`. So the gateway
//! holds at most `pool_size × (roots + max_pools)` SMB connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use smb_client::{ClientConfig, PoolConfig};

use crate::store::share::Pool;
use crate::store::{Store, StoreError, StoreResult};
use crate::users::SmbIdentity;

/// How to open the pool of an identity that is not the gateway's own.
pub struct PoolTemplate {
    /// Server, signing, encryption and I/O size; its user, domain,
    /// password and logon are replaced by each identity's.
    pub client: ClientConfig,
    /// How each identity logs on (NTLM or Kerberos).
    pub kerberos: crate::kerberos::KerberosArgs,
    /// The DFS link the share was found through, followed as the gateway's
    /// own pool follows it.
    pub dfs: Option<std::sync::Arc<smb_client::dfs::DfsLink>>,
    /// With `dfs`, the servers startup named (the link's own and the
    /// target it followed): the only ones users' pools connect to, however
    /// the link moves, so that a referral cannot send a user's credentials
    /// to a server nobody named.
    pub dfs_servers: Option<Vec<String>>,
    /// The share's name.
    pub share: String,
    /// Connections in each identity's pool.
    pub size: usize,
    /// Most identity pools open at once.
    pub max_pools: usize,
    /// A pool unused this long is closed.
    pub idle: Duration,
}

struct Entry {
    /// Set once the pool has connected; a failed connect leaves it empty,
    /// so the next request tries again.
    store: tokio::sync::OnceCell<Store>,
    last_used: Mutex<Instant>,
}

/// A root other than `--share`: one configured bucket's directory, its
/// gateway-own store, and how to open users' pools on its server.
pub struct BucketRoot {
    /// The store opened at startup with the gateway's own account.
    pub store: Store,
    /// Users' pools on the bucket's server and share.
    pub template: PoolTemplate,
    /// For a folder of `--share` (`path = "FOLDER"`), the folder's path
    /// under the share's root (`\`-separated); empty otherwise.
    pub folder: String,
}

struct Inner {
    primary: Store,
    template: PoolTemplate,
    /// Configured buckets, by name.
    buckets: HashMap<String, BucketRoot>,
    /// Users' pools, by root (`None`: `--share`; else the bucket's name)
    /// and account.
    pools: Mutex<HashMap<PoolKey, Arc<Entry>>>,
}

/// A user's pool: its root (`None`: `--share`; else the configured
/// bucket's name) and account.
type PoolKey = (Option<String>, SmbIdentity);

/// The stores by SMB identity. Clone to share.
#[derive(Clone)]
pub struct Identities {
    inner: Arc<Inner>,
}

impl Identities {
    /// `primary` serves `--share` as the gateway's own identity; other
    /// identities get pools made from `template`. `buckets` are the
    /// configured buckets' roots. Starts the idle-pool closer.
    pub fn new(primary: Store, template: PoolTemplate, buckets: HashMap<String, BucketRoot>) -> Identities {
        let inner = Arc::new(Inner { primary, template, buckets, pools: Default::default() });
        tokio::spawn(close_idle(Arc::downgrade(&inner)));
        Identities { inner }
    }

    /// The gateway's own store on `--share`.
    pub fn primary(&self) -> &Store {
        &self.inner.primary
    }

    /// The gateway-own store of configured bucket `name`, if there is one.
    pub fn configured_store(&self, name: &str) -> Option<&Store> {
        self.inner.buckets.get(name).map(|b| &b.store)
    }

    /// The names of the configured buckets, in name order.
    pub fn configured(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.inner.buckets.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// True if `a` and `b` live in the same root (so a server-side copy
    /// between them is possible).
    pub fn same_root(&self, a: &str, b: &str) -> bool {
        self.root_of(a) == self.root_of(b)
    }

    /// True if `bucket` is a configured bucket on another server than
    /// `--share`'s (another host or port, as the config writes them). A
    /// user's SMB credentials go there only if its table names the bucket
    /// ([`crate::users::User::may_log_on_for`]).
    pub fn on_another_server(&self, bucket: &str) -> bool {
        let primary = &self.inner.template.client.addr;
        self.inner.buckets.get(bucket).is_some_and(|b| !b.template.client.addr.eq_ignore_ascii_case(primary))
    }

    /// The root `bucket` lives in: `None` for `--share`, else its own name.
    pub fn root_of(&self, bucket: &str) -> Option<String> {
        self.inner.buckets.contains_key(bucket).then(|| bucket.to_string())
    }

    /// Every open pool with its name for metrics: `share` (the gateway's
    /// own on `--share`), `bucket:NAME` (its own on a configured bucket's
    /// server), and `ACCOUNT@share` or `ACCOUNT@bucket:NAME` (a user's).
    pub fn pools(&self) -> Vec<(String, Pool)> {
        let root_name = |r: &Option<String>| r.as_ref().map_or("share".to_string(), |b| format!("bucket:{b}"));
        let mut out = vec![("share".to_string(), self.inner.primary.root().pool().clone())];
        let mut configured: Vec<_> = self.inner.buckets.iter().collect();
        configured.sort_by(|a, b| a.0.cmp(b.0));
        for (name, b) in configured {
            out.push((format!("bucket:{name}"), b.store.root().pool().clone()));
        }
        let mut users: Vec<(String, Pool)> = self
            .inner
            .pools
            .lock()
            .unwrap()
            .iter()
            .filter_map(|((root, id), e)| {
                e.store.get().map(|s| (format!("{id}@{}", root_name(root)), s.root().pool().clone()))
            })
            .collect();
        users.sort_by(|a, b| a.0.cmp(&b.0));
        out.extend(users);
        out
    }

    /// Identity pools open now (not counting the gateway's own).
    pub fn open_pools(&self) -> usize {
        let pools = self.inner.pools.lock().unwrap();
        pools.values().filter(|e| e.store.initialized()).count()
    }

    /// The store of `bucket`'s root (`None`: `--share`, as for
    /// ListBuckets) acting as `identity` (`None`: the gateway's own),
    /// connecting its pool first if it has none open.
    ///
    /// Errors: AccessDenied if the server refuses the account's login or
    /// its access to the share (logged at ERROR with the reason, never the
    /// password); other SMB failures as the store maps them (503 SlowDown
    /// while the server cannot be reached).
    pub async fn store(&self, bucket: Option<&str>, identity: Option<&SmbIdentity>) -> StoreResult<Store> {
        let root = bucket.and_then(|b| self.root_of(b));
        let (own, template) = match root.as_deref().and_then(|r| self.inner.buckets.get(r)) {
            Some(b) => (&b.store, &b.template),
            None => (&self.inner.primary, &self.inner.template),
        };
        let Some(id) = identity else { return Ok(own.clone()) };
        let entry = self.entry(root, id);
        let store = entry.store.get_or_try_init(|| self.connect(own, template, id)).await?;
        *entry.last_used.lock().unwrap() = Instant::now();
        Ok(store.clone())
    }

    /// The entry of `id`, made if needed; making one past `max_pools`
    /// first drops the least recently used. Requests running on a dropped
    /// entry's store keep it until they finish; its connections close
    /// with the last of them.
    fn entry(&self, root: Option<String>, id: &SmbIdentity) -> Arc<Entry> {
        let key = (root, id.clone());
        let mut pools = self.inner.pools.lock().unwrap();
        if let Some(e) = pools.get(&key) {
            return e.clone();
        }
        while pools.len() >= self.inner.template.max_pools.max(1) {
            let oldest = pools.iter().min_by_key(|(_, e)| *e.last_used.lock().unwrap()).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    tracing::info!(smb_identity = %k.1, "closing the least recently used SMB identity pool");
                    pools.remove(&k);
                }
                None => break,
            }
        }
        let e = Arc::new(Entry { store: Default::default(), last_used: Mutex::new(Instant::now()) });
        pools.insert(key, e.clone());
        e
    }

    async fn connect(&self, own: &Store, t: &PoolTemplate, id: &SmbIdentity) -> StoreResult<Store> {
        let mut client = t.client.clone();
        let server = client.addr.clone();
        client.user = id.user.clone();
        client.domain = id.domain.clone();
        client.password = id.password.clone();
        client.auth = t.kerberos.smb_auth(&id.user, &id.password, id.keytab.as_deref());
        let mut cfg = PoolConfig::new(client, &t.share, t.size);
        cfg.dfs = t.dfs.clone();
        cfg.dfs_servers = t.dfs_servers.clone();
        match crate::store::share::connect_pool(cfg).await {
            Ok(pool) => {
                tracing::info!(smb_identity = %id, %server, share = %t.share, "SMB identity pool connected");
                Ok(own.for_pool(pool))
            }
            // Warned about where it was refused (the DFS link's WARN).
            Err(smb_client::Error::DfsTargetRefused(_)) => Err(StoreError::AccessDenied),
            Err(e) => {
                use crate::store::share::Failure;
                let refused = matches!(
                    Failure::of_error(&e),
                    Failure::LogonRefused | Failure::AccessDenied | Failure::NetworkAccessDenied | Failure::NoSuchShare
                );
                if refused {
                    tracing::error!(
                        smb_identity = %id, %server, share = %t.share, error = %e,
                        "SMB login or share access refused for this identity"
                    );
                    Err(StoreError::AccessDenied)
                } else {
                    Err(crate::store::share::ShareError::from(e).into())
                }
            }
        }
    }
}

/// How often unused identity pools are looked for (at most; `idle`, if
/// shorter): a pool outlives its idle time by at most this.
const IDLE_CHECK: Duration = Duration::from_secs(10);

/// Every [`IDLE_CHECK`] (or `idle`, if shorter), drops the identity pools
/// unused for `idle`; ends with the last [`Identities`].
async fn close_idle(inner: Weak<Inner>) {
    let period = match inner.upgrade() {
        Some(i) => i.template.idle.min(IDLE_CHECK),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else { return };
        let idle = inner.template.idle;
        let mut pools = inner.pools.lock().unwrap();
        pools.retain(|(_, id), e| {
            let keep = e.last_used.lock().unwrap().elapsed() < idle;
            if !keep && e.store.initialized() {
                tracing::info!(smb_identity = %id, "closing an idle SMB identity pool");
            }
            keep
        });
    }
}
