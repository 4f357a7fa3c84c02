//! DELETE, where it chooses between versions and plain files
//! (`Deletes::delete`), and DELETE on a versioned bucket. Without a
//! versionId the current file
//! moves into the key's versions folder and a delete marker becomes the
//! latest version (on a suspended bucket the `null` version goes instead,
//! and the marker is `null`). With a versionId exactly that version (or
//! marker) goes; if it was the latest, the next newest stored version
//! becomes the current file again (a marker stays stored: the key then
//! reads as deleted). Both run under the key's creation lock, which
//! versioned writes take too, so the versions of a key change one at a
//! time: the current file is held first, then the lock, in the order an
//! If-Match swap takes them.

use crate::store::conditions::Conditions;
use crate::store::keys::{map_key, MappedKey};
use crate::store::path::SharePath;
use crate::store::reads::open_checked::check_record_key;
use crate::store::share::{is_not_found, Failure, Handle, ShareError, Tree};
use crate::store::share_data::ShareData;
use crate::store::share_ops::ShareOps;
use crate::store::types::ObjectInfo;
use crate::store::writes::swap::make_parents_of;
use crate::store::{Deletes, StoreError, StoreResult};

use super::lock::check_delete;
use super::lock_config::now_ms;
use super::version_reads::invalid_version_id;
use super::{filetime_now, new_version_id, plausible_version_id, version_of, StoredName, Versioning, NULL_VERSION};

/// What a DELETE on a versioned bucket removed or made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The version ID removed, or of the delete marker made.
    pub version_id: String,
    /// True if that version is a delete marker.
    pub delete_marker: bool,
}

/// The current file of a key, held for DELETE (sharing only READ).
struct Current {
    handle: Handle,
    info: ObjectInfo,
}

impl Deletes {
    /// DELETE of `key`, or of its version `version_id`: on a versioned
    /// bucket a delete without a version ID adds a delete marker (see
    /// the module docs); elsewhere the object goes
    /// ([`Deletes::delete_object`]). Returns what a versioned delete
    /// removed or made (`None` on a bucket that was never versioned).
    ///
    /// `bypass`: the request may bypass GOVERNANCE retention.
    ///
    /// Errors: as [`Deletes::delete_object`] and [`Deletes::delete_version`].
    pub async fn delete(
        &self,
        bucket: &str,
        key: &str,
        version_id: Option<&str>,
        conditions: &Conditions,
        bypass: bool,
    ) -> StoreResult<Option<Removed>> {
        if let Some(id) = version_id {
            return self.delete_version(bucket, key, id, bypass).await.map(Some);
        }
        let state = self.root.versioning(&self.root.tree().await?, bucket).await?;
        if state.versioned() && !key.ends_with('/') {
            return self.delete_versioned(bucket, key, conditions, state).await.map(Some);
        }
        self.delete_object(bucket, key, conditions).await.map(|()| None)
    }

    /// The current file of `mapped`, at its own path or beside a directory
    /// of its name, held so that no one else replaces or removes it; `None`
    /// if the key has none (or only another spelling of it).
    async fn hold_current(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) -> StoreResult<Option<Current>> {
        let live = self.root.live(tree);
        let key = mapped.original();
        if self.root.exact_names_for(mapped) && self.root.case_mismatch(tree, bucket, mapped).await?.is_some() {
            return Ok(None);
        }
        let own = self.root.object_path(bucket, mapped);
        for path in [own.clone(), own.beside(false)] {
            match crate::store::retry_sharing(|| live.open_to_replace(path.as_str())).await {
                Ok((handle, meta)) => {
                    let Ok(meta) = check_record_key(meta, &key) else { return Ok(None) };
                    let info = ObjectInfo::new(handle.info(), meta, path.as_str());
                    return Ok(Some(Current { handle, info }));
                }
                Err(e) if is_not_found(&e) || e.failure() == Failure::IsDirectory => {}
                Err(e) if e.failure() == Failure::SharingViolation => {
                    return Err(StoreError::Busy("another write of this key is in progress; retry the request".into()))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }

    /// The current file of `mapped` held, then the key's creation lock, in
    /// the order an If-Match swap takes them. A key without a current file
    /// is looked at again once the lock is held: a writer that created it
    /// meanwhile is then seen, not passed over.
    ///
    /// Errors: Busy; SMB failures.
    async fn hold_then_lock(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        plain: &SharePath,
    ) -> StoreResult<(Option<Current>, crate::store::create_lock::CreateLock)> {
        let current = self.hold_current(tree, bucket, mapped).await?;
        let creating = self.root.create_lock(tree, plain).await?;
        if current.is_some() {
            return Ok((current, creating));
        }
        match self.hold_current(tree, bucket, mapped).await {
            Ok(current) => Ok((current, creating)),
            Err(e) => {
                creating.release().await;
                Err(e)
            }
        }
    }

    /// DELETE without a versionId on a bucket whose versioning is `state`
    /// (see the module docs); If-Match is decided on the current file.
    ///
    /// Errors: NoSuchBucket, InvalidKey, PreconditionFailed, Busy; SMB
    /// failures.
    pub(crate) async fn delete_versioned(
        &self,
        bucket: &str,
        key: &str,
        conditions: &Conditions,
        state: Versioning,
    ) -> StoreResult<Removed> {
        let mapped = map_key(key)?;
        let tree = self.root.tree().await?;
        let plain = self.root.object_path(bucket, &mapped);
        self.root.forget_listing(bucket, &mapped);
        let (current, creating) = self.hold_then_lock(&tree, bucket, &mapped, &plain).await?;
        let made = self.make_marker(&tree, bucket, &mapped, current, conditions, state).await;
        creating.release().await;
        let made = made?;
        self.prune_parents(&tree, bucket, &mapped, crate::store::delete::Prune::Parents).await;
        Ok(made)
    }

    /// Moves the `current` version aside and stores a delete marker, under
    /// the key's creation lock.
    async fn make_marker(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        current: Option<Current>,
        conditions: &Conditions,
        state: Versioning,
    ) -> StoreResult<Removed> {
        let live = self.root.live(tree);
        match current {
            Some(Current { handle, info }) => {
                conditions.check_write(Some(info.current()))?;
                let version_id = version_of(&info);
                if state == Versioning::Suspended && version_id == NULL_VERSION {
                    let key = live.record_key(&handle);
                    live.close_and_delete(handle).await?;
                    live.forget_record_of(key);
                } else {
                    let name = StoredName { stored_at: filetime_now(), version_id, marker: false };
                    let kept = self.root.next_version_folder(tree, bucket, mapped).await.join(&name.name());
                    make_parents_of(&live, kept.as_str()).await?;
                    live.rename(&handle, kept.as_str(), false).await?;
                    live.close(handle).await;
                }
            }
            None => {
                self.root.check_bucket(tree, bucket).await?;
                conditions.check_write(None)?;
            }
        }
        let version_id = match state {
            Versioning::Suspended => {
                self.root.drop_stored_versions(tree, bucket, mapped, |n| n.version_id == NULL_VERSION).await;
                NULL_VERSION.to_string()
            }
            _ => new_version_id(),
        };
        let marker = StoredName { stored_at: filetime_now(), version_id: version_id.clone(), marker: true };
        let path = self.root.next_version_folder(tree, bucket, mapped).await.join(&marker.name());
        make_parents_of(&live, path.as_str()).await?;
        live.write_small(path.as_str(), &[]).await?;
        Ok(Removed { version_id, delete_marker: true })
    }

    /// DELETE of `key`'s version `version_id` (see the module docs). A
    /// version that does not exist is success, as on AWS. A version under
    /// Object Lock stays (see `lock::check_delete`; `bypass`: GOVERNANCE
    /// retention may be bypassed).
    ///
    /// Errors: InvalidArgument for an ID no version has the form of;
    /// AccessDenied for a locked version; NoSuchBucket, InvalidKey, Busy;
    /// SMB failures.
    pub async fn delete_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        bypass: bool,
    ) -> StoreResult<Removed> {
        if !plausible_version_id(version_id) {
            return Err(invalid_version_id());
        }
        let mapped = map_key(key)?;
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let plain = self.root.object_path(bucket, &mapped);
        self.root.forget_listing(bucket, &mapped);
        let (current, creating) = self.hold_then_lock(&tree, bucket, &mapped, &plain).await?;
        let mut emptied = Vec::new();
        let removed = self.remove_version(&tree, bucket, &mapped, current, version_id, bypass, &mut emptied).await;
        creating.release().await;
        let (removed, current_gone) = removed?;
        self.prune_versions(&tree, bucket, &mapped, &emptied).await;
        if current_gone {
            self.prune_parents(&tree, bucket, &mapped, crate::store::delete::Prune::Parents).await;
        }
        Ok(removed)
    }

    /// Removes the version `version_id` of `mapped` (`current` its current
    /// file, held), under the key's creation lock, and makes the next newest current where it was the
    /// latest. Returns what went, and whether the key is left without a
    /// current file. The folders versions were taken out of are added to
    /// `emptied`.
    #[allow(clippy::too_many_arguments)]
    async fn remove_version(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        current: Option<Current>,
        version_id: &str,
        bypass: bool,
        emptied: &mut Vec<SharePath>,
    ) -> StoreResult<(Removed, bool)> {
        let live = self.root.live(tree);
        let mut removed = Removed { version_id: version_id.to_string(), delete_marker: false };
        let had_current = current.is_some();
        match current {
            Some(Current { handle, info }) if version_of(&info) == version_id => {
                check_delete(&info.meta, now_ms(), bypass)?;
                let read_only = handle.info().times.is_read_only();
                // A file without a record of ours (changed on the share) cannot
                // say; one someone else put there and locked through S3 has a
                // record (without an ETag of its own) that says.
                let recorded = info.meta != crate::store::meta::ObjectMeta::default();
                self.unknown_lock(tree, bucket, !recorded && read_only).await?;
                if read_only {
                    live.clear_read_only_at(&info.path).await?;
                }
                let key = live.record_key(&handle);
                delete_out_of_the_way(&live, handle, self.root.temp_path().as_str()).await?;
                live.forget_record_of(key);
            }
            other => {
                if let Some(Current { handle, .. }) = other {
                    live.close(handle).await;
                }
                let stored = self.root.stored_versions_noting_empty(tree, bucket, mapped, emptied).await?;
                let Some((path, name)) = stored.into_iter().find(|(_, n)| n.version_id == version_id) else {
                    return Ok((removed, !had_current));
                };
                if !name.marker {
                    self.unlock_stored(tree, bucket, &path, bypass).await?;
                }
                match live.delete_file(path.as_str()).await {
                    Ok(()) => emptied.extend(path.split_leaf().map(|(folder, _)| folder)),
                    Err(e) if is_not_found(&e) => return Ok((removed, !had_current)),
                    Err(e) => return Err(e.into()),
                }
                removed.delete_marker = name.marker;
                if had_current {
                    return Ok((removed, false));
                }
            }
        }
        let promoted = self.promote_newest(tree, bucket, mapped, emptied).await?;
        Ok((removed, !promoted))
    }

    /// Checks that the stored version at `path` may be deleted now, and
    /// clears its read-only mark on the share if it has one.
    ///
    /// Errors: AccessDenied under Object Lock; SMB failures.
    async fn unlock_stored(&self, tree: &Tree, bucket: &str, path: &SharePath, bypass: bool) -> StoreResult<()> {
        let (created, meta) = match self.root.live(tree).stat_with_meta(path.as_str(), false).await {
            Ok(found) => found,
            Err(e) if is_not_found(&e) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        match &meta {
            Some(meta) => check_delete(meta, now_ms(), bypass)?,
            None => self.unknown_lock(tree, bucket, created.times.is_read_only()).await?,
        }
        if created.times.is_read_only() {
            self.root.live(tree).clear_read_only_at(path).await?;
        }
        Ok(())
    }

    /// A version whose record no longer matches its file (changed on the
    /// share) cannot say whether it is locked; on a bucket with Object
    /// Lock, its read-only mark (`marked`) is taken to say it is.
    ///
    /// Errors: AccessDenied; SMB failures reading the bucket's configuration.
    async fn unknown_lock(&self, tree: &Tree, bucket: &str, marked: bool) -> StoreResult<()> {
        match marked && self.root.bucket_lock(tree, bucket).await?.enabled {
            true => Err(super::lock::locked()),
            false => Ok(()),
        }
    }

    /// Makes the newest stored version of `mapped` its current file again,
    /// unless it is a delete marker. Returns true if one was made current;
    /// the folder it came from is added to `emptied`.
    ///
    /// Errors: SMB failures.
    async fn promote_newest(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        emptied: &mut Vec<SharePath>,
    ) -> StoreResult<bool> {
        let live = self.root.live(tree);
        let stored = self.root.stored_versions_noting_empty(tree, bucket, mapped, emptied).await?;
        let Some((path, name)) = stored.into_iter().next() else { return Ok(false) };
        if name.marker {
            return Ok(false);
        }
        emptied.extend(path.split_leaf().map(|(folder, _)| folder));
        let target = self.root.object_path(bucket, mapped);
        make_parents_of(&live, target.as_str()).await?;
        match live.rename_path(path.as_str(), target.as_str(), false).await {
            Ok(()) => Ok(true),
            // Other keys continue under this one now: it goes beside.
            Err(e) if e.failure() == Failure::Collision && live.holds_no_file(target.as_str()).await => {
                live.rename_path(path.as_str(), target.beside(false).as_str(), false).await?;
                Ok(true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the folders of `mapped`'s versions left empty, deepest
    /// first (best effort: the first that is not empty ends it): the
    /// shards among `emptied`, then its versions folder and those above.
    async fn prune_versions(&self, tree: &Tree, bucket: &str, mapped: &MappedKey, emptied: &[SharePath]) {
        self.root.prune_shards(tree, bucket, mapped, emptied).await;
        let mut dirs: Vec<SharePath> = self.root.versions_root(bucket).ancestors_of(mapped);
        dirs.push(self.root.versions_dir(bucket, mapped));
        let live = self.root.live(tree);
        for dir in dirs.iter().rev() {
            if live.delete_dir(dir.as_str()).await.is_err() {
                return;
            }
        }
    }
}

/// Deletes the current file `handle` (held for DELETE) so that its name is
/// free at once: renamed to `aside` (a name in the gateway's temp folder)
/// first, then deleted there. A GET still streaming the file keeps it open,
/// and a delete in place would leave the key's name delete pending until
/// that GET ends, and the next newest version could not be made current
/// under it. A rename that fails leaves the delete in place; a file left
/// aside by a gateway that dies is the sweep's.
///
/// Errors: the delete's.
async fn delete_out_of_the_way<S: ShareOps>(s: &S, handle: S::Handle, aside: &str) -> Result<(), ShareError> {
    if let Err(e) = s.rename(&handle, aside, false).await {
        tracing::debug!(error = %e, "deleting a current version in place");
    }
    s.close_and_delete(handle).await
}

#[cfg(test)]
#[path = "removal_test.rs"]
mod tests;
