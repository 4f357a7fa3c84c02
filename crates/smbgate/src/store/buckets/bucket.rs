//! Buckets: the top-level directories under the share root.

use futures::future::BoxFuture;

use crate::store::path::SharePath;
use crate::store::share::Failure;
use crate::store::share::{self, is_not_found};
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, StoreError, StoreResult, INTERNAL};

/// A bucket as ListBuckets reports it.
#[derive(Debug, Clone)]
pub struct BucketInfo {
    /// Directory name.
    pub name: String,
    /// CreationTime of the directory (FILETIME).
    pub created: u64,
}

impl Buckets {
    /// The folders in the share root, with their CreationTime (FILETIME).
    ///
    /// Errors: the root cannot be listed.
    async fn root_folders(&self, tree: &share::Tree) -> StoreResult<Vec<(String, u64)>> {
        Ok(self
            .root
            .live(tree)
            .list_dir(self.root.root_dir().as_str())
            .await?
            .into_iter()
            .filter(|e| e.times.is_directory())
            .map(|e| (e.name, e.times.creation))
            .collect())
    }

    async fn remove_bucket_dir(&self, tree: &share::Tree, bucket: &str) -> StoreResult<()> {
        let path = self.root.bucket_path(bucket);
        crate::store::reads::cache_watches::unwatch_under(&self.root, path.as_str()).await;
        remove_bucket_dir(&self.root.live(tree), &path).await
    }
}

/// DeleteBucket's removal of the bucket's directory `path` on `s`: an
/// empty one goes; one holding only empty, unmarked directories (left by
/// deleted objects) loses them first, deepest first.
///
/// Errors: NoSuchBucket; BucketNotEmpty (a file or a marker under it,
/// found before or after the directories above it went).
pub(crate) async fn remove_bucket_dir<S: ShareOps>(s: &S, path: &SharePath) -> StoreResult<()> {
    match s.delete_dir(path).await {
        Ok(()) => return Ok(()),
        Err(e) if is_not_found(&e) => return Err(StoreError::NoSuchBucket),
        Err(e) if e.failure() == Failure::NotEmpty => {}
        Err(e) => return Err(e.into()),
    }
    if !remove_empty_tree(s, path).await? {
        return Err(StoreError::BucketNotEmpty);
    }
    s.delete_dir(path).await.map_err(|e| match e.failure() {
        Failure::NotEmpty => StoreError::BucketNotEmpty,
        _ => e.into(),
    })
}

/// Removes the empty, unmarked subdirectories of `dir`; returns false as
/// soon as a file or a marker directory is found (nothing else is removed
/// after that).
fn remove_empty_tree<'a, S: ShareOps>(s: &'a S, dir: &'a SharePath) -> BoxFuture<'a, StoreResult<bool>> {
    Box::pin(async move {
        for e in s.list_dir(dir).await? {
            if !e.times.is_directory() || e.ea_size > 0 {
                return Ok(false);
            }
            let sub = dir.join(&e.name);
            // Without EAs, only its stream or sidecar tells a marker apart.
            if !s.records_in_entries() && matches!(s.stat_with_meta(&sub, false).await, Ok((_, Some(m))) if m.marker) {
                return Ok(false);
            }
            if !remove_empty_tree(s, &sub).await? {
                return Ok(false);
            }
            s.delete_dir(&sub).await?;
        }
        Ok(true)
    })
}

/// CreateBucket on `s`: the directory `path` for `bucket`.
///
/// Errors: BucketAlreadyOwnedByYou if it exists (as a bucket), Conflict
/// if a file of that name sits in the root.
pub(crate) async fn make_bucket<S: ShareOps>(s: &S, path: &SharePath, bucket: &str) -> StoreResult<()> {
    match s.make_dir(path).await {
        Ok(()) => Ok(()),
        Err(e) if e.failure() == Failure::Collision => match s.is_directory(path).await? {
            true => Err(StoreError::BucketAlreadyOwnedByYou),
            false => Err(StoreError::Conflict(format!("a file named {bucket} is in the share root"))),
        },
        Err(e) => Err(e.into()),
    }
}

/// Bucket names must be plain directory names; S3's own naming rules are
/// enforced by the protocol layer, this guards the share.
fn check_name(bucket: &str) -> StoreResult<()> {
    if bucket.is_empty() || bucket.starts_with('.') || bucket.contains(['/', '\\']) {
        return Err(StoreError::InvalidArgument(format!("invalid bucket name {bucket:?}")));
    }
    Ok(())
}

impl Buckets {
    /// ListBuckets: every directory under the root that a client can
    /// address as a bucket, under the name it can use, in name order; for
    /// a store of one bucket ([`crate::store::Store::open_bucket`]), that bucket. On a
    /// case-insensitive share a folder such as `Photos` is listed as
    /// `photos` (which reaches it); a folder no bucket name can reach
    /// (`Team Photos`, `x_y`, `.smbgate`) is left out: see
    /// [`Buckets::unservable_folders`].
    pub async fn list_buckets(&self) -> StoreResult<Vec<BucketInfo>> {
        let tree = self.root.tree().await?;
        if let Some(name) = self.root.single_bucket() {
            return match self.root.live(&tree).times(self.root.root_dir().as_str()).await {
                Ok(t) if t.is_directory() => Ok(vec![BucketInfo { name: name.to_string(), created: t.creation }]),
                Ok(_) => Err(StoreError::NoSuchBucket),
                Err(e) if is_not_found(&e) => Err(StoreError::NoSuchBucket),
                Err(e) => Err(e.into()),
            };
        }
        let mut out: Vec<BucketInfo> = self
            .root_folders(&tree)
            .await?
            .into_iter()
            .filter_map(|(folder, created)| Some(BucketInfo { name: self.bucket_name_of(&folder)?, created }))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out.dedup_by(|a, b| a.name == b.name);
        Ok(out)
    }

    /// The bucket name that reaches the root's folder `folder`: the name
    /// itself if it is a valid bucket name, its lower case on a
    /// case-insensitive share if that is one; `None` for the internal
    /// directory and any other name.
    pub fn bucket_name_of(&self, folder: &str) -> Option<String> {
        if folder.eq_ignore_ascii_case(INTERNAL) || folder.starts_with('.') {
            return None;
        }
        if s3s::path::check_bucket_name(folder) {
            return Some(folder.to_string());
        }
        let lower = folder.to_ascii_lowercase();
        (self.root.case_insensitive() && s3s::path::check_bucket_name(&lower)).then_some(lower)
    }

    /// The root's folders that no bucket name reaches (see
    /// [`Buckets::bucket_name_of`]), in name order; none for a store of one
    /// bucket.
    ///
    /// Errors: the root cannot be listed.
    pub async fn unservable_folders(&self) -> StoreResult<Vec<String>> {
        if self.root.single_bucket().is_some() {
            return Ok(Vec::new());
        }
        let tree = self.root.tree().await?;
        let mut out: Vec<String> = self
            .root_folders(&tree)
            .await?
            .into_iter()
            .map(|(folder, _)| folder)
            .filter(|f| !f.eq_ignore_ascii_case(INTERNAL) && !f.starts_with('.') && self.bucket_name_of(f).is_none())
            .collect();
        out.sort();
        Ok(out)
    }

    /// CreateBucket: mkdir.
    ///
    /// Errors: BucketAlreadyOwnedByYou if it exists (as a bucket), Conflict
    /// if a file of that name sits in the root.
    pub async fn create_bucket(&self, bucket: &str) -> StoreResult<()> {
        check_name(bucket)?;
        let tree = self.root.tree().await?;
        make_bucket(&self.root.live(&tree), &self.root.bucket_path(bucket), bucket).await
    }

    /// HeadBucket.
    ///
    /// Errors: NoSuchBucket.
    pub async fn head_bucket(&self, bucket: &str) -> StoreResult<()> {
        check_name(bucket).map_err(|_| StoreError::NoSuchBucket)?;
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await
    }

    /// DeleteBucket: rmdir. Directories left empty by deleted objects do
    /// not count as content; they are removed first. The bucket's settings
    /// (its CORS configuration) go with it, so a bucket made again later
    /// under the name starts without them.
    ///
    /// Errors: NoSuchBucket, BucketNotEmpty.
    pub async fn delete_bucket(&self, bucket: &str) -> StoreResult<()> {
        check_name(bucket).map_err(|_| StoreError::NoSuchBucket)?;
        if self.root.single_bucket().is_some() {
            // A configured bucket is a directory the operator named; it
            // stays, whatever S3 clients ask.
            return Err(StoreError::Refused(
                "this bucket is a directory named in the gateway's configuration; it cannot be deleted through S3",
            ));
        }
        let tree = self.root.tree().await?;
        // Stored versions and delete markers are the bucket's objects too,
        // as on AWS: a bucket with any is not empty. Their folders go as
        // the versions in them do, so an empty one is removed here.
        match self.root.live(&tree).delete_dir(self.root.versions_root(bucket).as_str()).await {
            Err(e) if e.failure() == Failure::NotEmpty => return Err(StoreError::BucketNotEmpty),
            _ => {}
        }
        self.remove_bucket_dir(&tree, bucket).await?;
        self.forget_versioning(&tree, bucket).await;
        // What the gateway kept of the bucket goes with it, so that a bucket
        // made again under the name starts bare.
        let kept = [
            ("CORS configuration", self.cors_path(bucket)),
            ("tags", self.bucket_tags_path(bucket)),
            ("notification configuration", self.notifications_path(bucket)),
        ];
        for (what, path) in kept {
            if let Err(e) = self.remove_state_file(&tree, &path).await {
                tracing::warn!(bucket, error = %e, "bucket deleted, but not its {what}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "bucket_test.rs"]
mod tests;
