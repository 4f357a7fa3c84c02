//! Reclaiming what dead or absent clients left on the share, at startup and
//! then every `StoreOptions::sweep_interval`, by the server's clock:
//!
//! - temporary files of writers that died (failure class 16): a temp file
//!   is deleted only through an open that shares nothing, which the server
//!   refuses with STATUS_SHARING_VIOLATION while any writer (of any
//!   instance, on any connection or lane) still has it open. Files written
//!   within the last `sweep_interval` are not tried at all, so that a live
//!   writer's batch oplock is not broken for nothing;
//! - multipart uploads started longer than `StoreOptions::multipart_expiry`
//!   ago and neither completed nor aborted. Their age is the upload
//!   directory's creation time, from one directory listing: no upload
//!   record is read.

use crate::store::path::SharePath;
use crate::store::share::Failure;
use crate::store::share_ops::ShareOps;
use crate::store::{backoff, Uploads};

/// The log target of these events: the name `SMBGATE_LOG` filters by, kept when the file moved.
const LOG_TARGET: &str = "smbgate::store::sweep";

/// Object Lock retention is judged by the gateway's clock: a share whose
/// clock differs by more than this is worth a warning.
const CLOCK_SKEW_WARN: u64 = 60 * 10_000_000;

/// Removes the files in `tmp` (`.smbgate\tmp`) on `s` that no writer has
/// open and that nobody wrote in the `quiet` FILETIME units before `now`
/// (the server's clock); a file a live writer holds, on any connection of
/// any instance, refuses the open that shares nothing, and stays.
pub(crate) async fn sweep_temps<S: ShareOps>(s: &S, tmp: &SharePath, now: u64, quiet: u64) {
    let Ok(entries) = s.list_dir(tmp).await else { return };
    for e in entries {
        if e.times.is_directory() || e.times.last_write.saturating_add(quiet) >= now {
            continue;
        }
        match s.open_alone_for_delete(&tmp.join(&e.name)).await {
            Ok(h) => match s.close_and_delete(h).await {
                Ok(()) => {
                    tracing::info!(target: LOG_TARGET, temp = %e.name, bytes = e.times.end_of_file, "dead writer's temp file removed")
                }
                Err(err) => {
                    tracing::debug!(target: LOG_TARGET, temp = %e.name, error = %err, "temp file not removed yet")
                }
            },
            Err(err) if err.failure() == Failure::SharingViolation => {
                tracing::debug!(target: LOG_TARGET, temp = %e.name, "temp file held open by a live writer; kept")
            }
            Err(err) => {
                tracing::debug!(target: LOG_TARGET, temp = %e.name, error = %err, "temp file not removed yet")
            }
        }
    }
}

/// Sweeps now, then every `sweep_interval`, for as long as the store lives.
pub(crate) async fn sweep_loop(store: Uploads) {
    let mut first = true;
    loop {
        sweep_once(&store, first).await;
        first = false;
        backoff::pause(store.root.options().sweep_interval).await;
    }
}

/// One sweep; failures are left for the next one. The `first` one also
/// compares the share's clock with the gateway's.
async fn sweep_once(store: &Uploads, first: bool) {
    let Ok(tree) = store.root.tree().await else { return };
    let tmp = store.root.internal("tmp");
    // "Now" on the server: the LastWriteTime of a file made now.
    let probe = tmp.join(&format!("clock-{:016x}", rand::random::<u64>()));
    let share = store.root.live(&tree);
    let Ok(made) = share.write_small(&probe, b"").await else { return };
    let now = made.last_write;
    let _ = share.delete_file(&probe).await;
    let ours = crate::store::versions::filetime_now();
    if first && now.abs_diff(ours) > CLOCK_SKEW_WARN {
        tracing::warn!(
            skew_seconds = (now as i128 - ours as i128) / 10_000_000,
            "the share's clock differs from the gateway's by more than a minute; Object Lock retention is \
             judged by the gateway's clock"
        );
    }
    let quiet = store.root.options().sweep_interval.as_nanos() as u64 / 100;
    sweep_temps(&share, &tmp, now, quiet).await;
    let expiry = store.root.options().multipart_expiry.as_nanos() as u64 / 100;
    if let Ok(entries) = share.list_dir(&store.root.internal("uploads")).await {
        for e in entries {
            if e.times.is_directory()
                && super::multipart::valid_upload_id(&e.name)
                && e.times.creation.saturating_add(expiry) < now
            {
                match store.remove_upload(&e.name).await {
                    Ok(()) => {
                        tracing::info!(target: LOG_TARGET, upload_id = %e.name, "expired multipart upload removed")
                    }
                    Err(err) => {
                        tracing::debug!(target: LOG_TARGET, upload_id = %e.name, error = %err, "expired upload not removed yet")
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "sweep_test.rs"]
mod tests;
