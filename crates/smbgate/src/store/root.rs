//! The share root the S3 operations' owners share ([`Root`]): where
//! buckets, objects and state live, the pool, the records, and the caches
//! a change must be told to.

use std::sync::{Arc, Weak};

use super::keys;
use super::listings::listing_cache;
use super::path::SharePath;
use super::reads::{object_cache, watch_table};
use super::records;
use super::share::{self, Pool, Tree};
use super::share_ops::ShareOps;
use super::{StoreError, StoreOptions, StoreResult, INTERNAL};

/// One share root as every owner of S3 operations sees it: the pool, where
/// buckets, objects and the gateway's state live under the root, how the
/// share keeps records and matches names, and the caches every write and
/// delete must tell of its change. A cheap handle (one `Arc`).
#[derive(Clone)]
pub struct Root {
    inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) pool: Pool,
    /// The root inside the share (may be the share root).
    pub(super) root: SharePath,
    pub(super) opts: StoreOptions,
    /// The share matches names case-insensitively (Windows, Samba's
    /// default): keys differing only in case must be refused, not merged.
    pub(super) case_insensitive: bool,
    /// Where this root keeps object, upload and part records: EAs, or
    /// sidecar files on a share without them.
    pub(super) records: records::Records,
    /// Recent directory listings for paging.
    pub(super) dir_cache: listing_cache::DirCache,
    /// Set for a store whose root is one bucket's own directory (a
    /// configured `[buckets.NAME]`): its name. Gateway state then lives in
    /// `.smbgate` inside that directory, left out of its listings.
    pub(super) single_bucket: Option<String>,
    /// Objects held under leases for HEAD and small GETs.
    pub(super) objects: object_cache::ObjectCache,
    /// The watches that tell the object cache of changes no lease reports.
    pub(super) watches: watch_table::DirWatches,
    /// Buckets' versioning states as last read (shared by every identity's
    /// root).
    pub(super) versioning: Arc<super::versions::StatusCache>,
    /// The shard each versioned key's next stored version goes into
    /// (shared by every identity's root).
    pub(super) version_folders: Arc<super::versions::shards::Filling>,
    /// The lock's ACEs on the share, for this root's identity.
    pub(super) lock_acl: super::share::LockAcl,
    /// The keys' creation locks, as byte ranges of one file
    /// (`create_lock`).
    pub(super) key_locks: super::share::KeyLocks,
}

impl Root {
    pub(super) fn from_inner(inner: Arc<Inner>) -> Root {
        Root { inner }
    }

    /// A reference that does not keep the store alive (for its
    /// background tasks).
    pub(super) fn downgrade(&self) -> Weak<Inner> {
        Arc::downgrade(&self.inner)
    }

    /// The store of `weak`, if it still serves.
    pub(super) fn upgrade(weak: &Weak<Inner>) -> Option<Root> {
        weak.upgrade().map(Root::from_inner)
    }

    /// The ACEs that hold locked versions on the share, for this root's
    /// SMB identity.
    pub(crate) fn lock_acl(&self) -> &super::share::LockAcl {
        &self.inner.lock_acl
    }

    /// The object cache's directory watches.
    pub(super) fn watches(&self) -> &watch_table::DirWatches {
        &self.inner.watches
    }

    /// What the root holds, for a store over another pool of the same root.
    pub(super) fn inner(&self) -> &Inner {
        &self.inner
    }

    /// The name of the one bucket this store serves, if it serves only one
    /// ([`super::Store::open_bucket`]).
    pub fn single_bucket(&self) -> Option<&str> {
        self.inner.single_bucket.as_deref()
    }

    /// True if the share matches names case-insensitively.
    pub fn case_insensitive(&self) -> bool {
        self.inner.case_insensitive
    }

    /// Where this store keeps its records (EAs or sidecar files).
    pub fn records(&self) -> &records::Records {
        &self.inner.records
    }

    /// Tuning in effect.
    pub fn options(&self) -> &StoreOptions {
        &self.inner.opts
    }

    /// Bytes one stream may keep in flight, in bytes: the configured
    /// `in_flight`, or less while the pool backs off after losing
    /// connections under load (failure class 7, [`Pool::in_flight_budget`]).
    pub fn in_flight(&self) -> usize {
        self.inner.opts.in_flight.min(self.inner.pool.in_flight_budget())
    }

    /// The object cache for HEAD and small GETs: [`Reads`](super::Reads)
    /// fills it, every change drops or warns its entries.
    pub(super) fn objects(&self) -> &object_cache::ObjectCache {
        &self.inner.objects
    }

    /// Recent directory listings: [`Listings`](super::Listings) keeps
    /// them, every change forgets the directories it touched.
    pub(super) fn dir_cache(&self) -> &listing_cache::DirCache {
        &self.inner.dir_cache
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }

    /// A pooled tree (least loaded).
    ///
    /// Errors: no connection could be had (503 SlowDown).
    pub async fn tree(&self) -> StoreResult<Tree> {
        Ok(share::connection(&self.inner.pool).await?)
    }

    /// The store root inside the share.
    pub fn root_dir(&self) -> &SharePath {
        &self.inner.root
    }

    /// The path of gateway state under the root: `.smbgate\<name>`.
    pub fn internal(&self, name: &str) -> SharePath {
        self.inner.root.join(INTERNAL).join(name)
    }

    /// Share-relative path of a bucket directory.
    pub fn bucket_path(&self, bucket: &str) -> SharePath {
        match &self.inner.single_bucket {
            // The root is the bucket; callers route only its name here.
            Some(_) => self.inner.root.clone(),
            None => self.inner.root.join(bucket),
        }
    }

    /// Share-relative path of an object's file (or marker directory).
    pub fn object_path(&self, bucket: &str, key: &keys::MappedKey) -> SharePath {
        self.bucket_path(bucket).join_key(key)
    }

    /// A fresh temporary file path under `.smbgate\tmp`.
    pub fn temp_path(&self) -> SharePath {
        self.internal("tmp").join(&format!("{:032x}", rand::random::<u128>()))
    }

    /// Forgets cached listings of the directories `key` lives in, and the
    /// object cache's entry of `key` (after a write or delete through this
    /// instance).
    pub fn forget_listing(&self, bucket: &str, key: &keys::MappedKey) {
        let bucket_dir = self.bucket_path(bucket);
        self.inner.dir_cache.forget(&bucket_dir);
        for dir in bucket_dir.ancestors_of(key) {
            self.inner.dir_cache.forget(&dir);
        }
        self.inner.objects.forget(self.object_path(bucket, key).as_str());
    }

    /// Fails with NoSuchBucket unless `bucket` is an existing directory.
    pub async fn check_bucket(&self, tree: &Tree, bucket: &str) -> StoreResult<()> {
        bucket_is_there(&self.live(tree), &self.bucket_path(bucket)).await
    }
}

/// Ok if `bucket` (a share-relative path) is a directory.
///
/// Errors: NoSuchBucket if nothing or a file is there; the share's other
/// failures.
pub(crate) async fn bucket_is_there<S: ShareOps>(s: &S, bucket: &str) -> StoreResult<()> {
    match s.is_directory(bucket).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(StoreError::NoSuchBucket),
        Err(e) if share::is_not_found(&e) => Err(StoreError::NoSuchBucket),
        Err(e) => Err(e.into()),
    }
}
