//! A bucket's Object Lock configuration, one small JSON file under
//! `.smbgate/object-lock/<bucket>` (none: Object Lock is off), so that
//! every instance serving the share applies the same default retention.
//! Read again at most every few seconds, as the versioning state is.

use serde::{Deserialize, Serialize};

use crate::store::meta::{LockMode, Retention};
use crate::store::share::{is_not_found, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, Root, StoreError, StoreResult};

use super::Versioning;

/// Milliseconds in a day; a year of default retention is 365 of them.
const DAY_MS: i64 = 86_400_000;

/// A bucket's Object Lock configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketLock {
    /// Object Lock is on: versions may carry retention and legal holds,
    /// and versioning stays enabled.
    pub enabled: bool,
    /// The retention a new version gets when its write names none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DefaultRetention>,
}

/// A bucket's default retention: a mode and a period in days or years.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefaultRetention {
    /// The mode new versions get.
    pub mode: LockMode,
    /// The period in days (exactly one of `days` and `years` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub days: Option<u32>,
    /// The period in years of 365 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub years: Option<u32>,
}

impl DefaultRetention {
    /// The retention of a version written at `now_ms` (ms since the Unix
    /// epoch).
    pub fn from(&self, now_ms: i64) -> Retention {
        let days = self.days.map_or(0, i64::from) + self.years.map_or(0, |y| i64::from(y) * 365);
        Retention { mode: self.mode, until_ms: now_ms.saturating_add(days.saturating_mul(DAY_MS)) }
    }
}

/// Now, by the gateway's clock, in milliseconds since the Unix epoch:
/// retention is judged by it.
pub fn now_ms() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    now.as_millis() as i64
}

impl Root {
    fn object_lock_path(&self, bucket: &str) -> crate::store::path::SharePath {
        self.internal("object-lock").join(bucket)
    }

    /// `bucket`'s Object Lock configuration, at most a few seconds old.
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn bucket_lock(&self, tree: &Tree, bucket: &str) -> StoreResult<BucketLock> {
        if let Some(lock) = self.inner().versioning.locks.get(bucket) {
            return Ok(lock);
        }
        let lock = match self.live(tree).read_small(self.object_lock_path(bucket).as_str(), 4096).await {
            Ok(text) => serde_json::from_slice(&text).unwrap_or_else(|e| {
                tracing::error!(bucket, error = %e, "the bucket's Object Lock configuration does not parse; taken as on");
                BucketLock { enabled: true, default: None }
            }),
            Err(e) if is_not_found(&e) => BucketLock::default(),
            Err(e) => return Err(e.into()),
        };
        self.inner().versioning.locks.set(bucket, lock.clone());
        Ok(lock)
    }
}

impl Buckets {
    /// `bucket`'s Object Lock configuration, read now.
    ///
    /// Errors: SMB failures other than not-found.
    pub(in crate::store) async fn object_lock(&self, tree: &Tree, bucket: &str) -> StoreResult<BucketLock> {
        let path = self.root.object_lock_path(bucket);
        let lock = match self.read_state_file(tree, &path, 4096).await? {
            // A file that does not parse still says the bucket is locked.
            Some(text) => serde_json::from_slice(&text).unwrap_or(BucketLock { enabled: true, default: None }),
            None => BucketLock::default(),
        };
        self.root.inner().versioning.locks.set(bucket, lock.clone());
        Ok(lock)
    }

    /// GetObjectLockConfiguration: `bucket`'s configuration.
    ///
    /// Errors: NoSuchBucket; SMB failures.
    pub async fn object_lock_config(&self, bucket: &str) -> StoreResult<BucketLock> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        self.object_lock(&tree, bucket).await
    }

    /// PutObjectLockConfiguration: turns Object Lock on for `bucket`
    /// (versioning must be enabled), with `lock`'s default retention.
    ///
    /// Errors: NoSuchBucket; InvalidBucketState if versioning is not
    /// enabled; SMB failures.
    pub async fn put_object_lock_config(&self, bucket: &str, lock: &BucketLock) -> StoreResult<()> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        if self.bucket_versioning(bucket).await? != Versioning::Enabled {
            return Err(StoreError::InvalidBucketState(
                "Versioning must be 'Enabled' on the bucket to apply a Object Lock configuration".into(),
            ));
        }
        self.write_object_lock(&tree, bucket, lock).await
    }

    /// CreateBucket with Object Lock: versioning enabled and Object Lock
    /// on, without a default retention.
    ///
    /// Errors: SMB failures.
    pub async fn enable_object_lock(&self, bucket: &str) -> StoreResult<()> {
        self.put_bucket_versioning(bucket, Versioning::Enabled).await?;
        let tree = self.root.tree().await?;
        self.write_object_lock(&tree, bucket, &BucketLock { enabled: true, default: None }).await
    }

    async fn write_object_lock(&self, tree: &Tree, bucket: &str, lock: &BucketLock) -> StoreResult<()> {
        let text = serde_json::to_vec(lock).map_err(|e| StoreError::Smb(e.to_string()))?;
        self.replace_state_file(tree, &self.root.object_lock_path(bucket), &text).await?;
        self.root.inner().versioning.locks.set(bucket, lock.clone());
        Ok(())
    }

    /// Removes `bucket`'s Object Lock configuration (DeleteBucket).
    pub(in crate::store) async fn forget_object_lock(&self, tree: &Tree, bucket: &str) {
        let _ = self.remove_state_file(tree, &self.root.object_lock_path(bucket)).await;
        self.root.inner().versioning.locks.set(bucket, BucketLock::default());
    }
}
