//! GET and HEAD of a version by its ID: the current file if it is that
//! version, else the stored file of that ID in the key's versions folder.
//! A delete marker is no object: asking for one is 405, and a key whose
//! latest version is one is 404 with the marker's ID.

use crate::store::keys::MappedKey;
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::reads::read_plan::{Read, ReadPlan, ReadRequest};
use crate::store::share::{self, is_not_found, Tree};
use crate::store::share_lookups::ShareLookups;
use crate::store::share_ops::ShareOps;
use crate::store::types::{ObjectInfo, Opened};
use crate::store::{Reads, StoreError, StoreResult};

use super::{plausible_version_id, version_of, StoredName, NULL_VERSION};

/// The error of a versionId no version could have (AWS's wording).
pub fn invalid_version_id() -> StoreError {
    StoreError::InvalidArgument("Invalid version id specified".into())
}

/// The object `info` as the stored version `name`: its ID is the name's,
/// whatever its record says (a file someone put on the share has none).
fn as_stored(mut info: ObjectInfo, name: &StoredName) -> ObjectInfo {
    if !info.meta.etag.is_empty() {
        info.meta.version_id = (name.version_id != NULL_VERSION).then(|| name.version_id.clone());
    }
    info
}

impl Reads {
    /// The stored version `version_id` of `mapped`; NoSuchVersion if there
    /// is none, DeleteMarker (405) if it is a delete marker.
    async fn stored_version(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        version_id: &str,
    ) -> StoreResult<(SharePath, StoredName)> {
        let stored = self.root.stored_versions(tree, bucket, mapped).await?;
        let (path, name) =
            stored.into_iter().find(|(_, n)| n.version_id == version_id).ok_or(StoreError::NoSuchVersion)?;
        if name.marker {
            return Err(StoreError::DeleteMarker {
                version_id: name.version_id,
                last_modified: name.stored_at,
                requested: true,
            });
        }
        Ok((path, name))
    }

    /// GET of `key`'s version `version_id` (see the module docs).
    ///
    /// Errors: InvalidArgument for an ID no version has the form of;
    /// NoSuchBucket; NoSuchVersion; DeleteMarker (405); as
    /// [`Reads::get_object`] otherwise.
    pub async fn get_version(&self, bucket: &str, key: &str, version_id: &str, req: &ReadRequest) -> StoreResult<Read> {
        let read = req.first_read();
        let (opened, info, data) = self.open_version(bucket, key, version_id, read).await?;
        self.read_opened(opened, info, data, read, req)
    }

    /// Opens `key`'s version `version_id` for reading, as
    /// [`Reads::open_object`] opens the current one (with the first READ of
    /// `read`).
    ///
    /// Errors: as [`Reads::get_version`].
    pub async fn open_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        read: Option<(u64, u32)>,
    ) -> StoreResult<(Opened, ObjectInfo, Option<bytes::Bytes>)> {
        if !plausible_version_id(version_id) {
            return Err(invalid_version_id());
        }
        match self.open_object(bucket, key, read).await {
            Ok((opened, info, data)) if version_of(&info) == version_id => return Ok((opened, info, data)),
            Ok(_) | Err(StoreError::NoSuchKey) => {}
            Err(e) => return Err(e),
        }
        let tree = self.root.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await.map_err(not_found_version)?;
        let (path, name) = self.stored_version(&tree, bucket, &mapped, version_id).await?;
        let (handle, meta, data, _) = self
            .root
            .live(&tree)
            .open_with_meta(&path, read, false, true)
            .await
            .map_err(|e| if is_not_found(&e) { StoreError::NoSuchVersion } else { e.into() })?;
        let info = as_stored(ObjectInfo::new(handle.info(), meta.clone(), &path), &name);
        Ok((Opened { handle, meta }, info, data))
    }

    /// The body of an opened version, as [`Reads::get_object`] sends it.
    fn read_opened(
        &self,
        opened: Opened,
        info: ObjectInfo,
        data: Option<bytes::Bytes>,
        read: Option<(u64, u32)>,
        req: &ReadRequest,
    ) -> StoreResult<Read> {
        let plan = ReadPlan::decide(&info, req)?;
        let body = self.body_of(opened, &info, plan.range.clone(), req.sse_c.as_ref(), data, read)?;
        Ok(Read { info, plan, body })
    }

    /// Opens `key`'s version `version_id` to change its record (its tags),
    /// as [`Reads::open_to_update_record`] opens the current one.
    ///
    /// Errors: as [`Reads::get_version`].
    pub(crate) async fn open_version_to_update_record(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
    ) -> StoreResult<(share::Handle, Option<ObjectMeta>, ObjectInfo, SharePath)> {
        if !plausible_version_id(version_id) {
            return Err(invalid_version_id());
        }
        match self.open_to_update_record(bucket, key).await {
            Ok(current) if version_of(&current.2) == version_id => return Ok(current),
            Ok(_) | Err(StoreError::NoSuchKey) => {}
            Err(e) => return Err(e),
        }
        let tree = self.root.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await.map_err(not_found_version)?;
        let (path, name) = self.stored_version(&tree, bucket, &mapped, version_id).await?;
        let (handle, meta, _) = self.root.live(&tree).open_to_update_record(&path, false, true).await.map_err(|e| {
            if is_not_found(&e) {
                StoreError::NoSuchVersion
            } else {
                e.into()
            }
        })?;
        let info = as_stored(ObjectInfo::new(handle.info(), meta.clone(), &path), &name);
        Ok((handle, meta, info, path))
    }

    /// HEAD of `key`'s version `version_id`.
    ///
    /// Errors: as [`Reads::get_version`].
    pub async fn head_version(
        &self,
        bucket: &str,
        key: &str,
        version_id: &str,
        req: &ReadRequest,
    ) -> StoreResult<(ObjectInfo, ReadPlan)> {
        let info = self.version_info(bucket, key, version_id).await?;
        let plan = ReadPlan::decide(&info, req)?;
        Ok((info, plan))
    }

    /// What `key`'s version `version_id` is (size, times, record).
    ///
    /// Errors: as [`Reads::get_version`].
    pub async fn version_info(&self, bucket: &str, key: &str, version_id: &str) -> StoreResult<ObjectInfo> {
        if !plausible_version_id(version_id) {
            return Err(invalid_version_id());
        }
        match self.head_uncached(bucket, key).await {
            Ok(info) if version_of(&info) == version_id => return Ok(info),
            Ok(_) | Err(StoreError::NoSuchKey) => {}
            Err(e) => return Err(e),
        }
        let tree = self.root.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await.map_err(not_found_version)?;
        let (path, name) = self.stored_version(&tree, bucket, &mapped, version_id).await?;
        let (created, meta) = self.root.live(&tree).stat_with_meta(path.as_str(), false).await.map_err(|e| {
            if is_not_found(&e) {
                StoreError::NoSuchVersion
            } else {
                e.into()
            }
        })?;
        Ok(as_stored(ObjectInfo::new(&created, meta, &path), &name))
    }

    /// For a key with no current version: its latest stored version, if
    /// that is a delete marker (the 404 then names it).
    ///
    /// Errors: SMB failures.
    pub async fn latest_marker(&self, bucket: &str, key: &str) -> StoreResult<Option<StoredName>> {
        let Ok(mapped) = crate::store::keys::map_key(key) else { return Ok(None) };
        let tree = self.root.tree().await?;
        let stored = self.root.stored_versions(&tree, bucket, &mapped).await?;
        Ok(stored.into_iter().next().map(|(_, n)| n).filter(|n| n.marker))
    }
}

/// A key no object can have has no version either.
fn not_found_version(e: StoreError) -> StoreError {
    match e {
        StoreError::NoSuchKey => StoreError::NoSuchVersion,
        e => e,
    }
}
