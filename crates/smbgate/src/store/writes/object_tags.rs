//! Object tags (GetObjectTagging, PutObjectTagging, DeleteObjectTagging).
//! An object's tags live in its record (EA, stream or sidecar), so they
//! move, copy and vanish with the object, and an overwrite without tags
//! clears them; changing them rewrites the record through a handle that
//! keeps the name on this file, and leaves the ETag and Last-Modified as
//! they were. Object Lock's retention and legal hold change a record the
//! same way (`Writes::change_record`).

use crate::store::error::record_write_error;
use crate::store::meta::ObjectMeta;
use crate::store::share_ops::ShareOps;
use crate::store::tags::TagSet;
use crate::store::versions::lock::protected;
use crate::store::versions::lock_config::now_ms;
use crate::store::versions::version_of;
use crate::store::{share, StoreResult, Writes};

impl Writes {
    /// The tags of `key`, or of its version `version`.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, InvalidKey; as
    /// [`crate::store::Reads::version_info`] for a version.
    pub async fn object_tags(&self, bucket: &str, key: &str, version: Option<&str>) -> StoreResult<TagSet> {
        let info = match version {
            Some(v) => self.reads.version_info(bucket, key, v).await?,
            None => self.reads.head_object(bucket, key).await?,
        };
        Ok(info.meta.tags)
    }

    /// Replaces the tags of `key` (or of its version `version`) with
    /// `tags` (already checked, see
    /// `store::tags`; empty removes them). A file someone else put on the
    /// share gets a record that holds only its tags, so its ETag stays the
    /// derived one.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, InvalidKey; Busy while another
    /// client holds the file for a rename or delete.
    pub async fn put_object_tags(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        tags: TagSet,
    ) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        // On a bucket with Object Lock, under the key's creation lock, as
        // a change of a version's retention or legal hold: the two rewrite
        // one record, and neither may lose the other's change.
        if self.root.bucket_lock(&tree, bucket).await?.enabled {
            let changing = self.put_tags_now(bucket, key, version, tags);
            return self.root.under_key_lock(&tree, bucket, key, changing).await;
        }
        self.put_tags_now(bucket, key, version, tags).await
    }

    /// [`Writes::put_object_tags`] itself.
    async fn put_tags_now(&self, bucket: &str, key: &str, version: Option<&str>, tags: TagSet) -> StoreResult<()> {
        let change = |record: &mut ObjectMeta| {
            let changed = record.tags != tags;
            record.tags = tags;
            Ok(changed)
        };
        self.change_record(bucket, key, version, change, false).await.map(|_| ())
    }

    /// Changes the record of `key` (or of its version `version`) in place
    /// with `change` (which answers whether there is anything to write): a
    /// file someone else put on the share gets a record of its own. The
    /// file's read-only mark is lifted for the write (a record kept in a
    /// named stream is a write to the file), then put back as it was, or,
    /// with `follow_lock`, as the record's Object Lock now says. Returns
    /// the version's ID.
    ///
    /// Errors: `change`'s; as [`Writes::put_object_tags`]; the share's.
    pub(crate) async fn change_record(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        change: impl FnOnce(&mut ObjectMeta) -> StoreResult<bool>,
        follow_lock: bool,
    ) -> StoreResult<String> {
        let (handle, meta, info, path) = match version {
            Some(v) => self.reads.open_version_to_update_record(bucket, key, v).await?,
            None => self.reads.open_to_update_record(bucket, key).await?,
        };
        let version_id = version_of(&info);
        let mut record = meta.unwrap_or_else(|| ObjectMeta {
            size: info.size,
            disk_id: info.disk_id,
            key: Some(key.to_string()),
            ..Default::default()
        });
        if !change(&mut record)? {
            return Ok(version_id);
        }
        let sealed = handle.info().times.is_read_only();
        let seal = match follow_lock {
            true => protected(&record, now_ms()),
            false => sealed,
        };
        let tree = share::connection_of(&handle);
        let written = rewrite_record_on(&self.root.live(&tree), &handle, path.as_str(), &record, sealed, seal).await;
        let _ = handle.close().await;
        if follow_lock && written.is_ok() {
            self.deny_changes(&tree, path.as_str(), seal).await;
        }
        self.root.warn_holders_after(&tree, path.as_str()).await;
        written.map(|()| version_id)
    }
}

/// Writes `record` through `file` (open at `path`) on `s`, the file
/// read-only now if `sealed` and to be after if `seal`: the mark is taken
/// off for the write, and put back as the record then says, or as it was
/// if the write failed (the record, so the lock, is then as it was).
///
/// Errors: the share's; MetadataTooLarge for a record the share has no
/// room for.
pub(crate) async fn rewrite_record_on<S: ShareOps>(
    s: &S,
    file: &S::Handle,
    path: &str,
    record: &ObjectMeta,
    sealed: bool,
    seal: bool,
) -> StoreResult<()> {
    if sealed {
        s.set_read_only(file, false).await?;
    }
    let written = s.rewrite_record(file, path, record).await;
    let mark = if written.is_ok() { seal } else { sealed };
    if mark {
        if let Err(e) = s.set_read_only(file, true).await {
            tracing::warn!(error = %e, "a version's read-only mark on the share could not be put back");
        }
    }
    written.map_err(|e| record_write_error(e, record.record_len()))
}

#[cfg(test)]
#[path = "object_tags_test.rs"]
mod tests;
