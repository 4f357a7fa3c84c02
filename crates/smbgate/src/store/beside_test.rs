//! The move of an object beside a directory of its name, against the
//! in-memory share, racing a plain PUT of the same key one share operation
//! at a time (`memory_share`). The same race runs against smbd in
//! tests/e2e/test_nested_keys.py.

use std::future::Future;
use std::pin::Pin;

use super::*;
use crate::store::memory_share::{alone, interleave, race, MemoryShare, DELETE, READ, WRITE};

const KEY: &str = "b\\k";
const BESIDE: &str = "b\\k+";
const LOCK: &str = "tmp\\lock-k";
/// Interleavings tried per race.
const SEEDS: u64 = 400;

type Racer<'a> = Pin<Box<dyn Future<Output = StoreResult<()>> + 'a>>;

/// A plain PUT of a new version (`etag`) at the key, as `publish_if`
/// makes it: a replacing rename, and, where a directory now holds the
/// key's name, a replacing rename beside it.
fn put<'a>(s: &'a MemoryShare, temp: &'a str, etag: &'a str) -> Racer<'a> {
    Box::pin(async move {
        let file = s.create_temp(temp, etag);
        match s.rename(&file, KEY, true).await {
            Err(e) if e.failure() == Failure::AccessDenied && s.holds_no_file(KEY).await => {
                s.rename(&file, BESIDE, true).await.map_err(Into::into)
            }
            r => r.map_err(Into::into),
        }
    })
}

#[tokio::test(start_paused = true)]
async fn an_object_moved_beside_its_new_directory_keeps_the_last_put() {
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        s.mkdir("b");
        s.put(KEY, "v1");
        let displace: Racer = Box::pin(displace_on(&s, KEY, BESIDE, LOCK));
        let out = interleave(&s, seed, vec![displace, put(&s, "tmp\\p", "v2")]).await;
        assert!(out.iter().all(Result::is_ok), "seed {seed}: {out:?}");
        // The key is a directory now, and the object beside it is the
        // PUT's version, which came after the one that was there.
        assert_eq!((s.etag_at(KEY), s.etag_at(BESIDE).as_deref()), (None, Some("v2")), "seed {seed}");
        assert_eq!(s.names(), ["b", KEY, BESIDE], "seed {seed}: the lock is gone, nothing else is left");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_object_held_without_sharing_delete_is_waited_for_then_busy() {
    // An If-Match writer's lock open shares only READ: the object cannot
    // move until it closes; with it never closing, the move gives up.
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put(KEY, "v1");
    let held = s.open_as(KEY, WRITE | DELETE, READ).expect("the If-Match writer opens it");
    let out = interleave(&s, 0, vec![Box::pin(displace_on(&s, KEY, BESIDE, LOCK))]).await;
    assert!(matches!(out[0], Err(StoreError::Busy(_))), "{out:?}");
    assert_eq!(
        (s.etag_at(KEY).as_deref(), s.names()),
        (Some("v1"), vec!["b".to_string(), KEY.to_string()]),
        "nothing moved"
    );
    drop(held);
    let out = interleave(&s, 0, vec![Box::pin(displace_on(&s, KEY, BESIDE, LOCK))]).await;
    assert!(out[0].is_ok(), "{out:?}");
    assert_eq!(s.etag_at(BESIDE).as_deref(), Some("v1"));
}

/// What [`stat_stored`] found of `key` in the bucket `b`: where, or
/// "none".
async fn stat_place(s: &MemoryShare, key: &str, missing_too: bool) -> StoreResult<&'static str> {
    let mapped = crate::store::keys::map_key(key).expect("a valid key");
    let own = SharePath::root("b").join_key(&mapped);
    let found = stat_stored(s, own.clone(), &mapped, missing_too).await?;
    Ok(match found {
        None => "none",
        Some((_, _, path)) if path == own => "own",
        Some(_) => "beside",
    })
}

#[tokio::test(start_paused = true)]
async fn a_listings_stat_racing_a_move_beside_finds_the_object_at_one_place_or_the_other() {
    // A listing that saw `k` confirms it with a stat that also looks beside
    // a missing own path (`missing_too`): between the move's rename and
    // its mkdir, `k` is only beside.
    let real_beside = SharePath::root(KEY).beside(false);
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        s.mkdir("b");
        s.put(KEY, "v1");
        let displace = displace_on(&s, KEY, real_beside.as_str(), LOCK);
        let (moved, place) = race(&s, seed, displace, stat_place(&s, "k", true)).await;
        assert!(moved.is_ok(), "seed {seed}: {moved:?}");
        let place = place.expect("the stat succeeded");
        assert_ne!(place, "none", "seed {seed}");
        outcomes.insert(place);
    }
    assert_eq!(outcomes.into_iter().collect::<Vec<_>>(), ["beside", "own"], "both places over {SEEDS} seeds");
}

#[tokio::test(start_paused = true)]
async fn a_stat_of_a_key_ending_in_a_slash_finds_markers_and_foreign_empty_folders_only() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_marker("b\\m", "vm");
    s.mkdir("b\\f");
    let at = |key: &'static str| {
        let s = &s;
        async move { alone(s, stat_place(s, key, true)).await.expect("the stat succeeded") }
    };
    assert_eq!(at("m/").await, "own", "a directory with a marker record");
    assert_eq!(at("f/").await, "own", "an empty folder someone made");
    assert_eq!(at("m").await, "none", "`m/` is no object `m`");
    alone(&s, s.mkdir_own("b\\o")).await.expect("the gateway makes its folder");
    assert_eq!(at("o/").await, "none", "a directory the gateway made is no object");
    s.put("b\\f\\x", "vx");
    assert_eq!(at("f/").await, "none", "a folder with something in it is only a prefix");
}
