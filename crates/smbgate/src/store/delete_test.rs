//! The checked delete against the in-memory share (`memory_share`):
//! racing deletes and writers interleaved one share operation at a time,
//! over many seeded interleavings. The same races run against smbd in
//! tests/e2e/test_conditional_delete_race.py.

use super::*;
use crate::store::conditions::EtagCondition;
use crate::store::memory_share::{interleave, MemoryShare, READ};
use crate::store::writes::swap::tests::{if_match, Racer, KEY, LOCK};

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
        let s = MemoryShare::default();
        s.put(KEY, "v1");
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
