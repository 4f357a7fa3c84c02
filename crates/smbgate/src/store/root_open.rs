//! Opening a store on a share root: the root checked to be a directory,
//! the gateway's internal directories made, what the share can hold probed
//! (where records go, whether names match without case), and the sweep of
//! dead writers' files started; and the same root over another identity's
//! pool.

use std::sync::Arc;

use super::listings::listing_cache;
use super::path::SharePath;
use super::reads::object_cache;
use super::root::Inner;
use super::share::{self, Failure, Pool};
use super::share_ops::LiveShare;
use super::uploads::sweep;
use super::{case, records, Budget, Root, Store, StoreError, StoreOptions, StoreResult, INTERNAL};

impl Store {
    /// A store on `pool`, rooted at `root` inside the share (`\`-separated).
    /// Creates the internal directories if needed, probes whether the share
    /// is case-insensitive, and starts the temp-file sweep.
    ///
    /// Errors: the root does not exist or is not a directory
    /// (InvalidArgument); SMB failures.
    pub async fn open(pool: Pool, root: &str, opts: StoreOptions) -> StoreResult<Store> {
        Store::open_root(pool, root, opts, None).await
    }

    /// A store serving exactly one bucket, `bucket`, whose objects are the
    /// directory `dir` inside the share (`\`-separated; empty: the share
    /// root). Opened, probed and swept as [`Store::open`] does.
    ///
    /// Errors: as [`Store::open`].
    pub async fn open_bucket(pool: Pool, dir: &str, bucket: &str, opts: StoreOptions) -> StoreResult<Store> {
        Store::open_root(pool, dir, opts, Some(bucket.to_string())).await
    }

    async fn open_root(
        pool: Pool,
        root: &str,
        opts: StoreOptions,
        single_bucket: Option<String>,
    ) -> StoreResult<Store> {
        let root = SharePath::root(root);
        let tree = share::connection(&pool).await?;
        let root_times = share::stat(&tree, &root).await.map_err(|e| {
            if share::is_not_found(&e) {
                StoreError::InvalidArgument(format!("share path \"{}\" does not exist", root.as_str()))
            } else {
                e.into()
            }
        })?;
        if !root_times.is_directory() {
            return Err(StoreError::InvalidArgument(format!("share path \"{}\" is not a directory", root.as_str())));
        }
        let internal = root.join(INTERNAL);
        for d in [internal.clone(), internal.join("tmp"), internal.join("uploads")] {
            match share::mkdir(&tree, &d).await {
                Ok(()) => {}
                Err(e) if e.failure() == Failure::Collision => {}
                Err(e) => return Err(e.into()),
            }
        }
        let probe = internal.join("tmp").join(&format!("ea-probe-{:016x}", rand::random::<u64>()));
        let (eas, disk_ids) = share::probe_record_support(&tree, probe.as_str()).await?;
        let streams = !eas && records::probe_streams(&tree, &internal.join("tmp"), &probe).await?;
        // Every write stores a record (failure class 27): a share that can
        // hold none refuses to start rather than fail each write.
        let records = records::choose(&tree, &internal, eas, streams, disk_ids).await.map_err(|e| {
            match e.invalid_argument() {
                Some(m) => StoreError::InvalidArgument(m.to_string()),
                None => e.into(),
            }
        })?;
        let key_locks = share::KeyLocks::new(internal.join("key-locks").as_str().to_string(), pool.clone());
        let live = LiveShare { tree: &tree, records: &records, key_locks: &key_locks, pool: &pool };
        let case_insensitive = case::probe_case_insensitive(&live, &internal.join("tmp")).await?;
        // Logged by the caller once all of startup has succeeded, so that
        // a failure stays one line.
        tracing::debug!(case_insensitive, records = records.describe(), "store opened");
        let (read_ahead, write_behind) = (Budget::new(opts.read_ahead_budget), Budget::new(opts.write_behind_budget));
        let dir_cache = listing_cache::DirCache::new(opts.listing_cache_ttl, opts.listing_cache.clone());
        let opts_cache = opts.cache.clone();
        let root = Root::from_inner(Arc::new(Inner {
            pool,
            root,
            opts,
            case_insensitive,
            records,
            dir_cache,
            single_bucket,
            objects: object_cache::ObjectCache::new(opts_cache),
            watches: Default::default(),
            versioning: Default::default(),
            version_folders: Default::default(),
            lock_acl: Default::default(),
            key_locks,
        }));
        super::reads::cache_watches::probe(&root).await;
        let store = Store::assemble(root, read_ahead, write_behind, Default::default());
        tokio::spawn(sweep::sweep_loop(store.uploads().clone()));
        Ok(store)
    }

    /// The same share root served over `pool`, a pool logged in as another
    /// SMB identity (one S3 user's, see `crate::identities`): what the
    /// share holds is probed once, by [`Store::open`], and the read-ahead
    /// and write-behind budgets stay shared, so the process's memory bound
    /// holds over every identity. The listing cache is the pool's own,
    /// because the share's ACLs may show each identity different entries;
    /// the sweep runs only on the store [`Store::open`] made.
    pub fn for_pool(&self, pool: Pool) -> Store {
        let i = self.root().inner();
        let key_lock_pool = pool.clone();
        let root = Root::from_inner(Arc::new(Inner {
            pool,
            root: i.root.clone(),
            opts: i.opts.clone(),
            case_insensitive: i.case_insensitive,
            records: i.records.clone(),
            dir_cache: listing_cache::DirCache::new(i.opts.listing_cache_ttl, i.opts.listing_cache.clone()),
            single_bucket: i.single_bucket.clone(),
            objects: object_cache::ObjectCache::new(i.opts.cache.clone()),
            watches: i.watches.for_another_identity(),
            versioning: i.versioning.clone(),
            version_folders: i.version_folders.clone(),
            lock_acl: i.lock_acl.for_another_identity(),
            key_locks: i.key_locks.for_another_pool(key_lock_pool),
        }));
        let writes = self.writes();
        Store::assemble(root, self.read_ahead().clone(), writes.write_behind.clone(), writes.put_lanes.clone())
    }
}
