//! The gateway's own small files under `.smbgate/` (a bucket's CORS
//! configuration, tags and notification configuration; queued events and
//! the marks of S3 deletes), and the folders that hold them: read whole, replaced whole by a temp
//! file renamed over the old one (so readers see the old or the new), and
//! removed. Every instance serving the share sees the same.

use crate::store::path::SharePath;
use crate::store::share::{is_not_found, DirEntry, Failure, Tree};
use crate::store::{share, Buckets, StoreError, StoreResult};

impl Buckets {
    /// The file `name` of the gateway's folder `kind` (`.smbgate/<kind>/<name>`).
    pub(in crate::store) fn state_file(&self, kind: &str, name: &str) -> SharePath {
        self.root.internal(kind).join(name)
    }

    /// The bytes of `path`, up to `max` bytes; `None` if there is no such
    /// file.
    ///
    /// Errors: SMB failures other than not-found.
    pub(in crate::store) async fn read_state_file(
        &self,
        tree: &Tree,
        path: &SharePath,
        max: u32,
    ) -> StoreResult<Option<bytes::Bytes>> {
        match share::read_small(tree, path, max).await {
            Ok((_, data)) => Ok(Some(data)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces `path` (in a folder of `.smbgate/`, made if missing) with
    /// `body`.
    ///
    /// Errors: SMB failures (the temp file is then removed); Busy for a
    /// short write.
    pub(in crate::store) async fn replace_state_file(
        &self,
        tree: &Tree,
        path: &SharePath,
        body: &[u8],
    ) -> StoreResult<()> {
        if let Some((dir, _)) = path.split_leaf() {
            self.make_dirs(tree, &[dir]).await?;
        }
        // Held open from creation to rename, so no sweep takes it for a dead
        // writer's; dropped unpublished, it deletes itself.
        let (temp, written) = share::create_temp_and_write(
            self.root.pool(),
            tree,
            self.root.records(),
            &self.root.temp_path(),
            &[],
            body,
        )
        .await?;
        if written as usize != body.len() {
            temp.discard().await;
            return Err(StoreError::Busy(format!("short write: {written} of {} bytes", body.len())));
        }
        match share::publish_and_close(temp, path, true).await {
            Ok(()) => Ok(()),
            Err((e, temp)) => {
                if let Some(t) = temp {
                    t.discard().await;
                }
                Err(e.into())
            }
        }
    }

    /// Makes `dirs` in order (a folder of `.smbgate/` and those under it),
    /// those already there left as they are.
    ///
    /// Errors: SMB failures other than the name being taken.
    pub(in crate::store) async fn make_dirs(&self, tree: &Tree, dirs: &[SharePath]) -> StoreResult<()> {
        for dir in dirs {
            match share::mkdir(tree, dir).await {
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
    pub(in crate::store) async fn state_entries(&self, tree: &Tree, dir: &SharePath) -> StoreResult<Vec<DirEntry>> {
        match share::list_dir(tree, dir).await {
            Ok(entries) => Ok(entries),
            Err(e) if is_not_found(&e) => Ok(Vec::new()),
            Err(e) => Err(e.into()),
        }
    }

    /// Removes `path`; none is not an error.
    ///
    /// Errors: SMB failures other than not-found.
    pub(in crate::store) async fn remove_state_file(&self, tree: &Tree, path: &SharePath) -> StoreResult<()> {
        match share::delete(tree, path, false).await {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
