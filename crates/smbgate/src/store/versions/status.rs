//! A bucket's versioning state, one small file under
//! `.smbgate/versioning/<bucket>` (`Enabled` or `Suspended`; none for a
//! bucket that was never versioned), so that every instance serving the
//! share keeps versions alike. Each instance reads it again at most every
//! [`STATUS_TTL`]; AWS, too, asks clients to wait after a change before
//! relying on it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::store::share::{is_not_found, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, Root, StoreError, StoreResult};

/// How long a bucket's versioning state is used before it is read again.
pub const STATUS_TTL: Duration = Duration::from_secs(5);

/// A bucket's versioning state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versioning {
    /// Never enabled: one version per key, and no version IDs.
    Off,
    /// Every write keeps the version it replaces.
    Enabled,
    /// Writes replace the `null` version; older versions stay.
    Suspended,
}

impl Versioning {
    /// The S3 status word (`Enabled`, `Suspended`); `None` for [`Versioning::Off`].
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            Versioning::Off => None,
            Versioning::Enabled => Some("Enabled"),
            Versioning::Suspended => Some("Suspended"),
        }
    }

    /// True once versioning was ever enabled: answers carry version IDs.
    pub fn versioned(self) -> bool {
        self != Versioning::Off
    }

    fn parse(text: &[u8]) -> Versioning {
        match text.trim_ascii() {
            b"Enabled" => Versioning::Enabled,
            b"Suspended" => Versioning::Suspended,
            _ => Versioning::Off,
        }
    }
}

/// What was last read of each bucket, by name, for [`STATUS_TTL`].
#[derive(Debug)]
pub(crate) struct Recent<V> {
    known: Mutex<HashMap<String, (Instant, V)>>,
}

impl<V> Default for Recent<V> {
    fn default() -> Self {
        Recent { known: Mutex::default() }
    }
}

impl<V: Clone> Recent<V> {
    pub(crate) fn get(&self, bucket: &str) -> Option<V> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known.get(bucket).filter(|(at, _)| at.elapsed() < STATUS_TTL).map(|(_, v)| v.clone())
    }

    pub(crate) fn set(&self, bucket: &str, v: V) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() > 10_000 {
            known.retain(|_, (at, _)| at.elapsed() < STATUS_TTL);
        }
        known.insert(bucket.to_string(), (Instant::now(), v));
    }
}

/// Buckets' versioning states and Object Lock configurations as last
/// read (shared by the roots of every identity's pool).
#[derive(Debug, Default)]
pub struct StatusCache {
    versioning: Recent<Versioning>,
    pub(crate) locks: Recent<super::lock_config::BucketLock>,
}

impl Root {
    fn versioning_path(&self, bucket: &str) -> crate::store::path::SharePath {
        self.internal("versioning").join(bucket)
    }

    /// `bucket`'s versioning state (at most [`STATUS_TTL`] old).
    ///
    /// Errors: SMB failures other than not-found.
    pub async fn versioning(&self, tree: &Tree, bucket: &str) -> StoreResult<Versioning> {
        if let Some(v) = self.inner().versioning.versioning.get(bucket) {
            return Ok(v);
        }
        let v = match self.live(tree).read_small(self.versioning_path(bucket).as_str(), 64).await {
            Ok(text) => Versioning::parse(&text),
            Err(e) if is_not_found(&e) => Versioning::Off,
            Err(e) => return Err(e.into()),
        };
        self.inner().versioning.versioning.set(bucket, v);
        Ok(v)
    }
}

impl Buckets {
    /// GetBucketVersioning: `bucket`'s versioning state, read now.
    ///
    /// Errors: NoSuchBucket; SMB failures.
    pub async fn bucket_versioning(&self, bucket: &str) -> StoreResult<Versioning> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let path = self.root.versioning_path(bucket);
        let v = self.read_state_file(&tree, &path, 64).await?.map_or(Versioning::Off, |t| Versioning::parse(&t));
        self.root.inner().versioning.versioning.set(bucket, v);
        Ok(v)
    }

    /// PutBucketVersioning: sets `bucket`'s state to `Enabled` or
    /// `Suspended` (a bucket once versioned never goes back to
    /// [`Versioning::Off`]).
    ///
    /// Errors: NoSuchBucket; InvalidArgument for [`Versioning::Off`];
    /// InvalidBucketState for suspending a bucket with Object Lock; SMB
    /// failures.
    pub async fn put_bucket_versioning(&self, bucket: &str, v: Versioning) -> StoreResult<()> {
        let Some(word) = v.as_str() else {
            return Err(StoreError::InvalidArgument("versioning can only be Enabled or Suspended".into()));
        };
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        if v != Versioning::Enabled && self.object_lock(&tree, bucket).await?.enabled {
            return Err(StoreError::InvalidBucketState(
                "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed."
                    .into(),
            ));
        }
        self.replace_state_file(&tree, &self.root.versioning_path(bucket), word.as_bytes()).await?;
        self.root.inner().versioning.versioning.set(bucket, v);
        Ok(())
    }

    /// Removes `bucket`'s versioning state and its stored versions' empty
    /// folders (DeleteBucket; a bucket with stored versions is not empty).
    pub(in crate::store) async fn forget_versioning(&self, tree: &Tree, bucket: &str) {
        let _ = self.remove_state_file(tree, &self.root.versioning_path(bucket)).await;
        self.root.inner().versioning.versioning.set(bucket, Versioning::Off);
        self.forget_object_lock(tree, bucket).await;
    }
}
