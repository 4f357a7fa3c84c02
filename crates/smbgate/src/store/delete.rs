//! DeleteObject: remove the file (or a marker's record and body), then
//! prune the directories it leaves empty. A conditional delete (If-Match) is checked
//! on the very handle that deletes, so no other version can be deleted in
//! between.

use super::share::{CreateResponse, Tree};
use super::share_data::ShareData;
use super::share_ops::ShareOps;
use futures::future::BoxFuture;

use super::beside::{kept_as, nothing_beside, restore_beside, OnRemoved};
use super::conditions::Conditions;
use super::create_lock::take_lock_within;
use super::keys::{map_key, MappedKey};
use super::meta::ObjectMeta;
use super::path::SharePath;
use super::reads::open_checked::{check_record_key, keyed};
use super::share::is_not_found;
use super::share::{Failure, ShareError};
use super::types::ObjectInfo;
use super::{backoff, retry_sharing, share, Deletes, Root, StoreError, StoreResult};

impl Deletes {
    /// Deletes the file at `path`, the object `key`: `Ok(true)` if it went,
    /// `Ok(false)` if the file there is not that object (a case-variant, or
    /// one another conditional delete unlinked), `Err` inside for a failed
    /// condition. Without EAs the record is a sidecar found by the file's
    /// id, which only an open tells.
    ///
    /// Errors: the SMB failure (not-found, a directory, a sharing
    /// violation to retry).
    async fn delete_file(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        key: &str,
        conditions: &Conditions,
        path: &SharePath,
    ) -> Result<StoreResult<bool>, ShareError> {
        let exact = self.root.exact_names_for(mapped);
        let checked = !conditions.is_empty() || exact || self.root.records().kept_by_file_id();
        if !checked {
            return self.root.live(tree).delete_file(path.as_str()).await.map(|_| Ok(true));
        }
        // Open first to read the record: on a case-insensitive share
        // `mixed` would otherwise delete `Mixed` (and `PROGRA~1` the long
        // name it aliases), and If-Match needs the ETag of exactly the file
        // being deleted. A file without a record naming its key (someone
        // else's): its on-disk name decides, never a case-insensitive match.
        let kept = kept_as(mapped, *path != self.root.object_path(bucket, mapped));
        let names = |keyed: bool, on_disk: Option<String>| async move {
            self.reads.check_exact_name(tree, bucket, &kept, keyed, on_disk.as_deref()).await
        };
        let live = self.root.live(tree);
        delete_checked(&live, path.as_str(), key, conditions, exact, names).await
    }
    /// The delete of `key` ([`Deletes::delete_file`]) where it is kept:
    /// at its own path, else beside a directory of its name, else at its
    /// own path once more (it may have just taken that name back, see
    /// `beside`). Returns what the last try answered and where it was.
    async fn delete_found(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        key: &str,
        conditions: &Conditions,
        path: &SharePath,
    ) -> (Result<StoreResult<bool>, ShareError>, SharePath) {
        let mut at = path.clone();
        let mut deleted = retry_sharing(|| self.delete_file(tree, bucket, mapped, key, conditions, &at)).await;
        // Not at its own path: other keys continue under it (a directory
        // there), or it is moving between the two names; look beside.
        let directory = |d: &Result<_, ShareError>| matches!(d, Err(e) if e.failure() == Failure::IsDirectory);
        if directory(&deleted) || matches!(&deleted, Err(e) if is_not_found(e)) {
            let was_directory = directory(&deleted);
            at = path.beside(false);
            deleted = retry_sharing(|| self.delete_file(tree, bucket, mapped, key, conditions, &at)).await;
            // Not beside either, though a directory stood at its name: it
            // may have just taken that name back (see `beside`).
            if was_directory && matches!(&deleted, Err(e) if nothing_beside(e)) {
                at = path.clone();
                deleted = retry_sharing(|| self.delete_file(tree, bucket, mapped, key, conditions, &at)).await;
            }
        }
        (deleted, at)
    }

    /// Removes now-empty directories that the gateway made for keys (see
    /// `share::mkdir_own`) and that are not markers, deepest first, from
    /// where `from` says; stops at the first that is not empty, or not the
    /// gateway's: a folder someone made on the share stays (best effort),
    /// unless it is the one a deleted `name/` stood for (see `folders`). A
    /// removed directory with an object kept beside it gives that object
    /// its name back ([`restore_beside`]), and the walk up ends
    /// there.
    pub(in crate::store) async fn prune_parents(&self, tree: &Tree, bucket: &str, mapped: &MappedKey, from: Prune) {
        let mut dirs = self.root.bucket_path(bucket).ancestors_of(mapped);
        if from == Prune::Parents {
            dirs.pop(); // the object itself
        }
        dirs.reverse();
        let live = self.root.live(tree);
        // Samba removes a directory at its last close: this store's watch
        // of it closes.
        let root = &self.root;
        let removed = move |dir: String| -> BoxFuture<'_, ()> {
            Box::pin(async move { crate::store::reads::cache_watches::unwatch_under(root, &dir).await })
        };
        prune_empty(&live, &dirs, from == Prune::Folder, |d| self.root.lock_name(d), &removed).await
    }
}

/// [`Deletes::prune_parents`] on `s`: removes the directories `dirs`
/// (deepest first) while each is empty, the gateway's (or, with `folder`,
/// the first, which a deleted `name/` stood for) and not a marker; one
/// with an object kept beside it gives that object its name back
/// ([`restore_beside`]) and ends the walk. The look that decides and
/// the removal hold the folder's creation lock (named by `lock_of`), which
/// a marker's record is written under (`put_marker`): a record written
/// between them would go with the folder. A folder whose lock stays held
/// ([`backoff::PRUNE_LOCK`]) is left (pruning is best effort). `removed`
/// is told of each directory removed.
pub(crate) async fn prune_empty<S: ShareOps>(
    s: &S,
    dirs: &[SharePath],
    folder: bool,
    lock_of: impl Fn(&SharePath) -> String,
    removed: OnRemoved<'_>,
) {
    for (depth, dir) in dirs.iter().enumerate() {
        let removable = |found: &Result<(CreateResponse, Option<ObjectMeta>), ShareError>| match found {
            Ok((_, Some(m))) if m.marker => false,
            Ok((c, _)) => share::is_own_dir(&c.times) || (folder && depth == 0),
            Err(_) => false,
        };
        // A first look without the lock: most folders on the way hold a
        // record or are someone else's, and cost no lock. (An emptiness
        // check is the removal's own: a folder with names refuses it.)
        if !removable(&s.stat_with_meta(dir, false).await) {
            return;
        }
        let lock = match take_lock_within(s, &lock_of(dir), &backoff::PRUNE_LOCK).await {
            Ok(lock) => lock,
            Err(e) => {
                tracing::debug!(error = %e, "a folder's creation lock stayed taken; it is not pruned");
                return;
            }
        };
        let beside = dir.beside(false);
        let (found, beside_found) = tokio::join!(s.stat_with_meta(dir, false), s.times(&beside));
        let gone = match (removable(&found), beside_found) {
            (false, _) => false,
            (true, Ok(_)) => {
                restore_beside(s, dir, &beside, removed).await;
                s.release_lock(lock).await;
                return;
            }
            (true, Err(e)) if nothing_beside(&e) => s.delete_dir(dir).await.is_ok(),
            // Unknown: the directory stays, where reads find the object.
            (true, Err(e)) => {
                tracing::debug!(error = %e, "no look beside a directory; it is not pruned");
                false
            }
        };
        s.release_lock_soon(lock);
        if !gone {
            return;
        }
        removed(dir.to_string()).await;
    }
}

/// Runs `attempt` (a delete of a key wherever it is kept) again while it
/// finds nothing (`nothing`) but the key's creation lock at `lock` is
/// held: an If-Match swap between its two renames, or an object moving
/// beside its directory or back ([`backoff::KEY_IN_MOTION`]). With
/// `look_again`, a miss whose lock is free is tried once more, since the
/// move may have ended between the miss and the look at its lock: a
/// conditional delete then meets the version before or after the move,
/// never neither (an unconditional one succeeds on a miss either way).
/// Returns the last answer.
pub(crate) async fn while_in_motion<S, T, F, Fut>(
    s: &S,
    lock: &str,
    look_again: bool,
    mut attempt: F,
    nothing: impl Fn(&T) -> bool,
) -> T
where
    S: ShareOps,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut motion = backoff::KEY_IN_MOTION.start();
    let mut looked_again = !look_again;
    loop {
        let answer = attempt().await;
        if !nothing(&answer) {
            return answer;
        }
        if s.is_locked(lock).await {
            match motion.wait().await {
                true => continue,
                false => return answer,
            }
        }
        if looked_again {
            return answer;
        }
        looked_again = true;
    }
}

/// The checked delete of the object `key` at `path` on `s`, the rule of
/// [`Deletes::delete_file`] once a check is needed: the file opened for
/// DELETE with its record (sharing only READ under `conditions`, so that of
/// racing conditional deletes one holds the file at a time); a record
/// naming another key (a case-variant) or a name `names` refuses is not
/// this object; under `conditions`, a file already going (another delete
/// unlinked it between its close and our open: Samba lets such an open
/// through) is gone, not ours to delete again; the conditions are checked
/// on the handle that deletes; the file is deleted when that handle
/// closes, and its record forgotten after.
///
/// Returns `Ok(true)` if it went, `Ok(false)` if the file there is not
/// this object or is gone, `Err` inside for a failed condition.
///
/// Errors: the share's (not-found, a directory, a sharing violation to
/// retry).
pub(crate) async fn delete_checked<S, N, F>(
    s: &S,
    path: &str,
    key: &str,
    conditions: &Conditions,
    exact: bool,
    names: N,
) -> Result<StoreResult<bool>, ShareError>
where
    S: ShareOps,
    N: FnOnce(bool, Option<String>) -> F,
    F: std::future::Future<Output = StoreResult<()>>,
{
    let (handle, meta, on_disk) = s.open_delete_with_meta(path, exact, !conditions.is_empty()).await?;
    // On a refusal the handle closes itself when dropped: the answer
    // waits for no CLOSE.
    let Ok(meta) = check_record_key(meta, key) else {
        return Ok(Ok(false)); // only a case-variant exists
    };
    match names(keyed(&meta), on_disk).await {
        Ok(()) => {}
        Err(StoreError::NoSuchKey) => return Ok(Ok(false)),
        Err(e) => return Ok(Err(e)),
    }
    if !conditions.is_empty() && s.is_going(&handle).await? {
        s.close(handle).await;
        return Ok(Ok(false));
    }
    let info = s.info(&handle, meta, path);
    if let Err(e) = conditions.check_write(Some(info.current())) {
        return Ok(Err(e));
    }
    let r = s.delete_on_close(&handle).await;
    let record = s.record_key(&handle);
    s.close(handle).await;
    if r.is_ok() {
        s.forget_record_of(record);
    }
    r.map(|_| Ok(true))
}

impl Root {
    /// Removes a directory's marker record (an empty value removes an EA,
    /// a stream or a sidecar alike).
    ///
    /// Errors: SMB failures; not-found ones (STATUS_NOT_A_DIRECTORY among
    /// them) if there is no directory at `dir`.
    pub(crate) async fn drop_marker_record(&self, tree: &Tree, dir: &SharePath) -> Result<(), ShareError> {
        self.live(tree).drop_dir_record(dir).await
    }
    /// After a marker's body was published: the directory `dir` is no
    /// empty marker any more (its record would still answer first). No
    /// directory there is fine; another failure is logged, not answered,
    /// since the body is already in place.
    pub(crate) async fn body_replaces_empty_marker(&self, tree: &Tree, dir: &SharePath) {
        match self.drop_marker_record(tree, dir).await {
            Err(e) if !is_not_found(&e) => {
                tracing::warn!(error = %e, "a marker's empty record could not be dropped after a write with a body")
            }
            _ => {}
        }
    }
}

/// Where a delete's pruning of empty directories starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum Prune {
    /// At the key's parent.
    Parents,
    /// At the key's own path: its object was kept beside that directory.
    KeyDir,
    /// At the key's own path, a key ending in `/`: the directory goes
    /// while empty even if someone else made it, since it was the
    /// object just deleted (see `folders`).
    Folder,
}

impl Deletes {
    /// DELETE: removes the object (idempotent: a missing key is success, as
    /// in S3), then prunes directories it leaves empty. With `conditions`
    /// (If-Match), the object's ETag is read from the handle that deletes.
    ///
    /// Errors: NoSuchBucket, InvalidKey; NoSuchKey or PreconditionFailed
    /// for a failed If-Match; SMB failures.
    pub async fn delete_object(&self, bucket: &str, key: &str, conditions: &Conditions) -> StoreResult<()> {
        let mapped = map_key(key)?;
        let tree = self.root.tree().await?;
        let path = self.root.object_path(bucket, &mapped);
        self.root.forget_listing(bucket, &mapped);
        if mapped.dir_marker {
            if conditions.needs_current() {
                let current = self.reads.head_object(bucket, key).await.map(Some).or_else(|e| match e {
                    StoreError::NoSuchKey => Ok(None),
                    e => Err(e),
                })?;
                conditions.check_write(current.as_ref().map(ObjectInfo::current))?;
            }
            // Where the server matches another spelling (case, an 8.3
            // alias), `name/` must not reach the directory of `Name/`:
            // nothing of this key is there, and a DELETE of a missing key
            // succeeds.
            if self.root.exact_names_for(&mapped) && self.root.case_mismatch(&tree, bucket, &mapped).await?.is_some() {
                return Ok(());
            }
            // The body kept beside the directory and the directory's record
            // go under the key's creation lock, as they are written (see
            // `put`); then the directory goes if it is empty, as any prefix.
            let creating = self.root.create_lock(&tree, &path).await?;
            let body = self.root.live(&tree).delete_file(self.root.beside_path(bucket, &mapped).as_str()).await;
            let record = match &body {
                Err(e) if !nothing_beside(e) => None,
                _ => Some(self.root.drop_marker_record(&tree, &path).await),
            };
            creating.release().await;
            match (body, record) {
                (Err(e), _) if !nothing_beside(&e) => return Err(e.into()),
                (_, Some(Err(e))) if !is_not_found(&e) => return Err(e.into()),
                (Err(_), Some(Err(_))) => self.root.check_bucket(&tree, bucket).await?,
                _ => {}
            }
            self.prune_parents(&tree, bucket, &mapped, Prune::Folder).await;
            return Ok(());
        }
        // Found at neither name while the key's creation lock is held: an
        // If-Match swap is between its two renames, or the object is moving
        // beside its directory or back. Looked for again (see
        // `while_in_motion`).
        let live = self.root.live(&tree);
        let lock = self.root.lock_name(&path);
        let (deleted, at) = while_in_motion(
            &live,
            lock.as_str(),
            !conditions.is_empty(),
            || self.delete_found(&tree, bucket, &mapped, key, conditions, &path),
            |(d, _)| matches!(d, Err(e) if nothing_beside(e)),
        )
        .await;
        match deleted {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return conditions.check_write(None),
            Ok(Err(e)) => return Err(e),
            Err(e) if nothing_beside(&e) || e.failure() == Failure::IsDirectory => {
                self.root.check_bucket(&tree, bucket).await?;
                return conditions.check_write(None);
            }
            // Held open under another spelling of its name (an 8.3 alias of
            // the gateway's own files, whose key-locks file it keeps open):
            // nothing of this key is there.
            Err(e)
                if e.failure() == Failure::SharingViolation
                    && self.root.exact_names_for(&mapped)
                    && self.root.case_mismatch(&tree, bucket, &mapped).await?.is_some() =>
            {
                return conditions.check_write(None);
            }
            Err(e) => return Err(e.into()),
        }
        // Deleted beside its directory: that directory may be empty now.
        let from = if at != path { Prune::KeyDir } else { Prune::Parents };
        self.prune_parents(&tree, bucket, &mapped, from).await;
        Ok(())
    }
}

#[cfg(test)]
#[path = "delete_test.rs"]
mod tests;
