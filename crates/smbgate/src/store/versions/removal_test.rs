//! The delete of a key's current version (`delete_out_of_the_way`)
//! against the in-memory share (`memory_share`): the key's name is free at
//! once, also while a GET still streams the file, and the file goes when
//! that GET ends. Against smbd: tests/e2e/test_versioning.py.

use super::*;
use crate::store::memory_share::{alone, MemoryShare, ALL, READ};

#[tokio::test(start_paused = true)]
async fn a_deleted_current_version_frees_its_name_while_a_get_still_reads_it() {
    let s = MemoryShare::default();
    for d in ["b", "tmp", "versions"] {
        s.mkdir(d);
    }
    s.put("b\\k", "new");
    s.put("versions\\old", "old");
    let get = s.open_as("b\\k", READ, ALL).expect("a GET streams it");
    let (held, _) = alone(&s, s.open_to_replace("b\\k")).await.expect("held for DELETE");
    let deleted = alone(&s, delete_out_of_the_way(&s, held, "tmp\\aside")).await;
    assert!(deleted.is_ok(), "{deleted:?}");
    // The older version takes the name back at once.
    let promoted = alone(&s, s.rename_path("versions\\old", "b\\k", false)).await;
    assert!(promoted.is_ok(), "{promoted:?}");
    assert_eq!(s.etag_at("b\\k").as_deref(), Some("old"));
    // The deleted file lasts as long as the GET, aside.
    assert_eq!(s.names(), ["b", "b\\k", "tmp", "tmp\\aside", "versions"]);
    drop(get);
    assert_eq!(s.names(), ["b", "b\\k", "tmp", "versions"]);
    assert_eq!(s.open_count(), 0);
}
