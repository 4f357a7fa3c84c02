//! Bucket tags: one small file under `.smbgate/tags/<bucket>` (see
//! `state_files`). An object's tags are its record's (`writes::object_tags`).

use crate::store::tags::TagSet;
use crate::store::{Buckets, StoreError, StoreResult};

/// Largest bucket tag file, in bytes (50 tags of 128 + 256 UTF-16 units).
const MAX_BUCKET_TAGS_FILE: u32 = 64 << 10;

impl Buckets {
    pub(in crate::store) fn bucket_tags_path(&self, bucket: &str) -> crate::store::path::SharePath {
        self.state_file("tags", bucket)
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
