//! The object cache: HEAD, and GET of small objects, answered from memory
//! while the server's lease says the file has not changed.
//!
//! An entry is an object's info (and, up to a size, its bytes) together
//! with the open that proves them current: the file held with a
//! Read+Handle lease, sharing only READ (`share::hold_with_meta`). The
//! entry is used only while that lease still allows Read+Handle, its handle is open and
//! its connection up, and for at most `max_age`:
//! - anyone who writes the file breaks Read (Samba breaks it on the first
//!   write or truncating open);
//! - every gateway writer opens the current file for DELETE before it
//!   renames over it or deletes it, and after it rewrites a record
//!   (`share::open_breaking_leases`), which breaks Handle; the holder's connection
//!   closes the handle before it acknowledges, so the writer goes on;
//! - a person on the share who renames another file over the object, or a
//!   program on the server itself, breaks nothing: for them the entry is
//!   as fresh as `max_age`. `docs/leases.md` has the measurements.
//!
//! Entries and bytes are bounded; the least recently used entry goes
//! first, and its handle closes when it is dropped.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::store::share::{CreateResponse, Held};
use crate::store::types::ObjectInfo;

/// What the cache may hold (`--cache`, `--cache-entries`, `--cache-size`,
/// `--cache-object-max`, `--cache-max-age`).
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// False: nothing is cached, and writers do not warn holders.
    pub enabled: bool,
    /// Most objects held at once, per store (one open file on the server
    /// each).
    pub entries: usize,
    /// Most bytes entries may hold together, per store: their bodies plus
    /// [`ENTRY_OVERHEAD`] each.
    pub bytes: usize,
    /// Largest object whose bytes are kept (bytes; larger ones keep only
    /// their info).
    pub object_max: u32,
    /// Longest an entry is used, however its lease stands: the bound on
    /// staleness for changes that break no lease.
    pub max_age: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            enabled: true,
            entries: 4096,
            bytes: 64 << 20,
            object_max: 64 << 10,
            max_age: Duration::from_secs(30),
        }
    }
}

/// Lookups answered from an entry, and lookups that found none current,
/// over every store of the process.
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

/// `(hits, misses)` of every object cache of the process so far.
pub fn lookups() -> (u64, u64) {
    (HITS.load(Ordering::Relaxed), MISSES.load(Ordering::Relaxed))
}

/// Bytes an entry counts besides its body (its info, key and handle).
pub const ENTRY_OVERHEAD: usize = 512;

/// What the cache answers for an object.
#[derive(Clone)]
pub struct Cached {
    /// The object's info, as a HEAD would find it.
    pub info: ObjectInfo,
    /// All its bytes, if it is small enough to keep.
    pub body: Option<Bytes>,
}

/// What proves an entry current: an open of the file under a lease that
/// a change breaks ([`Held`] on the share; the in-memory share's holder
/// in unit tests).
pub trait Holder: Send + Sync {
    /// What the open's CREATE answered (times, size, on-disk id).
    fn created(&self) -> &CreateResponse;
    /// True while what the holder saw is still what the file is.
    fn holds(&self) -> bool;
}

impl Holder for Held {
    fn created(&self) -> &CreateResponse {
        Held::created(self)
    }
    fn holds(&self) -> bool {
        Held::holds(self)
    }
}

struct Entry<H> {
    cached: Cached,
    held: H,
    since: Instant,
    used: u64,
    cost: usize,
    /// Which entry of its path this is (the tick it was kept at).
    generation: u64,
}

struct State<H> {
    map: HashMap<String, Entry<H>>,
    /// Use tick → path, least recently used first.
    order: BTreeMap<u64, String>,
    tick: u64,
    bytes: usize,
    /// The paths of the entries in each directory (for `cache_watches`).
    dirs: HashMap<String, HashSet<String>>,
}

impl<H> Default for State<H> {
    fn default() -> Self {
        State { map: HashMap::new(), order: BTreeMap::new(), tick: 0, bytes: 0, dirs: HashMap::new() }
    }
}

impl<H> State<H> {
    fn remove(&mut self, path: &str) -> Option<Entry<H>> {
        let e = self.map.remove(path)?;
        self.order.remove(&e.used);
        self.bytes -= e.cost;
        if let Some(paths) = self.dirs.get_mut(parent(path)) {
            paths.remove(path);
            if paths.is_empty() {
                self.dirs.remove(parent(path));
            }
        }
        Some(e)
    }

    /// The paths of the entries directly in `dir`.
    fn paths_in(&self, dir: &str) -> Vec<String> {
        self.dirs.get(dir).map_or_else(Vec::new, |p| p.iter().cloned().collect())
    }
}

/// The directory a share path is in (`""` for the share root).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('\\').map_or("", |(dir, _)| dir)
}

/// Fills (hold, look, read) in flight at once per store, beyond which a
/// miss is not filled: each costs the server about three misses' work, so
/// more at once slows the requests it is meant to speed up (measured with
/// scripts/bench-small-ab on 2 cores).
const MAX_FILLS: usize = 16;

/// How old an entry is, against `max_age`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    /// Younger than half `max_age`: used as it is.
    Fresh,
    /// Past half `max_age`: used, and worth renewing
    /// ([`ObjectCache::renew`]) so that an object in use never expires.
    Aging,
    /// Past `max_age`: used only once a look at its path renews it.
    Expired,
}

/// The cache of one store (one share root as one SMB identity), its
/// entries proved current by `H`.
pub struct ObjectCache<H = Held> {
    opts: CacheOptions,
    state: Mutex<State<H>>,
    /// Paths being filled now, each by one fill.
    filling: Arc<Mutex<HashSet<String>>>,
    /// Paths a GET missed once lately: a GET's fill is a round trip of its
    /// own beside the GET's, so only an object asked for twice is filled,
    /// and a workload that reads each object once pays nothing (a HEAD's
    /// own open holds the file, at no extra cost). Cleared once it holds twice as
    /// many paths as the cache may hold entries.
    missed: Mutex<HashSet<String>>,
    /// When each path's holder last lost its lease to someone else's
    /// change: a file that changes often is not held again for
    /// [`QUIET_BEFORE_HOLD`] (each hold would only be one more break its
    /// next writer waits for). Cleared like `missed`.
    broken: Mutex<HashMap<String, Instant>>,
}

/// How long after a holder of a path lost its lease the path is looked at
/// without holding it.
pub const QUIET_BEFORE_HOLD: Duration = Duration::from_secs(1);

/// A fill of one path in flight ([`ObjectCache::start_fill`]); the path
/// may be filled again once this is dropped.
pub struct Filling {
    path: String,
    filling: Arc<Mutex<HashSet<String>>>,
}

impl Drop for Filling {
    fn drop(&mut self) {
        self.filling.lock().unwrap().remove(&self.path);
    }
}

impl<H: Holder> ObjectCache<H> {
    /// An empty cache under `opts`.
    pub fn new(opts: CacheOptions) -> ObjectCache<H> {
        ObjectCache {
            opts,
            state: Mutex::new(State::default()),
            filling: Default::default(),
            missed: Default::default(),
            broken: Default::default(),
        }
    }

    /// Records a miss of `path`; true if it was missed before (since the
    /// record was last cleared), so that filling it is worth its cost.
    pub fn missed_again(&self, path: &str) -> bool {
        let mut m = self.missed.lock().unwrap();
        if m.remove(path) {
            return true;
        }
        if m.len() >= self.opts.entries.saturating_mul(2) {
            m.clear();
        }
        m.insert(path.to_string());
        false
    }

    /// Claims the fill of `path`: `None` if it is being filled already or
    /// [`MAX_FILLS`] fills are in flight.
    pub fn start_fill(&self, path: &str) -> Option<Filling> {
        let mut f = self.filling.lock().unwrap();
        if f.len() >= MAX_FILLS || !f.insert(path.to_string()) {
            return None;
        }
        Some(Filling { path: path.to_string(), filling: self.filling.clone() })
    }

    /// True if objects are cached (and writers warn holders).
    pub fn enabled(&self) -> bool {
        self.opts.enabled && self.opts.entries > 0
    }

    /// The options in effect.
    pub fn options(&self) -> &CacheOptions {
        &self.opts
    }

    /// The object at share path `path`, if an entry holds it and its lease
    /// still stands, with the entry's [`Age`]; an entry whose lease broke
    /// is dropped (its handle closes). A [`Age::Fresh`] or [`Age::Aging`]
    /// entry counts as a hit here; an [`Age::Expired`] one is counted by
    /// [`ObjectCache::counted`] once its look has decided. Also returns the
    /// entry's generation, for [`ObjectCache::renew`].
    pub fn get(&self, path: &str) -> Option<(Cached, Age, u64)> {
        let mut s = self.state.lock().unwrap();
        let age = match s.map.get(path) {
            Some(e) if e.held.holds() => e.since.elapsed(),
            found => {
                if found.is_some() {
                    self.note_broken(path);
                }
                MISSES.fetch_add(1, Ordering::Relaxed);
                let gone = s.remove(path);
                drop(s);
                drop(gone);
                return None;
            }
        };
        let age = match age {
            a if a > self.opts.max_age => Age::Expired,
            a if a > self.opts.max_age / 2 => Age::Aging,
            _ => Age::Fresh,
        };
        if age != Age::Expired {
            HITS.fetch_add(1, Ordering::Relaxed);
        }
        s.tick += 1;
        let tick = s.tick;
        let e = s.map.get_mut(path).expect("present");
        let old = std::mem::replace(&mut e.used, tick);
        let (cached, generation) = (e.cached.clone(), e.generation);
        s.order.remove(&old);
        s.order.insert(tick, path.to_string());
        Some((cached, age, generation))
    }

    /// Records that the holder of `path` lost its lease (someone changed
    /// the file).
    fn note_broken(&self, path: &str) {
        let mut b = self.broken.lock().unwrap();
        if b.len() >= self.opts.entries.saturating_mul(2) {
            b.clear();
        }
        b.insert(path.to_string(), Instant::now());
    }

    /// True unless a holder of `path` lost its lease within
    /// [`QUIET_BEFORE_HOLD`]: whether holding it now is worth a lease.
    pub fn quiet(&self, path: &str) -> bool {
        let mut b = self.broken.lock().unwrap();
        match b.get(path) {
            Some(at) if at.elapsed() < QUIET_BEFORE_HOLD => false,
            Some(_) => {
                b.remove(path);
                true
            }
            None => true,
        }
    }

    /// Counts the lookup of an [`Age::Expired`] entry: a hit if its look
    /// renewed it.
    pub fn counted(&self, renewed: bool) {
        match renewed {
            true => HITS.fetch_add(1, Ordering::Relaxed),
            false => MISSES.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// Keeps `cached` for `path`, proved current by `held`, replacing any
    /// entry of that path and dropping the least recently used entries
    /// beyond the bounds. An entry larger than the byte bound is not kept.
    pub fn insert(&self, path: &str, cached: Cached, held: H, expired: bool) {
        let cost = ENTRY_OVERHEAD + path.len() + cached.body.as_ref().map_or(0, Bytes::len);
        if !self.enabled() || cost > self.opts.bytes {
            return;
        }
        // Expired: used only once a look renews it (see `expire_in`).
        let since = match expired {
            true => match self.expired_since() {
                Some(t) => t,
                None => return,
            },
            false => Instant::now(),
        };
        let mut dropped = Vec::new();
        let mut s = self.state.lock().unwrap();
        dropped.extend(s.remove(path));
        while s.map.len() >= self.opts.entries || s.bytes + cost > self.opts.bytes {
            let Some((_, oldest)) = s.order.pop_first() else { break };
            dropped.extend(s.remove(&oldest));
        }
        s.tick += 1;
        let used = s.tick;
        s.order.insert(used, path.to_string());
        s.bytes += cost;
        s.dirs.entry(parent(path).to_string()).or_default().insert(path.to_string());
        s.map.insert(path.to_string(), Entry { cached, held, since, used, cost, generation: used });
        drop(s);
        drop(dropped);
    }

    /// Starts the age of `path`'s entry again from `asked` if it still
    /// holds the file that `now` (a look at `path` sent at `asked`) found:
    /// the same on-disk id, size, LastWriteTime and ChangeTime, so neither
    /// a rename over it nor a change on the server's own disk has happened.
    /// Otherwise drops the entry. Only the entry of `generation` (as
    /// [`ObjectCache::get`] returned it) is renewed: another entry of the
    /// path, kept meanwhile, is not what the caller looked at. Returns true
    /// if renewed.
    pub fn renew(&self, path: &str, now: &CreateResponse, asked: Instant, generation: u64) -> bool {
        let mut s = self.state.lock().unwrap();
        let Some(e) = s.map.get_mut(path).filter(|e| e.generation == generation) else { return false };
        let (held, t) = (e.held.created(), &now.times);
        let same = held.on_disk_id() == now.on_disk_id()
            && (held.times.end_of_file, held.times.last_write, held.times.change)
                == (t.end_of_file, t.last_write, t.change);
        if same && e.held.holds() {
            e.since = e.since.max(asked);
            return true;
        }
        let gone = s.remove(path);
        drop(s);
        drop(gone);
        false
    }

    /// Drops the entry of `path` (this instance is about to change it).
    pub fn forget(&self, path: &str) {
        let gone = self.state.lock().unwrap().remove(path);
        drop(gone);
    }

    /// Drops the entry of `path` if it is still the one of `generation`
    /// (a look found it stale; a newer entry stays).
    pub fn forget_generation(&self, path: &str, generation: u64) {
        let mut s = self.state.lock().unwrap();
        if s.map.get(path).is_some_and(|e| e.generation == generation) {
            let gone = s.remove(path);
            drop(s);
            drop(gone);
        }
    }

    /// True if an entry is held directly in the directory `dir`.
    pub fn holds_in(&self, dir: &str) -> bool {
        self.state.lock().unwrap().dirs.contains_key(dir)
    }

    /// Drops the entry of `name` in the directory `dir` (a watch saw it
    /// change); with `case_insensitive`, also one whose name differs only
    /// in case (the share's name may not be the key's).
    pub fn forget_named(&self, dir: &str, name: &str, case_insensitive: bool) {
        let path = if dir.is_empty() { name.to_string() } else { format!("{dir}\\{name}") };
        let mut s = self.state.lock().unwrap();
        let mut gone: Vec<Entry<H>> = s.remove(&path).into_iter().collect();
        if gone.is_empty() && case_insensitive {
            let name = name.to_lowercase();
            let same: Vec<String> = s
                .paths_in(dir)
                .into_iter()
                .filter(|p| p.rsplit('\\').next().is_some_and(|leaf| leaf.to_lowercase() == name))
                .collect();
            gone.extend(same.iter().filter_map(|p| s.remove(p)));
        }
        drop(s);
        drop(gone);
    }

    /// Drops every entry in the directory `dir` and under it (it was
    /// removed or renamed: the held files moved with it).
    pub fn forget_under(&self, dir: &str) {
        let mut s = self.state.lock().unwrap();
        let under = |d: &str| d == dir || d.strip_prefix(dir).is_some_and(|r| r.starts_with('\\'));
        let paths: Vec<String> = s.dirs.iter().filter(|(d, _)| under(d)).flat_map(|(_, p)| p.iter().cloned()).collect();
        let gone: Vec<Entry<H>> = paths.iter().filter_map(|p| s.remove(p)).collect();
        drop(s);
        drop(gone);
    }

    /// Makes the entries directly in `dir` kept before `before` expired, so
    /// that each is used again only once a look at its path renews it (a
    /// watch began, or lost count of the directory's changes).
    pub fn expire_in(&self, dir: &str, before: Instant) {
        let expired = self.expired_since();
        let mut gone = Vec::new();
        let mut s = self.state.lock().unwrap();
        for path in s.paths_in(dir) {
            match (s.map.get_mut(&path), expired) {
                (Some(e), Some(expired)) if e.since < before => e.since = e.since.min(expired),
                // A clock too young to be set back that far: drop it.
                (Some(e), None) if e.since < before => gone.extend(s.remove(&path)),
                _ => {}
            }
        }
        drop(s);
        drop(gone);
    }

    /// A time that makes an entry [`Age::Expired`]; `None` if the clock
    /// cannot go back that far.
    fn expired_since(&self) -> Option<Instant> {
        Instant::now().checked_sub(self.opts.max_age.saturating_add(Duration::from_secs(1)))
    }

    /// Entries held now, and the bytes they count.
    pub fn usage(&self) -> (usize, usize) {
        let s = self.state.lock().unwrap();
        (s.map.len(), s.bytes)
    }
}

#[cfg(test)]
#[path = "object_cache_test.rs"]
mod tests;
