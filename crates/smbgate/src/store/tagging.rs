//! Object and bucket tags. An object's tags live in its record (EA, stream
//! or sidecar), so they move, copy and vanish with the object, and an
//! overwrite without tags clears them; changing them rewrites the record
//! through a handle that keeps the name on this file, and leaves the
//! ETag and Last-Modified as they were. A bucket's tags are one small
//! file under `.smbgate/tags/<bucket>` (see `state_files`).

use super::meta::{record_write_error, ObjectMeta};
use super::tags::TagSet;
use super::{share, Buckets, StoreError, StoreResult, Writes};

/// Largest bucket tag file, in bytes (50 tags of 128 + 256 UTF-16 units).
const MAX_BUCKET_TAGS_FILE: u32 = 64 << 10;

impl Buckets {
    pub(super) fn bucket_tags_path(&self, bucket: &str) -> super::path::SharePath {
        self.state_file("tags", bucket)
    }
}

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
        let tree = share::connection_of(&handle).clone();
        let _ = handle.close().await;
        self.root.warn_holders_after(&tree, path.as_str()).await;
        written.map_err(|e| record_write_error(e, record.record_len()))
    }
}

impl Buckets {
    /// The tags of `bucket`; `None` if it has none.
    ///
    /// Errors: NoSuchBucket; SMB failures other than not-found; a tag file
    /// that does not parse.
    pub async fn bucket_tags(&self, bucket: &str) -> StoreResult<Option<TagSet>> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let Some(data) = self.read_state_file(&tree, &self.bucket_tags_path(bucket), MAX_BUCKET_TAGS_FILE).await?
        else {
            return Ok(None);
        };
        let tags = serde_json::from_slice(&data)
            .map_err(|e| StoreError::Smb(format!("the tag file of bucket {bucket} does not parse: {e}")))?;
        Ok(Some(tags))
    }

    /// Replaces the tags of `bucket` (already checked), whole.
    ///
    /// Errors: NoSuchBucket; SMB failures (the temp file is then removed).
    pub async fn put_bucket_tags(&self, bucket: &str, tags: &TagSet) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let body = serde_json::to_vec(tags).expect("serialisable");
        self.replace_state_file(&tree, &self.bucket_tags_path(bucket), &body).await
    }

    /// Removes the tags of `bucket`; none is not an error.
    ///
    /// Errors: NoSuchBucket; SMB failures other than not-found.
    pub async fn delete_bucket_tags(&self, bucket: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        self.remove_state_file(&tree, &self.bucket_tags_path(bucket)).await
    }
}
