//! Which keys need an exact name match, and the case probe against the
//! in-memory share (`memory_share`), which, like Samba with `case
//! sensitive = yes`, matches names exactly; smbd's default,
//! case-insensitive, is tests/e2e/test_case.py's.

use super::*;
use crate::store::keys::map_key;
use crate::store::memory_share::{alone, MemoryShare};

#[test]
fn short_shaped_keys_are_checked_on_case_sensitive_shares_too() {
    let checked = |key: &str| needs_exact_names(false, &map_key(key).unwrap());
    assert!(checked("PROGRA~1/readme.txt"));
    assert!(checked("docs/LONGFI~1.TXT"));
    assert!(checked("SMBGAT~1/x"));
    assert!(!checked("Program Files/readme.txt"));
    assert!(!checked("a~b/c"), "lower case is no short name");
    assert!(needs_exact_names(true, &map_key("Program Files/readme.txt").unwrap()));
}

#[tokio::test(start_paused = true)]
async fn a_share_that_matches_names_exactly_is_probed_so_and_keeps_no_probe_file() {
    let s = MemoryShare::default();
    s.mkdir("tmp");
    let insensitive = alone(&s, probe_case_insensitive(&s, &SharePath::root("tmp"))).await;
    assert!(matches!(insensitive, Ok(false)), "{insensitive:?}");
    assert_eq!(s.names(), ["tmp"]);
    assert_eq!(s.open_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_probe_where_no_file_can_be_written_fails() {
    let s = MemoryShare::default();
    let refused = alone(&s, probe_case_insensitive(&s, &SharePath::root("tmp"))).await;
    assert!(matches!(&refused, Err(StoreError::Smb(_))), "{refused:?}");
    assert!(s.names().is_empty());
}
