//! Publishing a verified temporary file: the rename over the object's path
//! that makes a PUT, copy or CompleteMultipartUpload visible at once.
//!
//! Samba refuses (STATUS_ACCESS_DENIED) to rename over a file that a handle
//! in the *same* smbd process holds open, and it runs one process per
//! connection; handles on other connections do not block the rename (the
//! holder keeps reading the old version). A gateway's own GETs hold handles
//! on its pooled connections, so a refused rename is tried again from each
//! of the other pooled connections, then from the pool's spare connection,
//! on which the store keeps nothing open, before it backs off (failure
//! class 13).

use crate::store::share::{Handle, Tree};
use crate::store::share_lookups::ShareLookups;

use super::parents::{key_folders, make_parents_on};
use super::place::{place_on, Place, RenameStep};
use super::swap::{swap_if_match, Aside, SwapPaths, Swapped};
use crate::store::conditions::{Conditions, EtagCondition};
use crate::store::keys::MappedKey;
use crate::store::path::SharePath;
use crate::store::reads::open_checked::check_record_key;
use crate::store::records::FileKey;
use crate::store::share::is_busy;
use crate::store::share::is_not_found;
use crate::store::share::{self, TempFile};
use crate::store::share::{Failure, ShareError};
use crate::store::share_ops::ShareOps;
use crate::store::types::ObjectInfo;
use crate::store::types::Target;
use crate::store::{retry_busy, StoreError, StoreResult, Writes};

/// How often a replacing rename warns the object cache's holders while
/// the key comes and goes between the warning and the rename (then it
/// replaces unwarned).
const WARN_TRIES: usize = 4;

/// The live rename into place: holders of a replaced file warned, other
/// connections tried while the target is open, a replaced sidecar
/// forgotten ([`Writes::rename_over`]).
struct RenameOver<'a> {
    writes: &'a Writes,
    tree: &'a Tree,
    file: &'a Handle,
    source: &'a str,
}

impl RenameStep for RenameOver<'_> {
    async fn rename_to(&self, target: &str, replace: bool) -> Result<(), ShareError> {
        let old = match replace {
            true => self.writes.key_before_replace(self.tree, target).await,
            false => None,
        };
        self.writes.rename_over(self.file, self.source, target, replace).await?;
        self.writes.forget_replaced(self.tree, old, self.file.info().on_disk_id());
        Ok(())
    }
}

impl Writes {
    /// Publishes a verified temp file at `target` (see [`Writes::publish_if`]),
    /// marked as being published first, so that a request dropped
    /// mid-rename never deletes the object it just published. Without
    /// `replace` an existing object is
    /// never replaced: the server's rename fails and the answer is 412
    /// PreconditionFailed (`If-None-Match: *`, decided atomically on the
    /// share, failure class 25).
    #[tracing::instrument(level = "debug", name = "store.publish", skip_all)]
    pub(crate) async fn publish_temp_if(&self, temp: &TempFile, target: &Target, replace: bool) -> StoreResult<()> {
        temp.publishing();
        self.publish_if(temp.handle(), temp.path(), target, replace).await
    }

    /// Publishes `file` at `bucket`/`mapped` only if the object there now
    /// has an ETag `cond` accepts (If-Match), as one compare-and-swap on the
    /// share itself (failure class 25): the current file is opened sharing
    /// only READ, which keeps every other writer (this instance, another
    /// one, a plain SMB user) from replacing, renaming or deleting it; its
    /// record is read through that handle; then one compound renames it
    /// aside and `file` into its name (`publishing` is called just before).
    /// If another writer created the key between the two renames, this
    /// write came first and was replaced at once: `file` is marked for
    /// deletion and the answer is still success.
    ///
    /// Errors: NoSuchKey (no object, or only a case-variant), NoSuchBucket,
    /// PreconditionFailed (another ETag), Busy (another write holds the
    /// object, or it could not be moved aside).
    pub(crate) async fn publish_if_match(
        &self,
        file: &Handle,
        publishing: impl FnOnce(),
        bucket: &str,
        mapped: &MappedKey,
        key: &str,
        cond: &EtagCondition,
    ) -> StoreResult<()> {
        let tree = &share::connection_of(file);
        let plain = self.root.object_path(bucket, mapped);
        let path = self.root.write_path(bucket, mapped);
        self.root.forget_listing(bucket, mapped);
        let (beside, backup, lock) = (plain.beside(false), self.root.temp_path(), self.root.lock_name(&plain));
        let paths = SwapPaths {
            path: path.as_str(),
            beside: (!mapped.dir_marker).then_some(beside.as_str()),
            plain: plain.as_str(),
            backup: backup.as_str(),
            lock: lock.as_str(),
        };
        let accept = async |lock: &Handle, meta, at: &str| {
            let current = ObjectInfo::new(lock.info(), check_record_key(meta, key)?, at);
            match cond.matches(&current.etag) {
                true => Ok(Aside::Discard),
                false => Err(StoreError::PreconditionFailed),
            }
        };
        let live = self.root.live(tree);
        match swap_if_match(&live, file, publishing, &paths, accept).await? {
            Swapped::Done => Ok(()),
            Swapped::NoObject => {
                self.root.check_bucket(tree, bucket).await?;
                Err(StoreError::NoSuchKey)
            }
        }
    }

    /// Publishes `file` (at `source`) at `target` under the write
    /// conditions: If-Match as a compare-and-swap
    /// ([`Writes::publish_if_match`]), `If-None-Match: *` by a rename that
    /// may not replace, else a replacing rename. `publishing` is called just
    /// before the rename. A marker (`a/b/`) published with a body then
    /// drops the record that made its directory an empty marker, which
    /// reads would otherwise still find first.
    ///
    /// Errors: as [`Writes::publish_if`] and [`Writes::publish_if_match`].
    #[tracing::instrument(level = "debug", name = "store.publish", skip_all)]
    pub(crate) async fn publish_with(
        &self,
        file: &Handle,
        publishing: impl Fn(),
        source: &str,
        target: &Target,
        conditions: &Conditions,
    ) -> StoreResult<()> {
        if let Target::Object { bucket, key } = target {
            // A create-if-absent replaces nothing, and a marker keeps one
            // version: both publish as on any bucket.
            if !key.dir_marker && !conditions.forbids_existing() {
                let state = self.root.versioning(&share::connection_of(file), bucket).await?;
                if state.versioned() {
                    return self
                        .publish_versioned(file, publishing, source, target, bucket, key, conditions, state)
                        .await;
                }
            }
        }
        match (target, &conditions.if_match) {
            (Target::Object { bucket, key }, Some(cond)) => {
                let original = target.key().unwrap_or_default();
                self.publish_if_match(file, publishing, bucket, key, &original, cond).await?;
                if key.dir_marker {
                    self.root
                        .body_replaces_empty_marker(&share::connection_of(file), &self.root.object_path(bucket, key))
                        .await;
                }
                Ok(())
            }
            _ => {
                publishing();
                self.publish_if(file, source, target, !conditions.forbids_existing()).await
            }
        }
    }

    /// Renames the open file `file` (at share-relative `source`, opened
    /// with share-delete) to `target`, over an existing object only if
    /// `replace` (else the server's collision is 412), creating parent
    /// directories as needed.
    ///
    /// Errors: NoSuchBucket; Conflict (the key is a directory, or a folder
    /// of it refuses the name: a link the server hides); NameTooLong /
    /// InvalidArgument (names the server cannot hold); NoSuchUpload (a
    /// part's upload is gone); Busy (503 SlowDown: the target stays open on
    /// every connection, another upload of the part holds its record, or
    /// the key's folders were pruned by deletes every time they were made);
    /// PreconditionFailed; SMB errors otherwise.
    pub(in crate::store) async fn publish_if(
        &self,
        file: &Handle,
        source: &str,
        target: &Target,
        replace: bool,
    ) -> StoreResult<()> {
        let tree = &share::connection_of(file);
        let (bucket, mapped) = match target {
            Target::Object { bucket, key } => (bucket, key),
            Target::Part(path) => {
                // Not retried elsewhere: a part record is held open only by
                // another upload of that part, which must win or lose whole.
                let live = self.root.live(tree);
                return match retry_busy(|| live.rename(file, path, true)).await {
                    Ok(()) => Ok(()),
                    Err(e) if is_not_found(&e) => Err(StoreError::NoSuchUpload),
                    Err(e) if e.failure() == Failure::AccessDenied => {
                        Err(StoreError::Busy("another upload of this part is in progress; retry the request".into()))
                    }
                    Err(e) => Err(e.into()),
                };
            }
        };
        self.root.check_case(tree, bucket, mapped).await?;
        self.root.forget_listing(bucket, mapped);
        let target = self.root.write_path(bucket, mapped);
        if replace && !mapped.dir_marker {
            return self.rename_into_place(tree, file, source, bucket, mapped, &target, true, false).await;
        }
        // Under the key's creation lock: a create-if-absent (the server's
        // rename checks, then renames over whatever is there by then; the
        // lock makes it one step), and a marker's body, which replaces the
        // directory's empty-marker record (both forms change under the lock).
        let plain = self.root.object_path(bucket, mapped);
        let creating = self.root.create_lock(tree, &plain).await?;
        let published = self.rename_into_place(tree, file, source, bucket, mapped, &target, replace, true).await;
        if published.is_ok() && mapped.dir_marker {
            self.root.body_replaces_empty_marker(tree, &plain).await;
        }
        creating.release().await;
        published
    }

    /// On a share without EAs, the sidecar key of the file at `path` that a
    /// replacing publish is about to replace (`None` with EAs, which go
    /// with their file, or if nothing is there).
    pub(crate) async fn key_before_replace(&self, tree: &Tree, path: &str) -> Option<FileKey> {
        if !self.root.records().kept_by_file_id() {
            return None;
        }
        self.root.live(tree).stat_created(path).await.ok().and_then(|c| FileKey::of(&c))
    }

    /// After a replacing publish of the file with on-disk id `new_id`: the
    /// replaced file's sidecar goes (unless the stat met the new file
    /// itself, which wins a race with the rename).
    pub(crate) fn forget_replaced(&self, tree: &Tree, old: Option<FileKey>, new_id: Option<u64>) {
        if let Some(old) = old.filter(|o| Some(o.id) != new_id) {
            self.root.records().forget(tree, Some(old));
        }
    }

    /// The rename of `file` (at `source`) to `target`, the write path of
    /// `bucket`/`mapped`, over an existing file only if `replace`, by the
    /// rule of [`place_on`] (folders made, or the file beside a directory
    /// of its name, under the key's creation lock unless the caller holds
    /// it: `locked`). A replaced file's sidecar record goes.
    /// Errors mapped as [`Writes::publish_if`] says.
    #[allow(clippy::too_many_arguments)]
    async fn rename_into_place(
        &self,
        tree: &Tree,
        file: &Handle,
        source: &str,
        bucket: &str,
        mapped: &MappedKey,
        target: &SharePath,
        replace: bool,
        locked: bool,
    ) -> StoreResult<()> {
        let bucket = self.root.bucket_path(bucket);
        let place = Place { target, bucket: &bucket, mapped, replace, locked };
        let rename = RenameOver { writes: self, tree, file, source };
        place_on(&self.root.live(tree), &place, |d| self.root.lock_name(d), &rename).await
    }

    /// The rename itself, with bounded backoff while it is refused: first
    /// through `fid` on its own connection, then, if that connection holds
    /// the target open, through a new handle on `source` from each other
    /// pooled connection.
    async fn rename_over(&self, file: &Handle, source: &str, target: &str, replace: bool) -> Result<(), ShareError> {
        let tree = &share::connection_of(file);
        if !replace {
            return self.rename_over_warned(file, source, target, false).await;
        }
        // Holders of the file being replaced (object cache, any instance)
        // give it up before the rename, and none comes back until it is
        // done. Where nothing was there to warn about, the rename may not
        // replace; if a file came meanwhile, it is warned about in turn.
        for _ in 0..WARN_TRIES {
            let warning = self.root.warn_holders(tree, target).await;
            let absent = !warning.may_replace(true);
            let renamed = self.rename_over_warned(file, source, target, !absent).await;
            self.root.warned(warning).await;
            match renamed {
                Err(e) if absent && e.failure() == Failure::Collision => continue,
                r => return r,
            }
        }
        self.rename_over_warned(file, source, target, true).await
    }

    /// [`Writes::rename_over`] once holders are warned.
    async fn rename_over_warned(
        &self,
        file: &Handle,
        source: &str,
        target: &str,
        replace: bool,
    ) -> Result<(), ShareError> {
        let tree = &share::connection_of(file);
        retry_busy(|| async {
            let refused = match self.root.live(tree).rename(file, target, replace).await {
                Err(e) if e.failure() == Failure::AccessDenied => e,
                r => return r,
            };
            tracing::debug!(target, "rename refused on its own connection; trying the other pooled connections");
            let others = share::other_connections(self.root.pool(), usize::MAX, &[tree]);
            for other in others {
                if self.rename_through(&other, tree, source, target, replace).await {
                    return Ok(());
                }
            }
            // Readers may hold the object on every pooled connection (more
            // GETs than connections): the spare holds nothing open.
            tracing::debug!(target, "rename refused on every pooled connection; trying the spare");
            match share::spare_connection(self.root.pool()).await {
                Ok(spare) if self.rename_through(&spare, tree, source, target, replace).await => Ok(()),
                Ok(_) => Err(refused),
                Err(e) => {
                    tracing::debug!(error = %e, "no spare connection");
                    Err(refused)
                }
            }
        })
        .await
    }

    /// One try of the rename of `source` over `target` through a new handle
    /// on `other`. Returns true once it is done, false if `other` was
    /// refused too (busy, or failed another way that left the temp file at
    /// `source`, which is looked at through `tree`).
    async fn rename_through(&self, other: &Tree, tree: &Tree, source: &str, target: &str, replace: bool) -> bool {
        match self.root.live(other).rename_path(source, target, replace).await {
            Ok(()) => true,
            Err(e) if is_busy(&e) => false,
            Err(e) => {
                // A lost reply may hide a rename that happened: the temp
                // name is ours alone, so if it is gone, it moved.
                if matches!(self.root.live(tree).times(source).await, Err(ref s) if is_not_found(s)) {
                    return true;
                }
                tracing::debug!(error = %e, "rename through another connection failed");
                false
            }
        }
    }

    /// mkdir -p for the directories of `mapped`: all components but the
    /// last, and the last too if `own` (an empty marker is its own
    /// directory; a file, a marker's body included, needs only its
    /// parents); see [`make_parents_on`].
    ///
    /// Errors: as [`make_parents_on`].
    pub(crate) async fn make_parents(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        own: bool,
    ) -> StoreResult<()> {
        let dirs = key_folders(&self.root.bucket_path(bucket), mapped, own);
        make_parents_on(&self.root.live(tree), &dirs, |d| self.root.lock_name(d)).await
    }
}
