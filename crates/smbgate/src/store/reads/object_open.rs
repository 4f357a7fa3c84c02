//! Opening objects for GET and HEAD: one compound for the CREATE, our
//! metadata record and (for GET) the first READ.

use bytes::Bytes;

use super::find_stored::{find_stored, KeyPlaces};
use crate::store::beside::kept_as;
use crate::store::folders::Found;
use crate::store::keys::{map_key, KeyError, MappedKey};
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::share::records::Records;
use crate::store::share::ShareError;
use crate::store::types::{ObjectInfo, Opened};
use crate::store::{share, Reads, StoreError, StoreResult};

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

/// True if `meta` is a record that names its key (written through S3),
/// which [`check_record_key`] has compared: no name lookup is then needed.
pub(crate) fn keyed(meta: &Option<ObjectMeta>) -> bool {
    meta.as_ref().is_some_and(|m| m.key.is_some())
}

/// NoSuchKey unless what opened is what the key names: a file for a plain
/// key, a directory carrying a marker record (or an empty folder, as
/// `found` says) for a key ending in `/`.
fn check_kind(is_dir: bool, dir_marker: bool, found: Found, info: &ObjectInfo) -> StoreResult<()> {
    if is_dir != dir_marker || (is_dir && !info.meta.marker && found != Found::Folder) {
        return Err(StoreError::NoSuchKey);
    }
    Ok(())
}

/// What an open of a key is for ([`Reads::open_key`]): the share
/// operation it runs where the key is kept (one round trip: the CREATE,
/// the record, and what else it needs), and how the checks read its answer.
pub(in crate::store) trait OpenFor: Copy {
    /// What the share operation answers.
    type Answer;
    /// Runs it on `path`; `exact`: also asks for the on-disk name;
    /// `file_only`: refuses a directory.
    fn run<'a>(
        self,
        tree: &'a share::Tree,
        records: &'a Records,
        path: SharePath,
        exact: bool,
        file_only: bool,
    ) -> impl std::future::Future<Output = Result<Self::Answer, ShareError>> + Send + 'a;
    /// The CREATE's answer in `a`.
    fn create(a: &Self::Answer) -> &share::CreateResponse;
    /// The record in `a`.
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta>;
    /// Takes the record and the on-disk name out of `a`, for the checks.
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>);
}

/// GET ([`share::open_with_meta`]): the handle kept, and `(offset,
/// length)` read with the open.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForRead(pub Option<(u64, u32)>);

impl OpenFor for ForRead {
    type Answer = (share::Handle, Option<ObjectMeta>, Option<Bytes>, Option<String>);
    async fn run(
        self,
        tree: &share::Tree,
        records: &Records,
        path: SharePath,
        exact: bool,
        file_only: bool,
    ) -> Result<Self::Answer, ShareError> {
        share::open_with_meta(tree, records, &path, self.0, exact, file_only).await
    }
    fn create(a: &Self::Answer) -> &share::CreateResponse {
        a.0.info()
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.3.take())
    }
}

/// HEAD ([`share::stat_with_meta_and_name`]): the object's info; the
/// handle closes in the same round trip.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForStat;

impl OpenFor for ForStat {
    type Answer = (share::CreateResponse, Option<ObjectMeta>, Option<String>);
    async fn run(
        self,
        tree: &share::Tree,
        records: &Records,
        path: SharePath,
        exact: bool,
        file_only: bool,
    ) -> Result<Self::Answer, ShareError> {
        share::stat_with_meta_and_name(tree, records, &path, exact, file_only).await
    }
    fn create(a: &Self::Answer) -> &share::CreateResponse {
        &a.0
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.2.take())
    }
}

/// A record change ([`share::open_to_update_record`]): the handle kept,
/// held so that no other file can take the name until it closes.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForRecordChange;

impl OpenFor for ForRecordChange {
    type Answer = (share::Handle, Option<ObjectMeta>, Option<String>);
    async fn run(
        self,
        tree: &share::Tree,
        records: &Records,
        path: SharePath,
        exact: bool,
        file_only: bool,
    ) -> Result<Self::Answer, ShareError> {
        share::open_to_update_record(tree, records, &path, exact, file_only).await
    }
    fn create(a: &Self::Answer) -> &share::CreateResponse {
        a.0.info()
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.2.take())
    }
}

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
        let ((handle, ..), meta, info, path) = self.open_key(bucket, key, ForRecordChange).await?;
        Ok((handle, meta, info, path))
    }

    /// The one open of a key, for what `how` says ([`OpenFor`]): the key
    /// mapped for a read, `how`'s share operation run where the key is
    /// kept ([`Reads::open_stored`]), and what it found checked
    /// ([`Reads::checked`]). Returns the operation's answer (its record
    /// taken out), the checked record, the object's info and its path.
    ///
    /// Errors: as [`Reads::open_object`].
    pub(in crate::store) async fn open_key<K: OpenFor>(
        &self,
        bucket: &str,
        key: &str,
        how: K,
    ) -> StoreResult<(K::Answer, Option<ObjectMeta>, ObjectInfo, SharePath)> {
        let tree = self.root.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await?;
        let exact = self.root.exact_names_for(&mapped);
        let records = self.root.records();
        let (mut answer, path, found) = self
            .open_stored(
                &tree,
                bucket,
                &mapped,
                |p, file_only| how.run(&tree, records, p, exact, file_only),
                |a| (K::create(a).times, K::meta(a).is_some_and(|m| m.marker)),
            )
            .await?;
        let (meta, on_disk) = K::take(&mut answer);
        let (meta, info) = self
            .checked(&tree, bucket, (&mapped, key), K::create(&answer), meta, on_disk.as_deref(), (&path, found))
            .await?;
        Ok((answer, meta, info, path))
    }

    /// What an open of `key` (`mapped`) found at `at` = (path, beside),
    /// checked: the record names this key ([`check_record_key`]), the
    /// on-disk name matches where the server may match another spelling
    /// ([`Reads::check_exact_name`]), and it is the kind of thing the key
    /// names ([`check_kind`]). Returns the record and the object's info.
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
        (path, found): (&SharePath, Found),
    ) -> StoreResult<(Option<ObjectMeta>, ObjectInfo)> {
        let meta = check_record_key(meta, key)?;
        self.check_exact_name(tree, bucket, &kept_as(mapped, found == Found::Beside), keyed(&meta), on_disk).await?;
        let info = ObjectInfo::new(create, meta.clone(), path);
        check_kind(create.times.is_directory(), mapped.dir_marker && found != Found::Beside, found, &info)?;
        Ok((meta, info))
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

    /// NoSuchKey if the file that opened is named otherwise than `mapped`:
    /// in another case on a case-insensitive share (S3 keys are
    /// case-sensitive), or a long name `mapped` is an 8.3 alias of
    /// ([`crate::store::Root::exact_names_for`]).
    /// A record naming its key (`keyed`) has already been compared
    /// ([`check_record_key`]); a file without one (put there by someone
    /// else) is judged by `on_disk`, its path as the open's compound read
    /// it, or, if the server gave none, by one more batch of name lookups.
    ///
    /// Errors: NoSuchKey; SMB failures of the lookup.
    pub(crate) async fn check_exact_name(
        &self,
        tree: &share::Tree,
        bucket: &str,
        mapped: &MappedKey,
        keyed: bool,
        on_disk: Option<&str>,
    ) -> StoreResult<()> {
        if !self.root.exact_names_for(mapped) || keyed {
            return Ok(());
        }
        let differs = match on_disk {
            // The key's components are the last ones of the on-disk path.
            Some(name) => !name.rsplit('\\').take(mapped.components.len()).eq(mapped.components.iter().rev()),
            None => self.root.case_mismatch(tree, bucket, mapped).await?.is_some(),
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
        let ((handle, _, data, _), meta, info, _) = self.open_key(bucket, key, ForRead(read)).await?;
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
        let (_, _, info, _) = self.open_key(bucket, key, ForStat).await?;
        Ok(info)
    }
}
