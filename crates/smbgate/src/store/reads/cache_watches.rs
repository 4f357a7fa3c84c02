//! The object cache's watches on the share (CHANGE_NOTIFY): a change that
//! breaks no lease (a program on the server writing its own disk, NFS on a
//! multiprotocol share, a person renaming another file over the object)
//! drops the cached entry at once, not after `--cache-max-age`.
//!
//! One watch per directory that holds entries, since Samba watches its own
//! disk per directory (inotify): a directory handle and one pending
//! request on a pooled connection, at most [`MAX_WATCHES`] per store
//! (entries in other directories keep the age bound alone). A watch starts
//! with the directory's first entry and ends once the directory holds
//! none, looked at after each change and every `--cache-max-age` while
//! nothing changes; it is also started again every [`WATCH_LIFETIME`], so
//! that it never keeps a connection the pool has replaced.
//!
//! A change between an entry's fill and its directory's watch would go
//! unseen, so the rule is: an entry counts as fresh only if its
//! directory's watch was armed, and saw no change, from before the fill's
//! hold to its insert ([`mark`]); otherwise it is kept expired, and used
//! again once one look at its path renews it (same file, size and times).
//! When a watch is armed, the entries kept before it are expired, and
//! again [`ARM_GRACE`] later (the server may start looking at its disk a
//! moment after it answered); so are all of a directory's entries when the
//! server lost count of its changes,
//! and when an armed watch ends for another reason than the directory
//! holding no entry. A directory whose watch cannot be armed (no right to
//! list it, a file system that keeps no watches) is not tried again for
//! [`RETRY_AFTER`].
//!
//! Whether the server keeps watches at all is asked once, when the store
//! opens ([`probe`]): one that refuses is logged then (WARN), and no watch
//! is tried by any store of that root.

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

pub use super::watch_table::{DirWatches, Mark, MAX_WATCHES, RETRY_AFTER};
use crate::store::root::{Inner, Root};
use crate::store::share::{self, Action, DirWatch, Notified, WatchError};
use crate::store::share_data::ShareData;

/// How long a watch lives before it is started again on a connection the
/// pool has now.
pub const WATCH_LIFETIME: Duration = Duration::from_secs(600);

/// How long after a watch is armed its directory's entries are expired
/// once more: Samba hands a watch to its notifyd process, which starts
/// watching its own disk a moment after it answered (measured: the first
/// change on the disk after the arm went unreported under load).
pub const ARM_GRACE: Duration = Duration::from_secs(1);

/// Longest [`unwatch_under`] waits for the watches it stops to close.
const UNWATCH_WAIT: Duration = Duration::from_secs(2);

/// The mark of the directory of the cache entry at `path` now (see the
/// module docs): an entry is fresh only if the mark is the same, and
/// armed, at its insert as before its fill's hold.
pub(crate) fn mark(root: &Root, path: &str) -> Mark {
    root.watches().mark(super::object_cache::parent(path))
}

/// Starts watching the directory of the cache entry at `path` unless it is
/// watched already (see the module docs).
pub(crate) fn watch_dir_of(root: &Root, path: &str) {
    watch(root, super::object_cache::parent(path));
}

fn watch(root: &Root, dir: &str) {
    if !root.objects().enabled() {
        return;
    }
    let Some((stop, id)) = root.watches().claim(dir) else { return };
    let (weak, dir) = (root.downgrade(), dir.to_string());
    tokio::spawn(async move {
        let claim = Claim { weak: weak.clone(), dir: dir.clone(), id };
        let ended = keep_watching(&weak, &dir, id, &stop).await;
        let Some(root) = Root::upgrade(&weak) else { return };
        match &ended {
            Ended::Empty | Ended::Deleted => {}
            Ended::NotArmed(e) => {
                tracing::debug!(error = %e, dir, "object cache: a directory could not be watched");
                root.watches().failed(&dir);
            }
            Ended::Lost(e) => {
                tracing::debug!(error = %e, dir, "object cache: a directory's watch ended");
                root.objects().expire_in(&dir, Instant::now());
            }
            Ended::Aged => root.objects().expire_in(&dir, Instant::now()),
        }
        drop(claim);
        // Entries kept while it ended have no watch: start another.
        if !matches!(ended, Ended::NotArmed(_) | Ended::Deleted) && root.objects().holds_in(&dir) {
            watch(&root, &dir);
        }
    });
}

/// Releases a directory's claim when its watch's task ends, however it
/// ends.
struct Claim {
    weak: Weak<Inner>,
    dir: String,
    id: u64,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some(root) = Root::upgrade(&self.weak) {
            root.watches().release(&self.dir, self.id);
        }
    }
}

/// Before the gateway removes the directory `dir` (it answered the
/// delete, so it is pending deletion): drops this store's entries in it
/// and under it, stops their watches, and waits (up to [`UNWATCH_WAIT`])
/// for their directories to close, since Samba removes a directory only
/// once its last open closes.
pub(crate) async fn unwatch_under(root: &Root, dir: &str) {
    root.objects().forget_under(dir);
    let stopped = root.watches().stop_under(dir);
    let deadline = Instant::now() + UNWATCH_WAIT;
    while root.watches().any_open(&stopped) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asks whether the server of `root` keeps watches, by watching the root's
/// own directory for a moment: one that refuses (STATUS_NOT_SUPPORTED,
/// STATUS_NOT_IMPLEMENTED) is logged now, at startup (WARN), and then no
/// store of the root tries a watch.
pub(crate) async fn probe(root: &Root) {
    if !root.objects().enabled() {
        return;
    }
    match arm(root, root.root_dir().as_str()).await {
        Ok(_) => {}
        Err(e @ WatchError::Unsupported(_)) => {
            root.watches().refuse();
            tracing::warn!(
                error = %e,
                "the SMB server does not report changes in directories (CHANGE_NOTIFY): an object changed on \
                 the server's own disk, or renamed over by a person on the share, may be answered from the \
                 cache for up to --cache-max-age"
            );
        }
        Err(e) => tracing::debug!(error = %e, "object cache: the share root could not be watched"),
    }
}

/// A watch of `dir`, armed, on a pooled connection.
async fn arm(root: &Root, dir: &str) -> Result<DirWatch, WatchError> {
    let tree = share::connection(root.pool()).await.map_err(WatchError::Failed)?;
    root.live(&tree).watch_dir(dir).await
}

/// How a watch ended.
enum Ended {
    /// Its directory holds no entry any more (or the store is gone).
    Empty,
    /// The gateway removed its directory ([`unwatch_under`]).
    Deleted,
    /// It could not be armed.
    NotArmed(WatchError),
    /// It was armed, then failed: the directory went, the connection was
    /// lost.
    Lost(String),
    /// It reached [`WATCH_LIFETIME`].
    Aged,
}

/// Watches `dir` while it holds entries of the cache of `weak`'s store,
/// until `stop`; closes the directory before it returns.
async fn keep_watching(weak: &Weak<Inner>, dir: &str, id: u64, stop: &Notify) -> Ended {
    let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
    let (max_age, case_insensitive) = (root.objects().options().max_age, root.case_insensitive());
    let armed = arm(&root, dir).await;
    let mut watch = match armed {
        Ok(w) => w,
        Err(e) => return Ended::NotArmed(e),
    };
    // Armed: entries kept before now may have missed a change.
    root.watches().bump(dir, id);
    root.objects().expire_in(dir, Instant::now());
    drop(root);
    let ended = follow(weak, (dir, id), &mut watch, stop, max_age, case_insensitive).await;
    if let Err(e) = watch.close().await {
        tracing::debug!(error = %e, dir, "object cache: closing a watched directory");
    }
    ended
}

/// The changes `watch` (of `dir`, watch `id`) reports, told to the cache,
/// until one of the module's ends.
async fn follow(
    weak: &Weak<Inner>,
    (dir, id): (&str, u64),
    watch: &mut DirWatch,
    stop: &Notify,
    max_age: Duration,
    case_insensitive: bool,
) -> Ended {
    let until = tokio::time::Instant::now() + WATCH_LIFETIME;
    let grace = tokio::time::sleep(ARM_GRACE);
    tokio::pin!(grace);
    let mut graced = false;
    loop {
        let answer = {
            let next = watch.next();
            tokio::pin!(next);
            loop {
                tokio::select! {
                    answer = &mut next => break answer,
                    () = &mut grace, if !graced => {
                        graced = true;
                        let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
                        root.watches().bump(dir, id);
                        root.objects().expire_in(dir, Instant::now());
                    }
                    () = stop.notified() => return Ended::Deleted,
                    () = tokio::time::sleep(max_age.min(WATCH_LIFETIME)) => {
                        match Root::upgrade(weak) {
                            Some(root) if root.objects().holds_in(dir) => {}
                            _ => return Ended::Empty,
                        }
                        if tokio::time::Instant::now() >= until {
                            return Ended::Aged;
                        }
                    }
                }
            }
        };
        let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
        root.watches().bump(dir, id);
        match answer {
            Ok(Notified::Changes(changes)) => {
                for c in changes {
                    // A stream's change (`name:stream`) is its file's.
                    let name = c.name.split(':').next().unwrap_or_default();
                    root.objects().forget_named(dir, name, case_insensitive);
                    if matches!(c.action, Action::Removed | Action::RenamedOldName) {
                        // A directory that went took its files along.
                        let under = if dir.is_empty() { name.to_string() } else { format!("{dir}\\{name}") };
                        root.objects().forget_under(&under);
                    }
                }
            }
            Ok(Notified::Overflow) => root.objects().expire_in(dir, Instant::now()),
            Ok(Notified::Closed) => return Ended::Lost("the directory was closed".into()),
            Err(e) => return Ended::Lost(e.to_string()),
        }
        if !root.objects().holds_in(dir) {
            return Ended::Empty;
        }
    }
}
