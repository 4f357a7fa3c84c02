//! Buckets' CORS configurations, one small file each under
//! `.smbgate/cors/<bucket>` at the share root, so that every instance
//! serving the share applies the same rules. The store keeps the bytes;
//! what they say is `crate::cors`'s.

use super::share::is_not_found;
use super::share::Failure;
use super::{share, Store, StoreError, StoreResult};

/// Largest configuration kept, in bytes (AWS allows 64 KB of XML; the JSON
/// form is smaller).
const MAX_CONFIG: u32 = 64 << 10;

impl Store {
    pub(super) fn cors_path(&self, bucket: &str) -> super::path::SharePath {
        self.internal("cors").join(bucket)
    }

    /// The stored configuration of `bucket`, or `None` if it has none (or
    /// there is no such bucket).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn bucket_cors(&self, bucket: &str) -> StoreResult<Option<bytes::Bytes>> {
        let tree = self.tree().await?;
        match share::read_small(&tree, &self.cors_path(bucket), MAX_CONFIG).await {
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
        match share::mkdir(&tree, &dir).await {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Collision => {}
            Err(e) => return Err(e.into()),
        }
        // Held open from creation to rename, so no sweep takes it for a dead
        // writer's; dropped unpublished, it deletes itself.
        let (temp, written) =
            share::create_temp_and_write(self.pool(), &tree, self.records(), &self.temp_path(), &[], config).await?;
        if written as usize != config.len() {
            temp.discard().await;
            return Err(StoreError::Busy(format!("short write: {written} of {} bytes", config.len())));
        }
        let target = self.cors_path(bucket);
        match share::publish_and_close(temp, &target, true).await {
            Ok(()) => Ok(()),
            Err((e, temp)) => {
                if let Some(t) = temp {
                    t.discard().await;
                }
                Err(e.into())
            }
        }
    }

    /// Removes `bucket`'s configuration; none is not an error.
    ///
    /// Errors: NoSuchBucket; SMB failures other than not-found.
    pub async fn delete_bucket_cors(&self, bucket: &str) -> StoreResult<()> {
        let tree = self.tree().await?;
        self.check_bucket(&tree, bucket).await?;
        match share::delete(&tree, &self.cors_path(bucket), false).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
