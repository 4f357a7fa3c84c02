//! CompleteMultipartUpload's joins on the in-memory share
//! (`memory_share`, which keeps the bytes of its files): in place and by
//! copy, each part at its place, and a part uploaded again meanwhile
//! refused rather than joined under its old ETag, also while the new
//! upload races the join one share operation at a time. Against smbd:
//! tests/e2e/test_multipart.py, test_multipart_layout.py and
//! test_complete_conditions.py.

use super::*;
use crate::store::memory_share::{alone, race, MemHandle, MemoryShare, ALL, WRITE};
use crate::store::path::SharePath;
use crate::store::share_ops::ShareOps;

/// Interleavings tried per race.
const SEEDS: u64 = 200;

const DATA: &str = "u\\data";

fn part_path(n: i32) -> SharePath {
    SharePath::root("u").join(&n.to_string())
}

/// Part `number` of `size` bytes: in the data file at `data_offset`, or
/// in its own file as `s` has it now.
async fn part(s: &MemoryShare, number: i32, size: u64, data_offset: Option<u64>) -> PartInfo {
    let (disk_id, last_modified) = match data_offset {
        Some(_) => (None, 0),
        None => {
            let c = alone(s, s.stat_created(&part_path(number))).await.expect("the part's file");
            (c.on_disk_id(), c.times.last_write)
        }
    };
    PartInfo { data_offset, number, size, stored: size, last_modified, disk_id, ..Default::default() }
}

/// A new file at `path` holding `data`, open to be written as a join's
/// target is.
fn written(s: &MemoryShare, path: &str, data: &[u8]) -> MemHandle {
    s.put_bytes(path, data);
    s.open_as(path, WRITE, ALL).expect("a file just made opens")
}

fn upload() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("u");
    s
}

#[tokio::test(start_paused = true)]
async fn in_place_a_part_stored_apart_is_copied_to_its_place_and_the_file_cut() {
    let s = upload();
    // Parts 1 and 3 were written into the data file; 2 came apart.
    s.put_bytes(DATA, b"AAAA\0\0\0\0CCxx");
    s.put_bytes(&part_path(2), b"BBBB");
    let parts = vec![part(&s, 1, 4, Some(0)).await, part(&s, 2, 4, None).await, part(&s, 3, 2, Some(8)).await];
    let data = s.open_as(DATA, WRITE, ALL).unwrap();
    alone(&s, join_in_place(&s, &data, &parts, part_path, 4, 10)).await.expect("joined");
    assert_eq!(s.data_at(DATA).as_deref(), Some(&b"AAAABBBBCC"[..]));
}

#[tokio::test(start_paused = true)]
async fn by_copy_every_part_is_copied_in_order() {
    let s = upload();
    s.put_bytes(DATA, b"abc\0\0\0\0\0hi");
    s.put_bytes(&part_path(2), b"defg");
    let parts = vec![part(&s, 1, 3, Some(0)).await, part(&s, 2, 4, None).await, part(&s, 3, 2, Some(8)).await];
    let temp = written(&s, "u\\temp", b"");
    alone(&s, join_by_copy(&s, &temp, &parts, DATA, part_path)).await.expect("joined");
    assert_eq!(s.data_at("u\\temp").as_deref(), Some(&b"abcdefghi"[..]));
}

#[tokio::test(start_paused = true)]
async fn a_part_cut_short_in_the_data_file_fails_the_copy_and_a_temp_of_another_size_is_busy() {
    let s = upload();
    s.put_bytes(DATA, b"abc");
    let temp = written(&s, "u\\temp", b"");
    let parts = vec![PartInfo { data_offset: Some(0), number: 1, size: 5, stored: 5, ..Default::default() }];
    let got = alone(&s, join_by_copy(&s, &temp, &parts, DATA, part_path)).await;
    assert!(matches!(got, Err(StoreError::Smb(_))), "the copy's failure: {got:?}");
    // A temp file that already held bytes ends longer than its parts.
    let temp = written(&s, "u\\temp2", b"0123456789");
    let parts = vec![PartInfo { data_offset: Some(0), number: 1, size: 3, stored: 3, ..Default::default() }];
    let got = alone(&s, join_by_copy(&s, &temp, &parts, DATA, part_path)).await;
    assert_eq!(format!("{:?}", got.unwrap_err()), "Busy(\"assembled object has the wrong size\")");
}

#[tokio::test(start_paused = true)]
async fn a_part_uploaded_again_since_the_plan_is_refused_and_nothing_copied() {
    let s = upload();
    s.put_bytes(DATA, b"AAAA\0\0\0\0");
    s.put_bytes(&part_path(2), b"BBBB");
    let parts = vec![part(&s, 1, 4, Some(0)).await, part(&s, 2, 4, None).await];
    // UploadPart 2 again: a new file in its place.
    s.put_bytes(&part_path(2), b"ZZZZ");
    let data = s.open_as(DATA, WRITE, ALL).unwrap();
    let got = alone(&s, join_in_place(&s, &data, &parts, part_path, 4, 8)).await;
    assert_eq!(format!("{:?}", got.unwrap_err()), "InvalidPart(\"part 2 was uploaded again while completing\")");
    assert_eq!(s.data_at(DATA).as_deref(), Some(&b"AAAA\0\0\0\0"[..]));
}

#[tokio::test(start_paused = true)]
async fn a_part_uploaded_again_during_the_join_is_refused_or_its_old_bytes_joined() {
    for seed in 0..SEEDS {
        let s = upload();
        s.put_bytes(&part_path(1), b"BBBB");
        let parts = vec![part(&s, 1, 4, None).await];
        let temp = written(&s, "u\\temp", b"");
        let upload_again = async {
            let (t, _) = s.write_temp("u\\again", b"ZZZZ").await?;
            s.publish_temp(t, &part_path(1), true).await
        };
        let (_, joined) = race(&s, seed, upload_again, join_by_copy(&s, &temp, &parts, DATA, part_path)).await;
        match joined {
            Ok(()) => assert_eq!(s.data_at("u\\temp").as_deref(), Some(&b"BBBB"[..]), "seed {seed}"),
            Err(e) => assert_eq!(
                format!("{e:?}"),
                "InvalidPart(\"part 1 was uploaded again while completing\")",
                "seed {seed}"
            ),
        }
    }
}
