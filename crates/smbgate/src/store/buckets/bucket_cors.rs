//! Buckets' CORS configurations, one small file each under
//! `.smbgate/cors/<bucket>` at the share root (see `state_files`), so that
//! every instance serving the share applies the same rules. The store
//! keeps the bytes; what they say is `crate::cors_rules`'s.

use crate::store::{Buckets, StoreError, StoreResult};

/// Largest configuration kept, in bytes (AWS allows 64 KB of XML; the JSON
/// form is smaller).
const MAX_CONFIG: u32 = 64 << 10;

impl Buckets {
    pub(in crate::store) fn cors_path(&self, bucket: &str) -> crate::store::path::SharePath {
        self.state_file("cors", bucket)
    }
}

impl Buckets {
    /// The stored configuration of `bucket`, or `None` if it has none (or
    /// there is no such bucket).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn bucket_cors(&self, bucket: &str) -> StoreResult<Option<bytes::Bytes>> {
        let tree = self.root.tree().await?;
        self.read_state_file(&tree, &self.cors_path(bucket), MAX_CONFIG).await
    }

    /// Stores `config` as `bucket`'s, replacing any, whole.
    ///
    /// Errors: NoSuchBucket; InvalidArgument for more than 64 KiB; SMB
    /// failures (the temp file is then removed).
    pub async fn put_bucket_cors(&self, bucket: &str, config: &[u8]) -> StoreResult<()> {
        if config.len() > MAX_CONFIG as usize {
            return Err(StoreError::InvalidArgument("the CORS configuration is larger than 64 KiB".into()));
        }
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        self.replace_state_file(&tree, &self.cors_path(bucket), config).await
    }

    /// Removes `bucket`'s configuration; none is not an error.
    ///
    /// Errors: NoSuchBucket; SMB failures other than not-found.
    pub async fn delete_bucket_cors(&self, bucket: &str) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        self.remove_state_file(&tree, &self.cors_path(bucket)).await
    }
}
