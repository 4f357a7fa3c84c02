//! CopyObject's server-side copy on the in-memory share (`memory_share`,
//! which keeps its files' bytes): a range copied as it is, and a source
//! rewritten in place or cut short while the copy runs, one share
//! operation at a time over many interleavings, refused as a change to
//! retry rather than copied as a mix or answered as the server's error. Against
//! smbd: tests/e2e/test_objects.py and tests/e2e/test_copy_conditions.py.

use super::*;
use crate::store::memory_share::{alone, race, MemoryShare, ALL, READ, WRITE};
use crate::store::share_ops::ShareOps;

/// Interleavings tried per race.
const SEEDS: u64 = 200;

const SOURCE: &[u8] = b"0123456789";

/// A share holding the source `b\src` and an empty temp file `b\t`, both
/// open, and what a HEAD said of the source.
fn share() -> (MemoryShare, ObjectInfo) {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_bytes("b\\src", SOURCE);
    s.put_bytes("b\\t", b"");
    let src = s.open_as("b\\src", READ, ALL).unwrap();
    let info = s.info(&src, None, "b\\src");
    (s, info)
}

#[tokio::test(start_paused = true)]
async fn a_range_is_copied_as_it_is() {
    let (s, info) = share();
    let (src, temp) = (s.open_as("b\\src", READ, ALL).unwrap(), s.open_as("b\\t", WRITE, ALL).unwrap());
    assert_eq!(alone(&s, copy_range(&s, &src, &info, 2..6, &temp)).await.unwrap(), 4);
    assert_eq!(s.data_at("b\\t").as_deref(), Some(&b"2345"[..]));
}

#[tokio::test(start_paused = true)]
async fn a_source_rewritten_during_the_copy_is_refused_never_copied_as_a_mix() {
    for (seed, new) in (0..SEEDS).map(|seed| (seed, if seed % 2 == 0 { &b"abcdefghij"[..] } else { &b"abc"[..] })) {
        let (s, info) = share();
        let (src, temp) = (s.open_as("b\\src", READ, ALL).unwrap(), s.open_as("b\\t", WRITE, ALL).unwrap());
        let (_, copied) = race(&s, seed, s.write_small("b\\src", new), copy_range(&s, &src, &info, 0..10, &temp)).await;
        match copied {
            Ok(n) => {
                assert_eq!(n, 10, "seed {seed}");
                assert_eq!(s.data_at("b\\t").as_deref(), Some(SOURCE), "seed {seed}");
            }
            Err(e) => {
                assert_eq!(format!("{e:?}"), "Busy(\"the source changed during the copy; retry\")", "seed {seed}")
            }
        }
    }
}
