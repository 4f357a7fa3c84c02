//! S3-order listing over a directory tree.
//!
//! S3 lists keys in UTF-8 byte order. A depth-first walk yields exactly that order when each
//! directory's entries are sorted with directories compared as `name + "/"`, so the lister never
//! collects and sorts a whole bucket. It starts in the deepest directory the prefix names, skips
//! subtrees that lie entirely at or below `start_after`, rolls delimiter groups into common
//! prefixes (a directory whose path already holds the delimiter becomes its common prefix without
//! being walked, which with `/` means no subdirectory is ever listed), and stops one entry after
//! `max_keys` to learn whether the listing is truncated. While it waits for one directory it
//! fetches the next few it will enter (bounded by [`PREFETCH`]), yet emits strictly in order.
//!
//! The lister is generic over [`DirSource`], so it is tested against an in-memory tree and a model
//! of S3 (proptest) without a share.
//!
//! Two deliberate choices:
//! - An error from any directory the walk needs fails the whole listing (failure class 18). A
//!   directory the walk never reaches (the page filled up first) cannot fail it.
//! - A directory that becomes a common prefix is not walked, so an empty directory (no files, no
//!   marker) still shows as a common prefix, like a folder. A walk that enters one (no delimiter
//!   rolls it up) offers it as the object `dir/`, with no ETag hint: the caller confirms it (an
//!   empty folder someone made on the share is that object) or drops it, as for marker candidates.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::names::Names;
use futures::stream::{FuturesUnordered, StreamExt};

/// How many directory listings the walk keeps in flight (or finished but not yet consumed) ahead
/// of the one it is waiting for.
pub const PREFETCH: usize = 4;

pub use super::names::DirItem;

/// A directory listing as the lister walks it: names no key can have dropped, directory names
/// with a trailing `/`, sorted in S3 order (a marker `x/` before the directory `x/`).
pub type Prepared = Arc<Names>;

/// What a directory listing gives the walk: its entries in S3 order from
/// some name on, and whether they run to the directory's end.
#[derive(Debug, Clone)]
pub struct Window {
    /// [`super::walk::prepare`]d entries; when `complete` is false, every
    /// entry not here sorts after the last one.
    pub items: Prepared,
    /// True when no entry sorts after the last one here.
    pub complete: bool,
}

impl Window {
    /// A whole directory's (or whole rest's) listing.
    pub fn whole(items: Prepared) -> Window {
        Window { items, complete: true }
    }

    /// Whether this window, read from `read_from` on, holds everything a
    /// listing from `from` on needs first: `from` lies inside it, before
    /// its last name (at its last name the next window is needed).
    pub fn serves(&self, read_from: &str, from: &str) -> bool {
        read_from <= from && (self.complete || self.items.last().is_some_and(|l| from < l.name))
    }

    /// Whether this window, read for `read`, holds everything a page that
    /// needs `needed` needs first: every name it kept starts with
    /// `read.within`, so a page whose names all start with more of it finds
    /// them all (see [`Window::serves`] for where it starts and ends).
    pub fn serves_needs(&self, read: &Needed, needed: &Needed) -> bool {
        needed.within.starts_with(read.within.as_str()) && self.serves(&read.from, &needed.from)
    }
}

/// What a page needs of one directory: the names (a directory's with its
/// `/`) that start with `within` (the prefix's rest in the directory), from
/// `from` on. A source may leave out every other name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needed {
    /// The smallest name needed.
    pub from: String,
    /// What every needed name starts with.
    pub within: String,
}

/// Prepares a directory's listing, in any order, for the lister; see [`Prepared`].
pub fn prepare(listing: Vec<DirItem>) -> Prepared {
    let mut items = Names::new();
    for item in listing.into_iter().filter_map(prepared_item) {
        items.push_item(&item);
    }
    // A marker "x/" sorts equal to the directory "x/" and comes first: its key is a prefix of
    // every key inside.
    items.sort();
    Arc::new(items)
}

/// One entry as [`prepare`] keeps it: `None` for a name no key can have,
/// else the entry with a directory's name ending in `/`.
pub fn prepared_item(mut item: DirItem) -> Option<DirItem> {
    if !valid_name(&item) {
        return None;
    }
    if item.is_dir {
        item.name.push('/');
    }
    Some(item)
}

/// Where the lister reads directories from.
pub trait DirSource: Send + Sync {
    /// Opaque to the lister; always propagated, never swallowed.
    type Error: Send;

    /// Lists the directory at `path` (components relative to the bucket root, empty = root),
    /// [`prepare`]d: what the lister walks, shared so that continuation pages of a large directory
    /// reuse one sorted listing instead of copying and sorting it again. The page needs only the
    /// entries [`Needed`] names: the source may leave out the others, and may return only a
    /// [`Window`] of them (the walk ends its page where an incomplete window ends). Returns `Ok(None)` if the directory does not exist. An unreadable
    /// directory must be an error: it fails the whole listing (failure class 18). The future may
    /// be dropped before it completes (a prefetch the page no longer needs), so it must be
    /// cancel-safe.
    fn list(
        &self,
        path: &[String],
        needed: &Needed,
    ) -> impl Future<Output = Result<Option<Window>, Self::Error>> + Send;

    /// Finds the marker object of the directory at `path`: the item `"<last component>/"` that its
    /// parent's listing holds. Needed only when a prefix ends in `/` (prefix `"a/b/"` matches the
    /// key `"a/b/"`, which lives in `a`). The default lists the whole parent; a source that can
    /// look up one name cheaply (`QUERY_DIRECTORY` with a pattern) should override it.
    fn marker(&self, path: &[String]) -> impl Future<Output = Result<Option<DirItem>, Self::Error>> + Send {
        async move {
            let Some((name, parent)) = path.split_last() else {
                return Ok(None);
            };
            let needed = Needed { from: format!("{name}/"), within: String::new() };
            let Some(window) = self.list(parent, &needed).await? else {
                return Ok(None);
            };
            let found = window
                .items
                .iter()
                .find(|it| !it.is_dir && it.name.strip_suffix('/') == Some(name.as_str()))
                .map(|it| it.to_item());
            Ok(found)
        }
    }
}

/// `ListObjectsV2` / `ListObjects` parameters, already validated by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListRequest {
    /// Only keys starting with this.
    pub prefix: String,
    /// Any string; `Some("")` is treated as no delimiter.
    pub delimiter: Option<String>,
    /// Exclusive lower bound on returned keys and common prefixes: a V2 continuation token's key,
    /// V2 `start-after` or a V1 marker.
    pub start_after: Option<String>,
    /// Most entries to return (objects and common prefixes together).
    pub max_keys: usize,
    /// Most directories one page enters (`None`: no bound; 0 counts as 1),
    /// not counting the start directory and those `start_after` lies in. A
    /// page that reaches it ends early, truncated, with `next_marker` at the
    /// next directory to walk, so that one request's work stays bounded and
    /// every page makes progress.
    pub max_dirs: Option<usize>,
}

/// One listing entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listed {
    /// An object; `etag_hint` is filled in by the caller.
    #[allow(missing_docs)]
    Object { key: String, size: u64, last_modified: u64, etag_hint: Option<String> },
    /// A rolled-up common prefix.
    CommonPrefix(String),
}

impl Listed {
    /// The key or common prefix, which is what S3 orders and pages by.
    #[must_use]
    pub fn name(&self) -> &str {
        match self {
            Listed::Object { key, .. } => key,
            Listed::CommonPrefix(prefix) => prefix,
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListResult {
    /// In S3 order; at most `max_keys`, objects and common prefixes counted together.
    pub entries: Vec<Listed>,
    /// True only if at least one more entry follows the returned ones.
    pub is_truncated: bool,
    /// When truncated, where the next page starts: feed it back as
    /// `start_after`. The name of the last entry, or, on a page that
    /// [`ListRequest::max_dirs`] cut short, the key of the directory not yet
    /// walked (which no returned entry names).
    pub next_marker: Option<String>,
}

/// Lists one page of keys in S3 order.
///
/// `max_keys == 0` returns an empty, non-truncated page without reading anything, as S3 does. A
/// bucket root that does not exist lists as empty; telling that apart (`NoSuchBucket`) is the
/// caller's job.
///
/// # Errors
///
/// The first error of any directory listing the page needs, as the source returned it.
pub async fn list<S: DirSource>(src: &S, req: &ListRequest) -> Result<ListResult, S::Error> {
    if req.max_keys == 0 {
        return Ok(ListResult::default());
    }
    let Some(path) = start_dir(&req.prefix) else {
        // The prefix names a directory no valid key can be under ("a//", "a/../").
        return Ok(ListResult::default());
    };
    let mut walk = Walk {
        fetch: Fetcher::new(src),
        prefix: &req.prefix,
        delimiter: req.delimiter.as_deref().filter(|d| !d.is_empty()),
        start_after: req.start_after.as_deref(),
        max_keys: req.max_keys,
        entries: Vec::with_capacity(req.max_keys.min(1024)),
        truncated: false,
        stack: Vec::new(),
        dirs_left: req.max_dirs.unwrap_or(usize::MAX).max(1),
        resume: None,
    };
    walk.run(src, path).await?;
    let next_marker = match walk.resume {
        Some(dir) => Some(dir),
        None if walk.truncated => walk.entries.last().map(|e| e.name().to_owned()),
        None => None,
    };
    Ok(ListResult { entries: walk.entries, is_truncated: walk.truncated, next_marker })
}

/// The directory holding every key that starts with `prefix`: its components before the last `/`.
/// `None` when no key can be under it: the prefix is longer than a key can be, or a component is
/// one no key can have (empty, `.`, `..`, too long, a character the mapping refuses, the internal
/// directory). So a hostile prefix (thousands of `a/`) costs nothing on the share.
pub(crate) fn start_dir(prefix: &str) -> Option<Vec<String>> {
    if prefix.len() > crate::store::keys::MAX_KEY_BYTES {
        return None;
    }
    let Some((dirs, _)) = prefix.rsplit_once('/') else {
        return Some(Vec::new());
    };
    crate::store::keys::map_key(&format!("{dirs}/")).ok()?;
    Some(dirs.split('/').map(str::to_owned).collect())
}

/// The key prefix of the directory at `path`: `""` for the root, else `"a/b/"`.
fn dir_key(path: &[String]) -> String {
    let mut key = String::new();
    for c in path {
        key.push_str(c);
        key.push('/');
    }
    key
}

/// Whether a listed name can be a key component: no empty, `.`, `..` or embedded `/` names. Only a
/// marker (a non-directory) may end in `/`. Others are skipped: no key could name them.
fn valid_name(item: &DirItem) -> bool {
    valid_parts(&item.name, item.is_dir)
}

/// [`valid_name`] of an entry's parts (a directory's name without its `/`).
pub(crate) fn valid_parts(name: &str, is_dir: bool) -> bool {
    let stem = if is_dir { name } else { name.strip_suffix('/').unwrap_or(name) };
    !stem.is_empty() && stem != "." && stem != ".." && !stem.contains('/')
}

/// The common prefix `key` rolls into: the prefix plus the rest of the key up to and including the
/// first delimiter. For a directory's `key` ("a/b/"), every key beneath it rolls into the same one.
fn rollup<'k>(prefix: &str, delimiter: Option<&str>, key: &'k str) -> Option<&'k str> {
    let delimiter = delimiter?;
    let at = key.get(prefix.len()..)?.find(delimiter)?;
    Some(&key[..prefix.len() + at + delimiter.len()])
}

/// The object an empty directory without a marker may be (see the module
/// notes), for the caller to confirm.
fn folder(key: String, last_modified: u64) -> Listed {
    Listed::Object { key, size: 0, last_modified, etag_hint: None }
}

/// One directory being walked.
struct Frame {
    /// Key prefix of this directory (see [`dir_key`]).
    dir: String,
    path: Vec<String>,
    /// The directory's listing, shared with the source's cache; see [`Prepared`].
    items: Prepared,
    /// The next index to visit: `items[next..end]` are still to visit, in S3 order.
    next: usize,
    /// One past the last index this walk visits.
    end: usize,
    /// Indices into `items` of the directories the walk will enter, the next one last.
    walk_dirs: Vec<usize>,
    /// False when `items` is a window of the directory with more after it.
    complete: bool,
}

struct Walk<'a, S: DirSource> {
    fetch: Fetcher<'a, S>,
    prefix: &'a str,
    delimiter: Option<&'a str>,
    start_after: Option<&'a str>,
    max_keys: usize,
    entries: Vec<Listed>,
    truncated: bool,
    stack: Vec<Frame>,
    /// Directories this page may still enter, beyond the start directory
    /// and the directories `start_after` lies in (at most one per level of
    /// a key), which every page must pass through to resume.
    dirs_left: usize,
    /// The directory key the page stopped at when `dirs_left` ran out.
    resume: Option<String>,
}

impl<S: DirSource> Walk<'_, S> {
    async fn run(&mut self, src: &S, path: Vec<String>) -> Result<(), S::Error> {
        let dir = dir_key(&path);
        // Prefix "a/b/" also matches the key "a/b/", which a's listing holds, not a/b's.
        let marker_wanted =
            !path.is_empty() && dir == self.prefix && self.start_after.is_none_or(|sa| dir.as_str() > sa);
        let needed = self.needed(&dir);
        let (marker, listing) = if marker_wanted {
            futures::future::try_join(src.marker(&path), src.list(&path, &needed)).await?
        } else {
            (None, src.list(&path, &needed).await?)
        };
        if let Some(m) = marker {
            // The smallest key under the prefix; max_keys > 0, so this never truncates.
            self.emit(Listed::Object {
                key: dir.clone(),
                size: m.size,
                last_modified: m.last_modified,
                etag_hint: m.etag_hint,
            });
        } else if marker_wanted && listing.as_ref().is_some_and(|l| l.items.is_empty()) {
            self.emit(folder(dir.clone(), 0));
        }
        let frame = self.open(dir, path, listing.unwrap_or_else(empty));
        self.stack.push(frame);
        self.walk().await
    }

    async fn walk(&mut self) -> Result<(), S::Error> {
        while let Some(frame) = self.stack.last_mut() {
            if frame.next == frame.end {
                // The end of a window with more of the directory after it:
                // the page ends here, and the next one reads on from its
                // last name (every key up to it has been seen). A window
                // wholly before start_after holds nothing the page wants.
                if !frame.complete && frame.end == frame.items.len() {
                    if let Some(last) = frame.items.last() {
                        let resume = format!("{}{}", frame.dir, last.name);
                        if self.start_after.is_none_or(|sa| resume.as_str() > sa) {
                            self.truncated = true;
                            self.resume = Some(resume);
                            break;
                        }
                    }
                }
                self.stack.pop();
                continue;
            }
            let at = frame.next;
            frame.next += 1;
            if frame.walk_dirs.last() == Some(&at) {
                frame.walk_dirs.pop();
            }
            let items = frame.items.clone();
            let item = items.get(at);
            let key = format!("{}{}", frame.dir, item.name);
            let entry = if let Some(cp) = rollup(self.prefix, self.delimiter, &key) {
                if self.start_after.is_some_and(|sa| cp <= sa)
                    || matches!(self.entries.last(), Some(Listed::CommonPrefix(last)) if last == cp)
                {
                    continue;
                }
                Listed::CommonPrefix(cp.to_owned())
            } else if item.is_dir {
                // A directory start_after lies in is passed through, never
                // counted against the page's bound.
                let counted = !self.start_after.is_some_and(|sa| sa.starts_with(key.as_str()));
                let cut = counted && self.dirs_left == 0;
                if counted && !cut {
                    self.dirs_left -= 1;
                }
                let mut path = frame.path.clone();
                path.push(item.name[..item.name.len() - 1].to_owned());
                if !cut {
                    self.prefetch();
                }
                let needed = self.needed(&key);
                let listing = self.fetch.get(&key, &path, &needed).await?.unwrap_or_else(empty);
                // Its marker, if any, is the item just before it.
                let marked = at > 0 && !items.get(at - 1).is_dir && items.get(at - 1).name == item.name;
                if listing.items.is_empty() && !marked && self.start_after.is_none_or(|sa| key.as_str() > sa) {
                    // An empty folder is the object `key`, which only a look
                    // inside shows: listed here, also on a page that stops
                    // at this directory (whose marker, `key`, excludes it).
                    if self.emit(folder(key.clone(), item.last_modified)) || cut {
                        if cut && !self.truncated {
                            self.truncated = true;
                            self.resume = Some(key);
                        }
                        break;
                    }
                    continue;
                }
                if cut {
                    // Every key below this directory sorts after its key,
                    // and every key before it has been seen.
                    self.truncated = true;
                    self.resume = Some(key);
                    break;
                }
                let frame = self.open(key, path, listing);
                self.stack.push(frame);
                continue;
            } else {
                if self.start_after.is_some_and(|sa| key.as_str() <= sa) {
                    continue;
                }
                Listed::Object { key, size: item.size, last_modified: item.last_modified, etag_hint: item.etag_hint() }
            };
            if self.emit(entry) {
                break;
            }
        }
        Ok(())
    }

    /// Adds an entry; once the page is full, notes that one more exists and returns true (stop).
    fn emit(&mut self, entry: Listed) -> bool {
        if self.entries.len() == self.max_keys {
            self.truncated = true;
            return true;
        }
        self.entries.push(entry);
        false
    }

    /// The frame of a directory's (prepared) listing: the range of it the prefix and `start_after`
    /// leave, found by binary search, so a page costs what it visits, not the directory's size.
    /// `dir` is a prefix of the request's prefix (the start directory) or starts with it.
    fn open(&self, dir: String, path: Vec<String>, listing: Window) -> Frame {
        let Window { items, complete } = listing;
        let wanted = self.prefix.get(dir.len()..).unwrap_or("");
        // Sorted names that start with `wanted` are contiguous, after those below it.
        let mut lo = items.partition_point(0..items.len(), |it| it.name < wanted);
        let hi = items.partition_point(lo..items.len(), |it| it.name.starts_with(wanted));
        if let Some(sa) = self.start_after {
            match sa.strip_prefix(dir.as_str()) {
                Some(rest) => {
                    // Entries whose keys all lie at or below start_after form a sorted prefix.
                    lo = items.partition_point(lo..hi, |it| {
                        let name = it.name;
                        if it.is_dir {
                            name < rest && !rest.starts_with(name)
                        } else {
                            name <= rest
                        }
                    });
                }
                None if dir.as_str() < sa => lo = hi,
                None => {}
            }
        }
        // Descending, so that the next directory to enter is last.
        let walk_dirs = items
            .dirs_in(lo..hi)
            .iter()
            .rev()
            .copied()
            .filter(|&i| rollup(self.prefix, self.delimiter, &format!("{dir}{}", items.get(i).name)).is_none())
            .collect();
        Frame { dir, path, items, next: lo, end: hi, walk_dirs, complete }
    }

    /// What this page needs of the directory `dir`: names that start with
    /// the prefix's rest in it, from that rest or the component of
    /// `start_after` in it (with its `/` if it has one), whichever is larger.
    fn needed(&self, dir: &str) -> Needed {
        let wanted = self.prefix.strip_prefix(dir).unwrap_or("");
        let after = self.start_after.and_then(|sa| sa.strip_prefix(dir)).map_or("", |rest| match rest.find('/') {
            Some(at) => &rest[..=at],
            None => rest,
        });
        Needed { from: wanted.max(after).to_owned(), within: wanted.to_owned() }
    }

    /// Starts listings of the next directories the walk will enter, nearest first, until
    /// [`PREFETCH`] are in flight or waiting.
    fn prefetch(&mut self) {
        // Never further ahead than the page may go.
        let mut budget = PREFETCH.saturating_sub(self.fetch.held()).min(self.dirs_left);
        for frame in self.stack.iter().rev() {
            for &i in frame.walk_dirs.iter().rev() {
                if budget == 0 {
                    return;
                }
                let name = frame.items.get(i).name;
                let key = format!("{}{name}", frame.dir);
                if self.fetch.has(&key) {
                    continue;
                }
                let mut path = frame.path.clone();
                path.push(name[..name.len() - 1].to_owned());
                let needed = self.needed(&key);
                self.fetch.start(key, path, needed);
                budget -= 1;
            }
        }
    }
}

/// A directory that does not exist walks as an empty one.
fn empty() -> Window {
    Window::whole(Arc::new(Names::new()))
}

type Listing<E> = Result<Option<Window>, E>;

/// Directory listings in flight, by directory key. Finished listings wait in `ready` until the
/// walk reaches them; an error waits there too, so it fails the listing only if it is needed.
struct Fetcher<'a, S: DirSource> {
    src: &'a S,
    running: FuturesUnordered<BoxFuture<'a, (String, Listing<S::Error>)>>,
    in_flight: HashSet<String>,
    ready: HashMap<String, Listing<S::Error>>,
}

impl<'a, S: DirSource> Fetcher<'a, S> {
    fn new(src: &'a S) -> Self {
        Fetcher { src, running: FuturesUnordered::new(), in_flight: HashSet::new(), ready: HashMap::new() }
    }

    fn held(&self) -> usize {
        self.in_flight.len() + self.ready.len()
    }

    fn has(&self, key: &str) -> bool {
        self.in_flight.contains(key) || self.ready.contains_key(key)
    }

    fn start(&mut self, key: String, path: Vec<String>, needed: Needed) {
        let src = self.src;
        self.in_flight.insert(key.clone());
        self.running.push(Box::pin(async move {
            let listing = src.list(&path, &needed).await;
            (key, listing)
        }));
    }

    /// The listing of the directory `key` at `path`, driving every other listing in flight while
    /// it waits.
    async fn get(&mut self, key: &str, path: &[String], needed: &Needed) -> Listing<S::Error> {
        if let Some(listing) = self.ready.remove(key) {
            return listing;
        }
        if !self.in_flight.contains(key) {
            self.start(key.to_owned(), path.to_vec(), needed.clone());
        }
        while let Some((done, listing)) = self.running.next().await {
            self.in_flight.remove(&done);
            if done == key {
                return listing;
            }
            self.ready.insert(done, listing);
        }
        // Unreachable: `key` was in flight. Listing directly is still correct.
        self.src.list(path, needed).await
    }
}

#[cfg(test)]
#[path = "walk_test.rs"]
mod tests;
