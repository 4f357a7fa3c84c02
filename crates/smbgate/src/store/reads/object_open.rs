//! Opening objects for GET and HEAD: one compound for the CREATE, our
//! metadata record and (for GET) the first READ.

use bytes::Bytes;

use super::find_stored::{find_stored, KeyPlaces};
use super::open_checked::{check_exact_name, check_found, open_checked, Asked, OpenFor};
use super::open_checked::{ForRead, ForRecordChange, ForStat};
use crate::store::folders::Found;
use crate::store::keys::{map_key, KeyError, MappedKey};
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::share::ShareError;
use crate::store::share_ops::LiveShare;
use crate::store::types::{ObjectInfo, Opened};
use crate::store::{share, Reads, StoreError, StoreResult};

impl Reads {
    /// Opens `key` to change its record ([`share::open_to_update_record`]):
    /// found as a GET finds it, and held so that no other file can take
    /// its name until the handle closes. Returns the handle, the record as
    /// it is (`None` for a file someone else put there), the object's info
    /// and the path it opened.
    ///
    /// Errors: as [`Reads::open_object`].
    pub(crate) async fn open_to_update_record(
        &self,
        bucket: &str,
        key: &str,
    ) -> StoreResult<(share::Handle, Option<ObjectMeta>, ObjectInfo, SharePath)> {
        let ((handle, ..), meta, info, path) =
            self.open_key(&self.root.tree().await?, bucket, key, ForRecordChange).await?;
        Ok((handle, meta, info, path))
    }

    /// The one open of a key, for what `how` says ([`OpenFor`]): the key
    /// mapped for a read, then [`open_checked`] on the live share `tree`.
    /// Returns the operation's answer (its record taken out), the checked
    /// record, the object's info and its path.
    ///
    /// Errors: as [`Reads::open_object`].
    pub(in crate::store) async fn open_key<'t, K: OpenFor<LiveShare<'t>>>(
        &'t self,
        tree: &'t share::Tree,
        bucket: &str,
        key: &str,
        how: K,
    ) -> StoreResult<(K::Answer, Option<ObjectMeta>, ObjectInfo, SharePath)> {
        let mapped = self.map_key_to_read(tree, bucket, key).await?;
        let bucket_path = || self.root.bucket_path(bucket);
        let lock = |path: &SharePath| self.root.lock_name(path);
        let places = KeyPlaces { own: self.root.object_path(bucket, &mapped), bucket: &bucket_path, lock: &lock };
        open_checked(&self.root.live(tree), &places, &self.asked(key, &mapped, &bucket_path), how).await
    }

    /// What an open of `key` (`mapped`) in the bucket at `bucket` asks for.
    fn asked<'k>(&self, key: &'k str, mapped: &'k MappedKey, bucket: &'k (dyn Fn() -> SharePath + Sync)) -> Asked<'k> {
        Asked { key, mapped, bucket, case_insensitive: self.root.case_insensitive() }
    }

    /// [`check_found`] on the live share `tree`, of `key` (`mapped`) in
    /// `bucket`: what an open found at `at` = (path, where).
    ///
    /// Errors: NoSuchKey; SMB failures of the name lookup.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::store) async fn checked(
        &self,
        tree: &share::Tree,
        bucket: &str,
        (mapped, key): (&MappedKey, &str),
        create: &share::CreateResponse,
        meta: Option<ObjectMeta>,
        on_disk: Option<&str>,
        at: (&SharePath, Found),
    ) -> StoreResult<(Option<ObjectMeta>, ObjectInfo)> {
        let bucket_path = || self.root.bucket_path(bucket);
        check_found(&self.root.live(tree), &self.asked(key, mapped, &bucket_path), create, meta, on_disk, at).await
    }

    /// Runs `open` (a GET's or HEAD's) where `mapped` is kept
    /// ([`find_stored`] on the live share): its own path, beside the
    /// directory there, or an empty folder standing for a key ending in
    /// `/`; looked for again while the key's creation lock is held. `kind`
    /// gives, of what opened, its times and whether it has a marker record.
    /// Returns what opened, its path, and where that is.
    ///
    /// Errors: NoSuchBucket, NoSuchKey, or `open`'s other errors.
    pub(in crate::store) async fn open_stored<T, F, Fut>(
        &self,
        tree: &share::Tree,
        bucket: &str,
        mapped: &MappedKey,
        open: F,
        kind: impl Fn(&T) -> (share::FileTimes, bool),
    ) -> StoreResult<(T, SharePath, Found)>
    where
        F: Fn(SharePath, bool) -> Fut,
        Fut: std::future::Future<Output = Result<T, ShareError>>,
    {
        let places = KeyPlaces {
            own: self.root.object_path(bucket, mapped),
            bucket: &|| self.root.bucket_path(bucket),
            lock: &|path| self.root.lock_name(path),
        };
        find_stored(&self.root.live(tree), &places, mapped, open, kind).await
    }

    /// [`check_exact_name`] on the live share `tree`, of the key whose
    /// object is kept as `kept` in `bucket`.
    ///
    /// Errors: NoSuchKey; SMB failures of the lookup.
    pub(crate) async fn check_exact_name(
        &self,
        tree: &share::Tree,
        bucket: &str,
        kept: &MappedKey,
        keyed: bool,
        on_disk: Option<&str>,
    ) -> StoreResult<()> {
        let bucket_path = || self.root.bucket_path(bucket);
        let names = (&bucket_path as &(dyn Fn() -> SharePath + Sync), self.root.case_insensitive());
        check_exact_name(&self.root.live(tree), names, kept, keyed, on_disk).await
    }

    /// Maps `key` for a GET or HEAD. A key that no object on the share can
    /// have (a component too long for the share, `a//b`, `..`) is simply
    /// not there: NoSuchKey (or NoSuchBucket), where a PUT of it is a 400.
    /// An empty key or one over 1024 bytes stays the S3 error it is.
    pub(in crate::store) async fn map_key_to_read(
        &self,
        tree: &share::Tree,
        bucket: &str,
        key: &str,
    ) -> StoreResult<MappedKey> {
        match map_key(key) {
            Ok(m) => Ok(m),
            Err(e @ (KeyError::Empty | KeyError::TooLong)) => Err(StoreError::InvalidKey(e)),
            Err(_) => {
                self.root.check_bucket(tree, bucket).await?;
                Err(StoreError::NoSuchKey)
            }
        }
    }
}

impl Reads {
    /// Opens `key` for reading: CREATE + metadata (+ the first READ of
    /// `read = (offset, length)`) in one round trip, the handle left open
    /// (it closes itself when dropped). A directory-marker key (`a/`) opens
    /// the directory and requires its marker record.
    ///
    /// Errors: NoSuchKey (also for a key naming a plain directory),
    /// NoSuchBucket, InvalidKey.
    #[tracing::instrument(level = "debug", name = "store.lookup", skip_all)]
    pub async fn open_object(
        &self,
        bucket: &str,
        key: &str,
        read: Option<(u64, u32)>,
    ) -> StoreResult<(Opened, ObjectInfo, Option<Bytes>)> {
        let ((handle, _, data, _), meta, info, _) =
            self.open_key(&self.root.tree().await?, bucket, key, ForRead(read)).await?;
        Ok((Opened { handle, meta }, info, data))
    }

    /// HEAD: the object's info, from the object cache while its lease
    /// stands; else found as [`Reads::head_uncached`] finds it, by an
    /// open that holds the file for the cache when it may be cached
    /// ([`Reads::head_and_hold`], the same round trips).
    ///
    /// Errors: as [`Reads::open_object`].
    #[tracing::instrument(level = "debug", name = "store.lookup", skip_all)]
    pub async fn head_object(&self, bucket: &str, key: &str) -> StoreResult<ObjectInfo> {
        if let Some(hit) = self.cached(bucket, key).await {
            return Ok(hit.info);
        }
        match self.may_hold(bucket, key) {
            Some(path) => self.head_and_hold(bucket, key, path).await,
            None => self.head_uncached(bucket, key).await,
        }
    }

    /// HEAD on the share: the object's info with CREATE + metadata + CLOSE
    /// in one round trip (two for an object kept beside its directory).
    ///
    /// Errors: as [`Reads::open_object`].
    pub(crate) async fn head_uncached(&self, bucket: &str, key: &str) -> StoreResult<ObjectInfo> {
        let (_, _, info, _) = self.open_key(&self.root.tree().await?, bucket, key, ForStat).await?;
        Ok(info)
    }
}
