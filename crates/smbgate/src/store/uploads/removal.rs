//! Removing an upload's folder (AbortMultipartUpload, the cleanup after
//! CompleteMultipartUpload, the sweep of expired uploads): its files, then
//! the folder. A part uploaded meanwhile keeps the folder from going: its
//! record made after the listing, or its data file held by the writer
//! (delete pending until that closes). The files are listed and removed
//! again while that happens, for a while. A rule over [`ShareOps`], run
//! against the in-memory share in `removal_test.rs`.

use crate::store::backoff;
use crate::store::path::SharePath;
use crate::store::records::FileKey;
use crate::store::share::{is_not_found, Failure};
use crate::store::share_ops::ShareOps;
use crate::store::{StoreError, StoreResult};

/// Removes the upload folder `dir` and every file in it, the sidecar
/// records of those files forgotten; done if it is gone already. While a
/// part being uploaded keeps it (`NotEmpty`), tries again
/// ([`backoff::UPLOAD_REMOVAL`]).
///
/// Errors: Busy (503) while a part upload still writes into the folder
/// once the wait is spent; the share's other failures.
pub(crate) async fn remove_upload_on<S: ShareOps>(s: &S, dir: &SharePath) -> StoreResult<()> {
    let mut backoff = backoff::UPLOAD_REMOVAL.start();
    loop {
        let entries = match s.list_dir(dir).await {
            Ok(entries) => entries,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for e in entries {
            if s.delete_file(&dir.join(&e.name)).await.is_ok() {
                s.forget_record_of(Some(FileKey { id: e.file_id, created: e.times.creation }));
            }
        }
        match s.delete_dir(dir).await {
            Ok(()) => return Ok(()),
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) if e.failure() == Failure::NotEmpty => {}
            Err(e) => return Err(e.into()),
        }
        if !backoff.wait().await {
            return Err(StoreError::Busy("a part of this upload is still being written; retry the request".into()));
        }
    }
}

#[cfg(test)]
#[path = "removal_test.rs"]
mod tests;
