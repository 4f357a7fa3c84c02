//! What the events of people's changes on the share need of it: the
//! buckets that have a notification configuration, the lock that elects
//! one watcher of a bucket among the instances, a watch on the bucket's
//! tree, and the marks an S3 delete leaves so that the watcher does not
//! report it a second time.
//!
//! `.smbgate/watchers/<bucket>.lock`: a creation lock, held by the
//! watching instance and gone with its SMB session, so another takes over.
//! `.smbgate/s3-deletes/<bucket>/<hash of the key>`: written before an S3
//! delete of the key (taken back if it fails), taken by the watcher when
//! it hears of the removal.
//! (`.smbgate/events/` holds only the queues, one folder per target.)

use std::time::Duration;

pub use super::event_queue::QueueLock as WatcherLock;
use crate::store::path::SharePath;
use crate::store::share::{self, is_not_found, DirWatch, Failure, WatchError};
pub use crate::store::share::{Action, Change, Notified};
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
        super::event_queue::take_unheld_lock(&tree, &watchers.join(&format!("{bucket}.lock"))).await
    }

    /// Watches the whole tree of `bucket`'s directory.
    ///
    /// Errors: Refused where the server keeps no watches; SMB failures.
    pub async fn watch_bucket(&self, bucket: &str) -> StoreResult<BucketWatch> {
        let tree = self.root.tree().await?;
        match share::watch_tree(&tree, &self.root.bucket_path(bucket)).await {
            Ok(watch) => Ok(BucketWatch { watch }),
            Err(WatchError::Unsupported(_)) => Err(StoreError::Refused("the server keeps no change notifications")),
            Err(WatchError::Failed(e)) => Err(e.into()),
        }
    }

    /// Removes the marks of S3 deletes in `bucket` older than `max_age`
    /// (of keys the watcher never knew).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn sweep_delete_marks(&self, bucket: &str, max_age: Duration) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        let dir = self.root.internal("s3-deletes").join(bucket);
        let entries = self.state_entries(&tree, &dir).await?;
        for e in entries.into_iter().filter(|e| !e.times.is_directory() && older_than(e.times.last_write, max_age)) {
            self.remove_state_file(&tree, &dir.join(&e.name)).await?;
        }
        Ok(())
    }

    /// The mark of an S3 delete of `key` in `bucket`.
    fn delete_mark(&self, bucket: &str, key: &str) -> SharePath {
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
        let name = hex::encode(&digest.as_ref()[..16]);
        self.root.internal("s3-deletes").join(bucket).join(&name)
    }

    /// Leaves the mark of an S3 delete of `key` (made just now).
    ///
    /// Errors: SMB failures.
    pub async fn mark_deleted(&self, bucket: &str, key: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        let path = self.delete_mark(bucket, key);
        match share::write_small(&tree, &path, &[]).await {
            Ok(_) => Ok(()),
            Err(e) if e.failure() == Failure::PathNotFound => {
                let deletes = self.root.internal("s3-deletes");
                self.make_dirs(&tree, &[deletes.clone(), deletes.join(bucket)]).await?;
                share::write_small(&tree, &path, &[]).await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Takes the mark of an S3 delete of `key`: true if there was one
    /// younger than `max_age` (the removal was the gateway's own).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn take_delete_mark(&self, bucket: &str, key: &str, max_age: Duration) -> StoreResult<bool> {
        let tree = self.root.tree().await?;
        let path = self.delete_mark(bucket, key);
        let times = match share::stat(&tree, &path).await {
            Ok(t) => t,
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        match share::delete(&tree, &path, false).await {
            Ok(()) => {}
            Err(e) if is_not_found(&e) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        Ok(!older_than(times.last_write, max_age))
    }
}

/// True if the FILETIME `written` lies more than `max_age` back.
fn older_than(written: u64, max_age: Duration) -> bool {
    let (secs, _) = crate::store::meta::filetime_to_unix(written);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    now.saturating_sub(secs.max(0) as u64) > max_age.as_secs()
}
