//! Buckets' CORS configurations, one small file each under
//! `.smbgate/cors/<bucket>` at the share root, so that every instance
//! serving the share applies the same rules. The store keeps the bytes;
//! what they say is `crate::cors`'s.

use smb_proto::NtStatus;

use super::error::is_not_found;
use super::{share, Store, StoreError, StoreResult};

/// Largest configuration kept, in bytes (AWS allows 64 KB of XML; the JSON
/// form is smaller).
const MAX_CONFIG: u32 = 64 << 10;

impl Store {
    fn cors_path(&self, bucket: &str) -> super::path::SharePath {
        self.internal("cors").join(bucket)
    }

    /// The stored configuration of `bucket`, or `None` if it has none (or
    /// there is no such bucket).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn bucket_cors(&self, bucket: &str) -> StoreResult<Option<bytes::Bytes>> {
        let tree = self.tree().await?;
        match tree.read_small(&self.cors_path(bucket), MAX_CONFIG).await {
            Ok((_, data)) => Ok(Some(data)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Stores `config` as `bucket`'s, replacing any: written to a temp
    /// file, then renamed over the old one, so readers see the old or the
    /// new configuration whole.
    ///
    /// Errors: NoSuchBucket; InvalidArgument for more than 64 KiB; SMB
    /// failures (the temp file is then removed).
    pub async fn put_bucket_cors(&self, bucket: &str, config: &[u8]) -> StoreResult<()> {
        if config.len() > MAX_CONFIG as usize {
            return Err(StoreError::InvalidArgument("the CORS configuration is larger than 64 KiB".into()));
        }
        let tree = self.tree().await?;
        self.check_bucket(&tree, bucket).await?;
        let dir = self.internal("cors");
        match tree.mkdir(&dir).await {
            Ok(()) => {}
            Err(e) if e.status() == Some(NtStatus::STATUS_OBJECT_NAME_COLLISION) => {}
            Err(e) => return Err(e.into()),
        }
        let temp = self.temp_path();
        share::create_once(&tree, &temp, config).await?;
        if let Err(e) = share::rename_through_new_handle(&tree, &temp, &self.cors_path(bucket), true).await {
            let _ = tree.delete(&temp, false).await;
            return Err(e.into());
        }
        Ok(())
    }

    /// Removes `bucket`'s configuration; none is not an error.
    ///
    /// Errors: NoSuchBucket; SMB failures other than not-found.
    pub async fn delete_bucket_cors(&self, bucket: &str) -> StoreResult<()> {
        let tree = self.tree().await?;
        self.check_bucket(&tree, bucket).await?;
        match tree.delete(&self.cors_path(bucket), false).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
