//! The listing's directory reads (`ShareSource`) against the in-memory
//! share (`memory_share`): which entries list as which keys, when a kept
//! listing serves the next page, and a listing racing the move of an
//! object beside a directory of its name, one share operation at a time.
//! The walk's own order and paging rules run on a tree of keys in
//! walk_test.rs; the same listings run against smbd in
//! tests/e2e/test_nested_keys.py and tests/e2e/test_listing_windows.py.

use std::time::Duration;

use super::*;
use crate::store::beside::displace_on;
use crate::store::listings::listing_cache::ListingBudget;
use crate::store::memory_share::{alone, race, MemoryShare};
use crate::store::writes::swap::tests::{KEY, LOCK};

/// Interleavings tried per race.
const SEEDS: u64 = 300;

/// What one instance keeps between the pages of a listing.
struct Kept {
    cache: DirCache,
    spill: SpillBudget,
}

impl Kept {
    fn new() -> Kept {
        Kept { cache: DirCache::new(Duration::from_secs(30), ListingBudget::new(64 << 20)), spill: SpillBudget::new(0) }
    }
}

/// The page's entries as text: a key, or a common prefix as `P:prefix`.
fn names(page: &ListResult) -> Vec<String> {
    let name = |e: &Listed| match e {
        Listed::Object { key, .. } => key.clone(),
        Listed::CommonPrefix(p) => format!("P:{p}"),
    };
    page.entries.iter().map(name).collect()
}

/// One page of the bucket `b` on `s`, read through the share's directory
/// reads (`reuse`: as a continuation page, which may use what `kept`
/// holds); its entries as [`names`] gives them.
async fn page(s: &MemoryShare, kept: &Kept, req: &ListRequest, reuse: bool) -> Result<Vec<String>, String> {
    let src = ShareSource {
        share: s.clone(),
        bucket_path: SharePath::root("b"),
        cache: &kept.cache,
        reuse,
        window: 1000,
        spill: &kept.spill,
    };
    list(&src, req).await.map(|p| names(&p)).map_err(|e| format!("{e:?}"))
}

/// [`page`] with nothing racing it.
async fn page_alone(s: &MemoryShare, kept: &Kept, req: &ListRequest, reuse: bool) -> Result<Vec<String>, String> {
    alone(s, page(s, kept, req, reuse)).await
}

fn request(delimiter: Option<&str>, start_after: Option<&str>, max_keys: usize) -> ListRequest {
    ListRequest {
        delimiter: delimiter.map(Into::into),
        start_after: start_after.map(Into::into),
        max_keys,
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn entries_list_as_the_keys_they_hold() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put("b\\a", "va");
    // `d/x` made `d` a directory; the object `d` is kept beside it.
    s.mkdir("b\\d");
    s.put("b\\d\\x", "vx");
    s.put_sized(SharePath::root("b\\d").beside(false).as_str(), "vd", 3, &[]);
    // A directory with a marker record is the object `m/`.
    s.put_marker("b\\m", "vm");
    // The gateway's own state is no key.
    s.mkdir("b\\.smbgate");
    s.put("b\\.smbgate\\state", "vs");
    let kept = Kept::new();
    let all = page_alone(&s, &kept, &request(None, None, 100), false).await;
    assert_eq!(all, Ok(vec!["a".into(), "d".into(), "d/x".into(), "m/".into()]));
    let rolled = page_alone(&s, &kept, &request(Some("/"), None, 100), false).await;
    assert_eq!(rolled, Ok(vec!["a".into(), "d".into(), "P:d/".into(), "P:m/".into()]));
}

#[tokio::test(start_paused = true)]
async fn a_kept_listing_serves_the_next_page_until_an_entry_comes_or_goes() {
    let s = MemoryShare::default();
    s.mkdir("b");
    for k in ["a", "b", "c"] {
        s.put(&format!("b\\{k}"), "v");
    }
    let kept = Kept::new();
    assert_eq!(page_alone(&s, &kept, &request(None, None, 1), false).await, Ok(vec!["a".into()]));
    assert_eq!(s.dir_reads(), 1);
    // The next page uses the listing read for the first: the directory's
    // times say nothing came or went.
    assert_eq!(page_alone(&s, &kept, &request(None, Some("a"), 1), true).await, Ok(vec!["b".into()]));
    assert_eq!(s.dir_reads(), 1, "the kept listing served the page");
    // Someone adds a file: the directory's times change, and the next page
    // reads it again and sees the file.
    s.put("b\\bb", "v");
    assert_eq!(page_alone(&s, &kept, &request(None, Some("b"), 1), true).await, Ok(vec!["bb".into()]));
    assert_eq!(s.dir_reads(), 2);
    // A first page never uses a kept listing.
    assert_eq!(page_alone(&s, &kept, &request(None, None, 1), false).await, Ok(vec!["a".into()]));
    assert_eq!(s.dir_reads(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_listing_racing_a_move_beside_a_new_directory_lists_the_object_once() {
    // A PUT of `k/x` makes `k` a directory: the object `k` is renamed
    // beside it, then the directory is made. A listing that reads the
    // directory, two names a page in name order, before, between or after
    // those steps finds `k` once: a renamed name moves ahead of the read,
    // and an object seen both at its name and beside lists once. (In hash
    // order a rename can move a name behind the read: failure class 33's
    // open case.)
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        s.mkdir("b");
        for other in ["a", "j", "z"] {
            s.put(&format!("b\\{other}"), "v");
        }
        s.put(KEY, "v1");
        let kept = Kept::new();
        let beside = SharePath::root(KEY).beside(false);
        let displace = displace_on(&s, KEY, beside.as_str(), LOCK);
        let (moved, listed) = race(&s, seed, displace, page(&s, &kept, &request(None, None, 100), false)).await;
        assert!(moved.is_ok(), "seed {seed}: {moved:?}");
        let listed = listed.expect("the listing succeeded");
        // The page's candidates are confirmed as `Listings::list_objects`
        // does (`k/`, the directory entered empty, is no object: the
        // gateway made it), after the race.
        let mut objects = Vec::new();
        for key in listed {
            let confirmed = alone(&s, listed_object(&s, &SharePath::root("b"), &key)).await;
            if confirmed.expect("the lookup succeeded").is_some() {
                objects.push(key);
            }
        }
        assert_eq!(objects, ["a", "j", "k", "z"], "seed {seed}");
    }
}
