//! The completed object's record against the in-memory share
//! (`memory_share`) with a limited room for records: written whole where
//! it fits, else without the parts' checksums, then without the part
//! sizes, and refused when even that does not fit, never cut. Against
//! smbd: tests/e2e/test_large_records.py.

use std::collections::BTreeMap;

use super::*;
use crate::store::checksum::Algorithm;
use crate::store::memory_share::{alone, MemoryShare};

const PATH: &str = "tmp\\data";

/// The record of an upload of `n` parts, each with its checksum.
fn record(n: usize) -> ObjectMeta {
    ObjectMeta {
        etag: format!("\"{}-{n}\"", "d41d8cd98f00b204e9800998ecf8427e"),
        size: (n as u64) * (5 << 20),
        checksums: BTreeMap::from([(Algorithm::Crc32, "AAAAAA==".to_string())]),
        parts: vec![5 << 20; n],
        part_checksums: vec!["AAAAAA==".to_string(); n],
        ..Default::default()
    }
}

/// Writes `meta` to a file opened on a share that keeps `room` bytes of
/// record; returns what it answered and what the file holds after.
async fn written(room: usize, meta: &ObjectMeta) -> (StoreResult<()>, Option<ObjectMeta>) {
    let s = MemoryShare::default();
    s.mkdir("tmp");
    s.put(PATH, "");
    s.limit_records(room);
    let file = s.open_as(PATH, crate::store::memory_share::WRITE, 0).expect("open");
    let answer = alone(&s, set_record_fitting(&s, &file, PATH, meta.clone(), "k")).await;
    (answer, s.record_at(PATH))
}

#[tokio::test(start_paused = true)]
async fn a_record_that_fits_is_written_whole() {
    let meta = record(300);
    let (answer, kept) = written(meta.record_len(), &meta).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(kept, Some(meta));
}

#[tokio::test(start_paused = true)]
async fn the_parts_checksums_go_first_then_the_part_sizes_and_nothing_else() {
    let meta = record(300);
    let slim = ObjectMeta { part_checksums: Vec::new(), ..meta.clone() };
    let slimmest = ObjectMeta { parts: Vec::new(), ..slim.clone() };
    assert!(slimmest.record_len() < slim.record_len() && slim.record_len() < meta.record_len());
    let (answer, kept) = written(slim.record_len(), &meta).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(kept, Some(slim.clone()));
    let (answer, kept) = written(slim.record_len() - 1, &meta).await;
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(kept, Some(slimmest.clone()));
    // The ETag, size and whole-object checksum stay in every one.
    let kept = kept.expect("a record");
    assert_eq!((kept.etag, kept.size, kept.checksums), (meta.etag, meta.size, meta.checksums));
}

#[tokio::test(start_paused = true)]
async fn a_record_with_no_room_even_slimmest_is_refused_and_nothing_is_written() {
    let meta = record(300);
    let slimmest = ObjectMeta { parts: Vec::new(), part_checksums: Vec::new(), ..meta.clone() };
    let (answer, kept) = written(slimmest.record_len() - 1, &meta).await;
    assert!(matches!(answer, Err(StoreError::Smb(_))), "{answer:?}");
    assert_eq!(kept, None);
}
