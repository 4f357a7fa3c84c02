//! Temporary files of writers that died: removed at startup and then
//! hourly once a day old by the server's clock (failure class 16).

use std::time::Duration;

use super::Store;

/// Age, in FILETIME units (100 ns), after which a temp file is debris.
const GRACE_100NS: u64 = 24 * 3600 * 10_000_000;

/// Removes temporary files older than a day (by the server's clock) left by
/// crashed instances, at startup and then hourly.
pub(crate) async fn sweep_loop(store: Store) {
    loop {
        if let Ok(tree) = store.tree().await {
            let dir = store.internal("tmp");
            // "Now" on the server: the LastWriteTime of a file made now.
            let probe = dir.join(&format!("clock-{:016x}", rand::random::<u64>()));
            if let Ok(c) = tree.write_small(&probe, b"", &[]).await {
                let now = c.times.last_write;
                let _ = tree.delete(&probe, false).await;
                if let Ok(entries) = tree.list_dir(&dir).await {
                    for e in entries {
                        if !e.times.is_directory() && e.times.last_write + GRACE_100NS < now {
                            let _ = tree.delete(&dir.join(&e.name), false).await;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
