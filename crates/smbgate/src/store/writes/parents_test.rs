//! The directories a key's path needs, against the in-memory share
//! (`memory_share`), alone and racing the pruning of a delete. The same
//! rule runs against smbd in tests/e2e/test_keys.py and
//! test_prune_races.py.

use super::*;
use crate::store::delete::prune_empty;
use crate::store::memory_share::{alone, race, MemoryShare};
use futures::future::BoxFuture;

fn dirs(paths: &[&str]) -> Vec<SharePath> {
    paths.iter().map(|p| SharePath::root(p)).collect()
}

fn lock(p: &SharePath) -> String {
    p.as_str().to_lowercase()
}

#[tokio::test(start_paused = true)]
async fn missing_parents_are_made_and_an_object_in_the_way_moves_beside() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put("b\\x", "vx"); // the object x, now a prefix of the key too
    alone(&s, make_parents_on(&s, &dirs(&["b\\x", "b\\x\\y"]), lock)).await.unwrap();
    assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y", "b\\x\u{F02B}"]);
    assert_eq!(s.etag_at("b\\x\u{F02B}").as_deref(), Some("vx"));
    // Made already: nothing changes.
    alone(&s, make_parents_on(&s, &dirs(&["b\\x", "b\\x\\y"]), lock)).await.unwrap();
    assert_eq!(s.names().len(), 4);
    // The bucket gone.
    let s = MemoryShare::default();
    let gone = alone(&s, make_parents_on(&s, &dirs(&["b\\x"]), lock)).await;
    assert!(matches!(gone, Err(StoreError::NoSuchBucket)), "{gone:?}");
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn parents_a_delete_prunes_behind_the_walk_are_made_again() {
    let removed = |_: String| -> BoxFuture<'_, ()> { Box::pin(async {}) };
    let mut pruned = 0;
    for seed in 0..400 {
        let s = MemoryShare::default();
        s.mkdir("b");
        // The folders of a key just deleted, empty: its delete prunes them.
        for d in ["b\\x", "b\\x\\y"] {
            alone(&s, s.mkdir_own(d)).await.unwrap();
        }
        let (down, up) = (dirs(&["b\\x", "b\\x\\y"]), dirs(&["b\\x\\y", "b\\x"]));
        let walk = make_parents_on(&s, &down, lock);
        let (made, ()) = race(&s, seed, walk, prune_empty(&s, &up, false, lock, &removed)).await;
        assert!(made.is_ok(), "seed {seed}: {made:?}");
        // Made last, or pruned last: never a folder without its parent. (A
        // prune can always come after the walk's last look, so the walk
        // cannot promise its folders still stand: the rename into place
        // makes them again, `publish.rs`.)
        let names = s.names();
        assert!(
            names == ["b", "b\\x", "b\\x\\y"] || names == ["b"] || names == ["b", "b\\x"],
            "seed {seed}: {names:?}"
        );
        pruned += usize::from(names != ["b", "b\\x", "b\\x\\y"]);
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(pruned > 0, "the prune never came after the walk");
}
