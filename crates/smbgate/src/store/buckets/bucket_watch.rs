//! What the events of people's changes on the share need of it: the
//! buckets that have a notification configuration, the lock that elects
//! one watcher of a bucket among the instances, and a watch on the
//! bucket's tree (the marks an S3 delete leaves, so that the watcher does
//! not report it a second time, are `delete_marks`).
//!
//! `.smbgate/watchers/<bucket>.lock`: a creation lock, held by the
//! watching instance and gone with its SMB session, so another takes over.
//! (`.smbgate/events/` holds only the queues, one folder per target.)

pub use super::event_queue::QueueLock as WatcherLock;
pub use crate::store::share::{Action, Change, Notified};
use crate::store::share::{DirWatch, WatchError};
use crate::store::share_data::ShareData;
use crate::store::{Buckets, StoreError, StoreResult};

/// A bucket's tree, watched.
pub struct BucketWatch {
    watch: DirWatch,
}

impl BucketWatch {
    /// The next changes under the bucket (names relative to its directory;
    /// see `keys::key_of_share_name`). Not cancel-safe (see
    /// `share::DirWatch::next`).
    ///
    /// Errors: the watch ended (the connection lost, the directory gone).
    pub async fn next(&mut self) -> StoreResult<Notified> {
        Ok(self.watch.next().await?)
    }
}

impl Buckets {
    /// The buckets of this root with a notification configuration.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn notified_buckets(&self) -> StoreResult<Vec<String>> {
        let tree = self.root.tree().await?;
        let entries = self.state_entries(&tree, &self.root.internal("notifications")).await?;
        Ok(entries.into_iter().filter(|e| !e.times.is_directory()).map(|e| e.name).collect())
    }

    /// Takes the lock that makes this instance `bucket`'s watcher; `None`
    /// if another instance holds it.
    ///
    /// Errors: SMB failures.
    pub async fn lock_watcher(&self, bucket: &str) -> StoreResult<Option<WatcherLock>> {
        let tree = self.root.tree().await?;
        let watchers = self.root.internal("watchers");
        self.make_dirs(&tree, std::slice::from_ref(&watchers)).await?;
        let path = watchers.join(&format!("{bucket}.lock"));
        let lock = super::event_queue::take_unheld_lock(&self.root.live(&tree), &path).await?;
        Ok(lock.map(|lock| WatcherLock { lock, root: self.root.clone() }))
    }

    /// Watches the whole tree of `bucket`'s directory.
    ///
    /// Errors: Refused where the server keeps no watches; SMB failures.
    pub async fn watch_bucket(&self, bucket: &str) -> StoreResult<BucketWatch> {
        let tree = self.root.tree().await?;
        match self.root.live(&tree).watch_tree(&self.root.bucket_path(bucket)).await {
            Ok(watch) => Ok(BucketWatch { watch }),
            Err(WatchError::Unsupported(_)) => Err(StoreError::Refused("the server keeps no change notifications")),
            Err(WatchError::Failed(e)) => Err(e.into()),
        }
    }
}
