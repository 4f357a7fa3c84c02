//! A writer's warning to the object cache's holders (`warn_holders_on`)
//! against the in-memory share (`memory_share`, standing for both the
//! renaming connection and the other one): it ends every holder's lease
//! and keeps new holders away while it is kept, waits behind another
//! writer's warning and for nothing else, and tells a writer when nothing
//! is there to replace. The same rule runs against smbd in
//! tests/e2e/test_object_cache.py.

use std::time::Duration;

use super::*;
use crate::store::memory_share::{alone, MemHeld, MemoryShare, DELETE, READ, WRITE};
use crate::store::reads::object_cache::{CacheOptions, Holder, ObjectCache};
use crate::store::types::ObjectInfo;

const KEY: &str = "b\\k";

fn share() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put(KEY, "v1");
    s
}

/// A cache whose entry of `KEY` a HEAD's holder on `s` keeps.
fn held_in_cache(s: &MemoryShare) -> ObjectCache<MemHeld> {
    let c = ObjectCache::new(CacheOptions { entries: 4, max_age: Duration::from_secs(3600), ..Default::default() });
    let held = s.hold(KEY).expect("a HEAD holds it");
    c.insert(KEY, Cached { info: ObjectInfo::new(held.created(), None, KEY), body: None }, held, false);
    c
}

#[tokio::test(start_paused = true)]
async fn a_warning_ends_the_holders_lease_and_keeps_holders_away_while_it_is_kept() {
    let s = share();
    let c = held_in_cache(&s);
    assert!(c.get(KEY).is_some());
    let warning = alone(&s, warn_holders_on(&s, Some(&s), KEY)).await;
    let Warning::Held(open) = warning else { panic!("not held: the holder should have closed first") };
    assert!(c.get(KEY).is_none(), "the entry outlived its lease");
    // No HEAD holds the file again while the warning lasts, so the file a
    // writer renames over is the one it warned about.
    let again = s.hold(KEY).map(|_| ()).map_err(|e| e.failure());
    assert_eq!(again, Err(Failure::SharingViolation));
    drop(open);
    assert!(s.hold(KEY).is_ok());
}

#[tokio::test(start_paused = true)]
async fn nothing_at_the_path_is_absent_and_then_a_publish_may_not_replace() {
    let s = share();
    let began = tokio::time::Instant::now();
    let warning = alone(&s, warn_holders_on(&s, Some(&s), "b\\none")).await;
    assert!(matches!(warning, Warning::Absent));
    assert!(!warning.may_replace(true));
    // A directory cannot be warned about: the publish goes on as asked.
    let warning = alone(&s, warn_holders_on(&s, Some(&s), "b")).await;
    assert!(matches!(warning, Warning::Unwarned));
    assert!(warning.may_replace(true));
    assert_eq!(s.open_count(), 0);
    // Neither is waited on: only another writer's warning is.
    assert!(began.elapsed() < Duration::from_millis(100), "{:?}", began.elapsed());
}

#[tokio::test(start_paused = true)]
async fn with_no_other_connection_the_holders_leases_are_broken_and_nothing_is_kept() {
    let s = share();
    let c = held_in_cache(&s);
    let warning = alone(&s, warn_holders_on(&s, None, KEY)).await;
    assert!(matches!(warning, Warning::Unwarned));
    assert!(warning.may_replace(true));
    assert!(c.get(KEY).is_none(), "the entry outlived its lease");
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_warning_waits_behind_another_writers_and_is_had_once_that_closes() {
    let s = share();
    let other = s.open_as(KEY, DELETE, READ | WRITE).expect("another writer's warning");
    let began = tokio::time::Instant::now();
    let (warning, ()) = tokio::join!(alone(&s, warn_holders_on(&s, Some(&s), KEY)), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(other);
    });
    assert!(matches!(warning, Warning::Held(_)), "not held after the other writer's warning closed");
    assert!(began.elapsed() >= Duration::from_millis(300), "{:?}", began.elapsed());
    drop(warning);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_warning_held_elsewhere_past_the_wait_leaves_the_writer_unwarned() {
    let s = share();
    let _other = s.open_as(KEY, DELETE, READ | WRITE).expect("another writer's warning");
    let began = tokio::time::Instant::now();
    let warning = alone(&s, warn_holders_on(&s, Some(&s), KEY)).await;
    assert!(matches!(warning, Warning::Unwarned));
    let waited = began.elapsed();
    let budget = backoff::WARNING.budget();
    assert!(waited >= budget && waited < budget + Duration::from_millis(200), "{waited:?}");
    assert_eq!(s.open_count(), 1);
}
