//! The gateway's own small files under `.smbgate/` (a bucket's CORS
//! configuration, tags and notification configuration; queued events and
//! the marks of S3 deletes), and the folders that hold them: read whole, replaced whole by a temp
//! file renamed over the old one (so readers see the old or the new), and
//! removed. Every instance serving the share sees the same. The rules are
//! functions over [`ShareOps`], so that they run against the in-memory
//! share too (`state_files_test.rs`).

use crate::store::path::SharePath;
use crate::store::share::{is_not_found, DirEntry, Failure, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::{Buckets, StoreError, StoreResult};

impl Buckets {
    /// The file `name` of the gateway's folder `kind` (`.smbgate/<kind>/<name>`).
    pub(in crate::store) fn state_file(&self, kind: &str, name: &str) -> SharePath {
        self.root.internal(kind).join(name)
    }

    /// [`read_state_file`] on the live share.
    pub(in crate::store) async fn read_state_file(
        &self,
        tree: &Tree,
        path: &SharePath,
        max: u32,
    ) -> StoreResult<Option<bytes::Bytes>> {
        read_state_file(&self.root.live(tree), path, max).await
    }

    /// [`replace_state_file`] on the live share, through a fresh temp file.
    pub(in crate::store) async fn replace_state_file(
        &self,
        tree: &Tree,
        path: &SharePath,
        body: &[u8],
    ) -> StoreResult<()> {
        replace_state_file(&self.root.live(tree), &self.root.temp_path(), path, body).await
    }

    /// [`make_dirs`] on the live share.
    pub(in crate::store) async fn make_dirs(&self, tree: &Tree, dirs: &[SharePath]) -> StoreResult<()> {
        make_dirs(&self.root.live(tree), dirs).await
    }

    /// [`state_entries`] on the live share.
    pub(in crate::store) async fn state_entries(&self, tree: &Tree, dir: &SharePath) -> StoreResult<Vec<DirEntry>> {
        state_entries(&self.root.live(tree), dir).await
    }

    /// [`remove_state_file`] on the live share.
    pub(in crate::store) async fn remove_state_file(&self, tree: &Tree, path: &SharePath) -> StoreResult<()> {
        remove_state_file(&self.root.live(tree), path).await
    }
}

/// The bytes of `path`, up to `max` bytes; `None` if there is no such
/// file.
///
/// Errors: SMB failures other than not-found.
pub(crate) async fn read_state_file<S: ShareOps>(s: &S, path: &str, max: u32) -> StoreResult<Option<bytes::Bytes>> {
    match s.read_small(path, max).await {
        Ok(data) => Ok(Some(data)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Replaces `path` (in a folder of `.smbgate/`, made if missing) with
/// `body`, written first to the temp file `temp`.
///
/// Errors: SMB failures (the temp file is then removed); Busy for a short
/// write.
pub(crate) async fn replace_state_file<S: ShareOps>(
    s: &S,
    temp: &str,
    path: &SharePath,
    body: &[u8],
) -> StoreResult<()> {
    if let Some((dir, _)) = path.split_leaf() {
        make_dirs(s, &[dir]).await?;
    }
    // Held open from creation to rename, so no sweep takes it for a dead
    // writer's; dropped unpublished, it deletes itself.
    let (temp, written) = s.write_temp(temp, body).await?;
    if written as usize != body.len() {
        s.discard_temp(temp).await;
        return Err(StoreError::Busy(format!("short write: {written} of {} bytes", body.len())));
    }
    Ok(s.publish_temp(temp, path, true).await?)
}

/// Makes `dirs` in order (a folder of `.smbgate/` and those under it),
/// those already there left as they are.
///
/// Errors: SMB failures other than the name being taken.
pub(crate) async fn make_dirs<S: ShareOps>(s: &S, dirs: &[SharePath]) -> StoreResult<()> {
    for dir in dirs {
        match s.make_dir(dir).await {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Collision => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The entries of the folder `dir`; none if there is no such folder.
///
/// Errors: SMB failures other than not-found.
pub(crate) async fn state_entries<S: ShareOps>(s: &S, dir: &str) -> StoreResult<Vec<DirEntry>> {
    match s.list_dir(dir).await {
        Ok(entries) => Ok(entries),
        Err(e) if is_not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// Removes `path`; none is not an error.
///
/// Errors: SMB failures other than not-found.
pub(crate) async fn remove_state_file<S: ShareOps>(s: &S, path: &str) -> StoreResult<()> {
    match s.delete_file(path).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
#[path = "state_files_test.rs"]
mod tests;
