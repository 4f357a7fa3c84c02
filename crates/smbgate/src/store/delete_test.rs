//! The checked delete against the in-memory share (`memory_share`):
//! racing deletes and writers interleaved one share operation at a time,
//! over many seeded interleavings. The same races run against smbd in
//! tests/e2e/test_conditional_delete_race.py.

use super::*;
use crate::store::conditions::EtagCondition;
use crate::store::memory_share::{alone, interleave, MemoryShare, READ};
use crate::store::writes::swap::tests::{if_match, with_key, Racer, KEY, LOCK};

/// Interleavings tried per race.
const SEEDS: u64 = 300;

/// A DELETE with `If-Match: "etag"` of the object at [`KEY`], as
/// `Deletes::delete_object` makes it of a file at its own path: the checked
/// delete, tried again while another client's open shares nothing with it
/// and while the key is in motion (found nowhere, its creation lock held),
/// and a file found gone judged as a missing key.
fn delete_if_match<'a>(s: &'a MemoryShare, etag: &'a str) -> Racer<'a> {
    Box::pin(async move {
        let cond = Conditions { if_match: Some(EtagCondition::parse(&format!("\"{etag}\""))), ..Default::default() };
        let names = || |_: bool, _: Option<String>| async { Ok(()) };
        let attempt = || retry_sharing(|| delete_checked(s, KEY, "k", &cond, false, names()));
        let nothing = |r: &Result<StoreResult<bool>, ShareError>| matches!(r, Err(e) if is_not_found(e));
        match while_in_motion(s, LOCK, true, attempt, nothing).await {
            Ok(Ok(true)) => Ok(()),
            Ok(Ok(false)) => cond.check_write(None),
            Ok(Err(e)) => Err(e),
            Err(e) if is_not_found(&e) => cond.check_write(None),
            Err(e) => Err(e.into()),
        }
    })
}

#[tokio::test(start_paused = true)]
async fn racing_conditional_deletes_of_one_version_delete_it_once() {
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        s.put(KEY, "v1");
        let out = interleave(&s, seed, vec![delete_if_match(&s, "v1"), delete_if_match(&s, "v1")]).await;
        let deleted = out.iter().filter(|r| r.is_ok()).count();
        assert_eq!(deleted, 1, "seed {seed}: {out:?}");
        assert!(out.iter().any(|r| matches!(r, Err(StoreError::NoSuchKey))), "seed {seed}: {out:?}");
        assert!(s.names().is_empty(), "seed {seed}: {:?}", s.names());
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_conditional_delete_racing_an_if_match_write_deletes_only_the_version_it_matched() {
    for seed in 0..SEEDS {
        let s = with_key("v1");
        let out = interleave(&s, seed, vec![delete_if_match(&s, "v1"), if_match(&s, "tmp\\a", "v2", "v1")]).await;
        match (&out[0], &out[1]) {
            // The delete came first: the writer finds no object to replace.
            (Ok(()), Err(StoreError::NoSuchKey)) => {
                assert_eq!(s.etag_at(KEY), None, "seed {seed}");
            }
            // The writer came first: the delete's ETag no longer matches,
            // and the new version stays.
            (Err(StoreError::PreconditionFailed), Ok(())) => {
                assert_eq!(s.etag_at(KEY).as_deref(), Some("v2"), "seed {seed}");
            }
            other => panic!("seed {seed}: {other:?}"),
        }
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_delete_whose_etag_is_stale_leaves_the_object_and_a_reader_reads_on() {
    let s = MemoryShare::default();
    s.put(KEY, "v2");
    // A GET holds the file, sharing READ and DELETE, as GETs open it.
    let reader = s.open_as(KEY, READ, READ | crate::store::memory_share::DELETE).expect("a GET's open");
    let out = interleave(&s, 1, vec![delete_if_match(&s, "v1")]).await;
    assert!(matches!(out[0], Err(StoreError::PreconditionFailed)), "{out:?}");
    assert_eq!(s.etag_at(KEY).as_deref(), Some("v2"));
    drop(reader);
    assert_eq!(s.open_count(), 0);
}

/// The pruning after a delete, of `dirs` (deepest first) on `s`; returns
/// the directories it said it removed.
async fn prune(s: &MemoryShare, dirs: &[&str], folder: bool) -> Vec<String> {
    let dirs: Vec<SharePath> = dirs.iter().map(|d| SharePath::root(d)).collect();
    let told = std::sync::Mutex::new(Vec::new());
    let removed = |dir: String| -> BoxFuture<'_, ()> {
        told.lock().unwrap().push(dir);
        Box::pin(async {})
    };
    let lock_of = |d: &SharePath| format!("tmp\\lock-{}", d.leaf());
    alone(s, prune_empty(s, &dirs, folder, lock_of, &removed)).await;
    told.into_inner().unwrap()
}

/// A share with the bucket `b` and the gateway's directories `b\x` and
/// `b\x\y`, as a PUT of `x/y/k` left them once `k` was deleted.
async fn with_key_dirs() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("b");
    for d in ["b\\x", "b\\x\\y"] {
        alone(&s, s.mkdir_own(d)).await.expect("made");
    }
    s
}

#[tokio::test(start_paused = true)]
async fn pruning_removes_the_gateways_empty_directories_and_stops_at_anything_else() {
    // Both empty and the gateway's: both go, and the bucket stays.
    let s = with_key_dirs().await;
    assert_eq!(prune(&s, &["b\\x\\y", "b\\x"], false).await, ["b\\x\\y", "b\\x"]);
    assert_eq!(s.names(), ["b"]);
    // A directory with an entry stays, and so do those above it.
    let s = with_key_dirs().await;
    s.put("b\\x\\y\\other", "v");
    assert!(prune(&s, &["b\\x\\y", "b\\x"], false).await.is_empty());
    assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y", "b\\x\\y\\other"]);
    // A folder someone made on the share stays unless it is the one a
    // deleted `name/` stood for.
    let s = MemoryShare::default();
    s.mkdir("b");
    s.mkdir("b\\f");
    assert!(prune(&s, &["b\\f"], false).await.is_empty());
    assert_eq!(prune(&s, &["b\\f"], true).await, ["b\\f"]);
    assert_eq!(s.names(), ["b"]);
    // A marker (the object `x/y/`) stays.
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_marker("b\\m", "vm");
    assert!(prune(&s, &["b\\m"], false).await.is_empty());
    assert_eq!(s.names(), ["b", "b\\m"]);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_pruned_directory_gives_the_object_kept_beside_it_its_name_back() {
    let s = with_key_dirs().await;
    let beside = SharePath::root("b\\x").beside(false);
    s.put(beside.as_str(), "vx"); // the object `x`, kept beside its directory
                                  // `b\x\y` goes; `b\x` goes and `x` takes its name back; the walk ends.
    assert_eq!(prune(&s, &["b\\x\\y", "b\\x"], false).await, ["b\\x\\y", "b\\x"]);
    assert_eq!(s.names(), ["b", "b\\x"]);
    assert_eq!(s.etag_at("b\\x").as_deref(), Some("vx"));
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_object_beside_a_directory_a_reader_holds_takes_its_name_back_once_it_closes() {
    // The pruned directory lingers, delete pending, while a reader (a
    // listing, a watch) holds it: the rename back meets its name and tries
    // again; the directory is never taken for a writer's new one. Either
    // the object gets its name back, or, past the wait, it stays beside a
    // directory made again: never beside nothing.
    let mut named = 0;
    for seed in 0..SEEDS {
        let s = with_key_dirs().await;
        alone(&s, s.delete_dir("b\\x\\y")).await.expect("empty");
        let beside = SharePath::root("b\\x").beside(false);
        s.put(beside.as_str(), "vx");
        let (reader, _, _) = alone(&s, s.open_to_read("b\\x", false)).await.expect("a reader opens it");
        let share = &s;
        let closing: Racer = Box::pin(async move {
            let _ = share.times("b").await; // one share operation, then it closes
            drop(reader);
            Ok(())
        });
        let pruning: Racer = Box::pin(async {
            prune_empty(&s, &[SharePath::root("b\\x")], false, |d| format!("tmp\\lock-{}", d.leaf()), &|_| {
                Box::pin(async {})
            })
            .await;
            Ok(())
        });
        let out = interleave(&s, seed, vec![pruning, closing]).await;
        assert!(out.iter().all(Result::is_ok), "seed {seed}: {out:?}");
        match s.etag_at("b\\x").as_deref() {
            Some("vx") => {
                named += 1;
                assert_eq!(s.names(), ["b", "b\\x"], "seed {seed}");
            }
            _ => {
                let kept_beside = s.etag_at(beside.as_str()).as_deref() == Some("vx");
                assert!(
                    kept_beside && alone(&s, s.is_directory("b\\x")).await.unwrap_or(false),
                    "seed {seed}: {:?}",
                    s.names()
                );
            }
        }
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(named > 0, "the object never took its name back");
}
