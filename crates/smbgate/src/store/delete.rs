//! DeleteObject: remove the file (or a marker's record), then prune the
//! directories it leaves empty. A conditional delete (If-Match) is checked
//! on the very handle that deletes, so no other version can be deleted in
//! between.

use smb_client::Tree;
use smb_proto::NtStatus;

use super::conditions::Conditions;
use super::error::is_not_found;
use super::keys::{map_key, MappedKey};
use super::meta::META_EA;
use super::open::check_record_key;
use super::records::FileKey;
use super::types::ObjectInfo;
use super::{retry_sharing, share, Store, StoreError, StoreResult};

impl Store {
    /// DELETE: removes the object (idempotent: a missing key is success, as
    /// in S3), then prunes directories it leaves empty. With `conditions`
    /// (If-Match), the object's ETag is read from the handle that deletes.
    ///
    /// Errors: NoSuchBucket, InvalidKey; NoSuchKey or PreconditionFailed
    /// for a failed If-Match; SMB failures.
    pub async fn delete_object(&self, bucket: &str, key: &str, conditions: &Conditions) -> StoreResult<()> {
        let mapped = map_key(key)?;
        let tree = self.tree().await?;
        let path = self.object_path(bucket, &mapped);
        self.forget_listing(bucket, &mapped);
        if mapped.dir_marker {
            if conditions.needs_current() {
                let current = self.head_object(bucket, key).await.map(Some).or_else(|e| match e {
                    StoreError::NoSuchKey => Ok(None),
                    e => Err(e),
                })?;
                conditions.check_write(current.as_ref().map(ObjectInfo::current))?;
            }
            // Drop the marker record; remove the directory if it is empty.
            // A sidecar goes first, since it is found by the directory's id.
            if self.records().in_sidecars() {
                let drop_record = smb_proto::info::FullEa { name: META_EA.into(), value: vec![] };
                match share::set_dir_ea(&tree, self.records(), &path, drop_record).await {
                    Err(e) if !is_not_found(&e) => return Err(e.into()),
                    _ => {}
                }
            }
            match tree.delete(&path, true).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(NtStatus::STATUS_DIRECTORY_NOT_EMPTY) => {
                    let drop_record = smb_proto::info::FullEa { name: META_EA.into(), value: vec![] };
                    share::set_dir_ea(&tree, self.records(), &path, drop_record).await?;
                    return Ok(());
                }
                Err(e) if is_not_found(&e) => {
                    self.check_bucket(&tree, bucket).await?;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            // Without EAs the record is a sidecar found by the file's id,
            // which only an open tells.
            let checked = !conditions.is_empty() || self.case_insensitive() || self.records().in_sidecars();
            let del = || async {
                if !checked {
                    return tree.delete(&path, false).await.map(|_| Ok(true));
                }
                // Open first to read the record: on a case-insensitive share
                // `mixed` would otherwise delete `Mixed`, and If-Match needs
                // the ETag of exactly the file being deleted.
                let (handle, meta, on_disk) = share::open_delete_with_meta(
                    &tree,
                    self.records(),
                    &path,
                    self.case_insensitive(),
                    !conditions.is_empty(),
                )
                .await?;
                let meta = match check_record_key(meta, key) {
                    Ok(m) => m,
                    Err(_) => return Ok(Ok(false)), // only a case-variant exists
                };
                // A file without a record naming its key (someone else's):
                // its on-disk name decides, never a case-insensitive match.
                match self.check_exact_name(&tree, bucket, &mapped, &meta, on_disk.as_deref()).await {
                    Ok(()) => {}
                    Err(StoreError::NoSuchKey) => return Ok(Ok(false)),
                    Err(e) => return Ok(Err(e)),
                }
                // Another conditional delete may have unlinked it between its
                // close and our open (Samba lets an open reach a file whose
                // last handle is closing): then it is gone, not ours to
                // delete again, whatever its ETag (a stream record of a
                // going file no longer opens).
                if !conditions.is_empty() && handle.tree().query_standard(handle.id()).await?.is_going() {
                    let _ = handle.close().await;
                    return Ok(Ok(false));
                }
                let info = ObjectInfo::new(handle.info(), meta, &path);
                if let Err(e) = conditions.check_write(Some(info.current())) {
                    return Ok(Err(e));
                }
                let r = share::delete_on_close(&handle).await;
                let key = FileKey::of(handle.info());
                let _ = handle.close().await;
                if r.is_ok() {
                    self.records().forget(&tree, key);
                }
                r.map(|_| Ok(true))
            };
            match retry_sharing(del).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return conditions.check_write(None),
                Ok(Err(e)) => return Err(e),
                Err(e) if is_not_found(&e) || e.status() == Some(NtStatus::STATUS_FILE_IS_A_DIRECTORY) => {
                    self.check_bucket(&tree, bucket).await?;
                    return conditions.check_write(None);
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.prune_parents(&tree, bucket, &mapped).await;
        Ok(())
    }

    /// Removes now-empty parent directories that are not markers, deepest
    /// first; stops at the first that is not empty (best effort).
    async fn prune_parents(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) {
        let mut dirs = self.bucket_path(bucket).ancestors_of(mapped);
        dirs.pop(); // the object itself
        for dir in dirs.iter().rev() {
            match share::stat_with_meta(tree, self.records(), dir).await {
                Ok((_, Some(m))) if m.marker => return,
                Ok(_) => {}
                Err(_) => return,
            }
            if tree.delete(dir, true).await.is_err() {
                return;
            }
        }
    }
}
