//! Buckets' notification configurations, one small file each under
//! `.smbgate/notifications/<bucket>` (see `state_files`), so that every
//! instance serving the share sends the same events. The store keeps the
//! bytes; what they say is `crate::events::rules`'s.

use crate::store::{Buckets, StoreError, StoreResult};

/// Largest configuration kept, in bytes.
const MAX_CONFIG: u32 = 256 << 10;

impl Buckets {
    pub(in crate::store) fn notifications_path(&self, bucket: &str) -> crate::store::path::SharePath {
        self.state_file("notifications", bucket)
    }

    /// The stored notification configuration of `bucket`, or `None` if it
    /// has none (or there is no such bucket).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn bucket_notifications(&self, bucket: &str) -> StoreResult<Option<bytes::Bytes>> {
        let tree = self.root.tree().await?;
        self.read_state_file(&tree, &self.notifications_path(bucket), MAX_CONFIG).await
    }

    /// Stores `config` as `bucket`'s, replacing any, whole; an empty
    /// `config` removes it.
    ///
    /// Errors: NoSuchBucket; InvalidArgument for more than 256 KiB; SMB
    /// failures (the temp file is then removed).
    pub async fn put_bucket_notifications(&self, bucket: &str, config: &[u8]) -> StoreResult<()> {
        if config.len() > MAX_CONFIG as usize {
            return Err(StoreError::InvalidArgument("the notification configuration is larger than 256 KiB".into()));
        }
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let path = self.notifications_path(bucket);
        match config.is_empty() {
            true => self.remove_state_file(&tree, &path).await,
            false => self.replace_state_file(&tree, &path, config).await,
        }
    }
}
