//! Opening objects for GET and HEAD: one compound for the CREATE, our
//! metadata record and (for GET) the first READ.

use bytes::Bytes;

use super::error::is_not_found;
use super::keys::{map_key, KeyError, MappedKey};
use super::meta::ObjectMeta;
use super::types::{ObjectInfo, Opened};
use super::{retry_sharing, share, Store, StoreError, StoreResult};

/// Checks the record's key against the requested one: `Err(NoSuchKey)` if
/// the open landed on a case-variant of the key (case-insensitive share),
/// and drops a record written for another key (file renamed by someone
/// else: treat it as foreign).
pub(crate) fn check_record_key(meta: Option<ObjectMeta>, key: &str) -> StoreResult<Option<ObjectMeta>> {
    match meta {
        Some(m) => match m.key.as_deref() {
            None => Ok(Some(m)),
            Some(k) if k == key => Ok(Some(m)),
            Some(k) if k.to_lowercase() == key.to_lowercase() => Err(StoreError::NoSuchKey),
            Some(_) => Ok(None),
        },
        None => Ok(None),
    }
}

/// NoSuchKey unless what opened is what the key names: a file for a plain
/// key, a directory carrying a marker record for a key ending in `/`.
fn check_kind(is_dir: bool, dir_marker: bool, info: &ObjectInfo) -> StoreResult<()> {
    if is_dir != dir_marker || (is_dir && !info.meta.marker) {
        return Err(StoreError::NoSuchKey);
    }
    Ok(())
}

impl Store {
    /// Opens `key` for reading: CREATE + metadata (+ the first READ of
    /// `read = (offset, length)`) in one round trip, the handle left open
    /// (it closes itself when dropped). A directory-marker key (`a/`) opens
    /// the directory and requires its marker record.
    ///
    /// Errors: NoSuchKey (also for a key naming a plain directory),
    /// NoSuchBucket, InvalidKey.
    pub async fn open_object(
        &self,
        bucket: &str,
        key: &str,
        read: Option<(u64, u32)>,
    ) -> StoreResult<(Opened, ObjectInfo, Option<Bytes>)> {
        let tree = self.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await?;
        let path = self.object_path(bucket, &mapped);
        let exact = self.case_insensitive();
        let (handle, meta, data, on_disk) = self
            .open_existing(&tree, bucket, &path, || share::open_with_meta(&tree, self.records(), &path, read, exact))
            .await?;
        let meta = check_record_key(meta, key)?;
        self.check_exact_name(&tree, bucket, &mapped, &meta, on_disk.as_deref()).await?;
        let info = ObjectInfo::new(handle.info(), meta.clone(), &path);
        check_kind(handle.info().times.is_directory(), mapped.dir_marker, &info)?;
        Ok((Opened { handle, meta }, info, data))
    }

    /// HEAD: the object's info with CREATE + metadata + CLOSE in one round
    /// trip.
    ///
    /// Errors: as [`Store::open_object`].
    pub async fn head_object(&self, bucket: &str, key: &str) -> StoreResult<ObjectInfo> {
        let tree = self.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await?;
        let path = self.object_path(bucket, &mapped);
        let exact = self.case_insensitive();
        let (create, meta, on_disk) = self
            .open_existing(&tree, bucket, &path, || share::stat_with_meta_and_name(&tree, self.records(), &path, exact))
            .await?;
        let meta = check_record_key(meta, key)?;
        self.check_exact_name(&tree, bucket, &mapped, &meta, on_disk.as_deref()).await?;
        let info = ObjectInfo::new(&create, meta, &path);
        check_kind(create.times.is_directory(), mapped.dir_marker, &info)?;
        Ok(info)
    }

    /// NoSuchKey if, on a case-insensitive share, the file that opened is
    /// named in another case than `mapped` (S3 keys are case-sensitive).
    /// A record naming its key has already been compared
    /// ([`check_record_key`]); a file without one (put there by someone
    /// else) is judged by `on_disk`, its path as the open's compound read
    /// it, or, if the server gave none, by one more batch of name lookups.
    ///
    /// Errors: NoSuchKey; SMB failures of the lookup.
    pub(crate) async fn check_exact_name(
        &self,
        tree: &smb_client::Tree,
        bucket: &str,
        mapped: &MappedKey,
        meta: &Option<ObjectMeta>,
        on_disk: Option<&str>,
    ) -> StoreResult<()> {
        if !self.case_insensitive() || meta.as_ref().is_some_and(|m| m.key.is_some()) {
            return Ok(());
        }
        let differs = match on_disk {
            // The key's components are the last ones of the on-disk path.
            Some(name) => !name.rsplit('\\').take(mapped.components.len()).eq(mapped.components.iter().rev()),
            None => self.case_mismatch(tree, bucket, mapped).await?.is_some(),
        };
        if differs {
            return Err(StoreError::NoSuchKey);
        }
        Ok(())
    }

    /// Maps `key` for a GET or HEAD. A key that no object on the share can
    /// have (a component too long for the share, `a//b`, `..`) is simply
    /// not there: NoSuchKey (or NoSuchBucket), where a PUT of it is a 400.
    /// An empty key or one over 1024 bytes stays the S3 error it is.
    async fn map_key_to_read(&self, tree: &smb_client::Tree, bucket: &str, key: &str) -> StoreResult<MappedKey> {
        match map_key(key) {
            Ok(m) => Ok(m),
            Err(e @ (KeyError::Empty | KeyError::TooLong)) => Err(StoreError::InvalidKey(e)),
            Err(_) => {
                self.check_bucket(tree, bucket).await?;
                Err(StoreError::NoSuchKey)
            }
        }
    }

    /// Runs `open` (a GET's or HEAD's open of a key); if it finds nothing,
    /// runs it once more alongside the bucket check, in the same round
    /// trip, before answering 404. An open of a key that other clients keep
    /// renaming new versions over was seen to fail with not-found (about
    /// once in 20,000 reads under 16 writers); a second open finds the new
    /// version (failure class 13). A missing key costs no more round trips
    /// than the bucket check already did.
    ///
    /// Beside them goes a stat of the key's creation lock (`object` is the
    /// key's path). An If-Match swap holds it while it renames the old
    /// version aside and the new one in, two steps between which the key is
    /// absent (failure class 25); a conditional create holds it too. While
    /// it is held a not-found is tried again after 5, 10, 20, 40 and 80
    /// ms, so readers see the old version or the new, not a 404.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, or `open`'s other errors.
    async fn open_existing<T, F, Fut>(
        &self,
        tree: &smb_client::Tree,
        bucket: &str,
        object: &super::path::SharePath,
        mut open: F,
    ) -> StoreResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, smb_client::Error>>,
    {
        match retry_sharing(&mut open).await {
            Ok(r) => return Ok(r),
            Err(e) if is_not_found(&e) => {}
            // A name the server cannot hold (over its name length, say) is
            // no object of its.
            Err(e) if is_unholdable_name(&e) => {
                self.check_bucket(tree, bucket).await?;
                return Err(StoreError::NoSuchKey);
            }
            Err(e) => return Err(e.into()),
        }
        let (again, in_bucket, mut locked) =
            tokio::join!(retry_sharing(&mut open), self.check_bucket(tree, bucket), self.is_locked(tree, object));
        in_bucket?;
        let mut again = again;
        let mut wait = std::time::Duration::from_millis(5);
        while locked && matches!(&again, Err(e) if is_not_found(e)) && wait <= std::time::Duration::from_millis(80) {
            tokio::time::sleep(wait).await;
            wait *= 2;
            again = retry_sharing(&mut open).await;
            if matches!(&again, Err(e) if is_not_found(e)) {
                locked = self.is_locked(tree, object).await;
            }
        }
        match again {
            Ok(r) => {
                tracing::debug!(bucket, "a key not found by its first open was found by a later one");
                Ok(r)
            }
            Err(e) if is_not_found(&e) => Err(StoreError::NoSuchKey),
            Err(e) => Err(e.into()),
        }
    }
}

/// True if the server refused the name itself: too long for it, or a
/// character it cannot store.
fn is_unholdable_name(e: &smb_client::Error) -> bool {
    matches!(
        e.status(),
        Some(smb_proto::NtStatus::STATUS_OBJECT_NAME_INVALID) | Some(smb_proto::NtStatus::STATUS_NAME_TOO_LONG)
    )
}
