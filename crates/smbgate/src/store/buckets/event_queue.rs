//! The delivery queues of bucket notifications (`crate::events`): each
//! queued event is a small file, written before the event is sent and
//! removed once its target has taken it, so that a restart or the death of
//! an instance loses none.
//!
//! `.smbgate/events/<target>/<queue>/<entry>` at the root: one folder per
//! queue, each held by one instance through `<queue>.lock` beside it, a
//! creation lock (`share::create_lock`) that exists exactly while its
//! holder's open does. A queue whose lock nobody holds was left by an
//! instance that died or stopped, and another may take it over. Entries
//! are named so that their names sort in the order they were queued.

use crate::store::path::SharePath;
use crate::store::share::{self, is_not_found, Failure, Handle};
use crate::store::share_data::ShareData;
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, StoreError, StoreResult};

/// Largest queued event read back, in bytes.
const MAX_ENTRY: u32 = 1 << 20;

/// A queue (or a bucket's watch) held by this instance: while it lives,
/// no other instance takes it over. Dropping it lets the lock go (the
/// server deletes it).
pub struct QueueLock {
    pub(super) lock: Handle,
    /// The store it is of, to ask after the lock.
    pub(super) root: crate::store::Root,
}

impl QueueLock {
    /// True while the lock is still this instance's: its open answers. A
    /// lock whose connection was lost is gone from the server (another
    /// instance may hold it by now).
    pub async fn held(&self) -> bool {
        let tree = share::connection_of(&self.lock);
        self.root.live(&tree).query_times(&self.lock).await.is_ok()
    }
}

/// Takes the creation lock at `path` if nobody holds it: creates it, or,
/// where one was left by a server that went down with it still open (an
/// open sharing nothing succeeds only on a lock nobody holds), removes it
/// and creates it again. `None` while another instance holds it (or, where
/// takers race, may hold it: the next try tells). Over [`ShareOps`], so
/// that it runs against the in-memory share too (`event_queue_test.rs`).
///
/// Errors: SMB failures.
pub(super) async fn take_unheld_lock<S: ShareOps>(s: &S, path: &str) -> StoreResult<Option<S::Handle>> {
    for _ in 0..2 {
        if let Some(lock) = s.create_lock(path).await? {
            return Ok(Some(lock));
        }
        match s.open_alone_for_delete(path).await {
            Ok(left) => {
                tracing::debug!(lock = path, "removing a lock nobody holds");
                let _ = s.close_and_delete(left).await;
            }
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

impl Buckets {
    /// `.smbgate/events/<target>`.
    fn target_dir(&self, target: &str) -> SharePath {
        self.root.internal("events").join(target)
    }

    /// Takes the queue `queue` of `target`, making its folder if missing.
    /// Returns `None` if another instance holds it.
    ///
    /// The lock is taken before the folder is made, so that an instance
    /// looking for queues to take over never finds a new queue unheld.
    ///
    /// Errors: SMB failures.
    pub async fn lock_event_queue(&self, target: &str, queue: &str) -> StoreResult<Option<QueueLock>> {
        let tree = self.root.tree().await?;
        let target_dir = self.target_dir(target);
        self.make_dirs(&tree, &[self.root.internal("events"), target_dir.clone()]).await?;
        let path = target_dir.join(&format!("{queue}.lock"));
        let Some(lock) = take_unheld_lock(&self.root.live(&tree), &path).await? else { return Ok(None) };
        self.make_dirs(&tree, &[target_dir.join(queue)]).await?;
        Ok(Some(QueueLock { lock, root: self.root.clone() }))
    }

    /// The queues of `target` (their folder names), in no order; none if
    /// nothing was ever queued for it.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn event_queues(&self, target: &str) -> StoreResult<Vec<String>> {
        let tree = self.root.tree().await?;
        let entries = self.state_entries(&tree, &self.target_dir(target)).await?;
        Ok(entries.into_iter().filter(|e| e.times.is_directory()).map(|e| e.name).collect())
    }

    /// The entries of `target`'s queue `queue`, in the order they were
    /// queued.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn queued_events(&self, target: &str, queue: &str) -> StoreResult<Vec<String>> {
        let tree = self.root.tree().await?;
        let entries = self.state_entries(&tree, &self.target_dir(target).join(queue)).await?;
        let mut names: Vec<String> = entries.into_iter().filter(|e| !e.times.is_directory()).map(|e| e.name).collect();
        names.sort_unstable();
        Ok(names)
    }

    /// The body of queued event `entry`; `None` if it is gone.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn read_queued_event(&self, target: &str, queue: &str, entry: &str) -> StoreResult<Option<bytes::Bytes>> {
        let tree = self.root.tree().await?;
        self.read_state_file(&tree, &self.target_dir(target).join(queue).join(entry), MAX_ENTRY).await
    }

    /// Writes `body` as the new entry `entry` of `target`'s queue `queue`
    /// (made if missing).
    ///
    /// Errors: InvalidArgument for a body over 1 MiB; Conflict if the entry
    /// exists; SMB failures.
    pub async fn queue_event(&self, target: &str, queue: &str, entry: &str, body: &[u8]) -> StoreResult<()> {
        if body.len() > MAX_ENTRY as usize {
            return Err(StoreError::InvalidArgument("an event is larger than 1 MiB".into()));
        }
        let tree = self.root.tree().await?;
        let path = self.target_dir(target).join(queue).join(entry);
        let share = self.root.live(&tree);
        let created = match share.create_once(&path, body).await {
            Err(e) if e.failure() == Failure::PathNotFound => {
                let dir = self.target_dir(target);
                self.make_dirs(&tree, &[self.root.internal("events"), dir.clone(), dir.join(queue)]).await?;
                share.create_once(&path, body).await?
            }
            other => other?,
        };
        match created {
            true => Ok(()),
            false => Err(StoreError::Conflict(format!("queued event {entry} exists"))),
        }
    }

    /// Removes queued event `entry`; gone already is not an error.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn remove_queued_event(&self, target: &str, queue: &str, entry: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        self.remove_state_file(&tree, &self.target_dir(target).join(queue).join(entry)).await
    }

    /// Removes `target`'s queue `queue` if it is empty (a queue taken
    /// over and emptied); gone already, or not empty, is not an error.
    ///
    /// Errors: SMB failures other than those.
    pub async fn remove_event_queue(&self, target: &str, queue: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        match self.root.live(&tree).delete_dir(&self.target_dir(target).join(queue)).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) || e.failure() == Failure::NotEmpty => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
#[path = "event_queue_test.rs"]
mod tests;
