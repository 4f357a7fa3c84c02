//! The temp-file sweep against the in-memory share (`memory_share`). The
//! same rule runs against smbd in tests/e2e/test_temp_reclaim.py.

use super::*;
use crate::store::memory_share::{alone, MemoryShare, ALL, DELETE, WRITE};

#[tokio::test(start_paused = true)]
async fn the_sweep_removes_only_quiet_temp_files_no_writer_holds() {
    let s = MemoryShare::default();
    s.mkdir("t");
    s.mkdir("t\\d");
    s.put_written("t\\dead", 100);
    s.put_written("t\\held", 100);
    s.put_written("t\\fresh", 990);
    // A live writer's handle on its temp file (write and delete, sharing
    // everything, as temp files are opened).
    let writer = s.open_as("t\\held", WRITE | DELETE, ALL).expect("a writer's open");
    alone(&s, sweep_temps(&s, &SharePath::root("t"), 1000, 500)).await;
    assert_eq!(s.names(), ["t", "t\\d", "t\\fresh", "t\\held"]);
    // The held one was left alone, not marked: it outlives its writer's
    // handle (its writer publishes or deletes it).
    drop(writer);
    assert_eq!(s.names(), ["t", "t\\d", "t\\fresh", "t\\held"]);
    assert_eq!(s.open_count(), 0);
}
