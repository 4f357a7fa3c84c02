//! An upload's stride against the in-memory share (`memory_share`). The
//! same rule runs against smbd in tests/e2e/test_multipart.py.

use super::*;
use crate::store::memory_share::{alone, interleave, MemoryShare};
use crate::store::uploads::multipart::MIN_PART_SIZE;

const FILE: &str = "u\\stride";
const BIG: u64 = MIN_PART_SIZE;

/// [`stride`] as the upload of a part of `len` bytes calls it.
async fn stride_for(s: &MemoryShare, len: u64) -> StoreResult<Option<u64>> {
    stride(s, FILE, len, len >= MIN_PART_SIZE).await
}

fn upload() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("u");
    s
}

#[tokio::test(start_paused = true)]
async fn the_first_part_of_the_minimum_size_fixes_the_stride_and_small_ones_only_read_it() {
    let s = upload();
    assert_eq!(alone(&s, stride_for(&s, 10)).await.unwrap(), None);
    assert_eq!(s.names(), ["u"]);
    assert_eq!(alone(&s, stride_for(&s, BIG + 1)).await.unwrap(), Some(BIG + 1));
    assert_eq!(alone(&s, stride_for(&s, BIG + 7)).await.unwrap(), Some(BIG + 1));
    assert_eq!(alone(&s, stride_for(&s, 10)).await.unwrap(), Some(BIG + 1));
    assert_eq!(s.data_at(FILE), Some((BIG + 1).to_string().into_bytes()));
    // The upload's folder gone: aborted or completed.
    let s = MemoryShare::default();
    assert!(matches!(alone(&s, stride_for(&s, BIG)).await, Err(StoreError::NoSuchUpload)));
}

#[tokio::test(start_paused = true)]
async fn racing_parts_agree_on_one_stride_and_a_reader_waits_out_the_creators_write() {
    for seed in 0..300 {
        let s = upload();
        let got = interleave(
            &s,
            seed,
            vec![stride_for(&s, BIG + 1), stride_for(&s, BIG + 2), stride_for(&s, BIG + 3), stride_for(&s, 10)],
        )
        .await;
        let fixed: Vec<u64> =
            got[..3].iter().map(|g| g.as_ref().unwrap().expect("a big part fixes or reads it")).collect();
        assert!(fixed.iter().all(|f| *f == fixed[0]), "seed {seed}: {got:?}");
        // The small part read it once written, or came before it.
        match &got[3] {
            Ok(None) => {}
            Ok(Some(f)) => assert_eq!(*f, fixed[0], "seed {seed}"),
            Err(e) => panic!("seed {seed}: {e:?}"),
        }
        assert_eq!(s.data_at(FILE), Some(fixed[0].to_string().into_bytes()), "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}
