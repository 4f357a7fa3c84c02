//! The If-Match write: a compare-and-swap on the share itself (failure
//! class 25), over any [`ShareOps`], so that its races can be played out
//! step by step against an in-memory share as well as against smbd.
//!
//! The current file is opened sharing only READ, which keeps every other
//! writer (this instance, another one, a plain SMB user) from replacing,
//! renaming or deleting it; its record is read through that handle and the
//! condition decided; then, under the key's creation lock, one compound
//! renames it aside and the new file into its name. Of two writers that
//! expect the same ETag, the second opens the file only once the first has
//! closed its lock, and then finds the first one's version.

use crate::store::beside::nothing_beside;
use crate::store::create_lock::take_lock;
use crate::store::meta::ObjectMeta;
use crate::store::share::{is_busy, is_not_found, Failure, ShareError};
use crate::store::share_ops::ShareOps;
use crate::store::{retry_busy, retry_swap, StoreError, StoreResult};

/// What a swap's two renames answered: the old version aside, the new in.
type SwapSteps = (Result<(), ShareError>, Result<(), ShareError>);

/// Where an If-Match write looks and moves things (share-relative paths).
pub(crate) struct SwapPaths<'a> {
    /// The key's write path: its own name, or beside a directory.
    pub path: &'a str,
    /// The key's other name (beside a directory of its name), looked at if
    /// `path` holds no file; `None` for a key ending in `/`.
    pub beside: Option<&'a str>,
    /// The key's own name, looked at once more if nothing is beside.
    pub plain: &'a str,
    /// A fresh temporary name the old version moves to.
    pub backup: &'a str,
    /// The key's creation lock.
    pub lock: &'a str,
}

/// What becomes of the version a swap replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Aside {
    /// It goes (an unversioned bucket, or the `null` version of a
    /// suspended one).
    Discard,
    /// It is kept at this path (a stored version; its folder is made if
    /// missing).
    Keep(String),
}

/// How an If-Match write ended, short of an error.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Swapped {
    /// The new version is in (or was replaced at once by a writer that
    /// created the key meanwhile: the write happened, then was superseded).
    Done,
    /// No object at the key (the caller tells NoSuchBucket from NoSuchKey).
    NoObject,
}

/// Publishes `file` at `paths.path` if the object there now passes
/// `accept` (its handle, its record and the path it was found at; the
/// ETag condition), as one compare-and-swap; the replaced version goes, or
/// stays where `accept` says ([`Aside`]), which it may look up on the share
/// while the object is held. `publishing` is called just
/// before the renames.
///
/// Errors: what `accept` answers (PreconditionFailed, NoSuchKey); Busy
/// (another write holds the object, or it could not be moved aside); the
/// share's failures.
pub(crate) async fn swap_if_match<S: ShareOps>(
    s: &S,
    file: &S::Handle,
    publishing: impl FnOnce(),
    paths: &SwapPaths<'_>,
    accept: impl AsyncFnOnce(&S::Handle, Option<ObjectMeta>, &str) -> StoreResult<Aside>,
) -> StoreResult<Swapped> {
    let mut path = paths.path;
    let mut locked = retry_swap(|| s.open_to_replace(path)).await;
    let elsewhere = |e: &ShareError| is_not_found(e) || e.failure() == Failure::IsDirectory;
    if let (Some(beside), true) = (paths.beside, matches!(&locked, Err(e) if elsewhere(e))) {
        // Other keys continue under this one (a directory at its path), or
        // it is moving between its two names: look beside, and if it is
        // not there, at its own name once more (it may have just moved
        // back).
        path = beside;
        locked = retry_swap(|| s.open_to_replace(path)).await;
        if matches!(&locked, Err(e) if nothing_beside(e)) {
            path = paths.plain;
            locked = retry_swap(|| s.open_to_replace(path)).await;
        }
    }
    let (lock, meta) = match locked {
        Ok(r) => r,
        Err(e) if elsewhere(&e) || nothing_beside(&e) => return Ok(Swapped::NoObject),
        Err(e) if e.failure() == Failure::SharingViolation => {
            return Err(StoreError::Busy("another write of this key is in progress; retry the request".into()))
        }
        Err(e) => return Err(e.into()),
    };
    let aside = accept(&lock, meta, path).await?;
    let backup = match &aside {
        Aside::Keep(kept) => kept.as_str(),
        Aside::Discard => paths.backup,
    };
    // A creator's rename and our second rename both check, then rename:
    // held by both, the key's creation lock orders them.
    let creating = take_lock(s, paths.lock).await?;
    publishing();
    // The locked file can refuse to move aside for a moment: a reader's
    // open stream record (streams_xattr) makes Samba answer
    // STATUS_ACCESS_DENIED until it closes, often on a CTDB cluster.
    // Nothing has changed then and the lock still holds the file, so the
    // swap is tried again (about 1.5 s in all) before a 503.
    let swap = || {
        retry_busy(|| async {
            let (away, into) = s.swap_in(&lock, backup, file, path).await?;
            match away {
                Err(e) if is_busy(&e) && into.is_err() => Err(e),
                away => Ok((away, into)),
            }
        })
    };
    let mut swapped = swap().await;
    // A kept version's folder is made the first time it is missing (the
    // old version did not move, so the new one could not go in either).
    if let (Aside::Keep(kept), Ok((Err(e), Err(_)))) = (&aside, &swapped) {
        if is_not_found(e) {
            make_parents_of(s, kept).await?;
            swapped = swap().await;
        }
    }
    // The old version, once kept aside, closes and the creation lock
    // (which the next writer of the key waits for) goes now, beside the
    // rest of the write.
    match settle(s, file, (lock, &aside), swapped, path, paths).await {
        Ok(Retired::Kept(kept)) => {
            s.close_soon(kept);
            s.release_lock_soon(creating);
            Ok(Swapped::Done)
        }
        Ok(retired) => {
            s.release_lock(creating).await;
            // A look at the key by another smbd process, open across the
            // rename and closed last, keeps the file at its backup name,
            // which is this write's alone: deleted by it, after the lock.
            if matches!(retired, Retired::Deleted) {
                s.remove_leftover(paths.backup).await;
            }
            Ok(Swapped::Done)
        }
        Err(e) => {
            s.release_lock(creating).await;
            Err(e)
        }
    }
}

/// What became of the version a swap replaced.
enum Retired<H> {
    /// Kept aside (a stored version); its handle is still to be closed.
    Kept(H),
    /// Deleted through its handle, at its backup name.
    Deleted,
    /// Still at its backup name: its delete failed, and the sweep removes
    /// it.
    Left,
}

/// The replaced version, once the new one is in: it goes, or stays kept
/// where it moved; says which ([`Retired`], with a kept version's handle
/// for the caller to close).
async fn retire<S: ShareOps>(s: &S, lock: S::Handle, aside: &Aside) -> Retired<S::Handle> {
    match aside {
        Aside::Discard => {
            // The record goes only with its file: a delete that failed
            // leaves a file that still needs it.
            let key = s.record_key(&lock);
            if s.close_and_delete(lock).await.is_err() {
                return Retired::Left;
            }
            s.forget_record_of(key); // the old version's, now at the backup name
            Retired::Deleted
        }
        Aside::Keep(_) => Retired::Kept(lock),
    }
}

/// Makes the folders `path` is to be in, those there left as they are.
///
/// Errors: the share's, other than a folder being there already.
pub(crate) async fn make_parents_of<S: ShareOps>(s: &S, path: &str) -> Result<(), ShareError> {
    let Some((parent, _)) = path.rsplit_once('\\') else { return Ok(()) };
    let mut missing = vec![parent];
    while let Some(&dir) = missing.last() {
        match s.mkdir_own(dir).await {
            Ok(()) => drop(missing.pop()),
            Err(e) if e.failure() == Failure::Collision => drop(missing.pop()),
            Err(e) if is_not_found(&e) && missing.len() < 256 => match dir.rsplit_once('\\') {
                Some((up, _)) => missing.push(up),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What a swap's two renames did, settled while the key's creation lock
/// is still held: the old version (`lock`, at its backup name if it
/// moved) goes or stays kept ([`Aside`]), or goes back, and the answer:
/// what became of the old version ([`Retired`]).
async fn settle<S: ShareOps>(
    s: &S,
    file: &S::Handle,
    (lock, aside): (S::Handle, &Aside),
    swapped: Result<SwapSteps, ShareError>,
    path: &str,
    paths: &SwapPaths<'_>,
) -> StoreResult<Retired<S::Handle>> {
    let busy = || StoreError::Busy("the object could not be replaced; retry the request".into());
    let (away, into) = match swapped {
        Err(e) if is_busy(&e) => {
            tracing::debug!(error = %e, "If-Match write: the current object could not be moved aside");
            return Err(busy());
        }
        other => other?,
    };
    match (away, into) {
        (_, Ok(())) => Ok(retire(s, lock, aside).await),
        (Ok(()), Err(e))
            if e.failure() == Failure::Collision
                && paths.beside.is_some_and(|b| b != path)
                && s.holds_no_file(path).await =>
        {
            // A directory was made at the key's name between the two
            // renames (a PUT of a longer key: its mkdir takes no lock).
            // The new version goes beside it; the old one goes.
            let beside = paths.beside.unwrap_or(path);
            match s.rename(file, beside, true).await {
                Ok(()) => Ok(retire(s, lock, aside).await),
                Err(e) => {
                    tracing::warn!(error = %e, "If-Match write: the new version could not go beside the new directory; restoring the old");
                    if let Err(r) = s.rename(&lock, beside, false).await {
                        tracing::error!(error = %r, backup = backup_of(aside, paths), "If-Match write: the old version is left at its backup name");
                    }
                    s.close(lock).await;
                    Err(busy())
                }
            }
        }
        (Ok(()), Err(e)) if e.failure() != Failure::Collision => {
            // The new version could not go in: put the old one back under
            // its name (nobody else can have taken it but a creator, and
            // then the collision below applies).
            tracing::warn!(error = %e, "If-Match write: the new version could not be renamed in; restoring the old");
            if let Err(r) = s.rename(&lock, path, false).await {
                tracing::error!(error = %r, backup = backup_of(aside, paths), "If-Match write: the old version is left at its backup name");
                return Err(busy());
            }
            s.close(lock).await;
            Err(busy())
        }
        (Ok(()), Err(e)) => {
            tracing::debug!(error = %e, "If-Match write superseded by a writer that created the key meanwhile");
            let retired = retire(s, lock, aside).await;
            let _ = s.delete_on_close(file).await;
            match retired {
                // A versioned write would name a version that was never
                // stored: the client is asked to try again.
                Retired::Kept(kept) => {
                    s.close(kept).await;
                    Err(busy())
                }
                other => Ok(other),
            }
        }
        (Err(e), Err(_)) => {
            tracing::debug!(error = %e, "If-Match write: the current object could not be moved aside");
            Err(busy())
        }
    }
}

/// Where the replaced version was moved to.
fn backup_of<'a>(aside: &'a Aside, paths: &'a SwapPaths<'_>) -> &'a str {
    match aside {
        Aside::Keep(kept) => kept,
        Aside::Discard => paths.backup,
    }
}

#[cfg(test)]
#[path = "swap_test.rs"]
pub(crate) mod tests;
