//! Tests of `walk.rs`.
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
    /// Lists each directory in windows of at most this many entries and
    /// bytes, as the share source does for a large one.
    window: Option<(usize, usize)>,
}

#[derive(Debug, PartialEq, Eq)]
struct Unreadable(String);

impl MemTree {
    fn new<I: IntoIterator<Item = S>, S: Into<String>>(keys: I) -> Self {
        MemTree { keys: keys.into_iter().map(Into::into).collect(), ..MemTree::default() }
    }

    fn windowed(mut self, cap: usize) -> Self {
        self.window = Some((cap, usize::MAX));
        self
    }

    fn windowed_bytes(mut self, max_bytes: usize) -> Self {
        self.window = Some((usize::MAX, max_bytes));
        self
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

    async fn list(&self, path: &[String], needed: &Needed) -> Result<Option<Window>, Unreadable> {
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
        // Any order goes into prepare; make sure it sorts.
        items.reverse();
        if !exists {
            return Ok(None);
        }
        let Some(limits) = self.window else { return Ok(Some(Window::whole(prepare(items)))) };
        for (cap, max_bytes) in [limits, (usize::MAX, usize::MAX)] {
            let mut window = crate::store::listings::dir_window::WindowBuilder::new(needed, cap, max_bytes);
            for i in &items {
                window.push(i.clone());
            }
            if let Some(w) = window.finish(Vec::new()) {
                return Ok(Some(w));
            }
        }
        unreachable!("a window without a cap always ends")
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
        max_dirs: None,
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
fn a_page_enters_at_most_max_dirs_directories_and_resumes_at_the_next() {
    // Issue 23: a tree of many directories costs one page a bounded number
    // of directory reads; the page ends early at the next directory.
    let keys: Vec<String> = (0..50).map(|i| format!("d{i:02}/x/f")).collect();
    let tree = MemTree::new(keys.clone());
    let mut r = req("", None, None, 1000);
    r.max_dirs = Some(4);
    let page = run(&tree, &r).unwrap();
    assert_eq!(names(&page), ["d00/x/f", "d01/x/f"]);
    assert!(page.is_truncated);
    assert_eq!(page.next_marker.as_deref(), Some("d02/"));
    // The start directory, the four entered, and at most PREFETCH read ahead.
    assert!(tree.calls().len() <= 1 + 4 + PREFETCH, "{:?}", tree.calls());
    // The next page passes through d02/ without counting it against its
    // bound, whatever the bound: a page always moves on.
    let tree = MemTree::new(keys);
    r.start_after = Some("d02/x/".into());
    r.max_dirs = Some(1);
    let page = run(&tree, &r).unwrap();
    assert_eq!(names(&page), ["d02/x/f"]);
    assert_eq!(page.next_marker.as_deref(), Some("d03/x/"));
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

#[test]
fn odd_prefixes() {
    let tree = MemTree::new(["a/b", "é/x"]);
    assert_eq!(run(&tree, &req("a//", None, None, 10)).unwrap(), ListResult::default());
    assert_eq!(run(&tree, &req("a/../", None, None, 10)).unwrap(), ListResult::default());
    // Issue 10: prefixes no key can be under cost nothing on the share:
    // longer than a key (32K components), a NUL, a reserved character, a
    // component over 255 UTF-16 units, the internal directory.
    for p in [
        "a/".repeat(32 * 1024),
        "a\0/".into(),
        "a\u{F022}/".into(),
        format!("{}/", "x".repeat(256)),
        ".smbgate/".into(),
    ] {
        assert_eq!(run(&tree, &req(&p, None, None, 10)).unwrap(), ListResult::default(), "{:.40}", p);
    }
    assert!(tree.calls().is_empty(), "{:?}", tree.calls());
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

/// Keys the store would accept, a key and longer keys under it included (`a` beside `a/b`: the
/// store keeps such a key beside its directory, so its parent lists a file and a directory of
/// one name).
fn key_set() -> impl Strategy<Value = BTreeSet<String>> {
    prop::collection::vec(raw_key(), 0..40).prop_map(|raw| {
        raw.into_iter()
            .filter(|k| {
                let comps: Vec<&str> = k.split('/').collect();
                let (last, dirs) = comps.split_last().unwrap();
                !dirs.iter().any(|c| c.is_empty() || *c == "." || *c == "..")
                    && (last.is_empty() && !dirs.is_empty() || *last != "." && *last != "..")
            })
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
    let delimiter =
        prop_oneof![Just(None), Just(Some("/")), Just(Some("-")), Just(Some("ab")), Just(Some("/a")), Just(Some("é")),];
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
        let delimiter = delimiter.map(str::to_owned);
        Case { keys, req: ListRequest { prefix, delimiter, start_after, max_keys, max_dirs: None } }
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
    fn paging_reproduces_the_whole_listing(
        case in case(),
        page in 1..5usize,
        max_dirs in prop_oneof![Just(None), (0..4usize).prop_map(Some)],
    ) {
        let tree = MemTree::new(case.keys.clone());
        let whole = model(&case.keys, &ListRequest { max_keys: usize::MAX, ..case.req.clone() });
        let mut req = ListRequest { max_keys: page, max_dirs, ..case.req.clone() };
        let mut got = Vec::new();
        // A page cut short by max_dirs may hold no entry, but it moves on:
        // at most one page per directory beyond the pages of entries.
        let dirs = tree.dirs().len();
        for _ in 0..=whole.entries.len() + dirs {
            let r = run(&tree, &req).unwrap();
            prop_assert!(r.entries.len() == page || !r.is_truncated || max_dirs.is_some());
            prop_assert!(r.entries.len() <= page);
            if r.is_truncated {
                prop_assert!(r.next_marker.as_deref() > req.start_after.as_deref(), "no progress");
            }
            got.extend(r.entries);
            if !r.is_truncated {
                break;
            }
            req.start_after = r.next_marker;
        }
        prop_assert_eq!(got, whole.entries);
    }

    #[test]
    fn windowed_paging_reproduces_the_whole_listing(
        case in case(),
        page in prop_oneof![1..5usize, Just(1000)],
        window in 2..5usize,
        by_bytes in any::<bool>(),
        max_dirs in prop_oneof![Just(None), (0..3usize).prop_map(Some)],
    ) {
        // A directory listed in windows of a few entries (or of a few
        // entries' bytes, 32 each and their names): pages end early at a
        // window's end, yet together they list exactly what S3 would, each
        // page moving on.
        let tree = MemTree::new(case.keys.clone());
        let tree = if by_bytes { tree.windowed_bytes(window * 40) } else { tree.windowed(window) };
        let whole = model(&case.keys, &ListRequest { max_keys: usize::MAX, ..case.req.clone() });
        let mut req = ListRequest { max_keys: page, max_dirs, ..case.req.clone() };
        let mut got = Vec::new();
        let mut pages = 0;
        loop {
            let r = run(&tree, &req).unwrap();
            prop_assert!(r.entries.len() <= page);
            if let (Some(last), Some(next)) = (r.entries.last(), r.next_marker.as_deref()) {
                prop_assert!(next >= last.name(), "the marker is past every entry returned");
            }
            got.extend(r.entries);
            if !r.is_truncated {
                break;
            }
            prop_assert!(r.next_marker.as_deref() > req.start_after.as_deref(), "no progress");
            req.start_after = r.next_marker;
            pages += 1;
            prop_assert!(pages <= 8 * case.keys.len() + 8, "too many pages");
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

/// Empty folders, which `MemTree` (built from keys) cannot hold.
#[path = "walk_folder_test.rs"]
mod folders;
