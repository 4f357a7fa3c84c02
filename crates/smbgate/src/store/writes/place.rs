//! Where a published file lands: the rename into its key's write path.
//! Missing folders are made, and made again while a delete prunes them; a
//! directory at the key's name (other keys continue under it) sends the
//! file beside it, decided under the key's creation lock; a rename that
//! still fails is mapped to what the client hears. A rule over
//! [`ShareOps`], run against the in-memory share in `place_test.rs`; the
//! rename step itself (holders warned, other connections tried, a replaced
//! sidecar forgotten) is the caller's (`publish.rs`).

use std::future::Future;

use super::parents::{key_folders, make_parents_on};
use crate::store::beside::too_long_to_keep_beside;
use crate::store::create_lock::take_lock;
use crate::store::keys::MappedKey;
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::root::bucket_is_there;
use crate::store::share::{is_bad_path, is_not_found, is_unholdable_name, not_a_file};
use crate::store::share::{Failure, FileTimes, ShareError};
use crate::store::share_ops::ShareOps;
use crate::store::{StoreError, StoreResult};

/// How often a rename into place (or a marker's record) makes the key's
/// directories again while a delete prunes them between the making and the
/// rename.
const PARENTS_TRIES: usize = 4;

/// The rename a placement makes, with the caller's own care around it
/// (holders warned, other connections tried, a replaced sidecar
/// forgotten).
pub(crate) trait RenameStep: Sync {
    /// Renames the published file to `target`, over a file there only if
    /// `replace`.
    ///
    /// Errors: the share's, as its rename answers them (Collision without
    /// `replace`, not-found kinds for a missing folder, AccessDenied while
    /// the target is open).
    fn rename_to(&self, target: &str, replace: bool) -> impl Future<Output = Result<(), ShareError>> + Send;
}

/// What a rename into place needs to know of its key.
pub(crate) struct Place<'a> {
    /// The key's write path, where the file goes.
    pub target: &'a SharePath,
    /// The bucket's path: the key's folders are under it.
    pub bucket: &'a SharePath,
    /// The key as the share spells it.
    pub mapped: &'a MappedKey,
    /// Whether an existing object may be replaced (else its collision is
    /// 412).
    pub replace: bool,
    /// True if the caller holds the key's creation lock already.
    pub locked: bool,
}

/// Renames a published file to `p.target` with `rename`, making the key's folders (their creation
/// locks named by `lock_of`) when one is missing, a few times
/// ([`PARENTS_TRIES`]) while a delete prunes them again. If the target
/// holds a directory, the file goes beside it, under the key's creation
/// lock (taken here unless `p.locked`): the object moves between its two
/// names only under that lock, so the directory may also be gone by then,
/// and the file then takes its own name.
///
/// Errors: NoSuchBucket; Busy (503: the folders were pruned every time, or
/// the target stays open); Conflict (the key is a directory, or a folder
/// refuses the name: a link the server hides); PreconditionFailed (an
/// object is there and `replace` is false); NameTooLong / InvalidArgument
/// (names the server cannot hold); the share's other failures.
pub(crate) async fn place_on<S: ShareOps>(
    s: &S,
    p: &Place<'_>,
    lock_of: impl Fn(&SharePath) -> String,
    rename: &impl RenameStep,
) -> StoreResult<()> {
    let mut e = match rename.rename_to(p.target, p.replace).await {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if folder_missing(&e) {
        // A parent is missing: the bucket, or directories for the key's
        // prefix. A delete of the last other key under them may prune
        // them again before the rename (and another writer make them
        // again before a look): made again, a few times.
        bucket_is_there(s, p.bucket).await?;
        for _ in 0..PARENTS_TRIES {
            make_parents_on(s, &key_folders(p.bucket, p.mapped, false), &lock_of).await?;
            match rename.rename_to(p.target, p.replace).await {
                Ok(()) => return Ok(()),
                Err(again) if folder_missing(&again) => e = again,
                Err(again) => {
                    e = again;
                    break;
                }
            }
        }
        // Refused every time. A folder that stands refuses the name
        // itself (a link the server hides: answered below); one that is
        // gone was pruned every time, which is retryable.
        if folder_missing(&e) && !folder_stands(s, p.target).await {
            bucket_is_there(s, p.bucket).await?;
            return Err(StoreError::Busy("the key's folders were removed meanwhile; retry the request".into()));
        }
    }
    beside_or_error(s, p.target, p.mapped, e).await?;
    let lock = match p.locked {
        true => None,
        false => Some(take_lock(s, &lock_of(p.target)).await?),
    };
    // Under the lock: the directory may have gone and the object taken its
    // own name back meanwhile; then it is replaced there.
    let at = match holds_no_file(s, p.target).await {
        true => p.target.beside(false),
        false => p.target.clone(),
    };
    let renamed = rename.rename_to(&at, p.replace).await;
    if let Some(lock) = lock {
        s.release_lock(lock).await;
    }
    match renamed {
        Ok(()) => Ok(()),
        Err(e) if is_unholdable_name(&e) => Err(too_long_to_keep_beside(p.target)),
        Err(e) => Err(rename_error_on(s, &at, p.mapped, e, None).await),
    }
}

/// True if `e` says the folder a name goes into is missing, or going (a
/// delete pending on it, which `is_not_found` counts and a mkdir waits
/// out).
fn folder_missing(e: &ShareError) -> bool {
    is_not_found(e) || is_bad_path(e)
}

/// True if the folder `target` goes into is a directory now.
async fn folder_stands<S: ShareOps>(s: &S, target: &SharePath) -> bool {
    let Some((folder, _)) = target.split_leaf() else { return true };
    s.times(&folder).await.is_ok_and(|t| t.is_directory())
}

/// True if `path` holds no file now: a directory, or a directory removed
/// while a handle still holds it (see `share::not_a_file`).
async fn holds_no_file<S: ShareOps>(s: &S, path: &str) -> bool {
    s.times(path).await.is_ok_and(|t| not_a_file(&t))
}

/// After a rename to `target` (a plain key's own path) failed with `e`:
/// `Ok` if `target` holds no file (a directory: the object goes beside
/// it), else the error to answer. One look serves both, so that a losing
/// create-if-absent holds the key's lock no longer than before.
async fn beside_or_error<S: ShareOps>(s: &S, target: &str, mapped: &MappedKey, e: ShareError) -> StoreResult<()> {
    if is_unholdable_name(&e) {
        return Err(rename_error_on(s, target, mapped, e, None).await);
    }
    let now = s.times(target).await;
    match &now {
        Ok(t) if !mapped.dir_marker && not_a_file(t) => Ok(()),
        _ => Err(rename_error_on(s, target, mapped, e, Some(now)).await),
    }
}

/// What a rename to `target` that still fails with `e` means to the
/// client, from a look at `target` after the failure (`seen`, if the
/// caller took it already).
async fn rename_error_on<S: ShareOps>(
    s: &S,
    target: &str,
    mapped: &MappedKey,
    e: ShareError,
    seen: Option<Result<FileTimes, ShareError>>,
) -> StoreError {
    if is_unholdable_name(&e) {
        // The server's own name rules (e.g. 255 UTF-8 bytes on Linux).
        return if mapped.components.iter().any(|c| c.len() > 255) {
            StoreError::NameTooLong
        } else {
            StoreError::InvalidArgument("the SMB server cannot hold a name in this key".into())
        };
    }
    let stat = match seen {
        Some(stat) => stat,
        None => s.times(target).await,
    };
    if e.failure() == Failure::Collision && matches!(&stat, Err(s) if is_not_found(s)) {
        // It was there when the server decided, and someone deleted it
        // since: the create-if-absent failed all the same.
        return StoreError::PreconditionFailed;
    }
    if is_not_found(&e) && matches!(&stat, Err(s) if is_not_found(s)) {
        // Its parents exist (they were just made), yet the name can be
        // neither seen nor replaced: a symbolic link the server hides
        // (Samba with `follow symlinks = no`).
        return StoreError::Conflict(
            "the share holds this name as something the gateway cannot see or replace (a link the server does not follow)"
                .into(),
        );
    }
    if let Ok(t) = stat {
        if !t.is_directory() && e.failure() == Failure::Collision {
            // A rename that may not replace: the object exists (it may
            // have just been created by a racing writer).
            return StoreError::PreconditionFailed;
        }
        if t.is_directory() {
            return StoreError::Conflict(
                "the key is also a prefix of other keys (a directory on the share); an SMB share cannot hold both"
                    .into(),
            );
        }
        if e.failure() == Failure::AccessDenied && open_elsewhere(s, target).await {
            // The old object is still open (long GETs on every pooled
            // connection, or a server that refuses to replace any open
            // file). Retryable: 503 SlowDown, not 403.
            return StoreError::Busy("the object is open for reading on the share; retry the request".into());
        }
    }
    e.into()
}

/// True if someone holds `path` open: an open for DELETE that shares
/// nothing meets a sharing violation. Tells a rename refused because the
/// target is open from one refused by permissions.
async fn open_elsewhere<S: ShareOps>(s: &S, path: &str) -> bool {
    match s.open_alone_for_delete(path).await {
        Ok(f) => {
            s.close(f).await;
            false
        }
        Err(e) => e.failure() == Failure::SharingViolation,
    }
}

/// Writes the marker record `meta` on `dir`, the key's own directory
/// (`folders`, the key's folders with `dir` last, are made already). A
/// delete of the last key under them may prune them between the making and
/// the record: they are made again, a few times ([`PARENTS_TRIES`]). Samba
/// answers a record on a gone directory with a not-found status, and
/// refuses it with AccessDenied while the directory goes.
///
/// Errors: Busy (503) if the folders were pruned every time; as
/// [`make_parents_on`]; the share's other failures.
pub(crate) async fn record_marker_on<S: ShareOps>(
    s: &S,
    dir: &str,
    folders: &[SharePath],
    meta: &ObjectMeta,
    lock_of: impl Fn(&SharePath) -> String,
) -> StoreResult<()> {
    for _ in 0..PARENTS_TRIES {
        match s.set_dir_record(dir, meta).await {
            Err(e) if is_not_found(&e) || (e.failure() == Failure::AccessDenied && going(s, dir).await) => {
                make_parents_on(s, folders, &lock_of).await?;
            }
            other => return other.map_err(Into::into),
        }
    }
    Err(StoreError::Busy("the key's folder was removed meanwhile; retry the request".into()))
}

/// True if the directory `dir` is gone, or going: removed while a handle
/// still holds it (a look answers it with no attributes).
async fn going<S: ShareOps>(s: &S, dir: &str) -> bool {
    match s.times(dir).await {
        Ok(t) => t.attributes == 0,
        Err(e) => is_not_found(&e) || e.failure() == Failure::DeletePending,
    }
}

#[cfg(test)]
#[path = "place_test.rs"]
mod tests;
