//! The state of one store's directory watches (`cache_watches` runs them):
//! which directories are watched, each watch's id and how often it was
//! armed or reported changes (the marks fills compare), which directories
//! could not be watched lately, and whether the server keeps watches at
//! all. Plain data behind locks; it knows nothing of the store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Most directories one store watches at once.
pub const MAX_WATCHES: usize = 1024;

/// How long a directory whose watch could not be armed is left unwatched.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// What a fill saw of its directory's watch: `None` unwatched, else the
/// watch's id and how many times it was armed or reported changes.
pub type Mark = Option<(u64, u64)>;

/// One watched directory.
struct Watch {
    /// Tells the watch to end.
    stop: Arc<Notify>,
    /// Which watch this is (a later one of the same directory is another).
    id: u64,
    /// Arms and reports so far; 0 until armed.
    changes: u64,
}

/// The watches of one store's cache.
#[derive(Default)]
pub struct DirWatches {
    dirs: Mutex<HashMap<String, Watch>>,
    /// Directories whose watch could not be armed, and when.
    failed: Mutex<HashMap<String, Instant>>,
    /// The server keeps no watches (shared by every store of the root).
    refused: Arc<AtomicBool>,
    next_id: std::sync::atomic::AtomicU64,
}

impl DirWatches {
    /// Watches for another store of the same root (another SMB identity):
    /// its own directories, the server's refusal shared.
    pub fn for_another_identity(&self) -> DirWatches {
        DirWatches { refused: self.refused.clone(), ..Default::default() }
    }

    /// True if the server keeps no watches.
    pub fn refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// Directories watched now.
    pub fn watched(&self) -> usize {
        self.dirs.lock().unwrap().len()
    }

    /// Claims `dir` for a new watch: its signal to stop and its id; `None`
    /// if it is watched already, at [`MAX_WATCHES`], refused, or failed
    /// within [`RETRY_AFTER`].
    pub(super) fn claim(&self, dir: &str) -> Option<(Arc<Notify>, u64)> {
        if self.refused() {
            return None;
        }
        {
            let mut failed = self.failed.lock().unwrap();
            match failed.get(dir) {
                Some(at) if at.elapsed() < RETRY_AFTER => return None,
                Some(_) => {
                    failed.remove(dir);
                }
                None => {}
            }
        }
        let mut dirs = self.dirs.lock().unwrap();
        if dirs.len() >= MAX_WATCHES || dirs.contains_key(dir) {
            return None;
        }
        let (stop, id) = (Arc::new(Notify::new()), self.next_id.fetch_add(1, Ordering::Relaxed));
        dirs.insert(dir.to_string(), Watch { stop: stop.clone(), id, changes: 0 });
        Some((stop, id))
    }

    /// Counts an arm or a report of the watch `id` of `dir`.
    pub(super) fn bump(&self, dir: &str, id: u64) {
        if let Some(w) = self.dirs.lock().unwrap().get_mut(dir).filter(|w| w.id == id) {
            w.changes += 1;
        }
    }

    pub(super) fn release(&self, dir: &str, id: u64) {
        let mut dirs = self.dirs.lock().unwrap();
        if dirs.get(dir).is_some_and(|w| w.id == id) {
            dirs.remove(dir);
        }
    }

    pub(super) fn failed(&self, dir: &str) {
        let mut failed = self.failed.lock().unwrap();
        if failed.len() >= MAX_WATCHES {
            failed.retain(|_, at| at.elapsed() < RETRY_AFTER);
        }
        failed.insert(dir.to_string(), Instant::now());
    }
}

impl DirWatches {
    /// What a fill sees of the watch of `dir` now (see [`Mark`]).
    pub fn mark(&self, dir: &str) -> Mark {
        self.dirs.lock().unwrap().get(dir).map(|w| (w.id, w.changes))
    }

    /// Tells the watches of `dir` and of the directories under it to end;
    /// returns which they were, for [`DirWatches::any_open`].
    pub(super) fn stop_under(&self, dir: &str) -> Vec<(String, u64)> {
        let under = |d: &str| d == dir || d.strip_prefix(dir).is_some_and(|r| r.starts_with('\\'));
        let dirs = self.dirs.lock().unwrap();
        dirs.iter()
            .filter(|(d, _)| under(d))
            .map(|(d, w)| {
                w.stop.notify_one();
                (d.clone(), w.id)
            })
            .collect()
    }

    /// True while any of `watches` (from [`DirWatches::stop_under`]) is
    /// still claimed.
    pub(super) fn any_open(&self, watches: &[(String, u64)]) -> bool {
        let dirs = self.dirs.lock().unwrap();
        watches.iter().any(|(d, id)| dirs.get(d).is_some_and(|w| w.id == *id))
    }

    /// Notes that the server keeps no watches, for every store of the root.
    pub(super) fn refuse(&self) {
        self.refused.store(true, Ordering::Relaxed);
    }
}
