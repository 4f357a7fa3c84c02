//! The object cache's coherence decisions against the in-memory share
//! (`memory_share`): an entry is answered only while its holder's lease
//! stands, for at most its age, and only for the file it was kept for.
//! The same rules run against smbd in tests/e2e/test_object_cache.py.

use std::time::{Duration, Instant};

use super::*;
use crate::store::memory_share::{alone, MemHeld, MemoryShare, ALL, DELETE, READ, WRITE};
use crate::store::share::Failure;
use crate::store::share_ops::ShareOps;

const KEY: &str = "b\\k";

fn cache(entries: usize) -> ObjectCache<MemHeld> {
    ObjectCache::new(CacheOptions { entries, max_age: Duration::from_secs(3600), ..Default::default() })
}

/// Holds `path` on `s` and keeps it in `c`, as a HEAD's holder does.
fn keep(c: &ObjectCache<MemHeld>, s: &MemoryShare, path: &str) {
    let held = s.hold(path).expect("held");
    let info = ObjectInfo::new(held.created(), None, path);
    c.insert(path, Cached { info, body: None }, held, false);
}

/// How `c` answers for `path`: with an entry of what age, or not at all.
fn answer(c: &ObjectCache<MemHeld>, path: &str) -> Option<Age> {
    c.get(path).map(|(_, age, _)| age)
}

#[test]
fn an_entry_answers_while_its_lease_stands_and_a_writers_open_ends_it() {
    let s = MemoryShare::default();
    s.put(KEY, "v1");
    let c = cache(16);
    keep(&c, &s, KEY);
    assert_eq!(answer(&c, KEY), Some(Age::Fresh));
    // A GET's open (reading, sharing everything) breaks nothing.
    let reader = s.open_as(KEY, READ, ALL).expect("a GET opens");
    assert_eq!(answer(&c, KEY), Some(Age::Fresh));
    drop(reader);
    // A writer's open for DELETE (an If-Match lock, a warning before a
    // rename) breaks the lease; the holder closed first, so the open goes
    // on, and the entry is gone at the next look.
    let writer = s.open_as(KEY, DELETE, READ).expect("the holder closed before the writer's open");
    assert_eq!(answer(&c, KEY), None);
    // A path whose holder lost its lease just now is not held again yet.
    assert!(!c.quiet(KEY));
    drop(writer);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_publish_warns_the_holder_before_its_rename_and_a_write_into_it_ends_the_entry() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.mkdir("tmp");
    s.put(KEY, "v1");
    let c = cache(16);
    keep(&c, &s, KEY);
    let temp = s.create_temp("tmp\\t", "v2");
    // A rename over the held file breaks no lease (docs/leases.md): it is
    // refused while the holder has the file open, and the entry stands.
    let refused = alone(&s, s.rename(&temp, KEY, true)).await.map_err(|e| e.failure());
    assert_eq!(refused, Err(Failure::AccessDenied));
    assert_eq!(answer(&c, KEY), Some(Age::Fresh));
    // So a PUT first opens the file for DELETE (`warn_holders`), which
    // breaks the lease; the holder closes, and the rename goes through.
    let warning = s.open_as(KEY, DELETE, READ | WRITE).expect("the holder closed first");
    drop(warning);
    assert_eq!(answer(&c, KEY), None);
    assert!(alone(&s, s.rename(&temp, KEY, true)).await.is_ok());
    drop(temp);
    // An open to write the file in place (someone on the share).
    keep(&c, &s, KEY);
    assert!(answer(&c, KEY).is_some());
    let _w = s.open_as(KEY, WRITE, ALL).expect("opens once the holder closed");
    assert_eq!(answer(&c, KEY), None);
}

#[test]
fn a_renewal_keeps_only_the_same_unchanged_file_of_the_same_entry() {
    let s = MemoryShare::default();
    s.put(KEY, "v1");
    let c = cache(16);
    keep(&c, &s, KEY);
    let (_, _, generation) = c.get(KEY).expect("kept");
    // What a look at the path would answer: the same file, unchanged.
    let now = {
        let (cached, _, _) = c.get(KEY).expect("kept");
        let mut r = smb_proto::create::CreateResponse {
            oplock_level: 0,
            create_action: 0,
            times: Default::default(),
            file_id: Default::default(),
            contexts: vec![smb_proto::create::CreateResponseContext::OnDiskId {
                disk_file_id: cached.info.disk_id.expect("an on-disk id"),
                volume_id: 0,
            }],
        };
        r.times.end_of_file = cached.info.size;
        r.times.last_write = cached.info.last_modified;
        r
    };
    assert!(c.renew(KEY, &now, Instant::now(), generation));
    // Another generation's look renews nothing and drops nothing.
    assert!(!c.renew(KEY, &now, Instant::now(), generation + 1));
    assert!(c.get(KEY).is_some());
    // Changed in place (its ChangeTime moved): the entry goes.
    let mut changed = now.clone();
    changed.times.change += 1;
    assert!(!c.renew(KEY, &changed, Instant::now(), generation));
    assert!(c.get(KEY).is_none());
    // Another file under the name (another on-disk id): the entry goes.
    keep(&c, &s, KEY);
    let (_, _, generation) = c.get(KEY).expect("kept");
    let mut other = now.clone();
    other.contexts = vec![smb_proto::create::CreateResponseContext::OnDiskId { disk_file_id: 999, volume_id: 0 }];
    assert!(!c.renew(KEY, &other, Instant::now(), generation));
    assert!(c.get(KEY).is_none());
}

#[test]
fn entries_expire_by_age_and_by_their_directory_and_are_dropped_by_name() {
    let s = MemoryShare::default();
    for p in ["b\\k", "b\\K2", "b\\sub\\x", "c\\y"] {
        s.put(p, "v");
    }
    let c = cache(16);
    for p in ["b\\k", "b\\K2", "b\\sub\\x", "c\\y"] {
        keep(&c, &s, p);
    }
    // A change seen in `b` (a watch began there): its entries are used
    // again only once a look renews them; others are as they were.
    c.expire_in("b", Instant::now());
    assert_eq!(c.get("b\\k").map(|g| g.1), Some(Age::Expired));
    assert_eq!(c.get("b\\sub\\x").map(|g| g.1), Some(Age::Fresh));
    assert_eq!(c.get("c\\y").map(|g| g.1), Some(Age::Fresh));
    // A name a watch saw change, in another case on a case-insensitive
    // share: dropped; case-sensitive, the other name stays.
    c.forget_named("b", "k2", false);
    assert!(c.get("b\\K2").is_some());
    c.forget_named("b", "k2", true);
    assert!(c.get("b\\K2").is_none());
    // A directory removed or renamed: everything under it goes.
    c.forget_under("b");
    assert!(c.get("b\\k").is_none() && c.get("b\\sub\\x").is_none());
    assert!(c.get("c\\y").is_some());
    // Past its age an entry is expired whatever its lease says.
    let short = ObjectCache::new(CacheOptions { max_age: Duration::from_millis(1), ..Default::default() });
    keep(&short, &s, "b\\k");
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(short.get("b\\k").map(|g| g.1), Some(Age::Expired));
}

#[test]
fn the_least_recently_used_entry_goes_first_and_its_holder_closes() {
    let s = MemoryShare::default();
    for p in ["b\\1", "b\\2", "b\\3"] {
        s.put(p, "v");
    }
    let c = cache(2);
    keep(&c, &s, "b\\1");
    keep(&c, &s, "b\\2");
    assert!(c.get("b\\1").is_some()); // 2 is now the least recently used
    keep(&c, &s, "b\\3");
    assert!(c.get("b\\2").is_none());
    assert!(c.get("b\\1").is_some() && c.get("b\\3").is_some());
    assert_eq!(c.usage().0, 2);
    // The dropped entry's holder closed: a writer's open needs no break.
    assert_eq!(s.open_count(), 2);
}
