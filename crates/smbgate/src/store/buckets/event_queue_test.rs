//! The locks of event queues and bucket watchers against the in-memory
//! share (`memory_share`), whose creation lock is made in two steps, as
//! Samba makes the file before it records the open. The same locks are
//! taken against smbd in tests/e2e/test_events.py and
//! test_share_events.py.

use super::*;
use crate::store::memory_share::{alone, interleave, MemoryShare};

const LOCK: &str = ".smbgate\\events\\t\\q.lock";

/// A share with the target's folder, which the lock goes into.
fn queues() -> MemoryShare {
    let s = MemoryShare::default();
    for d in [".smbgate", ".smbgate\\events", ".smbgate\\events\\t"] {
        s.mkdir(d);
    }
    s
}

/// The names on `s` other than the folders [`queues`] made.
fn locks(s: &MemoryShare) -> Vec<String> {
    s.names().into_iter().filter(|n| n.ends_with(".lock")).collect()
}

#[tokio::test(start_paused = true)]
async fn of_racing_takers_of_one_lock_never_two_hold_it() {
    let mut held = 0;
    for seed in 0..400 {
        let s = queues();
        let took = interleave(
            &s,
            seed,
            vec![take_unheld_lock(&s, LOCK), take_unheld_lock(&s, LOCK), take_unheld_lock(&s, LOCK)],
        )
        .await;
        let holders: Vec<_> =
            took.into_iter().filter_map(|t| t.unwrap_or_else(|e| panic!("seed {seed}: {e:?}"))).collect();
        assert!(holders.len() <= 1, "seed {seed}: {} hold the lock", holders.len());
        // A holder's lock is the file at the name, and goes with it.
        assert_eq!(locks(&s), if holders.is_empty() { vec![] } else { vec![LOCK.to_string()] }, "seed {seed}");
        assert_eq!(s.open_count(), holders.len(), "seed {seed}");
        held += holders.len();
        drop(holders);
        assert!(locks(&s).is_empty(), "seed {seed}");
    }
    // Most races have a winner (where none has, the next try tells).
    assert!(held > 300, "{held} of 400 races had a holder");
}

#[tokio::test(start_paused = true)]
async fn a_lock_left_by_a_dead_holder_is_taken_over_and_a_held_one_is_not() {
    let s = queues();
    s.put(LOCK, ""); // its holder's server went down with it open
    let ours = alone(&s, take_unheld_lock(&s, LOCK)).await.unwrap();
    assert!(ours.is_some());
    assert!(alone(&s, take_unheld_lock(&s, LOCK)).await.unwrap().is_none());
    assert_eq!(locks(&s), [LOCK]);
    drop(ours);
    assert!(locks(&s).is_empty());
    assert!(alone(&s, take_unheld_lock(&s, LOCK)).await.unwrap().is_some());
}
