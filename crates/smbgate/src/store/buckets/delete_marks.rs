//! The marks an S3 delete leaves, so that the watcher of people's changes
//! on the share does not report the removal a second time:
//! `.smbgate/s3-deletes/<bucket>/<hash of the key>`, written before an S3
//! delete of the key (taken back if it fails), taken by the watcher when
//! it hears of the removal, and swept once old. Taking one is an open
//! that shares nothing and a delete through it, so of two takers (the
//! watcher and a failed delete's taking back, or two instances) one has
//! it. The rules are functions over [`ShareOps`], so that they run
//! against the in-memory share too (`delete_marks_test.rs`).

use std::time::Duration;

use super::state_files::{make_dirs, remove_state_file, state_entries};
use crate::store::path::SharePath;
use crate::store::share::{is_not_found, Failure};
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, StoreResult};

impl Buckets {
    /// The folder of the marks of S3 deletes in all buckets.
    fn delete_marks(&self) -> SharePath {
        self.root.internal("s3-deletes")
    }

    /// Leaves the mark of an S3 delete of `key` in `bucket` (made just
    /// now).
    ///
    /// Errors: SMB failures.
    pub async fn mark_deleted(&self, bucket: &str, key: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        mark_deleted(&self.root.live(&tree), &self.delete_marks(), bucket, key).await
    }

    /// Takes the mark of an S3 delete of `key`: true if there was one
    /// younger than `max_age` (the removal was the gateway's own).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn take_delete_mark(&self, bucket: &str, key: &str, max_age: Duration) -> StoreResult<bool> {
        let tree = self.root.tree().await?;
        take_delete_mark(&self.root.live(&tree), &mark_path(&self.delete_marks(), bucket, key), max_age).await
    }

    /// Removes the marks of S3 deletes in `bucket` older than `max_age`
    /// (of keys the watcher never knew).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn sweep_delete_marks(&self, bucket: &str, max_age: Duration) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        sweep_delete_marks(&self.root.live(&tree), &self.delete_marks().join(bucket), max_age).await
    }
}

/// The mark of an S3 delete of `key` in `bucket`, under `marks`.
pub(crate) fn mark_path(marks: &SharePath, bucket: &str, key: &str) -> SharePath {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key.as_bytes());
    marks.join(bucket).join(&hex::encode(&digest.as_ref()[..16]))
}

/// Writes the mark of an S3 delete of `key` in `bucket` under `marks`,
/// making the folders the first time.
///
/// Errors: SMB failures.
pub(crate) async fn mark_deleted<S: ShareOps>(s: &S, marks: &SharePath, bucket: &str, key: &str) -> StoreResult<()> {
    let path = mark_path(marks, bucket, key);
    match s.write_small(&path, &[]).await {
        Ok(_) => Ok(()),
        Err(e) if e.failure() == Failure::PathNotFound => {
            make_dirs(s, &[marks.clone(), marks.join(bucket)]).await?;
            s.write_small(&path, &[]).await?;
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Takes the mark at `path`: true if this call's delete removed it and it
/// was younger than `max_age`. The mark is opened sharing nothing before
/// it is deleted, so that of racing takers one has it: a delete that
/// shared its open could be joined by another's before either set the
/// delete, and both would answer success.
///
/// Errors: SMB failures other than not-found and another taker's hold.
pub(crate) async fn take_delete_mark<S: ShareOps>(s: &S, path: &str, max_age: Duration) -> StoreResult<bool> {
    let mark = match s.open_alone_for_delete(path).await {
        Ok(mark) => mark,
        Err(e) if is_not_found(&e) || matches!(e.failure(), Failure::SharingViolation | Failure::DeletePending) => {
            return Ok(false)
        }
        Err(e) => return Err(e.into()),
    };
    let written = s.opened_times(&mark).last_write;
    s.close_and_delete(mark).await?;
    Ok(!older_than(written, max_age))
}

/// Removes the marks in the folder `dir` older than `max_age`.
///
/// Errors: SMB failures other than not-found.
pub(crate) async fn sweep_delete_marks<S: ShareOps>(s: &S, dir: &SharePath, max_age: Duration) -> StoreResult<()> {
    let entries = state_entries(s, dir).await?;
    for e in entries.into_iter().filter(|e| !e.times.is_directory() && older_than(e.times.last_write, max_age)) {
        remove_state_file(s, &dir.join(&e.name)).await?;
    }
    Ok(())
}

/// True if the FILETIME `written` lies more than `max_age` back.
fn older_than(written: u64, max_age: Duration) -> bool {
    let (secs, _) = crate::store::meta::filetime_to_unix(written);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    now.saturating_sub(secs.max(0) as u64) > max_age.as_secs()
}

#[cfg(test)]
#[path = "delete_marks_test.rs"]
mod tests;
