//! The one open of a key, over any [`ShareLookups`]: found where it is
//! kept ([`find_stored`]), then checked to be the key's object (its
//! record names the key, its on-disk name is the key's where the server
//! may match another spelling, it is the kind of thing the key names).
//! GET, HEAD and a record change differ only in the share operation they
//! run ([`OpenFor`]). The gateway runs it on the live share
//! (`Reads::open_key`); its unit tests on the in-memory share
//! (`open_checked_test.rs`).

use std::future::Future;

use super::find_stored::{find_stored, KeyPlaces};
use crate::store::beside::kept_as;
use crate::store::case::{mismatch_on, needs_exact_names};
use crate::store::folders::Found;
use crate::store::keys::MappedKey;
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::share::{CreateResponse, ShareError};
use crate::store::share_lookups::{ReadOpen, ShareLookups, WithRecord};
use crate::store::types::ObjectInfo;
use crate::store::{StoreError, StoreResult};

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

/// The key an open asks for.
pub(in crate::store) struct Asked<'a> {
    /// The key as S3 names it.
    pub key: &'a str,
    /// It mapped to share names.
    pub mapped: &'a MappedKey,
    /// The bucket's directory (share-relative), made only when a name
    /// lookup needs it.
    pub bucket: &'a (dyn Fn() -> SharePath + Sync),
    /// The share matches names without case (`Root::case_insensitive`).
    pub case_insensitive: bool,
}

/// What an open of a key is for: the share operation it runs where the
/// key is kept (one round trip: the CREATE, the record, and what else it
/// needs), and how the checks read its answer.
pub(in crate::store) trait OpenFor<S: ShareLookups>: Copy + Send {
    /// What the share operation answers.
    type Answer: Send;
    /// Runs it on `path`; `exact`: also asks for the on-disk name;
    /// `file_only`: refuses a directory.
    fn run(
        self,
        s: &S,
        path: SharePath,
        exact: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<Self::Answer, ShareError>> + Send;
    /// The CREATE's answer in `a`.
    fn create<'a>(s: &S, a: &'a Self::Answer) -> &'a CreateResponse;
    /// The record in `a`.
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta>;
    /// Takes the record and the on-disk name out of `a`, for the checks.
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>);
}

/// GET ([`ShareLookups::open_with_meta`]): the handle kept, and `(offset,
/// length)` read with the open.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForRead(pub Option<(u64, u32)>);

impl<S: ShareLookups> OpenFor<S> for ForRead {
    type Answer = ReadOpen<S::Handle>;
    async fn run(self, s: &S, path: SharePath, exact: bool, file_only: bool) -> Result<Self::Answer, ShareError> {
        s.open_with_meta(&path, self.0, exact, file_only).await
    }
    fn create<'a>(s: &S, a: &'a Self::Answer) -> &'a CreateResponse {
        s.created(&a.0)
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.3.take())
    }
}

/// HEAD ([`ShareLookups::stat_with_meta_and_name`]): the object's info;
/// the handle closes in the same round trip.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForStat;

impl<S: ShareLookups> OpenFor<S> for ForStat {
    type Answer = (CreateResponse, Option<ObjectMeta>, Option<String>);
    async fn run(self, s: &S, path: SharePath, exact: bool, file_only: bool) -> Result<Self::Answer, ShareError> {
        s.stat_with_meta_and_name(&path, exact, file_only).await
    }
    fn create<'a>(_: &S, a: &'a Self::Answer) -> &'a CreateResponse {
        &a.0
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.2.take())
    }
}

/// A record change ([`ShareLookups::open_to_update_record`]): the handle
/// kept, held so that no other file can take the name until it closes.
#[derive(Debug, Clone, Copy)]
pub(in crate::store) struct ForRecordChange;

impl<S: ShareLookups> OpenFor<S> for ForRecordChange {
    type Answer = WithRecord<S::Handle>;
    async fn run(self, s: &S, path: SharePath, exact: bool, file_only: bool) -> Result<Self::Answer, ShareError> {
        s.open_to_update_record(&path, exact, file_only).await
    }
    fn create<'a>(s: &S, a: &'a Self::Answer) -> &'a CreateResponse {
        s.created(&a.0)
    }
    fn meta(a: &Self::Answer) -> Option<&ObjectMeta> {
        a.1.as_ref()
    }
    fn take(a: &mut Self::Answer) -> (Option<ObjectMeta>, Option<String>) {
        (a.1.take(), a.2.take())
    }
}

/// Opens the key `asked` on `s` for what `how` says: `how`'s share
/// operation run where the key is kept ([`find_stored`] over `places`),
/// and what it found checked ([`check_found`]). Returns the operation's
/// answer (its record taken out), the checked record, the object's info
/// and its path.
///
/// Errors: NoSuchKey (also for a key naming a plain directory),
/// NoSuchBucket, the operation's other errors.
pub(in crate::store) async fn open_checked<S: ShareLookups, K: OpenFor<S>>(
    s: &S,
    places: &KeyPlaces<'_>,
    asked: &Asked<'_>,
    how: K,
) -> StoreResult<(K::Answer, Option<ObjectMeta>, ObjectInfo, SharePath)> {
    let exact = needs_exact_names(asked.case_insensitive, asked.mapped);
    let (mut answer, path, found) = find_stored(
        s,
        places,
        asked.mapped,
        |p, file_only| how.run(s, p, exact, file_only),
        |a| (K::create(s, a).times, K::meta(a).is_some_and(|m| m.marker)),
    )
    .await?;
    let (meta, on_disk) = K::take(&mut answer);
    let (meta, info) = check_found(s, asked, K::create(s, &answer), meta, on_disk.as_deref(), (&path, found)).await?;
    Ok((answer, meta, info, path))
}

/// What an open of the key `asked` found at `at` = (path, where), its
/// CREATE answer `create`, record `meta` and on-disk path `on_disk`,
/// checked: the record names this key ([`check_record_key`]), the on-disk
/// name matches where the server may match another spelling
/// ([`check_exact_name`]), and it is the kind of thing the key names
/// ([`check_kind`]). Returns the record and the object's info.
///
/// Errors: NoSuchKey; SMB failures of the name lookup.
pub(in crate::store) async fn check_found(
    s: &impl ShareLookups,
    asked: &Asked<'_>,
    create: &CreateResponse,
    meta: Option<ObjectMeta>,
    on_disk: Option<&str>,
    (path, found): (&SharePath, Found),
) -> StoreResult<(Option<ObjectMeta>, ObjectInfo)> {
    let meta = check_record_key(meta, asked.key)?;
    let kept = kept_as(asked.mapped, found == Found::Beside);
    check_exact_name(s, (asked.bucket, asked.case_insensitive), &kept, keyed(&meta), on_disk).await?;
    let info = ObjectInfo::new(create, meta.clone(), path);
    check_kind(create.times.is_directory(), asked.mapped.dir_marker && found != Found::Beside, found, &info)?;
    Ok((meta, info))
}

/// NoSuchKey if the file that opened is named otherwise than `kept` (the
/// names the key's object is kept under, in the directory `bucket` of a
/// share that matches names without case if `case_insensitive`): in
/// another case on a case-insensitive share (S3 keys are case-sensitive),
/// or a long name `kept` is an 8.3 alias of ([`needs_exact_names`]).
/// A record naming its key (`keyed`) has already been compared
/// ([`check_record_key`]); a file without one (put there by someone else)
/// is judged by `on_disk`, its path as the open's compound read it, or, if
/// the server gave none, by one more batch of name lookups
/// ([`mismatch_on`]).
///
/// Errors: NoSuchKey; SMB failures of the lookup.
pub(in crate::store) async fn check_exact_name(
    s: &impl ShareLookups,
    (bucket, case_insensitive): (&(dyn Fn() -> SharePath + Sync), bool),
    kept: &MappedKey,
    keyed: bool,
    on_disk: Option<&str>,
) -> StoreResult<()> {
    if !needs_exact_names(case_insensitive, kept) || keyed {
        return Ok(());
    }
    let differs = match on_disk {
        // The key's components are the last ones of the on-disk path.
        Some(name) => !name.rsplit('\\').take(kept.components.len()).eq(kept.components.iter().rev()),
        None => mismatch_on(s, &bucket(), kept).await?.0.is_some(),
    };
    if differs {
        return Err(StoreError::NoSuchKey);
    }
    Ok(())
}

#[cfg(test)]
#[path = "open_checked_test.rs"]
mod tests;
