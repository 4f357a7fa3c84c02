//! The listing cache: recent directory listings kept for the next pages
//! of a paginated ListObjects, bounded in directories and, across every
//! store of the process, in bytes ([`ListingBudget`]).

use std::sync::Arc;

use super::spill_runs::SpillRuns;
use super::walk::{Needed, Prepared, Window};
use crate::store::share;

/// Recent directory listings, so that paging through a large directory
/// reads it once rather than once per page. Only continuation requests use
/// it (a first page always reads the share), entries live 30 s from their
/// last use (5 minutes at most from their read), and it is a cache: an
/// instance that does not have an entry just reads the share.
/// Before an entry is reused, the directory's LastWriteTime and ChangeTime
/// are read again (one round trip): a change through another instance or
/// an SMB user moves them, and the directory is read anew (failure class
/// 30).
pub struct DirCache {
    dirs: std::sync::Mutex<std::collections::HashMap<String, CachedDir>>,
    /// How long a listing is kept after a page last used it, up to
    /// [`MAX_AGE`] after its read ([`crate::store::StoreOptions::listing_cache_ttl`]).
    ttl: std::time::Duration,
    /// What all caches made from the same options may hold together.
    budget: ListingBudget,
    /// Reads in flight, shared by concurrent listings of one directory.
    pub(crate) reads: super::dir_reads::SharedReads<DirRead>,
}

/// What one read of a directory gives: `None` if it does not exist; else
/// its stamp when the read began, the window read, and the runs holding
/// what the window let go ([`super::spill_runs`]), if they were written.
pub(crate) type DirRead = Option<(DirStamp, Window, Option<Arc<SpillRuns>>)>;

/// One kept listing.
struct CachedDir {
    /// When a page last used it (or it was read).
    used: std::time::Instant,
    /// When it was read.
    read_at: std::time::Instant,
    /// The directory's (LastWriteTime, ChangeTime) then.
    stamp: DirStamp,
    /// What the read kept (see [`Needed`]).
    needed: Needed,
    /// The whole directory or a window of it.
    window: Window,
    /// The names after the window, spilled to local disk when it was read.
    spill: Option<Arc<SpillRuns>>,
    /// What it takes of the [`ListingBudget`].
    bytes: usize,
}

/// The longest a listing is kept, however often pages use it: a file
/// changed in place on the share moves no directory time, so its size and
/// time in a kept listing are at most this old (5 minutes).
pub(crate) const MAX_AGE: std::time::Duration = std::time::Duration::from_secs(300);

impl CachedDir {
    fn live(&self, ttl: std::time::Duration) -> bool {
        self.used.elapsed() < ttl && self.read_at.elapsed() < MAX_AGE
    }
}

/// Bytes all cached directory listings may hold together
/// (`--listing-cache-size`): shared by every store made from the same
/// [`crate::store::StoreOptions`] (each share root, each SMB identity), so that
/// many identities paging through large directories cannot grow the
/// process without bound. A listing that does not fit, after the least
/// recently used ones of its own cache made room, is simply not kept: later pages read
/// the share again.
///
/// The windows being read ([`ReadReservation`]) have twice as many bytes
/// again, apart (a window grows to half as much again as it keeps before
/// it is cut back): many listings of large directories at once each get a
/// smaller window (and read their directory more often) rather than grow
/// the process.
#[derive(Debug, Clone)]
pub struct ListingBudget {
    limit: usize,
    /// Bytes of the cached listings.
    held: SharedBytes,
    /// Bytes of the windows being read.
    reading: SharedBytes,
}

/// A count of bytes shared by clones, taken only up to a limit.
#[derive(Debug, Clone, Default)]
struct SharedBytes(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl SharedBytes {
    /// Takes `n` bytes if the count stays within `limit`.
    fn take(&self, limit: usize, n: usize) -> bool {
        use std::sync::atomic::Ordering;
        self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| (h + n <= limit).then_some(h + n)).is_ok()
    }

    fn give(&self, n: usize) {
        self.0.fetch_sub(n, std::sync::atomic::Ordering::AcqRel);
    }

    fn get(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Bytes every window may hold without a reservation, so that a listing
/// always goes on (a page needs at most a thousand entries).
pub(crate) const WINDOW_FLOOR: usize = 4 << 20;

/// Reservation granularity: a window asks for this much more at a time.
const RESERVE_STEP: usize = 4 << 20;

/// The bytes one window being read holds of its [`ListingBudget`], given
/// back when dropped (also when the read is cancelled).
pub(crate) struct ReadReservation {
    budget: ListingBudget,
    held: usize,
}

impl ReadReservation {
    /// Holds what `n` bytes need beyond [`WINDOW_FLOOR`] (in steps of 4
    /// MiB), taking more or giving back what a cut freed. False: more was
    /// needed and not to be had; the window must stay within
    /// [`ReadReservation::allowed`].
    pub(crate) fn cover(&mut self, n: usize) -> bool {
        let need = n.saturating_sub(WINDOW_FLOOR).div_ceil(RESERVE_STEP) * RESERVE_STEP;
        if need <= self.held {
            self.budget.reading.give(self.held - need);
            self.held = need;
            return true;
        }
        if self.budget.reading.take(self.budget.limit.saturating_mul(2), need - self.held) {
            self.held = need;
            return true;
        }
        false
    }

    /// The bytes the window may hold now.
    pub(crate) fn allowed(&self) -> usize {
        self.held + WINDOW_FLOOR
    }
}

impl Drop for ReadReservation {
    fn drop(&mut self) {
        self.budget.reading.give(self.held);
    }
}

impl ListingBudget {
    /// A budget of `limit` bytes (0: nothing is cached).
    pub fn new(limit: usize) -> ListingBudget {
        ListingBudget { limit, held: Default::default(), reading: Default::default() }
    }

    /// Bytes held now by the windows being read, over every cache on
    /// this budget (beyond each one's [`WINDOW_FLOOR`]).
    pub fn reading(&self) -> usize {
        self.reading.get()
    }

    /// Bytes held now by every cache on this budget.
    pub fn held(&self) -> usize {
        self.held.get()
    }

    /// Takes `n` bytes if they fit.
    fn take(&self, n: usize) -> bool {
        self.held.take(self.limit, n)
    }

    fn give(&self, n: usize) {
        self.held.give(n);
    }
}

/// About what a prepared listing takes in memory, in bytes.
fn listing_bytes(items: &Prepared) -> usize {
    items.bytes()
}

/// A directory's LastWriteTime and ChangeTime (100 ns units since 1601).
pub(crate) type DirStamp = (u64, u64);

pub(crate) fn stamp(t: &share::FileTimes) -> DirStamp {
    (t.last_write, t.change)
}

const DIR_CACHE_DIRS: usize = 256;

impl DirCache {
    /// An empty cache whose listings are kept for `ttl` after their last
    /// use (up to [`MAX_AGE`] after their read), within `budget`.
    pub fn new(ttl: std::time::Duration, budget: ListingBudget) -> DirCache {
        DirCache { dirs: Default::default(), ttl, budget, reads: Default::default() }
    }

    /// The kept listing of `path` that serves a page needing `needed`
    /// (names kept with a `within` the page's starts with, so that every
    /// name it needs was kept, and `from` inside the window:
    /// see [`Window::serves`]), with the directory's stamp when it was read.
    /// A page that uses it keeps it another `ttl` (a slow client paging
    /// through a million keys would outlive a fixed one), up to 5 minutes
    /// from its read.
    pub(crate) fn get(&self, path: &str, needed: &Needed) -> Option<(DirStamp, Window)> {
        let mut dirs = self.dirs.lock().unwrap();
        self.drop_dead(&mut dirs, path);
        let kept = dirs.get_mut(path).filter(|k| k.window.serves_needs(&k.needed, needed))?;
        kept.used = std::time::Instant::now();
        Some((kept.stamp, kept.window.clone()))
    }

    /// The spilled runs of `path` that hold every name a page needing
    /// `needed` needs after the kept window ([`SpillRuns::serves`]), with
    /// the directory's stamp when they were read; a page that uses them
    /// keeps them as [`DirCache::get`] does.
    pub(crate) fn spill_for(&self, path: &str, needed: &Needed) -> Option<(DirStamp, Arc<SpillRuns>)> {
        let mut dirs = self.dirs.lock().unwrap();
        self.drop_dead(&mut dirs, path);
        let kept = dirs.get_mut(path)?;
        let spill = kept.spill.as_ref().filter(|s| s.serves(needed))?.clone();
        kept.used = std::time::Instant::now();
        Some((kept.stamp, spill))
    }

    /// Drops `path`'s listing if it is past its time, giving back its bytes
    /// and its spilled runs.
    fn drop_dead(&self, dirs: &mut std::collections::HashMap<String, CachedDir>, path: &str) {
        if dirs.get(path).is_some_and(|k| !k.live(self.ttl)) {
            if let Some(kept) = dirs.remove(path) {
                self.budget.give(kept.bytes);
            }
        }
    }

    /// True if this cache keeps anything (a listing spilled for it can
    /// be used).
    pub(crate) fn keeps(&self) -> bool {
        self.budget.limit > 0
    }

    /// The most bytes a directory window may hold ([`super::names::Names::used_bytes`]):
    /// what this cache can keep of one listing, so that the next pages of a
    /// listing find the window its first page read, or 4 MiB when the cache
    /// keeps less (a window then only needs to cover a page).
    pub(crate) fn window_bytes(&self) -> usize {
        // Room for the listing's own bookkeeping and for objects kept
        // beside their directories, merged in after the cut (see `put`).
        (self.budget.limit - self.budget.limit / 32).saturating_sub(64 << 10).max(WINDOW_FLOOR)
    }

    /// A reservation for one window about to be read (see [`ListingBudget`]).
    pub(crate) fn reserve_read(&self) -> ReadReservation {
        ReadReservation { budget: self.budget.clone(), held: 0 }
    }

    /// Drops the listing of `dir` (after a write into it).
    pub fn forget(&self, dir: &str) {
        if let Some(kept) = self.dirs.lock().unwrap().remove(dir) {
            self.budget.give(kept.bytes);
        }
    }

    /// Keeps `window` of `path`, read for `needed`, in place of any other
    /// listing of it.
    #[cfg(test)]
    pub(crate) fn put(&self, path: String, stamp: DirStamp, needed: &Needed, window: Window) {
        self.put_spilled(path, stamp, needed, window, None)
    }

    /// [`DirCache::put`] with the runs of the names after the window (a
    /// window made from them keeps them, and their read's age).
    pub(crate) fn put_spilled(
        &self,
        path: String,
        stamp: DirStamp,
        needed: &Needed,
        window: Window,
        spill: Option<Arc<SpillRuns>>,
    ) {
        // (The runs' index, about 1/256 of them, is bounded by
        // --list-spill-size instead.)
        let n = listing_bytes(&window.items) + needed.from.len() + needed.within.len();
        if n > self.budget.limit {
            return; // would never fit: keep what is kept
        }
        let mut dirs = self.dirs.lock().unwrap();
        let ttl = self.ttl;
        let budget = &self.budget;
        dirs.retain(|_, kept| {
            let keep = kept.live(ttl);
            if !keep {
                budget.give(kept.bytes);
            }
            keep
        });
        if let Some(kept) = dirs.remove(&path) {
            budget.give(kept.bytes);
        }
        // Room under the count and within the shared budget, made from
        // this cache's least recently used listings; none left to drop: not
        // kept.
        loop {
            if dirs.len() < DIR_CACHE_DIRS && budget.take(n) {
                let now = std::time::Instant::now();
                let read_at = spill.as_ref().map_or(now, |s| s.read_at());
                let needed = needed.clone();
                dirs.insert(path, CachedDir { used: now, read_at, stamp, needed, window, spill, bytes: n });
                return;
            }
            let Some(unused) = dirs.iter().min_by_key(|(_, k)| k.used).map(|(k, _)| k.clone()) else {
                return;
            };
            if let Some(kept) = dirs.remove(&unused) {
                budget.give(kept.bytes);
            }
        }
    }
}

impl Drop for DirCache {
    fn drop(&mut self) {
        let dirs = self.dirs.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, kept) in dirs.drain() {
            self.budget.give(kept.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::listings::walk::{prepare, DirItem};

    fn listing(entries: usize) -> Window {
        Window::whole(prepare(
            (0..entries)
                .map(|i| DirItem {
                    name: format!("entry-{i:06}"),
                    is_dir: false,
                    size: 0,
                    last_modified: 0,
                    etag_hint: None,
                })
                .collect(),
        ))
    }

    #[test]
    fn listings_stay_within_the_shared_budget() {
        let one = listing_bytes(&listing(1000).items);
        let budget = ListingBudget::new(one * 2 + one / 2);
        let ttl = crate::store::StoreOptions::default().listing_cache_ttl;
        let (a, b) = (DirCache::new(ttl, budget.clone()), DirCache::new(ttl, budget.clone()));
        a.put("a1".into(), (1, 1), &Needed::default(), listing(1000));
        a.put("a2".into(), (1, 1), &Needed::default(), listing(1000));
        assert_eq!(budget.held(), 2 * one);
        // The other cache on the budget: no room, and none of its own to
        // make room from, so its listing is not kept.
        b.put("b1".into(), (1, 1), &Needed::default(), listing(1000));
        assert!(b.get("b1", &Needed::default()).is_none());
        // A cache makes room from its own least recently used.
        a.put("a3".into(), (1, 1), &Needed::default(), listing(1000));
        assert!(
            a.get("a1", &Needed::default()).is_none()
                && a.get("a2", &Needed::default()).is_some()
                && a.get("a3", &Needed::default()).is_some()
        );
        assert_eq!(budget.held(), 2 * one);
        // Bigger than the whole budget: never kept, nothing else lost.
        a.put("huge".into(), (1, 1), &Needed::default(), listing(10_000));
        assert!(
            a.get("huge", &Needed::default()).is_none()
                && a.get("a2", &Needed::default()).is_some()
                && a.get("a3", &Needed::default()).is_some()
        );
        assert_eq!(budget.held(), 2 * one);
        a.forget("a3");
        assert!(budget.held() < 2 * one);
        drop(a);
        assert_eq!(budget.held(), 0, "a dropped cache gives its bytes back");
        b.put("b1".into(), (1, 1), &Needed::default(), listing(1000));
        assert!(b.get("b1", &Needed::default()).is_some());
    }

    #[test]
    fn a_listing_in_use_outlives_its_ttl() {
        let ttl = std::time::Duration::from_millis(200);
        let cache = DirCache::new(ttl, ListingBudget::new(64 << 20));
        cache.put("d".into(), (1, 1), &Needed::default(), listing(10));
        // Each page keeps it another ttl, past the first ttl since its read.
        for _ in 0..3 {
            std::thread::sleep(ttl / 2);
            assert!(cache.get("d", &Needed::default()).is_some());
        }
        std::thread::sleep(ttl + ttl / 2);
        assert!(cache.get("d", &Needed::default()).is_none(), "unused for longer than its ttl");
    }

    #[test]
    fn windows_being_read_share_the_budget_and_give_it_back() {
        // Windows being read may hold 20 MiB together beyond their floors.
        let cache = DirCache::new(std::time::Duration::from_secs(30), ListingBudget::new(10 << 20));
        let mut a = cache.reserve_read();
        let mut b = cache.reserve_read();
        // Below the floor: nothing taken.
        assert!(a.cover(3 << 20));
        assert_eq!(cache.budget.reading(), 0);
        // 18 MiB for one: 16 MiB taken in 4 MiB steps, 4 MiB of the floor.
        assert!(a.cover(18 << 20));
        assert_eq!(cache.budget.reading(), 16 << 20);
        // The other gets what is left, then no more: it keeps its floor.
        assert!(b.cover(8 << 20));
        assert!(!b.cover(16 << 20));
        assert_eq!(b.allowed(), 8 << 20);
        // A cut gives back what it freed.
        assert!(a.cover(9 << 20));
        assert_eq!(cache.budget.reading(), 12 << 20);
        drop(a);
        assert_eq!(cache.budget.reading(), 4 << 20);
        assert!(b.cover(16 << 20));
        drop(b);
        assert_eq!(cache.budget.reading(), 0);
    }

    #[test]
    fn a_listing_serves_pages_that_need_fewer_of_its_names() {
        let cache = DirCache::new(std::time::Duration::from_secs(30), ListingBudget::new(64 << 20));
        let read = Needed { from: "entry-000010".into(), within: "entry-".into() };
        cache.put("d".into(), (1, 1), &read, listing(100));
        let needs = |from: &str, within: &str| Needed { from: from.into(), within: within.into() };
        // A narrower prefix, from on: every name it needs was kept.
        assert!(cache.get("d", &needs("entry-00005", "entry-00005")).is_some());
        assert!(cache.get("d", &needs("entry-000010", "entry-")).is_some());
        // Names before the read's start, or outside its prefix, were not.
        assert!(cache.get("d", &needs("entry-000001", "entry-")).is_none());
        assert!(cache.get("d", &needs("entry-000010", "")).is_none());
        assert!(cache.get("d", &needs("f", "f")).is_none());
    }
}
