//! The If-Match swap and the creation lock against the in-memory share,
//! racing writers interleaved one share operation at a time, over many
//! seeded interleavings (`memory_share`). The same races run against smbd
//! in tests/e2e/test_conditional_writes.py.

use std::future::Future;
use std::pin::Pin;

use super::*;
use crate::store::create_lock::take_lock;
use crate::store::memory_share::{interleave, MemHandle, MemoryShare, DELETE, READ};

pub(crate) const KEY: &str = "b\\k";
const BESIDE: &str = "b\\k+";
pub(crate) const LOCK: &str = "tmp\\lock-k";
/// Interleavings tried per race.
const SEEDS: u64 = 400;

pub(crate) type Racer<'a> = Pin<Box<dyn Future<Output = StoreResult<()>> + 'a>>;

/// An If-Match write of a new version (`etag`) from the temp file `temp`,
/// expecting the object's ETag to be `expect`.
pub(crate) fn if_match<'a>(s: &'a MemoryShare, temp: &'a str, etag: &'a str, expect: &'a str) -> Racer<'a> {
    Box::pin(async move {
        let file = s.create_temp(temp, etag);
        let backup = format!("tmp\\backup-{}", temp.replace('\\', "-"));
        let paths = SwapPaths { path: KEY, beside: Some(BESIDE), plain: KEY, backup: &backup, lock: LOCK };
        let accept =
            async |_: &MemHandle, meta: Option<ObjectMeta>, _: &str| match meta.is_some_and(|m| m.etag == expect) {
                true => Ok(super::Aside::Discard),
                false => Err(StoreError::PreconditionFailed),
            };
        match swap_if_match(s, &file, || {}, &paths, accept).await? {
            Swapped::Done => Ok(()),
            Swapped::NoObject => Err(StoreError::NoSuchKey),
        }
    })
}

/// A create-if-absent (`If-None-Match: *`) of `temp` at the key, as
/// `Writes::publish_if` makes it: a rename that may not replace, under the
/// key's creation lock.
fn create_if_absent<'a>(s: &'a MemoryShare, temp: &'a str, etag: &'a str) -> Racer<'a> {
    Box::pin(async move {
        let file = s.create_temp(temp, etag);
        let lock = take_lock(s, LOCK).await?;
        let renamed = s.rename(&file, KEY, false).await;
        s.release_lock(lock).await;
        renamed.map_err(|e| match e.failure() {
            Failure::Collision => StoreError::PreconditionFailed,
            _ => e.into(),
        })
    })
}

/// A share holding the object `KEY` (ETag `etag`) in its bucket, beside
/// the folder writers' temp files and locks are in.
pub(crate) fn with_key(etag: &str) -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.mkdir("tmp");
    s.put(KEY, etag);
    s
}

/// The ETags left at any name, sorted (temp files of losers included).
fn etags(s: &MemoryShare) -> Vec<String> {
    let mut v: Vec<String> = s.names().iter().filter_map(|n| s.etag_at(n)).collect();
    v.sort();
    v
}

#[tokio::test(start_paused = true)]
async fn two_if_match_writers_of_one_etag_never_both_win() {
    for seed in 0..SEEDS {
        let s = with_key("v1");
        let out =
            interleave(&s, seed, vec![if_match(&s, "tmp\\a", "va", "v1"), if_match(&s, "tmp\\b", "vb", "v1")]).await;
        let won: Vec<usize> = (0..2).filter(|&i| out[i].is_ok()).collect();
        assert_eq!(won.len(), 1, "seed {seed}: {out:?}");
        let loser = &out[1 - won[0]];
        assert!(matches!(loser, Err(StoreError::PreconditionFailed)), "seed {seed}: {out:?}");
        let winner = ["va", "vb"][won[0]];
        assert_eq!(s.etag_at(KEY).as_deref(), Some(winner), "seed {seed}");
        // The old version is gone, the lock released, no open left; only
        // the loser's unpublished temp file (its caller deletes it) stays.
        let loser_temp = ["tmp\\b", "tmp\\a"][won[0]];
        assert_eq!(s.names(), ["b", KEY, "tmp", loser_temp], "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_create_if_absent_never_lands_in_a_swaps_gap() {
    // The object exists at every moment: moved aside and the new version
    // renamed in are two steps, and the creation lock keeps a creator out
    // from between them.
    for seed in 0..SEEDS {
        let s = with_key("v1");
        let out =
            interleave(&s, seed, vec![if_match(&s, "tmp\\a", "va", "v1"), create_if_absent(&s, "tmp\\c", "vc")]).await;
        assert!(out[0].is_ok(), "seed {seed}: {out:?}");
        assert!(matches!(out[1], Err(StoreError::PreconditionFailed)), "seed {seed}: {out:?}");
        assert_eq!(s.etag_at(KEY).as_deref(), Some("va"), "seed {seed}");
        assert_eq!(etags(&s), ["va", "vc"], "seed {seed}: the old version is gone, nothing else is lost");
    }
}

#[tokio::test(start_paused = true)]
async fn a_directory_made_in_a_swaps_gap_puts_the_new_version_beside_it() {
    let mut beside = 0;
    for seed in 0..SEEDS {
        let s = with_key("v1");
        let mkdir: Racer = Box::pin(async { s.mkdir_own(KEY).await.map_err(Into::into) });
        let out = interleave(&s, seed, vec![if_match(&s, "tmp\\a", "va", "v1"), mkdir]).await;
        assert!(out[0].is_ok(), "seed {seed}: {out:?}");
        match out[1] {
            // The directory took the key's name: the new version is beside.
            Ok(()) => {
                beside += 1;
                assert_eq!((s.etag_at(KEY), s.etag_at(BESIDE).as_deref()), (None, Some("va")), "seed {seed}");
            }
            Err(_) => assert_eq!(s.etag_at(KEY).as_deref(), Some("va"), "seed {seed}"),
        }
        assert_eq!(etags(&s), ["va"], "seed {seed}: the old version is gone");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(beside > 0, "no interleaving put the mkdir in the gap");
}

#[tokio::test(start_paused = true)]
async fn a_look_open_across_the_swap_leaves_no_old_version_behind() {
    // A look at the key (another writer's check of its condition, a HEAD)
    // opened before the old version moves aside, and closing last, knows
    // the file by its old name: the delete-on-close set under the backup
    // name does not take, and the old version would stay at that name.
    for seed in 0..SEEDS {
        let s = with_key("v1");
        let look: Racer = Box::pin(async { s.stat_with_meta(KEY, true).await.map(drop).map_err(Into::into) });
        let out = interleave(&s, seed, vec![if_match(&s, "tmp\\a", "va", "v1"), look]).await;
        assert!(out[0].is_ok(), "seed {seed}: {out:?}");
        assert_eq!(s.names(), ["b", KEY, "tmp"], "seed {seed}: the old version is gone, nothing else is left");
        assert_eq!(s.etag_at(KEY).as_deref(), Some("va"), "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_held_creation_lock_is_waited_for_then_busy() {
    let s = MemoryShare::default();
    let first = interleave(&s, 0, vec![Box::pin(take_lock(&s, LOCK))]).await.pop().unwrap().expect("taken");
    let began = tokio::time::Instant::now();
    let second = interleave(&s, 0, vec![Box::pin(take_lock(&s, LOCK))]).await.pop().unwrap();
    assert!(matches!(second, Err(StoreError::Busy(_))), "{:?}", second.err());
    // The stated policy: the waiter gives up after the creation lock's
    // whole budget, not before.
    let waited = began.elapsed();
    assert!(waited >= crate::store::backoff::CREATION_LOCK.budget(), "{waited:?}");
    drop(first);
}

#[tokio::test(start_paused = true)]
async fn a_reader_keeps_the_old_version_until_it_closes_and_then_it_goes() {
    for seed in 0..SEEDS / 4 {
        let s = with_key("v1");
        let reader = s.open_as(KEY, READ, READ | DELETE).expect("a GET opens the object");
        let out = interleave(&s, seed, vec![if_match(&s, "tmp\\a", "va", "v1")]).await;
        assert!(out[0].is_ok(), "seed {seed}: {out:?}");
        assert_eq!(etags(&s), ["v1", "va"], "seed {seed}: the reader's version stays, delete pending");
        drop(reader);
        assert_eq!(s.names(), ["b", KEY, "tmp"], "seed {seed}: the old version went with its last open");
    }
}

/// Two takers, each holding the lock across one share operation, never
/// hold it at once, and nothing is left once both are done.
#[tokio::test(start_paused = true)]
async fn two_takers_never_hold_the_creation_lock_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        let (holding, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let taker = || async {
            let lock = take_lock(&s, LOCK).await?;
            most.fetch_max(holding.fetch_add(1, SeqCst) + 1, SeqCst);
            let _ = s.is_directory(KEY).await;
            holding.fetch_sub(1, SeqCst);
            s.release_lock(lock).await;
            Ok::<(), StoreError>(())
        };
        let out = interleave(&s, seed, vec![taker(), taker()]).await;
        assert!(out.iter().all(|r| r.is_ok()), "seed {seed}: {out:?}");
        assert_eq!(most.load(SeqCst), 1, "seed {seed}: both held the lock");
        assert!(s.names().is_empty(), "seed {seed}: {:?} left", s.names());
    }
}
