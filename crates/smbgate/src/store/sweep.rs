//! Reclaiming what dead or absent clients left on the share, at startup and
//! then every `StoreOptions::sweep_interval`, by the server's clock:
//!
//! - temporary files of writers that died, once a day old (failure class
//!   16);
//! - multipart uploads started longer than `StoreOptions::multipart_expiry`
//!   ago and neither completed nor aborted. Their age is the upload
//!   directory's creation time, from one directory listing: no upload
//!   record is read.

use super::Store;

/// Age, in FILETIME units (100 ns), after which a temp file is debris.
const GRACE_100NS: u64 = 24 * 3600 * 10_000_000;

/// Sweeps now, then every `sweep_interval`, for as long as the store lives.
pub(crate) async fn sweep_loop(store: Store) {
    loop {
        sweep_once(&store).await;
        tokio::time::sleep(store.options().sweep_interval).await;
    }
}

/// One sweep; failures are left for the next one.
async fn sweep_once(store: &Store) {
    let Ok(tree) = store.tree().await else { return };
    let tmp = store.internal("tmp");
    // "Now" on the server: the LastWriteTime of a file made now.
    let probe = tmp.join(&format!("clock-{:016x}", rand::random::<u64>()));
    let Ok(c) = tree.write_small(&probe, b"", &[]).await else { return };
    let now = c.times.last_write;
    let _ = tree.delete(&probe, false).await;
    if let Ok(entries) = tree.list_dir(&tmp).await {
        for e in entries {
            if !e.times.is_directory() && e.times.last_write + GRACE_100NS < now {
                let _ = tree.delete(&tmp.join(&e.name), false).await;
            }
        }
    }
    let expiry = store.options().multipart_expiry.as_nanos() as u64 / 100;
    if let Ok(entries) = tree.list_dir(&store.internal("uploads")).await {
        for e in entries {
            if e.times.is_directory()
                && super::multipart::valid_upload_id(&e.name)
                && e.times.creation.saturating_add(expiry) < now
            {
                match store.remove_upload(&e.name).await {
                    Ok(()) => tracing::info!(upload_id = %e.name, "expired multipart upload removed"),
                    Err(err) => tracing::debug!(upload_id = %e.name, error = %err, "expired upload not removed yet"),
                }
            }
        }
    }
}
