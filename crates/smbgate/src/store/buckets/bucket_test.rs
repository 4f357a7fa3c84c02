//! CreateBucket's and DeleteBucket's rules against the in-memory share
//! (`memory_share`). The same rules run against smbd in
//! tests/e2e/test_buckets.py.

use super::*;
use crate::store::memory_share::{alone, MemoryShare};

async fn make(s: &MemoryShare, bucket: &str) -> StoreResult<()> {
    alone(s, make_bucket(s, &SharePath::root(bucket), bucket)).await
}

async fn remove(s: &MemoryShare, bucket: &str) -> StoreResult<()> {
    alone(s, remove_bucket_dir(s, &SharePath::root(bucket))).await
}

#[tokio::test(start_paused = true)]
async fn a_bucket_is_made_once_and_a_file_of_its_name_is_a_conflict() {
    let s = MemoryShare::default();
    assert!(make(&s, "b").await.is_ok());
    assert!(matches!(make(&s, "b").await, Err(StoreError::BucketAlreadyOwnedByYou)));
    s.put("f", "");
    assert!(matches!(make(&s, "f").await, Err(StoreError::Conflict(_))));
    assert_eq!(s.names(), ["b", "f"]);
}

#[tokio::test(start_paused = true)]
async fn a_bucket_holding_only_empty_folders_is_removed_with_them() {
    let s = MemoryShare::default();
    s.mkdir("b");
    for d in ["b\\x", "b\\x\\y", "b\\z"] {
        s.mkdir(d);
    }
    assert!(remove(&s, "b").await.is_ok());
    assert!(s.names().is_empty(), "{:?}", s.names());
    assert!(matches!(remove(&s, "b").await, Err(StoreError::NoSuchBucket)));
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_bucket_with_a_file_or_a_marker_anywhere_is_not_empty_and_keeps_it() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.mkdir("b\\x");
    s.mkdir("b\\x\\y");
    s.put("b\\x\\y\\k", ""); // someone's file: no record, no EAs
    assert!(matches!(remove(&s, "b").await, Err(StoreError::BucketNotEmpty)));
    assert_eq!(s.names(), ["b", "b\\x", "b\\x\\y", "b\\x\\y\\k"]);
    // The object `m/`: a directory with a marker record.
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_marker("b\\m", "vm");
    assert!(matches!(remove(&s, "b").await, Err(StoreError::BucketNotEmpty)));
    assert_eq!(s.names(), ["b", "b\\m"]);
    assert_eq!(s.open_count(), 0);
}
