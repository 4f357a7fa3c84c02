//! Writes on a versioned bucket: the new version's ID is stamped into its
//! record before it is written, and the publish moves the current file
//! into the key's versions folder by rename, in the same compound that
//! renames the new one in (the If-Match swap, with the old version kept),
//! so readers see the old version or the new one, never neither.

use crate::store::meta::ObjectMeta;
use crate::store::reads::open_checked::check_record_key;
use crate::store::share::{self, Handle, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::types::{ObjectInfo, Target};
use crate::store::writes::swap::{swap_if_match, Aside, SwapPaths, Swapped};
use crate::store::{conditions::Conditions, keys::MappedKey};
use crate::store::{Root, StoreError, StoreResult, Writes};

use super::{filetime_now, new_version_id, version_of, StoredName, Versioning, NULL_VERSION};

/// How often a versioned publish tries while the key comes and goes
/// between its swap and its create (another writer made or removed it).
const PUBLISH_TRIES: usize = 4;

/// Refuses Object Lock settings on a folder marker (a key ending in `/`),
/// which keeps one version.
///
/// Errors: InvalidRequest.
pub(crate) fn refuse_marker_lock(meta: &ObjectMeta) -> StoreResult<()> {
    match meta.retention.is_some() || meta.legal_hold {
        true => Err(StoreError::InvalidRequest("Object Lock cannot be set on a key ending in /".into())),
        false => Ok(()),
    }
}

impl Root {
    /// Stamps the record `meta` of a new object of `target` with the
    /// version it is written as: a new ID where versioning is enabled,
    /// none (`null`) otherwise; and with its Object Lock settings (see
    /// [`Root::apply_lock`]). Returns the version ID the answer names
    /// (`None` on a bucket that was never versioned).
    ///
    /// Errors: InvalidRequest for lock settings on a bucket without
    /// Object Lock; SMB failures reading the bucket's state.
    pub(crate) async fn stamp_version(
        &self,
        tree: &Tree,
        target: &Target,
        meta: &mut ObjectMeta,
    ) -> StoreResult<Option<String>> {
        let Target::Object { bucket, key } = target else { return Ok(None) };
        // A copy's record starts as its source's: its version is not the
        // copy's.
        meta.version_id = None;
        if key.dir_marker {
            // Markers keep one version (see docs/objects-on-the-share.md),
            // so nothing could keep a lock on one.
            refuse_marker_lock(meta)?;
            return Ok(None);
        }
        self.apply_lock(tree, target, meta).await?;
        Ok(match self.versioning(tree, bucket).await? {
            Versioning::Off => None,
            Versioning::Enabled => {
                let id = new_version_id();
                meta.version_id = Some(id.clone());
                Some(id)
            }
            Versioning::Suspended => Some(NULL_VERSION.to_string()),
        })
    }
}

impl Writes {
    /// Publishes `file` (at `source`) as the current version of `mapped`
    /// in `bucket`, whose versioning is `state`: the version it replaces
    /// moves to the key's versions folder (or, on a suspended bucket, goes
    /// if it is the `null` version), and on a suspended bucket a stored
    /// `null` version goes too. If-Match is decided on the file replaced.
    /// `publishing` is called just before the renames.
    ///
    /// Errors: NoSuchKey / PreconditionFailed (If-Match), Busy, and what
    /// [`Writes::publish_with`] answers.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn publish_versioned(
        &self,
        file: &Handle,
        publishing: impl Fn(),
        source: &str,
        target: &Target,
        bucket: &str,
        mapped: &MappedKey,
        conditions: &Conditions,
        state: Versioning,
    ) -> StoreResult<()> {
        let tree = &share::connection_of(file);
        let key = mapped.original();
        self.root.check_case(tree, bucket, mapped).await?;
        self.root.forget_listing(bucket, mapped);
        let plain = self.root.object_path(bucket, mapped);
        let path = self.root.write_path(bucket, mapped);
        let (beside, backup, lock) = (plain.beside(false), self.root.temp_path(), self.root.lock_name(&plain));
        let paths = SwapPaths {
            path: path.as_str(),
            beside: Some(beside.as_str()),
            plain: plain.as_str(),
            backup: backup.as_str(),
            lock: lock.as_str(),
        };
        let live = self.root.live(tree);
        let started = filetime_now();
        let mut done = false;
        for _ in 0..PUBLISH_TRIES {
            let accept = async |lock: &Handle, meta, at: &str| {
                let current = ObjectInfo::new(lock.info(), check_record_key(meta, &key)?, at);
                if conditions.if_match.as_ref().is_some_and(|c| !c.matches(&current.etag)) {
                    return Err(StoreError::PreconditionFailed);
                }
                let version_id = version_of(&current);
                if state == Versioning::Suspended && version_id == NULL_VERSION {
                    return Ok(Aside::Discard);
                }
                // Looked up only now: a new key keeps nothing, and a
                // version goes into the folder known while its file is held.
                let folder = self.root.next_version_folder(tree, bucket, mapped).await;
                let name = StoredName { stored_at: filetime_now(), version_id, marker: false };
                Ok(Aside::Keep(folder.join(&name.name()).to_string()))
            };
            match swap_if_match(&live, file, &publishing, &paths, accept).await? {
                Swapped::Done => done = true,
                Swapped::NoObject if conditions.if_match.is_some() => {
                    self.root.check_bucket(tree, bucket).await?;
                    return Err(StoreError::NoSuchKey);
                }
                Swapped::NoObject => {
                    publishing();
                    // Nothing to keep: created if still absent; a writer
                    // that made the key meanwhile is swapped with again.
                    match self.publish_if(file, source, target, false).await {
                        Ok(()) => done = true,
                        Err(StoreError::PreconditionFailed) => continue,
                        Err(e) => return Err(e),
                    }
                }
            }
            break;
        }
        if !done {
            return Err(StoreError::Busy("the key kept changing while it was written; retry the request".into()));
        }
        if state == Versioning::Suspended {
            // Only the `null` versions stored before this write: a DELETE
            // that came after it (its lock released) made a newer one.
            let older = |n: &StoredName| n.version_id == NULL_VERSION && n.stored_at < started;
            self.root.drop_stored_versions(tree, bucket, mapped, older).await;
        }
        Ok(())
    }
}

impl Root {
    /// Removes the stored versions of `mapped` whose names `which` picks
    /// (best effort: one that stays is logged).
    pub(crate) async fn drop_stored_versions(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        which: impl Fn(&StoredName) -> bool,
    ) {
        let mut emptied = Vec::new();
        let Ok(stored) = self.stored_versions_noting_empty(tree, bucket, mapped, &mut emptied).await else { return };
        for (path, _) in stored.iter().filter(|(_, n)| which(n)) {
            match self.live(tree).delete_file(path.as_str()).await {
                Ok(()) => emptied.extend(path.split_leaf().map(|(folder, _)| folder)),
                Err(err) => tracing::warn!(bucket, error = %err, "a stored version that should go stayed"),
            }
        }
        self.prune_shards(tree, bucket, mapped, &emptied).await;
    }
}
