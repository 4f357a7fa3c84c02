//! The object cache's watches on the share (CHANGE_NOTIFY): a change that
//! breaks no lease (a program on the server writing its own disk, NFS on a
//! multiprotocol share) drops the cached entry at once, not after
//! `--cache-max-age`.
//!
//! One watch per directory that holds entries, since Samba watches its own
//! disk per directory (inotify): a directory handle and one pending
//! request on a pooled connection, at most [`MAX_WATCHES`] per store
//! (entries in other directories keep the age bound alone). A watch starts
//! with the directory's first entry and ends once the directory holds
//! none, looked at after each change and every `--cache-max-age` while
//! nothing changes.
//!
//! A change between an entry's fill and its directory's watch would go
//! unseen: when a watch starts, the entries kept before it are expired, so
//! each is used again only once a look at its path renews it (same file,
//! size and times). So are all of a directory's entries when the server
//! lost count of its changes, and when its watch ends for another reason
//! than the directory holding no entry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::store::root::{Inner, Root};
use crate::store::share::{self, DirWatch, Notified, WatchError};

/// Most directories one store watches at once.
pub const MAX_WATCHES: usize = 1024;

/// The watches of one store's cache.
#[derive(Default)]
pub struct DirWatches {
    /// Directories watched now (or being started), each with the signal
    /// that stops its watch.
    dirs: Mutex<HashMap<String, Arc<Notify>>>,
    /// The server refused to watch: no more watches are tried.
    refused: AtomicBool,
}

impl DirWatches {
    /// Notes that the server refused to watch: logged once (WARN), and no
    /// watch is tried again.
    fn refuse(&self, dir: &str, e: &WatchError) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %e,
                dir,
                "the SMB server does not report changes in directories (CHANGE_NOTIFY): an object changed on \
                 the server's own disk may be answered from the cache for up to --cache-max-age"
            );
        }
    }

    /// True if the server refused to watch.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// Claims `dir` for a new watch, returning the signal that stops it:
    /// `None` if it is watched already, at [`MAX_WATCHES`], or refused.
    fn claim(&self, dir: &str) -> Option<Arc<Notify>> {
        let mut dirs = self.dirs.lock().unwrap();
        if self.refused() || dirs.len() >= MAX_WATCHES || dirs.contains_key(dir) {
            return None;
        }
        let stop = Arc::new(Notify::new());
        dirs.insert(dir.to_string(), stop.clone());
        Some(stop)
    }

    fn release(&self, dir: &str) {
        self.dirs.lock().unwrap().remove(dir);
    }

    /// Directories watched now.
    pub fn watched(&self) -> usize {
        self.dirs.lock().unwrap().len()
    }
}

/// Longest [`unwatch_under`] waits for the watches it stops to close.
const UNWATCH_WAIT: Duration = Duration::from_secs(2);

/// Starts watching the directory of the cache entry at `path` unless it is
/// watched already (see the module docs).
pub(crate) fn watch_dir_of(root: &Root, path: &str) {
    let dir = super::object_cache::parent(path);
    if !root.objects().enabled() {
        return;
    }
    let Some(stop) = root.watches().claim(dir) else { return };
    let (weak, dir) = (root.downgrade(), dir.to_string());
    tokio::spawn(async move {
        let outcome = keep_watching(&weak, &dir, &stop).await;
        let Some(root) = Root::upgrade(&weak) else { return };
        match outcome {
            Ended::Empty => {}
            Ended::Refused(e) => {
                root.watches().refuse(&dir, &e);
                root.objects().expire_in(&dir, Instant::now());
            }
            Ended::Lost(e) => {
                tracing::debug!(error = %e, dir, "object cache: a directory's watch ended");
                root.objects().expire_in(&dir, Instant::now());
            }
        }
        root.watches().release(&dir);
    });
}

/// Stops this store's watches of `dir` and of the directories under it,
/// and waits (up to [`UNWATCH_WAIT`]) for their directories to close:
/// before the gateway removes a directory, since Samba removes one only
/// once its last open closes (until then it is pending deletion).
pub(crate) async fn unwatch_under(root: &Root, dir: &str) {
    let under = |d: &str| dir.is_empty() || d == dir || d.strip_prefix(dir).is_some_and(|r| r.starts_with('\\'));
    let stopped: Vec<String> = {
        let dirs = root.watches().dirs.lock().unwrap();
        dirs.iter()
            .filter(|(d, _)| under(d))
            .map(|(d, stop)| {
                stop.notify_one();
                d.clone()
            })
            .collect()
    };
    let deadline = Instant::now() + UNWATCH_WAIT;
    while !stopped.is_empty() && Instant::now() < deadline {
        if !root.watches().dirs.lock().unwrap().keys().any(|d| stopped.contains(d)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Finds out whether the server of `root` keeps watches, by watching the
/// root's own directory for a moment: one that refuses is logged (WARN)
/// now, at startup, rather than at the cache's first entry.
pub(crate) async fn probe(root: &Root) {
    if !root.objects().enabled() {
        return;
    }
    let dir = root.root_dir().as_str();
    let watched = match share::connection(root.pool()).await {
        Ok(tree) => share::watch_dir(&tree, dir).await,
        Err(_) => return,
    };
    match watched {
        Ok(_) => {}
        Err(e @ WatchError::Unsupported(_)) => root.watches().refuse(dir, &e),
        Err(e) => tracing::debug!(error = %e, "object cache: the share root could not be watched"),
    }
}

/// How a watch ended.
enum Ended {
    /// Its directory holds no entry any more (or the store is gone).
    Empty,
    /// The server will not watch directories.
    Refused(WatchError),
    /// The directory could not be opened or went, the connection was lost.
    Lost(String),
}

/// Watches `dir` while it holds entries of the cache of `weak`'s store,
/// until `stop`; closes the directory before it returns.
async fn keep_watching(weak: &Weak<Inner>, dir: &str, stop: &Notify) -> Ended {
    let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
    let (max_age, case_insensitive) = (root.objects().options().max_age, root.case_insensitive());
    let tree = match share::connection(root.pool()).await {
        Ok(t) => t,
        Err(e) => return Ended::Lost(e.to_string()),
    };
    drop(root);
    let mut watch = match share::watch_dir(&tree, dir).await {
        Ok(w) => w,
        Err(e @ WatchError::Unsupported(_)) => return Ended::Refused(e),
        Err(e) => return Ended::Lost(e.to_string()),
    };
    let ended = follow(weak, dir, &mut watch, stop, max_age, case_insensitive).await;
    if let Err(e) = watch.close().await {
        tracing::debug!(error = %e, dir, "object cache: closing a watched directory");
    }
    ended
}

/// The changes `watch` reports, told to the cache, until one of the
/// module's ends.
async fn follow(
    weak: &Weak<Inner>,
    dir: &str,
    watch: &mut DirWatch,
    stop: &Notify,
    max_age: Duration,
    case_insensitive: bool,
) -> Ended {
    let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
    root.objects().expire_in(dir, Instant::now());
    drop(root);
    loop {
        let answer = {
            let next = watch.next();
            tokio::pin!(next);
            loop {
                tokio::select! {
                    answer = &mut next => break answer,
                    () = stop.notified() => return Ended::Empty,
                    () = tokio::time::sleep(max_age) => {
                        match Root::upgrade(weak) {
                            Some(root) if root.objects().holds_in(dir) => {}
                            _ => return Ended::Empty,
                        }
                    }
                }
            }
        };
        let Some(root) = Root::upgrade(weak) else { return Ended::Empty };
        match answer {
            Ok(Notified::Changes(changes)) => {
                for c in changes {
                    // A stream's change (`name:stream`) is its file's.
                    let name = c.name.split(':').next().unwrap_or_default();
                    root.objects().forget_named(dir, name, case_insensitive);
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
