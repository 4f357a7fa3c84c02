//! One SMB connection pool, and a store over it, per SMB identity: the
//! gateway's own (`--smb-user`, opened at startup) and one for each S3
//! user that acts as another account ([`crate::users`]). A user's pool
//! connects on its first request, at most `max_pools` of them are open at
//! once (the least recently used is closed to make room), and a pool
//! unused for `idle` is closed. So the gateway holds at most
//! `pool_size × (1 + max_pools)` SMB connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use smb_client::{ClientConfig, Pool, PoolConfig};
use smb_proto::NtStatus;

use crate::store::{Store, StoreError, StoreResult};
use crate::users::SmbIdentity;

/// How to open the pool of an identity that is not the gateway's own.
pub struct PoolTemplate {
    /// Server, signing, encryption and I/O size; its user, domain and
    /// password are replaced by each identity's.
    pub client: ClientConfig,
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

struct Inner {
    primary: Store,
    template: PoolTemplate,
    pools: Mutex<HashMap<SmbIdentity, Arc<Entry>>>,
}

/// The stores by SMB identity. Clone to share.
#[derive(Clone)]
pub struct Identities {
    inner: Arc<Inner>,
}

impl Identities {
    /// `primary` serves the gateway's own identity; other identities get
    /// pools made from `template`. Starts the idle-pool closer.
    pub fn new(primary: Store, template: PoolTemplate) -> Identities {
        let inner = Arc::new(Inner { primary, template, pools: Default::default() });
        tokio::spawn(close_idle(Arc::downgrade(&inner)));
        Identities { inner }
    }

    /// The gateway's own store.
    pub fn primary(&self) -> &Store {
        &self.inner.primary
    }

    /// Identity pools open now (not counting the gateway's own).
    pub fn open_pools(&self) -> usize {
        let pools = self.inner.pools.lock().unwrap();
        pools.values().filter(|e| e.store.initialized()).count()
    }

    /// The store acting as `identity` (`None`: the gateway's own),
    /// connecting its pool first if it has none open.
    ///
    /// Errors: AccessDenied if the server refuses the account's login or
    /// its access to the share (logged at ERROR with the reason, never the
    /// password); other SMB failures as the store maps them (503 SlowDown
    /// while the server cannot be reached).
    pub async fn store(&self, identity: Option<&SmbIdentity>) -> StoreResult<Store> {
        let Some(id) = identity else { return Ok(self.inner.primary.clone()) };
        let entry = self.entry(id);
        let store = entry.store.get_or_try_init(|| self.connect(id)).await?;
        *entry.last_used.lock().unwrap() = Instant::now();
        Ok(store.clone())
    }

    /// The entry of `id`, made if needed; making one past `max_pools`
    /// first drops the least recently used. Requests running on a dropped
    /// entry's store keep it until they finish; its connections close
    /// with the last of them.
    fn entry(&self, id: &SmbIdentity) -> Arc<Entry> {
        let mut pools = self.inner.pools.lock().unwrap();
        if let Some(e) = pools.get(id) {
            return e.clone();
        }
        while pools.len() >= self.inner.template.max_pools.max(1) {
            let oldest = pools.iter().min_by_key(|(_, e)| *e.last_used.lock().unwrap()).map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    tracing::info!(smb_identity = %k, "closing the least recently used SMB identity pool");
                    pools.remove(&k);
                }
                None => break,
            }
        }
        let e = Arc::new(Entry { store: Default::default(), last_used: Mutex::new(Instant::now()) });
        pools.insert(id.clone(), e.clone());
        e
    }

    async fn connect(&self, id: &SmbIdentity) -> StoreResult<Store> {
        let t = &self.inner.template;
        let mut client = t.client.clone();
        client.user = id.user.clone();
        client.domain = id.domain.clone();
        client.password = id.password.clone();
        match Pool::connect(PoolConfig::new(client, &t.share, t.size)).await {
            Ok(pool) => {
                tracing::info!(smb_identity = %id, "SMB identity pool connected");
                Ok(self.inner.primary.for_pool(pool))
            }
            Err(e) => {
                let refused = matches!(
                    e.status(),
                    Some(
                        NtStatus::STATUS_LOGON_FAILURE
                            | NtStatus::STATUS_WRONG_PASSWORD
                            | NtStatus::STATUS_ACCOUNT_DISABLED
                            | NtStatus::STATUS_ACCESS_DENIED
                            | NtStatus::STATUS_NETWORK_ACCESS_DENIED
                            | NtStatus::STATUS_BAD_NETWORK_NAME
                    )
                );
                if refused {
                    tracing::error!(smb_identity = %id, error = %e, "SMB login or share access refused for this identity");
                    Err(StoreError::AccessDenied)
                } else {
                    Err(e.into())
                }
            }
        }
    }
}

/// Every 10 s (or `idle`, if shorter), drops the identity pools unused for
/// `idle`; ends with the last [`Identities`].
async fn close_idle(inner: Weak<Inner>) {
    let period = match inner.upgrade() {
        Some(i) => i.template.idle.min(Duration::from_secs(10)),
        None => return,
    };
    loop {
        tokio::time::sleep(period).await;
        let Some(inner) = inner.upgrade() else { return };
        let idle = inner.template.idle;
        let mut pools = inner.pools.lock().unwrap();
        pools.retain(|id, e| {
            let keep = e.last_used.lock().unwrap().elapsed() < idle;
            if !keep && e.store.initialized() {
                tracing::info!(smb_identity = %id, "closing an idle SMB identity pool");
            }
            keep
        });
    }
}
