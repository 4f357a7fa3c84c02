//! A bucket's capacity as the share reports it: the size of the volume
//! its directory is on, what the gateway's account may still write there,
//! and the difference as used.

use crate::store::share_data::ShareData;
use crate::store::{Buckets, StoreResult};

/// Bytes of a bucket's volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// The volume's size.
    pub total: u64,
    /// What the gateway's account may still write (quotas included).
    pub available: u64,
    /// The rest: `total - available`.
    pub used: u64,
}

impl Buckets {
    /// The capacity of `bucket`'s volume, asked of the server now.
    ///
    /// Errors: NoSuchBucket; SMB failures.
    pub async fn capacity(&self, bucket: &str) -> StoreResult<Capacity> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let (total, available) = self.root.live(&tree).space(&self.root.bucket_path(bucket)).await?;
        Ok(Capacity { total, available, used: total.saturating_sub(available) })
    }
}
