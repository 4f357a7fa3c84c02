//! The move of an object beside a directory of its name, against the
//! in-memory share, racing a plain PUT of the same key one share operation
//! at a time (`memory_share`). The same race runs against smbd in
//! tests/e2e/test_nested_keys.py.

use std::future::Future;
use std::pin::Pin;

use super::*;
use crate::store::memory_share::{interleave, MemoryShare, DELETE, READ, WRITE};

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
        s.put(KEY, "v1");
        let displace: Racer = Box::pin(displace_on(&s, KEY, BESIDE, LOCK));
        let out = interleave(&s, seed, vec![displace, put(&s, "tmp\\p", "v2")]).await;
        assert!(out.iter().all(Result::is_ok), "seed {seed}: {out:?}");
        // The key is a directory now, and the object beside it is the
        // PUT's version, which came after the one that was there.
        assert_eq!((s.etag_at(KEY), s.etag_at(BESIDE).as_deref()), (None, Some("v2")), "seed {seed}");
        assert_eq!(s.names(), [KEY, BESIDE], "seed {seed}: the lock is gone, nothing else is left");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_object_held_without_sharing_delete_is_waited_for_then_busy() {
    // An If-Match writer's lock open shares only READ: the object cannot
    // move until it closes; with it never closing, the move gives up.
    let s = MemoryShare::default();
    s.put(KEY, "v1");
    let held = s.open_as(KEY, WRITE | DELETE, READ).expect("the If-Match writer opens it");
    let out = interleave(&s, 0, vec![Box::pin(displace_on(&s, KEY, BESIDE, LOCK))]).await;
    assert!(matches!(out[0], Err(StoreError::Busy(_))), "{out:?}");
    assert_eq!((s.etag_at(KEY).as_deref(), s.names()), (Some("v1"), vec![KEY.to_string()]), "nothing moved");
    drop(held);
    let out = interleave(&s, 0, vec![Box::pin(displace_on(&s, KEY, BESIDE, LOCK))]).await;
    assert!(out[0].is_ok(), "{out:?}");
    assert_eq!(s.etag_at(BESIDE).as_deref(), Some("v1"));
}
