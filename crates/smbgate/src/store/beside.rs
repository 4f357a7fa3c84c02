//! Objects kept beside a directory of the same name. S3 lets `a/b` and
//! `a/b/c` both exist, and a key ending in `/` have a body; a file system
//! holds either a file or a directory under one name. So while `a\b` is a
//! directory (other keys continue under it), the object `a/b` is the file
//! `a\b\u{F02B}` beside it, and a marker `a/b/` with a body is
//! `a\b\u{F02B}\u{F02B}` (see [`super::keys::beside_name`]). Both stand in
//! the parent's directory listing, so a walk meets them in S3 order with no
//! extra lookup.
//!
//! The moves between the two forms hold the object's creation lock (see
//! `create_lock`): a reader that finds neither form waits while the lock
//! is held (`Reads::open_stored`), and conditional writers of the key take
//! turns with the move.

use super::share::Tree;

use super::share::CreateResponse;

use super::backoff;
use super::create_lock::take_lock;
use super::folders::stands_as_folder;
use super::keys::MappedKey;
use super::meta::ObjectMeta;
use super::path::SharePath;
use super::share::{is_busy, Failure, ShareError};
use super::share::{is_not_found, is_unholdable_name, not_a_file};
use super::share_ops::ShareOps;
use super::{Root, StoreError, StoreResult};
use futures::future::BoxFuture;

impl Root {
    /// Where `mapped` is kept while its own path is a directory: beside it.
    pub(crate) fn beside_path(&self, bucket: &str, mapped: &MappedKey) -> SharePath {
        self.object_path(bucket, mapped).beside(mapped.dir_marker)
    }

    /// Where a write of `mapped` publishes its file: the object's own path,
    /// or, for a marker (`a/b/`) with a body, beside its directory (an
    /// empty marker is the directory itself, see `put`).
    pub(crate) fn write_path(&self, bucket: &str, mapped: &MappedKey) -> SharePath {
        match mapped.dir_marker {
            true => self.beside_path(bucket, mapped),
            false => self.object_path(bucket, mapped),
        }
    }

    /// What the CREATE says of the object `mapped` and its record, wherever
    /// it is kept (its own path, or beside the directory there), and that
    /// path; `None` if there is no such object. One round trip, or two for
    /// an object kept beside its directory. With `missing_too`, a missing
    /// own path is looked beside as well: a listing that saw the object
    /// may meet it in the middle of a move (see [`displace_on`]). An
    /// empty folder someone made is the object of a key ending in `/`
    /// (see `folders`).
    ///
    /// Errors: SMB failures other than not-found.
    pub(crate) async fn stat_object(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        missing_too: bool,
    ) -> Result<Option<(CreateResponse, Option<ObjectMeta>, SharePath)>, ShareError> {
        stat_stored(&self.live(tree), self.object_path(bucket, mapped), mapped, missing_too).await
    }
}

/// What is told of a directory just removed, by its path (the store's
/// watch of it closes, so that the server can remove it).
pub(crate) type OnRemoved<'a> = &'a (dyn Fn(String) -> BoxFuture<'a, ()> + Send + Sync);

/// Removes the directory `dir` if it is empty and, if it was, gives the
/// object kept beside it (`beside`, known to exist) its name back; the
/// caller holds the object's creation lock. `removed` is told of the
/// directory just removed first. Returns true if the directory went. Best
/// effort: an object left beside is still found there by reads.
pub(crate) async fn restore_beside<S: ShareOps>(s: &S, dir: &str, beside: &str, removed: OnRemoved<'_>) -> bool {
    let gone = s.delete_dir(dir).await.is_ok();
    if gone {
        // Gone at its last close, before its name is taken again.
        removed(dir.to_string()).await;
        rename_back(s, dir, beside).await;
    }
    gone
}

/// The rename of `beside` to `dir`, a directory just removed. A removed
/// directory that a reader still holds open lingers, delete-pending,
/// until it closes (Samba then answers a stat of it with no attributes
/// at all, so it cannot be told from a file): the rename meets a
/// collision and tries again, as it does while the file is busy (an
/// If-Match writer holds it), about 1 s in all. A directory there again
/// (a writer under it) keeps the object beside, as it should be.
/// Nothing is ever deleted here. If the rename still fails, the
/// directory is made again, so that the object stays beside a
/// directory as everything else expects; if even that fails (a PUT of
/// the key put a file there meanwhile) a warning says so.
async fn rename_back<S: ShareOps>(s: &S, dir: &str, beside: &str) {
    let mut backoff = backoff::RENAME_BACK.start();
    loop {
        match s.rename_path(beside, dir, false).await {
            Ok(()) => return,
            Err(e) if nothing_beside(&e) => return, // deleted meanwhile
            Err(e) if e.failure() == Failure::Collision || is_busy(&e) => {}
            Err(e) => {
                tracing::debug!(error = %e, "an object kept beside its directory could not take its name back");
                break;
            }
        }
        if s.is_directory(dir).await.unwrap_or(false) {
            return;
        }
        if !backoff.wait().await {
            break;
        }
    }
    match s.mkdir_own(dir).await {
        Ok(()) => tracing::info!(dir, "an object kept beside its directory stays beside it"),
        Err(e) => tracing::warn!(
            error = %e,
            dir,
            "an object kept beside its removed directory stays beside it, and its name is taken"
        ),
    }
}

/// The answer to a rename beside `path` that the server refused for its
/// name ([`is_unholdable_name`]: the mark made it too long; Linux holds 255
/// bytes of UTF-8, the mark takes 3): a conflict the share cannot resolve.
pub(crate) fn too_long_to_keep_beside(path: &str) -> StoreError {
    let leaf = path.rsplit('\\').next().unwrap_or(path);
    StoreError::Conflict(format!(
        "the object {:?} is also a prefix of this key, and its name is too long for the share to keep it \
         beside a directory of the same name",
        super::keys::decode_component(leaf)
    ))
}

/// `mapped` as the names of where its object is kept: with `beside`, its
/// last component followed by the mark (twice for a marker), so that an
/// on-disk name is compared with the name the object really has
/// (`Reads::check_exact_name`, case-insensitive shares).
pub(crate) fn kept_as(mapped: &MappedKey, beside: bool) -> std::borrow::Cow<'_, MappedKey> {
    match (beside, mapped.components.split_last()) {
        (true, Some((last, rest))) => {
            let mut components = rest.to_vec();
            components.push(super::keys::beside_name(last, mapped.dir_marker));
            std::borrow::Cow::Owned(MappedKey { components, dir_marker: false })
        }
        _ => std::borrow::Cow::Borrowed(mapped),
    }
}

/// True if a lookup beside a name found nothing there: not found, or a
/// name the server cannot hold (a name at its length limit has no room
/// for the mark, so nothing can be kept beside it).
pub(crate) fn nothing_beside(e: &ShareError) -> bool {
    is_not_found(e) || is_unholdable_name(e)
}

/// True if what opened at a key's own path is that key's object: a file
/// for a plain key, a directory with a marker record for a key ending in
/// `/`. Otherwise the object, if any, is kept beside (or a marker's body
/// is, where the directory has no record).
pub(crate) fn stands_for(is_dir: bool, marker_record: bool, mapped: &MappedKey) -> bool {
    match mapped.dir_marker {
        true => is_dir && marker_record,
        false => !is_dir,
    }
}

/// [`Root::stat_object`] on `s`, for the object `mapped` whose own path is
/// `path`.
///
/// Errors: SMB failures other than not-found.
pub(crate) async fn stat_stored<S: ShareOps>(
    s: &S,
    path: SharePath,
    mapped: &MappedKey,
    missing_too: bool,
) -> Result<Option<(CreateResponse, Option<ObjectMeta>, SharePath)>, ShareError> {
    // File-only for a plain key, as reads open it (see `open`).
    let file_only = !mapped.dir_marker;
    let stat = |p: SharePath| async move {
        match s.stat_with_meta(&p, file_only).await {
            Ok((c, m)) => Ok(Some((c, m, p))),
            Err(e) if e.failure() == Failure::IsDirectory => Ok(None),
            Err(e) => Err(e),
        }
    };
    let stands = |c: &CreateResponse, m: &Option<ObjectMeta>| {
        stands_for(not_a_file(&c.times), m.as_ref().is_some_and(|m| m.marker), mapped)
    };
    match stat(path.clone()).await {
        Ok(Some((c, m, p))) if stands(&c, &m) => return Ok(Some((c, m, p))),
        Ok(_) => {} // a directory
        Err(e) if is_not_found(&e) && (mapped.dir_marker || missing_too) => {}
        Err(e) if is_not_found(&e) => return Ok(None),
        Err(e) => return Err(e),
    }
    // Beside first, the own path again last, in one round trip: an
    // object that moves back between the two is seen at one of them.
    let beside = path.beside(mapped.dir_marker);
    let (aside, again) = tokio::join!(stat(beside), stat(path));
    match aside {
        Ok(Some((c, m, p))) if !not_a_file(&c.times) => return Ok(Some((c, m, p))),
        Err(e) if !nothing_beside(&e) => return Err(e),
        _ => {}
    }
    match again {
        Ok(Some((c, m, p))) if stands(&c, &m) => Ok(Some((c, m, p))),
        Ok(Some((c, m, p))) => {
            let marker = m.as_ref().is_some_and(|m| m.marker);
            Ok(stands_as_folder(s, mapped, &c.times, marker, &p).await?.then_some((c, m, p)))
        }
        Err(e) if !is_not_found(&e) => Err(e),
        _ => Ok(None),
    }
}

/// Makes the file at `path` (an object a longer key now needs as a
/// directory) into that directory: the file is renamed to `beside`, over
/// any stale file there, and the directory is made, both under the
/// object's creation lock at `lock`. A writer that puts a new version at
/// `path` between the two steps wins: that version is moved beside too.
///
/// Errors: Busy (503) if the file stays open without sharing delete (an
/// If-Match writer holds it) for about 3 s; SMB errors.
pub(crate) async fn displace_on<S: ShareOps>(s: &S, path: &str, beside: &str, lock: &str) -> StoreResult<()> {
    let mut backoff = backoff::DISPLACE.start();
    loop {
        let held = take_lock(s, lock).await?;
        let moved = s.rename_path(path, beside, true).await;
        let made = match moved {
            Ok(()) => s.mkdir_own(path).await,
            Err(e) if is_not_found(&e) => s.mkdir_own(path).await,
            // Another writer made it a directory first.
            Err(e) if e.failure() == Failure::IsDirectory => {
                s.release_lock(held).await;
                return Ok(());
            }
            Err(e) if is_busy(&e) => {
                // Not while holding the lock: the holder of the file may
                // be waiting for it.
                s.release_lock(held).await;
                if backoff.wait().await {
                    continue;
                }
                break;
            }
            Err(e) => {
                s.release_lock(held).await;
                return Err(match is_unholdable_name(&e) {
                    true => too_long_to_keep_beside(path),
                    false => e.into(),
                });
            }
        };
        s.release_lock(held).await;
        match made {
            Ok(()) => return Ok(()),
            Err(e) if e.failure() == Failure::Collision => {
                match s.is_directory(path).await {
                    Ok(true) => return Ok(()), // another writer made it first
                    Ok(false) => {}
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(e.into()),
                }
                // A writer put a new version there meanwhile: it moves
                // beside too, on the next turn.
                if !backoff.wait().await {
                    break;
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Busy("a prefix of the key is an object that is being written; retry the request".into()))
}

#[cfg(test)]
#[path = "beside_test.rs"]
mod tests;
