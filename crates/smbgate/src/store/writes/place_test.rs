//! The rename into place against the in-memory share (`memory_share`):
//! where a published file lands, what a failed rename answers, and a PUT
//! racing the pruning of its folders by a delete. The same rule runs
//! against smbd in tests/e2e/test_keys.py and test_prune_races.py.

use super::*;
use crate::store::create_lock::take_lock;
use crate::store::delete::prune_empty;
use crate::store::keys::map_key;
use crate::store::memory_share::{alone, race, MemHandle, MemoryShare, READ};
use crate::store::meta::ObjectMeta;
use futures::future::BoxFuture;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The plain rename of the temp file, counted.
struct Rename<'a> {
    s: &'a MemoryShare,
    file: &'a MemHandle,
    tries: AtomicUsize,
}

impl RenameStep for Rename<'_> {
    async fn rename_to(&self, target: &str, replace: bool) -> Result<(), ShareError> {
        self.tries.fetch_add(1, Ordering::Relaxed);
        self.s.rename(self.file, target, replace).await
    }
}

fn lock(p: &SharePath) -> String {
    p.as_str().to_lowercase()
}

/// Places a temp file with ETag `etag` at `key` in bucket `b`; returns
/// the answer and how many renames it took.
async fn place(s: &MemoryShare, key: &str, etag: &str, replace: bool) -> (StoreResult<()>, usize) {
    static TEMPS: AtomicUsize = AtomicUsize::new(0);
    // A refused temp file stays where it was: each try has its own.
    let file = s.create_temp(&format!("b\\tmp{}", TEMPS.fetch_add(1, Ordering::Relaxed)), etag);
    let rename = Rename { s, file: &file, tries: AtomicUsize::new(0) };
    let placed = alone(s, place_on(s, &place_of(key, replace).as_place(), lock, &rename)).await;
    (placed, rename.tries.into_inner())
}

/// A key's target, folders and bucket, owned.
struct Owned {
    target: SharePath,
    bucket: SharePath,
    mapped: MappedKey,
    replace: bool,
}

impl Owned {
    fn as_place(&self) -> Place<'_> {
        Place { target: &self.target, bucket: &self.bucket, mapped: &self.mapped, replace: self.replace, locked: false }
    }
}

fn place_of(key: &str, replace: bool) -> Owned {
    let mapped = map_key(key).expect("a valid key");
    let bucket = SharePath::root("b");
    let target = bucket.ancestors_of(&mapped).pop().expect("a key has a name");
    Owned { target, bucket, mapped, replace }
}

#[tokio::test(start_paused = true)]
async fn a_file_lands_at_its_key_its_folders_made_or_beside_a_directory_of_its_name() {
    let s = MemoryShare::default();
    s.mkdir("b");
    // Folders made.
    let (placed, tries) = place(&s, "x/y", "v1", true).await;
    assert!(placed.is_ok(), "{placed:?}");
    assert_eq!(tries, 2, "one rename refused for the missing folder, one after making it");
    assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y"]);
    assert_eq!(s.etag_at("b\\x\\y").as_deref(), Some("v1"));
    // Replaced in one rename.
    let (placed, tries) = place(&s, "x/y", "v2", true).await;
    assert!(placed.is_ok() && tries == 1, "{placed:?} in {tries}");
    assert_eq!(s.etag_at("b\\x\\y").as_deref(), Some("v2"));
    // Other keys continue under `x`: the object `x` goes beside.
    let (placed, _) = place(&s, "x", "vx", true).await;
    assert!(placed.is_ok(), "{placed:?}");
    assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y", "b\\x\u{F02B}"]);
    assert_eq!(s.etag_at("b\\x\u{F02B}").as_deref(), Some("vx"));
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_rename_that_still_fails_answers_what_the_client_can_do() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put("b\\k", "v1");
    // Create-if-absent over an object: 412, the object kept.
    let (placed, _) = place(&s, "k", "v2", false).await;
    assert!(matches!(placed, Err(StoreError::PreconditionFailed)), "{placed:?}");
    assert_eq!(s.etag_at("b\\k").as_deref(), Some("v1"));
    // Replacing a file another client holds open: 503, not 403.
    let reader = s.open_as("b\\k", READ, READ).expect("the object opens");
    let (placed, _) = place(&s, "k", "v2", true).await;
    assert!(matches!(placed, Err(StoreError::Busy(_))), "{placed:?}");
    assert_eq!(s.etag_at("b\\k").as_deref(), Some("v1"));
    drop(reader);
    // A marker's name is a directory of other keys: 409.
    s.mkdir("b\\d");
    s.put("b\\d\\z", "vz");
    let (placed, _) = place(&s, "d/", "vm", true).await;
    assert!(matches!(placed, Err(StoreError::Conflict(_))), "{placed:?}");
    // No bucket.
    let s = MemoryShare::default();
    s.mkdir("c");
    let file = s.create_temp("c\\tmp", "v");
    let rename = Rename { s: &s, file: &file, tries: AtomicUsize::new(0) };
    let placed = alone(&s, place_on(&s, &place_of("x/y", true).as_place(), lock, &rename)).await;
    assert!(matches!(placed, Err(StoreError::NoSuchBucket)), "{placed:?}");
}

#[tokio::test(start_paused = true)]
async fn a_put_racing_the_prune_of_its_folders_lands() {
    let removed = |_: String| -> BoxFuture<'_, ()> { Box::pin(async {}) };
    let up = [SharePath::root("b\\x\\y"), SharePath::root("b\\x")];
    let mut retried = 0;
    for seed in 0..400 {
        let s = MemoryShare::default();
        s.mkdir("b");
        // The folders of a key just deleted, empty: its delete prunes
        // them while the PUT's rename goes into them.
        for d in ["b\\x", "b\\x\\y"] {
            alone(&s, s.mkdir_own(d)).await.unwrap();
        }
        let file = s.create_temp("b\\tmp", "v1");
        let rename = Rename { s: &s, file: &file, tries: AtomicUsize::new(0) };
        let owned = place_of("x/y/k", true);
        let p = owned.as_place();
        let put = place_on(&s, &p, lock, &rename);
        let (placed, ()) = race(&s, seed, put, prune_empty(&s, &up, false, lock, &removed)).await;
        assert!(placed.is_ok(), "seed {seed}: {placed:?}");
        assert_eq!(s.etag_at("b\\x\\y\\k").as_deref(), Some("v1"), "seed {seed}");
        assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y", "b\\x\\y\\k"], "seed {seed}");
        retried += usize::from(rename.tries.into_inner() > 1);
        drop(file);
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(retried > 0, "the prune never came before the rename");
}

#[tokio::test(start_paused = true)]
async fn a_marker_racing_the_prune_of_its_folders_is_recorded_and_stays() {
    let pruned = AtomicUsize::new(0);
    let removed = |_: String| -> BoxFuture<'_, ()> {
        pruned.fetch_add(1, Ordering::Relaxed);
        Box::pin(async {})
    };
    let (folders, up) =
        ([SharePath::root("b\\x"), SharePath::root("b\\x\\m")], [SharePath::root("b\\x\\m"), SharePath::root("b\\x")]);
    let meta = ObjectMeta { etag: "vm".into(), marker: true, ..Default::default() };
    for seed in 0..400 {
        let s = MemoryShare::default();
        s.mkdir("b");
        // `x/m/`'s folders as its PUT made them, empty; a delete of the
        // last key under them prunes them.
        for d in ["b\\x", "b\\x\\m"] {
            alone(&s, s.mkdir_own(d)).await.unwrap();
        }
        // As `put_marker` writes it: under the key's creation lock.
        let record = async {
            let held = take_lock(&s, &lock(&folders[1])).await?;
            let recorded = record_marker_on(&s, "b\\x\\m", &folders, &meta, lock).await;
            s.release_lock(held).await;
            recorded
        };
        let (recorded, ()) = race(&s, seed, record, prune_empty(&s, &up, false, lock, &removed)).await;
        assert!(recorded.is_ok(), "seed {seed}: {recorded:?}");
        // The marker answered 200, so it stands, with its record.
        assert_eq!(s.names(), ["b", "b\\x", "b\\x\\m"], "seed {seed}");
        let found = alone(&s, s.stat_with_meta("b\\x\\m", false)).await.map(|(_, m)| m);
        let found = found.ok().flatten().map(|m| (m.marker, m.etag));
        assert_eq!(found, Some((true, "vm".to_string())), "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert!(pruned.into_inner() > 0, "the prune never removed the folders before the record");
}
