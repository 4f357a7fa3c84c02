//! Object tags (GetObjectTagging, PutObjectTagging, DeleteObjectTagging).
//! An object's tags live in its record (EA, stream or sidecar), so they
//! move, copy and vanish with the object, and an overwrite without tags
//! clears them; changing them rewrites the record through a handle that
//! keeps the name on this file, and leaves the ETag and Last-Modified as
//! they were.

use crate::store::meta::ObjectMeta;
use crate::store::tags::TagSet;
use crate::store::versions::lock::rewrite_sealed;
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
        let (handle, meta, info, path) = match version {
            Some(v) => self.reads.open_version_to_update_record(bucket, key, v).await?,
            None => self.reads.open_to_update_record(bucket, key).await?,
        };
        let mut record = meta.unwrap_or_else(|| ObjectMeta {
            size: info.size,
            disk_id: info.disk_id,
            key: Some(key.to_string()),
            ..Default::default()
        });
        if record.tags == tags {
            return Ok(());
        }
        record.tags = tags;
        let written = rewrite_sealed(&handle, self.root.records(), path.as_str(), &record).await;
        let tree = share::connection_of(&handle);
        let _ = handle.close().await;
        self.root.warn_holders_after(&tree, path.as_str()).await;
        written
    }
}
