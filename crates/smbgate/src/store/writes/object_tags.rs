//! Object tags (GetObjectTagging, PutObjectTagging, DeleteObjectTagging).
//! An object's tags live in its record (EA, stream or sidecar), so they
//! move, copy and vanish with the object, and an overwrite without tags
//! clears them; changing them rewrites the record through a handle that
//! keeps the name on this file, and leaves the ETag and Last-Modified as
//! they were.

use crate::store::meta::{record_write_error, ObjectMeta};
use crate::store::tags::TagSet;
use crate::store::{share, StoreResult, Writes};

impl Writes {
    /// The tags of `key`.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, InvalidKey.
    pub async fn object_tags(&self, bucket: &str, key: &str) -> StoreResult<TagSet> {
        Ok(self.reads.head_object(bucket, key).await?.meta.tags)
    }

    /// Replaces the tags of `key` with `tags` (already checked, see
    /// `store::tags`; empty removes them). A file someone else put on the
    /// share gets a record that holds only its tags, so its ETag stays the
    /// derived one.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, InvalidKey; Busy while another
    /// client holds the file for a rename or delete.
    pub async fn put_object_tags(&self, bucket: &str, key: &str, tags: TagSet) -> StoreResult<()> {
        let (handle, meta, info, path) = self.reads.open_to_update_record(bucket, key).await?;
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
        let written = share::rewrite_records(&handle, self.root.records(), path.as_str(), &[record.to_ea()]).await;
        let tree = share::connection_of(&handle);
        let _ = handle.close().await;
        self.root.warn_holders_after(&tree, path.as_str()).await;
        written.map_err(|e| record_write_error(e, record.record_len()))
    }
}
