//! A record rewritten through an open file with its read-only mark
//! (`rewrite_record_on`) against the in-memory share (`memory_share`):
//! the mark ends as the new record says, or as it was when the write
//! failed, so a locked version is never left unmarked nor an unlocked one
//! marked. Against smbd: tests/e2e/test_object_lock.py.

use super::*;
use crate::store::memory_share::{alone, MemoryShare, ALL, WRITE};
use crate::store::StoreError;

const PATH: &str = "b\\k";

/// A file at `PATH`, open to change its record, with room for `room`
/// bytes of record.
fn share(room: usize) -> (MemoryShare, crate::store::memory_share::MemHandle) {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put(PATH, "e1");
    s.limit_records(room);
    let file = s.open_as(PATH, WRITE, ALL).expect("open");
    (s, file)
}

fn record(tags: usize) -> ObjectMeta {
    let tags = (0..tags).map(|i| (format!("t{i}"), "v".repeat(200))).collect();
    ObjectMeta { etag: "\"e1\"".into(), user: tags, ..Default::default() }
}

#[tokio::test(start_paused = true)]
async fn the_mark_ends_as_the_new_record_says() {
    for (sealed, seal) in [(true, true), (true, false), (false, true), (false, false)] {
        let (s, file) = share(4096);
        if sealed {
            alone(&s, s.set_read_only(&file, true)).await.expect("marked");
        }
        let meta = record(1);
        let written = alone(&s, rewrite_record_on(&s, &file, PATH, &meta, sealed, seal)).await;
        assert!(written.is_ok(), "{sealed} {seal}: {written:?}");
        assert_eq!(s.record_at(PATH), Some(meta), "{sealed} {seal}");
        assert_eq!(s.read_only_at(PATH), seal, "{sealed} {seal}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_write_that_fails_leaves_the_record_and_the_mark_as_they_were() {
    for (sealed, seal) in [(true, false), (false, true)] {
        let (s, file) = share(512);
        if sealed {
            alone(&s, s.set_read_only(&file, true)).await.expect("marked");
        }
        let before = s.record_at(PATH);
        let written = alone(&s, rewrite_record_on(&s, &file, PATH, &record(12), sealed, seal)).await;
        assert!(matches!(written, Err(StoreError::MetadataTooLarge(_))), "{sealed} {seal}: {written:?}");
        assert_eq!(s.record_at(PATH), before, "{sealed} {seal}");
        assert_eq!(s.read_only_at(PATH), sealed, "{sealed} {seal}");
    }
}
