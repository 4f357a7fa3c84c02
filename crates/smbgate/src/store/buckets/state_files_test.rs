//! The rules of the gateway's small files under `.smbgate/` against the
//! in-memory share (`memory_share`): replaced whole through a temp file,
//! so that a reader sees the old bytes or the new, never none. The same
//! files are read and written against smbd in tests/e2e/test_cors.py,
//! test_tagging.py and test_events.py.

use super::*;
use crate::store::memory_share::{alone, interleave, race, MemoryShare};

const CORS: &str = ".smbgate\\cors\\b";

/// A share with the gateway's folders `.smbgate` and `.smbgate\tmp`.
fn state() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir(".smbgate");
    s.mkdir(".smbgate\\tmp");
    s
}

fn path(p: &str) -> SharePath {
    SharePath::root(p)
}

#[tokio::test(start_paused = true)]
async fn a_state_file_is_replaced_whole_read_back_and_removed() {
    let s = state();
    assert_eq!(alone(&s, read_state_file(&s, CORS, 1024)).await.unwrap(), None);
    assert!(alone(&s, state_entries(&s, ".smbgate\\cors")).await.unwrap().is_empty());
    alone(&s, replace_state_file(&s, ".smbgate\\tmp\\t1", &path(CORS), b"first")).await.unwrap();
    alone(&s, replace_state_file(&s, ".smbgate\\tmp\\t2", &path(CORS), b"second")).await.unwrap();
    assert_eq!(alone(&s, read_state_file(&s, CORS, 1024)).await.unwrap().as_deref(), Some(&b"second"[..]));
    assert_eq!(alone(&s, read_state_file(&s, CORS, 3)).await.unwrap().as_deref(), Some(&b"sec"[..]));
    let entries = alone(&s, state_entries(&s, ".smbgate\\cors")).await.unwrap();
    assert_eq!(entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["b"]);
    // The folder was made once, and no temp file is left.
    assert_eq!(s.names(), [".smbgate", ".smbgate\\cors", CORS, ".smbgate\\tmp"]);
    alone(&s, remove_state_file(&s, CORS)).await.unwrap();
    alone(&s, remove_state_file(&s, CORS)).await.unwrap();
    assert_eq!(alone(&s, read_state_file(&s, CORS, 1024)).await.unwrap(), None);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_reader_racing_a_replace_sees_the_old_bytes_or_the_new_never_none() {
    for seed in 0..300 {
        let s = state();
        alone(&s, replace_state_file(&s, ".smbgate\\tmp\\t0", &path(CORS), b"old")).await.unwrap();
        let (wrote, read) = race(&s, seed, replace_state_file(&s, ".smbgate\\tmp\\t1", &path(CORS), b"new"), async {
            (read_state_file(&s, CORS, 64).await, read_state_file(&s, CORS, 64).await)
        })
        .await;
        assert!(wrote.is_ok(), "seed {seed}: {wrote:?}");
        let (first, second) = read;
        for got in [&first, &second] {
            let got = got.as_ref().unwrap_or_else(|e| panic!("seed {seed}: {e:?}"));
            assert!(matches!(got.as_deref(), Some(b"old") | Some(b"new")), "seed {seed}: {got:?}");
        }
        assert!(
            !(first.unwrap().as_deref() == Some(b"new") && second.unwrap().as_deref() == Some(b"old")),
            "seed {seed}"
        );
        assert_eq!(s.data_at(CORS).as_deref(), Some(&b"new"[..]), "seed {seed}");
        assert_eq!(s.names(), [".smbgate", ".smbgate\\cors", CORS, ".smbgate\\tmp"], "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}

#[tokio::test(start_paused = true)]
async fn racing_replaces_leave_one_whole_body_and_no_temp_file() {
    for seed in 0..300 {
        let s = state();
        let outs = interleave(
            &s,
            seed,
            vec![
                replace_state_file(&s, ".smbgate\\tmp\\ta", &path(CORS), b"from a"),
                replace_state_file(&s, ".smbgate\\tmp\\tb", &path(CORS), b"from b"),
            ],
        )
        .await;
        assert!(outs.iter().all(Result::is_ok), "seed {seed}: {outs:?}");
        let now = s.data_at(CORS);
        assert!(matches!(now.as_deref(), Some(b"from a") | Some(b"from b")), "seed {seed}: {now:?}");
        assert_eq!(s.names(), [".smbgate", ".smbgate\\cors", CORS, ".smbgate\\tmp"], "seed {seed}");
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
}
