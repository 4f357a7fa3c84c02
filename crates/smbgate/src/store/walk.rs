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
//!   marker) still shows as a common prefix, like a folder. Without a delimiter it yields nothing.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};

/// How many directory listings the walk keeps in flight (or finished but not yet consumed) ahead
/// of the one it is waiting for.
pub const PREFETCH: usize = 4;

/// One entry of a directory listing, names already decoded to S3 form (the caller maps SMB names
/// to key components).
///
/// A directory is `is_dir: true` with a plain `name`. A directory that is also a marker object
/// (the key `"<dir>/"`) is reported by its parent's listing with one more item,
/// `name: "<dir>/", is_dir: false`, which carries that object's size, time and ETag hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirItem {
    /// Decoded name; a marker object's name ends in `/`.
    pub name: String,
    /// True for a directory to walk.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// FILETIME.
    pub last_modified: u64,
    /// Caller-defined, passed through to [`Listed::Object`].
    pub etag_hint: Option<String>,
}

/// Where the lister reads directories from.
pub trait DirSource: Send + Sync {
    /// Opaque to the lister; always propagated, never swallowed.
    type Error: Send;

    /// Lists the directory at `path` (components relative to the bucket root, empty = root), in
    /// any order. Returns `Ok(None)` if the directory does not exist. An unreadable directory must
    /// be an error: it fails the whole listing (failure class 18). The future may be dropped before
    /// it completes (a prefetch the page no longer needs), so it must be cancel-safe.
    fn list(&self, path: &[String]) -> impl Future<Output = Result<Option<Vec<DirItem>>, Self::Error>> + Send;

    /// Finds the marker object of the directory at `path`: the item `"<last component>/"` that its
    /// parent's listing holds. Needed only when a prefix ends in `/` (prefix `"a/b/"` matches the
    /// key `"a/b/"`, which lives in `a`). The default lists the whole parent; a source that can
    /// look up one name cheaply (`QUERY_DIRECTORY` with a pattern) should override it.
    fn marker(&self, path: &[String]) -> impl Future<Output = Result<Option<DirItem>, Self::Error>> + Send {
        async move {
            let Some((name, parent)) = path.split_last() else {
                return Ok(None);
            };
            let Some(items) = self.list(parent).await? else {
                return Ok(None);
            };
            Ok(items.into_iter().find(|it| !it.is_dir && it.name.strip_suffix('/') == Some(name.as_str())))
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
    /// When truncated, the name of the last entry: feed it back as `start_after`.
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
    };
    walk.run(src, path).await?;
    let next_marker = if walk.truncated { walk.entries.last().map(|e| e.name().to_owned()) } else { None };
    Ok(ListResult { entries: walk.entries, is_truncated: walk.truncated, next_marker })
}

/// The directory holding every key that starts with `prefix`: its components before the last `/`.
/// `None` when a component is one no key can have (empty, `.`, `..`).
fn start_dir(prefix: &str) -> Option<Vec<String>> {
    let Some((dirs, _)) = prefix.rsplit_once('/') else {
        return Some(Vec::new());
    };
    dirs.split('/').map(|c| (!c.is_empty() && c != "." && c != "..").then(|| c.to_owned())).collect()
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
    let stem = if item.is_dir { item.name.as_str() } else { item.name.strip_suffix('/').unwrap_or(&item.name) };
    !stem.is_empty() && stem != "." && stem != ".." && !stem.contains('/')
}

/// The common prefix `key` rolls into: the prefix plus the rest of the key up to and including the
/// first delimiter. For a directory's `key` ("a/b/"), every key beneath it rolls into the same one.
fn rollup<'k>(prefix: &str, delimiter: Option<&str>, key: &'k str) -> Option<&'k str> {
    let delimiter = delimiter?;
    let at = key.get(prefix.len()..)?.find(delimiter)?;
    Some(&key[..prefix.len() + at + delimiter.len()])
}

/// One directory being walked.
struct Frame {
    /// Key prefix of this directory (see [`dir_key`]).
    dir: String,
    path: Vec<String>,
    /// Entries still to visit, sorted descending so that `pop` yields the next in S3 order.
    /// Directory names carry a trailing `/`, so they sort as their keys do.
    items: Vec<DirItem>,
    /// Indices into `items` of the directories the walk will enter, the next one last.
    walk_dirs: Vec<usize>,
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
}

impl<S: DirSource> Walk<'_, S> {
    async fn run(&mut self, src: &S, path: Vec<String>) -> Result<(), S::Error> {
        let dir = dir_key(&path);
        // Prefix "a/b/" also matches the key "a/b/", which a's listing holds, not a/b's.
        let marker_wanted =
            !path.is_empty() && dir == self.prefix && self.start_after.is_none_or(|sa| dir.as_str() > sa);
        let (marker, listing) = if marker_wanted {
            futures::future::try_join(src.marker(&path), src.list(&path)).await?
        } else {
            (None, src.list(&path).await?)
        };
        if let Some(m) = marker {
            // The smallest key under the prefix; max_keys > 0, so this never truncates.
            self.emit(Listed::Object {
                key: dir.clone(),
                size: m.size,
                last_modified: m.last_modified,
                etag_hint: m.etag_hint,
            });
        }
        let frame = self.open(dir, path, listing.unwrap_or_default());
        self.stack.push(frame);
        self.walk().await
    }

    async fn walk(&mut self) -> Result<(), S::Error> {
        while let Some(frame) = self.stack.last_mut() {
            let Some(item) = frame.items.pop() else {
                self.stack.pop();
                continue;
            };
            if frame.walk_dirs.last() == Some(&frame.items.len()) {
                frame.walk_dirs.pop();
            }
            let key = format!("{}{}", frame.dir, item.name);
            let entry = if let Some(cp) = rollup(self.prefix, self.delimiter, &key) {
                if self.start_after.is_some_and(|sa| cp <= sa)
                    || matches!(self.entries.last(), Some(Listed::CommonPrefix(last)) if last == cp)
                {
                    continue;
                }
                Listed::CommonPrefix(cp.to_owned())
            } else if item.is_dir {
                let mut path = frame.path.clone();
                path.push(item.name[..item.name.len() - 1].to_owned());
                self.prefetch();
                let listing = self.fetch.get(&key, &path).await?;
                let frame = self.open(key, path, listing.unwrap_or_default());
                self.stack.push(frame);
                continue;
            } else {
                if self.start_after.is_some_and(|sa| key.as_str() <= sa) {
                    continue;
                }
                Listed::Object { key, size: item.size, last_modified: item.last_modified, etag_hint: item.etag_hint }
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

    /// Sorts a directory's listing into a frame, dropping what the prefix and `start_after` exclude.
    /// `dir` is a prefix of the request's prefix (the start directory) or starts with it.
    fn open(&self, dir: String, path: Vec<String>, listing: Vec<DirItem>) -> Frame {
        let wanted = self.prefix.get(dir.len()..).unwrap_or("");
        let mut items: Vec<DirItem> = listing
            .into_iter()
            .filter(valid_name)
            .filter_map(|mut it| {
                if it.is_dir {
                    it.name.push('/');
                }
                it.name.starts_with(wanted).then_some(it)
            })
            .collect();
        // A marker "x/" sorts equal to the directory "x/" and comes first: its key is a prefix of
        // every key inside.
        items.sort_unstable_by(|a, b| a.name.cmp(&b.name).then(a.is_dir.cmp(&b.is_dir)));
        if let Some(sa) = self.start_after {
            match sa.strip_prefix(dir.as_str()) {
                Some(rest) => {
                    // Entries whose keys all lie at or below start_after form a sorted prefix.
                    let below = items.partition_point(|it| {
                        let name = it.name.as_str();
                        if it.is_dir {
                            name < rest && !rest.starts_with(name)
                        } else {
                            name <= rest
                        }
                    });
                    items.drain(..below);
                }
                None if dir.as_str() < sa => items.clear(),
                None => {}
            }
        }
        items.reverse();
        let walk_dirs = (0..items.len())
            .filter(|&i| {
                items[i].is_dir && rollup(self.prefix, self.delimiter, &format!("{dir}{}", items[i].name)).is_none()
            })
            .collect();
        Frame { dir, path, items, walk_dirs }
    }

    /// Starts listings of the next directories the walk will enter, nearest first, until
    /// [`PREFETCH`] are in flight or waiting.
    fn prefetch(&mut self) {
        let mut budget = PREFETCH.saturating_sub(self.fetch.held());
        for frame in self.stack.iter().rev() {
            for &i in frame.walk_dirs.iter().rev() {
                if budget == 0 {
                    return;
                }
                let name = &frame.items[i].name;
                let key = format!("{}{name}", frame.dir);
                if self.fetch.has(&key) {
                    continue;
                }
                let mut path = frame.path.clone();
                path.push(name[..name.len() - 1].to_owned());
                self.fetch.start(key, path);
                budget -= 1;
            }
        }
    }
}

type Listing<E> = Result<Option<Vec<DirItem>>, E>;

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

    fn start(&mut self, key: String, path: Vec<String>) {
        let src = self.src;
        self.in_flight.insert(key.clone());
        self.running.push(Box::pin(async move {
            let listing = src.list(&path).await;
            (key, listing)
        }));
    }

    /// The listing of the directory `key` at `path`, driving every other listing in flight while
    /// it waits.
    async fn get(&mut self, key: &str, path: &[String]) -> Listing<S::Error> {
        if let Some(listing) = self.ready.remove(key) {
            return listing;
        }
        if !self.in_flight.contains(key) {
            self.start(key.to_owned(), path.to_vec());
        }
        while let Some((done, listing)) = self.running.next().await {
            self.in_flight.remove(&done);
            if done == key {
                return listing;
            }
            self.ready.insert(done, listing);
        }
        // Unreachable: `key` was in flight. Listing directly is still correct.
        self.src.list(path).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    use std::task::{Context, Poll};

    /// An in-memory bucket built from a set of keys: keys ending in `/` are markers, every
    /// directory is implied by the keys under it, and one directory can be made unreadable.
    #[derive(Default)]
    struct MemTree {
        keys: BTreeSet<String>,
        /// Directory key ("" for the root, "a/b/") whose listing fails.
        fail: Option<String>,
        /// Directory keys listed, in call order.
        calls: Mutex<Vec<String>>,
        in_flight: AtomicUsize,
        max_in_flight: AtomicUsize,
    }

    #[derive(Debug, PartialEq, Eq)]
    struct Unreadable(String);

    impl MemTree {
        fn new<I: IntoIterator<Item = S>, S: Into<String>>(keys: I) -> Self {
            MemTree { keys: keys.into_iter().map(Into::into).collect(), ..MemTree::default() }
        }

        fn failing(mut self, dir: &str) -> Self {
            self.fail = Some(dir.to_owned());
            self
        }

        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }

        /// Every directory key the tree holds, root included.
        fn dirs(&self) -> BTreeSet<String> {
            let mut dirs = BTreeSet::from([String::new()]);
            for k in &self.keys {
                for (i, _) in k.match_indices('/') {
                    dirs.insert(k[..=i].to_owned());
                }
            }
            dirs
        }
    }

    /// Decrements the in-flight count even when the listing is dropped mid-way.
    struct InFlight<'a>(&'a AtomicUsize);
    impl Drop for InFlight<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Pending `n` times, so that listings finish out of order.
    struct Spin(u32);
    impl Future for Spin {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 == 0 {
                return Poll::Ready(());
            }
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    fn item(name: &str, is_dir: bool, key: &str) -> DirItem {
        DirItem {
            name: name.to_owned(),
            is_dir,
            size: if is_dir { 0 } else { key.len() as u64 },
            last_modified: if is_dir { 0 } else { 7 * key.len() as u64 },
            etag_hint: (!is_dir).then(|| format!("etag:{key}")),
        }
    }

    impl DirSource for MemTree {
        type Error = Unreadable;

        async fn list(&self, path: &[String]) -> Result<Option<Vec<DirItem>>, Unreadable> {
            let dir = dir_key(path);
            self.calls.lock().unwrap().push(dir.clone());
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            let _guard = InFlight(&self.in_flight);
            self.max_in_flight.fetch_max(now, Ordering::SeqCst);
            Spin(dir.bytes().map(u32::from).sum::<u32>() % 5).await;
            if self.fail.as_deref() == Some(dir.as_str()) {
                return Err(Unreadable(dir));
            }
            let mut items = Vec::new();
            let mut subdirs = HashSet::new();
            let mut exists = dir.is_empty();
            for k in self.keys.range(dir.clone()..) {
                let Some(rest) = k.strip_prefix(dir.as_str()) else {
                    break;
                };
                exists = true;
                match rest.find('/') {
                    _ if rest.is_empty() => {} // this directory's own marker: in the parent
                    None => items.push(item(rest, false, k)),
                    Some(i) => {
                        if i + 1 == rest.len() {
                            items.push(item(rest, false, k));
                        }
                        if subdirs.insert(&rest[..i]) {
                            items.push(item(&rest[..i], true, k));
                        }
                    }
                }
            }
            // Any order is allowed; make sure the lister sorts.
            items.reverse();
            Ok(exists.then_some(items))
        }
    }

    /// S3 as documented: sort all keys bytewise, keep those under the prefix, roll them up by the
    /// delimiter, drop entries at or below start_after, take max_keys.
    fn model(keys: &BTreeSet<String>, req: &ListRequest) -> ListResult {
        let delimiter = req.delimiter.as_deref().filter(|d| !d.is_empty());
        let mut all: Vec<Listed> = Vec::new();
        for k in keys {
            let Some(rest) = k.strip_prefix(req.prefix.as_str()) else {
                continue;
            };
            let entry = match delimiter.and_then(|d| rest.find(d).map(|at| at + d.len())) {
                Some(end) => Listed::CommonPrefix(k[..req.prefix.len() + end].to_owned()),
                None => Listed::Object {
                    key: k.clone(),
                    size: k.len() as u64,
                    last_modified: 7 * k.len() as u64,
                    etag_hint: Some(format!("etag:{k}")),
                },
            };
            if req.start_after.as_deref().is_some_and(|sa| entry.name() <= sa) {
                continue;
            }
            if all.last() != Some(&entry) {
                all.push(entry);
            }
        }
        if req.max_keys == 0 {
            return ListResult::default();
        }
        let is_truncated = all.len() > req.max_keys;
        all.truncate(req.max_keys);
        ListResult {
            next_marker: is_truncated.then(|| all.last().map(|e| e.name().to_owned())).flatten(),
            entries: all,
            is_truncated,
        }
    }

    fn run(tree: &MemTree, req: &ListRequest) -> Result<ListResult, Unreadable> {
        futures::executor::block_on(list(tree, req))
    }

    fn req(prefix: &str, delimiter: Option<&str>, start_after: Option<&str>, max_keys: usize) -> ListRequest {
        ListRequest {
            prefix: prefix.to_owned(),
            delimiter: delimiter.map(str::to_owned),
            start_after: start_after.map(str::to_owned),
            max_keys,
        }
    }

    fn names(r: &ListResult) -> Vec<&str> {
        r.entries.iter().map(Listed::name).collect()
    }

    const ORDER_KEYS: [&str; 12] =
        ["a", "a-b", "a.b", "ab/", "ab/c", "ab/c-d/e", "ab/c/d", "ab-", "b/é", "b/z", "é/", "é/a"];

    #[test]
    fn walk_order_is_byte_order() {
        let tree = MemTree::new(ORDER_KEYS);
        let got = run(&tree, &req("", None, None, 1000)).unwrap();
        let mut want: Vec<&str> = ORDER_KEYS.to_vec();
        want.sort_unstable();
        assert_eq!(names(&got), want);
        assert!(!got.is_truncated);
        assert_eq!(got.next_marker, None);
        assert_eq!(got, model(&tree.keys, &req("", None, None, 1000)));
    }

    #[test]
    fn slash_delimiter_lists_only_the_start_directory() {
        let tree = MemTree::new(["a/b/c/d", "a/b/c.txt", "a/b/cc/x", "a/b/d", "a/x/y", "top"]);
        let got = run(&tree, &req("", Some("/"), None, 1000)).unwrap();
        assert_eq!(names(&got), ["a/", "top"]);
        assert_eq!(tree.calls(), [""]);

        let tree = MemTree::new(tree.keys.clone());
        let got = run(&tree, &req("a/b/c", Some("/"), None, 1000)).unwrap();
        assert_eq!(names(&got), ["a/b/c.txt", "a/b/c/", "a/b/cc/"]);
        assert_eq!(tree.calls(), ["a/b/"], "starts in the deepest directory the prefix names");
    }

    #[test]
    fn prefix_naming_a_directory_finds_its_marker() {
        let tree = MemTree::new(["a/b/", "a/b/c", "a/b/d/e", "a/bb"]);
        let got = run(&tree, &req("a/b/", Some("/"), None, 1000)).unwrap();
        assert_eq!(names(&got), ["a/b/", "a/b/c", "a/b/d/"]);
        assert_eq!(got.entries[0], model(&tree.keys, &req("a/b/", None, None, 1)).entries[0]);
        let mut calls = tree.calls();
        calls.sort();
        assert_eq!(calls, ["a/", "a/b/"], "the marker lives in the parent");

        // Past the marker, the parent is not read.
        let tree = MemTree::new(tree.keys.clone());
        let got = run(&tree, &req("a/b/", None, Some("a/b/"), 1000)).unwrap();
        assert_eq!(names(&got), ["a/b/c", "a/b/d/e"]);
        assert_eq!(tree.calls(), ["a/b/", "a/b/d/"]);
    }

    #[test]
    fn other_delimiters_roll_up_across_components() {
        let tree = MemTree::new(["x-1/a", "x-1/b", "x-2", "x/a-b/c", "x/a/b-c", "y"]);
        let got = run(&tree, &req("", Some("-"), None, 1000)).unwrap();
        assert_eq!(names(&got), ["x-", "x/a-", "x/a/b-", "y"]);
        assert!(!tree.calls().contains(&"x-1/".to_owned()), "x-1/ rolls into x- unwalked");

        let tree = MemTree::new(tree.keys.clone());
        let got = run(&tree, &req("x", Some("/a"), None, 1000)).unwrap();
        assert_eq!(names(&got), ["x-1/a", "x-1/b", "x-2", "x/a"]);
    }

    #[test]
    fn max_keys_zero_is_empty_and_not_truncated() {
        let tree = MemTree::new(["a", "b"]);
        assert_eq!(run(&tree, &req("", None, None, 0)).unwrap(), ListResult::default());
        assert!(tree.calls().is_empty());
    }

    #[test]
    fn truncated_only_when_more_remain() {
        let tree = MemTree::new(["a", "b/c", "d"]);
        let exact = run(&tree, &req("", None, None, 3)).unwrap();
        assert_eq!(names(&exact), ["a", "b/c", "d"]);
        assert!(!exact.is_truncated);
        assert_eq!(exact.next_marker, None);

        let short = run(&tree, &req("", None, None, 2)).unwrap();
        assert!(short.is_truncated);
        assert_eq!(short.next_marker.as_deref(), Some("b/c"));

        let cps = run(&tree, &req("", Some("/"), None, 2)).unwrap();
        assert_eq!(names(&cps), ["a", "b/"]);
        assert_eq!(cps.next_marker.as_deref(), Some("b/"));
    }

    #[test]
    fn start_after_skips_subtrees_below_it() {
        let tree = MemTree::new(["a/x", "a/y/z", "m/a", "m/n/o", "z"]);
        let got = run(&tree, &req("", None, Some("m/a"), 1000)).unwrap();
        assert_eq!(names(&got), ["m/n/o", "z"]);
        assert_eq!(tree.calls(), ["", "m/", "m/n/"]);

        // A common prefix at or below start_after is skipped, even if it holds later keys.
        let got = run(&tree, &req("", Some("/"), Some("m/a"), 1000)).unwrap();
        assert_eq!(names(&got), ["z"]);
    }

    #[test]
    fn an_unreadable_subdirectory_fails_the_listing() {
        let keys = ["a", "a2", "b/c/d", "b/e", "f"];
        let tree = MemTree::new(keys).failing("b/c/");
        assert_eq!(run(&tree, &req("", None, None, 1000)), Err(Unreadable("b/c/".to_owned())));
        let tree = MemTree::new(keys).failing("");
        assert_eq!(run(&tree, &req("", Some("/"), None, 1000)), Err(Unreadable(String::new())));
        // A page that fills up before reaching it does not need it.
        let tree = MemTree::new(keys).failing("b/c/");
        let got = run(&tree, &req("", None, None, 1)).unwrap();
        assert_eq!(names(&got), ["a"]);
        assert!(got.is_truncated);
    }

    /// A directory with nothing in it, which `MemTree` (built from keys) cannot hold.
    struct EmptyDir;
    impl DirSource for EmptyDir {
        type Error = ();
        async fn list(&self, path: &[String]) -> Result<Option<Vec<DirItem>>, ()> {
            Ok(Some(match path {
                [] => vec![item("empty", true, ""), item("f", false, "f")],
                _ => Vec::new(),
            }))
        }
    }

    #[test]
    fn empty_directories() {
        let flat = futures::executor::block_on(list(&EmptyDir, &req("", None, None, 10))).unwrap();
        assert_eq!(names(&flat), ["f"]);
        let slash = futures::executor::block_on(list(&EmptyDir, &req("", Some("/"), None, 10))).unwrap();
        assert_eq!(names(&slash), ["empty/", "f"], "shown as a folder, unwalked");
    }

    #[test]
    fn odd_prefixes() {
        let tree = MemTree::new(["a/b", "é/x"]);
        assert_eq!(run(&tree, &req("a//", None, None, 10)).unwrap(), ListResult::default());
        assert_eq!(run(&tree, &req("a/../", None, None, 10)).unwrap(), ListResult::default());
        assert!(tree.calls().is_empty());
        assert_eq!(names(&run(&tree, &req("missing/dir/", None, None, 10)).unwrap()), Vec::<&str>::new());
        assert_eq!(names(&run(&tree, &req("é", None, Some("é"), 10)).unwrap()), ["é/x"]);
    }

    #[test]
    fn prefetch_is_concurrent_and_bounded() {
        let keys: Vec<String> = (0..40).map(|i| format!("d{i:02}/s/f")).collect();
        let tree = MemTree::new(keys.clone());
        let got = run(&tree, &req("", None, None, 1000)).unwrap();
        assert_eq!(names(&got), keys);
        let max = tree.max_in_flight.load(Ordering::SeqCst);
        assert!((2..=PREFETCH + 1).contains(&max), "max in flight {max}");
        let mut calls = tree.calls();
        let listed = calls.len();
        calls.sort();
        calls.dedup();
        assert_eq!(calls.len(), listed, "each directory is listed once");
    }

    #[test]
    fn the_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let tree = MemTree::new(["a"]);
        let r = req("", None, None, 1);
        assert_send(&list(&tree, &r));
    }

    // ---- properties ----

    static ALPHABET: [char; 6] = ['/', '-', '.', 'a', 'b', 'é'];

    fn text(len: std::ops::Range<usize>) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(&ALPHABET[..]), len).prop_map(String::from_iter)
    }

    fn component() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(&ALPHABET[1..]), 1..4).prop_map(String::from_iter)
    }

    /// Random strings (odd shapes) and component paths (deeper trees), optionally markers.
    fn raw_key() -> impl Strategy<Value = String> {
        prop_oneof![
            text(1..9),
            (prop::collection::vec(component(), 1..5), any::<bool>()).prop_map(|(cs, marker)| {
                let mut k = cs.join("/");
                if marker {
                    k.push('/');
                }
                k
            }),
        ]
    }

    /// Keys the store would accept, without a file and a directory of the same name.
    fn key_set() -> impl Strategy<Value = BTreeSet<String>> {
        prop::collection::vec(raw_key(), 0..40).prop_map(|raw| {
            let valid: BTreeSet<String> = raw
                .into_iter()
                .filter(|k| {
                    let comps: Vec<&str> = k.split('/').collect();
                    let (last, dirs) = comps.split_last().unwrap();
                    !dirs.iter().any(|c| c.is_empty() || *c == "." || *c == "..")
                        && (last.is_empty() && !dirs.is_empty() || *last != "." && *last != "..")
                })
                .collect();
            valid
                .iter()
                .filter(|k| k.ends_with('/') || !valid.iter().any(|o| o.starts_with(&format!("{k}/"))))
                .cloned()
                .collect()
        })
    }

    /// A string near the keys: a piece of one, a key with a suffix, or random text.
    fn near(keys: &BTreeSet<String>, pick: prop::sample::Index, cut: prop::sample::Index, extra: &str) -> String {
        if keys.is_empty() {
            return extra.to_owned();
        }
        let k = keys.iter().nth(pick.index(keys.len())).unwrap();
        let bounds: Vec<usize> = (0..=k.len()).filter(|&i| k.is_char_boundary(i)).collect();
        let mut s = k[..bounds[cut.index(bounds.len())]].to_owned();
        s.push_str(extra);
        s
    }

    #[derive(Debug, Clone)]
    struct Case {
        keys: BTreeSet<String>,
        req: ListRequest,
    }

    fn case() -> impl Strategy<Value = Case> {
        let delimiter = prop_oneof![
            Just(None),
            Just(Some("/")),
            Just(Some("-")),
            Just(Some("ab")),
            Just(Some("/a")),
            Just(Some("é")),
        ];
        let max_keys = prop_oneof![0..6usize, Just(1000)];
        let spot = || (any::<prop::sample::Index>(), any::<prop::sample::Index>(), text(0..3), 0..4u8);
        (key_set(), delimiter, spot(), spot(), max_keys).prop_map(|(keys, delimiter, p, s, max_keys)| {
            let prefix = match p.3 {
                0 => String::new(),
                1 => p.2.clone(),
                _ => near(&keys, p.0, p.1, if p.3 == 2 { "" } else { &p.2 }),
            };
            let start_after = match s.3 {
                0 => None,
                1 => Some(s.2.clone()),
                _ => Some(near(&keys, s.0, s.1, if s.3 == 2 { "" } else { &s.2 })),
            };
            Case { keys, req: ListRequest { prefix, delimiter: delimiter.map(str::to_owned), start_after, max_keys } }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn matches_the_model(case in case()) {
            let tree = MemTree::new(case.keys.clone());
            let got = run(&tree, &case.req).unwrap();
            prop_assert_eq!(got, model(&case.keys, &case.req));
            // Beyond the start directory (and its parent, for a marker), only directories that can
            // hold wanted keys are read, each once; with "/" none are.
            let start = dir_key(&start_dir(&case.req.prefix).unwrap_or_default());
            let parent = start.trim_end_matches('/').rfind('/').map_or("", |i| &start[..=i]);
            let delimiter = case.req.delimiter.as_deref();
            let calls = tree.calls();
            for (n, call) in calls.iter().enumerate() {
                if call == &start || call == parent {
                    continue;
                }
                prop_assert!(delimiter != Some("/"), "listed {call:?}");
                prop_assert!(!calls[..n].contains(call), "listed {call:?} twice");
                prop_assert!(call.starts_with(&case.req.prefix), "listed {call:?}");
                prop_assert!(rollup(&case.req.prefix, delimiter, call).is_none(), "listed {call:?}");
                if let Some(sa) = case.req.start_after.as_deref() {
                    prop_assert!(call.as_str() > sa || sa.starts_with(call.as_str()), "listed {call:?}");
                }
            }
        }

        #[test]
        fn paging_reproduces_the_whole_listing(case in case(), page in 1..5usize) {
            let tree = MemTree::new(case.keys.clone());
            let whole = model(&case.keys, &ListRequest { max_keys: usize::MAX, ..case.req.clone() });
            let mut req = ListRequest { max_keys: page, ..case.req.clone() };
            let mut got = Vec::new();
            for _ in 0..=whole.entries.len() {
                let r = run(&tree, &req).unwrap();
                prop_assert!(r.entries.len() == page || !r.is_truncated);
                got.extend(r.entries);
                if !r.is_truncated {
                    break;
                }
                req.start_after = r.next_marker;
            }
            prop_assert_eq!(got, whole.entries);
        }

        #[test]
        fn errors_fail_never_truncate(case in case(), pick in any::<prop::sample::Index>()) {
            let dirs: Vec<String> = MemTree::new(case.keys.clone()).dirs().into_iter().collect();
            let bad = dirs[pick.index(dirs.len())].clone();
            let tree = MemTree::new(case.keys.clone()).failing(&bad);
            match run(&tree, &case.req) {
                Ok(got) => prop_assert_eq!(got, model(&case.keys, &case.req)),
                Err(e) => prop_assert_eq!(e, Unreadable(bad.clone())),
            }
            // A full flat listing needs every directory.
            let all = ListRequest { max_keys: usize::MAX, ..ListRequest::default() };
            prop_assert_eq!(run(&tree, &all), Err(Unreadable(bad)));
        }
    }
}
