//! An upload's folder removed against the in-memory share
//! (`memory_share`): alone, racing a part's claim, and while a part's
//! writer holds its data file. The same runs against smbd in
//! tests/e2e/test_multipart.py.

use super::*;
use crate::store::memory_share::{alone, race, MemoryShare, ALL, WRITE};

const DIR: &str = "u\\x";

fn dir() -> SharePath {
    SharePath::root(DIR)
}

fn upload() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("u");
    s.mkdir(DIR);
    s.put("u\\x\\part-00001", "e1");
    s.put("u\\x\\data", "");
    s
}

#[tokio::test(start_paused = true)]
async fn an_upload_folder_goes_with_its_files_and_a_gone_one_is_done() {
    let (s, d) = (upload(), dir());
    let removed = alone(&s, remove_upload_on(&s, &d)).await;
    assert!(removed.is_ok(), "{removed:?}");
    assert_eq!(s.names(), ["u"]);
    let again = alone(&s, remove_upload_on(&s, &d)).await;
    assert!(again.is_ok(), "{again:?}");
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_part_claimed_while_its_upload_is_removed_goes_with_it() {
    let mut claimed = 0;
    for seed in 0..400 {
        let (s, d) = (upload(), dir());
        let claim = s.create_once("u\\x\\part-00002", b"");
        let (removed, claim) = race(&s, seed, remove_upload_on(&s, &d), claim).await;
        assert!(removed.is_ok(), "seed {seed}: {removed:?}");
        // Claimed before the folder went, or refused once it had.
        match claim {
            Ok(true) => claimed += 1,
            Err(e) if is_not_found(&e) => {}
            other => panic!("seed {seed}: {other:?}"),
        }
        assert_eq!(s.names(), ["u"], "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(claimed > 0, "no claim came before the folder went");
}

#[tokio::test(start_paused = true)]
async fn a_part_still_writing_makes_the_removal_busy_until_it_closes() {
    let (s, d) = (upload(), dir());
    let writer = s.open_as("u\\x\\data", WRITE, ALL).expect("a part writes into the data file");
    let began = tokio::time::Instant::now();
    let removed = alone(&s, remove_upload_on(&s, &d)).await;
    assert!(matches!(removed, Err(StoreError::Busy(_))), "{removed:?}");
    assert!(began.elapsed() >= backoff::UPLOAD_REMOVAL.budget(), "{:?}", began.elapsed());
    // Delete pending: the name stays while the writer holds it.
    assert_eq!(s.names(), ["u", DIR, "u\\x\\data"]);
    drop(writer);
    let removed = alone(&s, remove_upload_on(&s, &d)).await;
    assert!(removed.is_ok(), "{removed:?}");
    assert_eq!(s.names(), ["u"]);
}
