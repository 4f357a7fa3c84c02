//! Empty folders someone made on the share. Such a folder (an empty
//! directory without a marker record, not made by the gateway) is the
//! 0-byte object `name/`, as the S3 console's folders are: every listing
//! shows it, with or without a delimiter (with `/` it rolls into the
//! common prefix `name/` as any key under it would), and GET, HEAD, a
//! conditional write and DELETE of `name/` treat it as that object. Its
//! ETag is derived from its LastWriteTime and on-disk id, as for any file
//! someone else put there. Once something is put in it, it is only a
//! prefix again; DELETE of `name/` removes it while it is empty.
//!
//! Directories the gateway made for keys ([`share::is_own_dir`]) are never
//! such objects: they are empty only for an instant, before the first
//! object lands in them or after the last one left, and are pruned then.

use super::keys::MappedKey;
use super::path::SharePath;
use super::share::{self, is_not_found, FileTimes, ShareError};
use super::share_ops::ShareOps;

/// Where an open found the object a key names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// At the key's own path.
    Own,
    /// Beside the directory at its path (see `beside`).
    Beside,
    /// An empty folder someone made, at the path of a key ending in `/`.
    Folder,
}

/// Whether what opened at the own path of `mapped` (`times`, with a
/// marker record or not) is an empty folder's object: a key ending in `/`,
/// a directory without a marker record that the gateway did not make, and
/// empty now (one more round trip, only for such a directory). A directory
/// gone meanwhile (or a file there now) is no folder.
///
/// Errors: the server's other refusals of the look inside.
pub(crate) async fn stands_as_folder<S: ShareOps>(
    s: &S,
    mapped: &MappedKey,
    times: &FileTimes,
    marker_record: bool,
    path: &SharePath,
) -> Result<bool, ShareError> {
    if !mapped.dir_marker || !times.is_directory() || marker_record || share::is_own_dir(times) {
        return Ok(false);
    }
    match s.is_empty_dir(path.as_str()).await {
        Ok(empty) => Ok(empty),
        Err(e) if is_not_found(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
