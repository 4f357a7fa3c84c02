//! The marks of S3 deletes against the in-memory share (`memory_share`).
//! The watcher that takes them runs against smbd in
//! tests/e2e/test_share_events.py.

use super::*;
use crate::store::memory_share::{alone, interleave, MemoryShare};

const HOUR: Duration = Duration::from_secs(3600);

fn marks() -> SharePath {
    SharePath::root(".smbgate\\s3-deletes")
}

#[tokio::test(start_paused = true)]
async fn a_mark_is_written_with_its_folders_and_taken_once() {
    let s = MemoryShare::default();
    s.mkdir(".smbgate");
    alone(&s, mark_deleted(&s, &marks(), "b", "a/key")).await.unwrap();
    let path = mark_path(&marks(), "b", "a/key");
    assert_eq!(s.names(), [".smbgate", ".smbgate\\s3-deletes", ".smbgate\\s3-deletes\\b", path.as_str()]);
    // Marked again (a second delete of the key): the same file.
    alone(&s, mark_deleted(&s, &marks(), "b", "a/key")).await.unwrap();
    assert_eq!(s.names().len(), 4);
    assert!(alone(&s, take_delete_mark(&s, &path, HOUR)).await.unwrap());
    assert!(!alone(&s, take_delete_mark(&s, &path, HOUR)).await.unwrap());
    // Another key's mark is another file.
    assert_ne!(mark_path(&marks(), "b", "a/key2"), path);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn of_two_racing_takers_of_one_mark_exactly_one_has_it() {
    for seed in 0..300 {
        let s = MemoryShare::default();
        s.mkdir(".smbgate");
        alone(&s, mark_deleted(&s, &marks(), "b", "k")).await.unwrap();
        let path = mark_path(&marks(), "b", "k");
        let took =
            interleave(&s, seed, vec![take_delete_mark(&s, &path, HOUR), take_delete_mark(&s, &path, HOUR)]).await;
        let took: Vec<bool> = took.into_iter().map(|t| t.unwrap_or_else(|e| panic!("seed {seed}: {e:?}"))).collect();
        assert_eq!(took.iter().filter(|t| **t).count(), 1, "seed {seed}: {took:?}");
        assert_eq!(s.names().len(), 3, "seed {seed}: {:?}", s.names());
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_old_mark_is_not_the_gateways_and_the_sweep_takes_only_old_ones() {
    let s = MemoryShare::default();
    let dir = marks().join("b");
    s.mkdir(".smbgate");
    alone(&s, mark_deleted(&s, &marks(), "b", "fresh")).await.unwrap();
    let two_hours_ago = crate::store::versions::filetime_now() - 2 * 3600 * 10_000_000;
    let old = mark_path(&marks(), "b", "old");
    s.put_written(&old, two_hours_ago);
    // Taken, but older than the watcher waits: someone else's removal.
    assert!(!alone(&s, take_delete_mark(&s, &old, HOUR)).await.unwrap());
    assert!(!s.names().contains(&old.to_string()));
    s.put_written(&old, two_hours_ago);
    alone(&s, sweep_delete_marks(&s, &dir, HOUR)).await.unwrap();
    let fresh = mark_path(&marks(), "b", "fresh");
    assert_eq!(s.names(), [".smbgate", ".smbgate\\s3-deletes", dir.as_str(), fresh.as_str()]);
    // A bucket with no marks yet has no folder: nothing to sweep.
    alone(&s, sweep_delete_marks(&s, &marks().join("other"), HOUR)).await.unwrap();
}
