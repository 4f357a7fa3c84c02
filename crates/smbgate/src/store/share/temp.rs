//! Temporary files that delete themselves unless published, and their
//! publishing by rename (failure classes 15, 16 and 26).

use super::Pool;
use super::{backoff, Failure, Result, ShareError};
use super::{Handle, Tree};
use smb_client::Error;
use smb_proto::create::{access, options, share, CloseRequest, CloseResponse, CreateContext, CreateRequest, FileId};
use smb_proto::info::{FullEa, SetFileInfo};
use smb_proto::io::{WriteRequest, WriteResponse};
use smb_proto::query::SetInfoRequest;
use smb_proto::NtStatus;

use std::sync::atomic::{AtomicBool, Ordering};

use super::record_io::set_eas;
use super::records::Records;
use super::replace::{close_and_delete, open_for_delete};
use super::requests::{delete_req, take, temp_req, QFID};
use super::spill;

/// Creates the temporary file `path` (QFid), with `eas` set by the CREATE.
///
/// Errors: the CREATE's NTSTATUS.
pub async fn create_temp(pool: &Pool, tree: &Tree, path: &str, eas: &[FullEa]) -> Result<TempFile> {
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    let ctx = if eas.is_empty() { &ctx[1..] } else { &ctx[..] };
    let handle = tree.open_durable(&temp_req(path, ctx)).await?;
    Ok(TempFile::new(pool, handle, path))
}

/// CREATE(temp `path`, `eas` in the CREATE) + WRITE(`data` at 0), the
/// handle left open, in one round trip. Returns the temp file and the byte
/// count the server reports written, to be checked before anything is
/// published. With empty `data` no WRITE is sent.
///
/// Errors: the CREATE's NTSTATUS (nothing left: a file the server made
/// anyway is deleted), or the WRITE's (the temp file is deleted as the
/// returned error drops it).
pub async fn create_temp_and_write(
    pool: &Pool,
    tree: &Tree,
    rec: &Records,
    path: &str,
    eas: &[FullEa],
    data: &[u8],
) -> Result<(TempFile, u32)> {
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    // A record that spills is set after the CREATE, which tells the
    // file's id its sidecar is named after.
    let in_create = rec.in_eas() && !eas.is_empty() && eas.iter().all(|e| e.value.len() <= spill::SPILL_OVER);
    let create = temp_req(path, if in_create { &ctx[..] } else { &ctx[1..] });
    let created = async {
        if data.is_empty() {
            return Ok((TempFile::new(pool, tree.open(&create).await?, path), None));
        }
        let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data };
        let [created, written] = take(tree.smb().compound(&[&create, &write]).await?)?;
        Ok::<_, ShareError>((TempFile::new(pool, Handle::from_response(tree, created)?, path), Some(written)))
    }
    .await;
    let (temp, written) = match created {
        Ok(c) => c,
        // Samba (4.17) makes the file, then fails to set an EA over the
        // share's room (STATUS_DISK_FULL) and leaves the file: remove it by
        // its name, which is new and ours (the CREATE makes, never opens).
        Err(e) if in_create && e.is_record_too_large() => {
            delete_by_name(path.to_string(), pool.clone(), None).await;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let n = match written {
        Some(w) => w.ok_or_status(&[])?.body(WriteResponse::decode)?.count,
        None => 0,
    };
    if !in_create && !eas.is_empty() {
        set_eas(temp.handle(), rec, path, eas).await?;
    }
    Ok((temp, n))
}

/// SET_INFO(rename to `target`; over an existing file only if `replace`) +
/// CLOSE on the temp file's handle, in one round trip. Without `replace`
/// the server alone decides whether the name is free (an existing target
/// fails with STATUS_OBJECT_NAME_COLLISION), so racing creators cannot both
/// win. On failure the rename's error comes back
/// with the temp file, still open, for a slower publish; a server that ran
/// the CLOSE anyway gets the file re-opened by name, and `None` comes back
/// only if that fails too (the file is then deleted by name).
pub async fn publish_and_close(
    temp: TempFile,
    target: &str,
    replace: bool,
) -> std::result::Result<(), (ShareError, Option<TempFile>)> {
    temp.publishing.store(true, Ordering::Release);
    let (tree, id) = (temp.handle().tree(), temp.handle().smb().id());
    let t = smb_client::tree::smb_path(target);
    let rename = SetInfoRequest { file_id: id, info: SetFileInfo::Rename { target: &t, replace_if_exists: replace } };
    let close = CloseRequest { file_id: id, post_query: false };
    let [renamed, closed] = match tree.smb().compound(&[&rename, &close]).await.map_err(Into::into).and_then(take::<2>)
    {
        Ok(rs) => rs,
        Err(e) => return Err((e, None)), // dropped: deleted by name, if it was not renamed
    };
    let closed = closed.status() == NtStatus::STATUS_SUCCESS;
    match renamed.ok_or_status(&[]) {
        Ok(_) => {
            temp.kept(closed);
            Ok(())
        }
        Err(e) if !closed => {
            temp.publishing.store(false, Ordering::Release);
            Err((e.into(), Some(temp)))
        }
        Err(e) => {
            let path = temp.path.clone();
            let pool = temp.pool.clone();
            let id = temp.shared_name.then(|| temp.handle().info().on_disk_id()).flatten();
            temp.kept(true);
            match open_for_delete(&tree, &path, false).await {
                Ok(h) => Err((e.into(), Some(TempFile::new(&pool, h, &path)))),
                Err(_) => {
                    CLEANUPS.spawn(delete_by_name(path, pool, id));
                    Err((e.into(), None))
                }
            }
        }
    }
}

/// A temporary file under `.smbgate\tmp`, open on one connection. Dropped
/// before [`TempFile::keep`], it deletes its file: through its handle, or,
/// if that handle's connection has died (the likeliest reason the request
/// failed), by name over another pooled connection. Once a publish of it
/// has been sent ([`TempFile::publishing`]) it is deleted by name only: a
/// temp file already renamed into place is never touched.
pub struct TempFile {
    handle: Option<Handle>,
    path: String,
    pool: Pool,
    publishing: AtomicBool,
    /// Its name is not private (a part claim's is the part's record), so
    /// another writer may rename its own file over it.
    shared_name: bool,
}

impl TempFile {
    /// Takes charge of the temp file at `path`, open as `handle`.
    pub fn new(pool: &Pool, handle: Handle, path: &str) -> TempFile {
        TempFile {
            handle: Some(handle),
            path: path.to_string(),
            pool: pool.clone(),
            publishing: AtomicBool::new(false),
            shared_name: false,
        }
    }

    /// [`TempFile::new`] for a file at a name others may rename over (a
    /// part claim): it is deleted only while that name is still its own.
    pub fn with_shared_name(pool: &Pool, handle: Handle, path: &str) -> TempFile {
        let mut t = TempFile::new(pool, handle, path);
        t.shared_name = true;
        t
    }

    /// The open handle.
    pub fn handle(&self) -> &Handle {
        self.handle.as_ref().expect("present until keep or discard")
    }

    /// The share-relative path the file was created at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Makes sure the handle is usable after its connection was lost:
    /// takes `replacement` (the same file, reopened by a writer on another
    /// connection) if given, else reopens the file itself on a pooled
    /// connection (`smb_client::durable`). A live handle is kept as it is.
    ///
    /// Errors: the reopen's (the file is gone or is another file, or no
    /// connection came back).
    pub async fn revive(&mut self, replacement: Option<Handle>) -> Result<()> {
        let handle = self.handle.as_ref().expect("present until keep or discard");
        if !handle.smb().tree().conn().is_poisoned() {
            return Ok(()); // a replacement (if any) is dropped, and closes itself
        }
        let fresh = match replacement {
            Some(h) => h,
            None => reopen(&self.pool, handle).await?,
        };
        self.handle = Some(fresh);
        Ok(())
    }

    /// Says that a rename of this file into place is being sent: from now
    /// on a discard deletes it by its temp name, never through the handle,
    /// which may by then name the published object.
    pub fn publishing(&self) {
        self.publishing.store(true, Ordering::Release);
    }

    /// The file was published (or is to stay): closes the handle, leaving
    /// the file. Returns the CLOSE's post-query, if it succeeded.
    pub async fn keep(mut self) -> Option<CloseResponse> {
        self.handle.take().expect("present until keep or discard").close().await.ok()
    }

    /// The file was published; `handle_closed`: by a compound that also
    /// closed its handle.
    fn kept(mut self, handle_closed: bool) {
        let h = self.handle.take().expect("present until keep or discard");
        if handle_closed {
            h.into_smb().closed_elsewhere();
        }
    }

    /// Keeps the file if `result` is Ok, else deletes it; returns `result`.
    pub async fn settle<T, E>(self, result: std::result::Result<T, E>) -> std::result::Result<T, E> {
        match result {
            Ok(v) => {
                self.keep().await;
                Ok(v)
            }
            Err(e) => {
                self.discard().await;
                Err(e)
            }
        }
    }

    /// Deletes the file now.
    pub async fn discard(mut self) {
        let handle = self.handle.take().expect("present until keep or discard");
        let by_name = self.publishing.load(Ordering::Acquire);
        discard(handle, std::mem::take(&mut self.path), self.pool.clone(), by_name, self.shared_name).await;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            let by_name = self.publishing.load(Ordering::Acquire);
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                let path = std::mem::take(&mut self.path);
                CLEANUPS.spawn_on(discard(handle, path, self.pool.clone(), by_name, self.shared_name), &rt);
            }
        }
    }
}

/// Temp files being deleted in the background (a request that failed
/// answers before its temp file is gone), so that a stopping process
/// deletes them before it exits rather than leave them to the sweep.
static CLEANUPS: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

/// Waits up to `limit` for the temp files being deleted in the background
/// (for a process that is stopping).
pub async fn finish_cleanups(limit: std::time::Duration) {
    CLEANUPS.close();
    if tokio::time::timeout(limit, CLEANUPS.wait()).await.is_err() {
        tracing::warn!(
            left = CLEANUPS.len(),
            "stopping with temp files still being deleted; the sweep will remove them"
        );
    }
}

/// Opens `lost` (a handle whose connection is gone) again on a pooled
/// connection: its durable handle reclaimed, or the same file by name.
///
/// Errors: the handle cannot be reopened (not opened durable), or as
/// `smb_client::Tree::reopen`.
pub async fn reopen(pool: &Pool, lost: &Handle) -> Result<Handle> {
    let Some(info) = lost.smb().reopen_info() else {
        return Err(Error::ConnectionLost("the connection holding the file was lost".into()).into());
    };
    let tree = pool.smb().get().await?;
    tracing::info!(name = info.name(), "SMB connection lost under an open file; reopening it on another connection");
    Ok(Handle::of(tree.reopen(&info).await?.0))
}

/// Deletes a temp file: marks it delete-on-close through `handle` and
/// closes it, unless `by_name`; by name over a pooled connection when asked
/// to, or when the mark failed (the handle's connection is gone).
pub(crate) async fn discard(handle: Handle, path: String, pool: Pool, by_name: bool, shared_name: bool) {
    // Samba deletes a delete-on-close file by the name its handle has, so a
    // file another writer renamed over a shared name (a part claim replaced
    // by a concurrent upload of the part) would go in its place: mark ours
    // only while the name is still ours. Private temp names need no look.
    let id = shared_name.then(|| handle.info().on_disk_id()).flatten();
    if !by_name && id.is_some() && !name_is(&handle.tree(), &path, id).await {
        let _ = handle.close().await;
        return;
    }
    if !by_name {
        if close_and_delete(handle).await.is_ok() {
            return;
        }
        // Its connection died, or the mark was refused: the file still has
        // its temp name (nothing was published), so delete it by that.
    } else {
        drop(handle); // closed by its connection's reaper
    }
    delete_by_name(path, pool, id).await;
}

/// True unless `path` now names a file other than the one with on-disk
/// `id` (a file that is gone, or a failed look, counts as ours).
pub(crate) async fn name_is(tree: &Tree, path: &str, id: Option<u64>) -> bool {
    let req = CreateRequest {
        desired_access: access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        options: options::NON_DIRECTORY_FILE,
        contexts: &QFID,
        ..delete_req(path, share::ALL)
    };
    match tree.open(&req).await {
        Ok(h) => {
            let same = h.info().on_disk_id() == id;
            let _ = h.close().await;
            if !same {
                tracing::debug!(path, "a file of ours was replaced by another's under its name; kept");
            }
            same
        }
        Err(_) => true,
    }
}

/// Deletes the file still at `path` (a temp name) after it was marked
/// delete-on-close under that name and closed. Samba decides a
/// delete-on-close, at the last close, by the name that closing open knows
/// the file by, and an open another smbd process made before a rename
/// learns the new name only after the request it is in: a look of one
/// compound (CREATE, QUERY_INFO, CLOSE) that spans the rename and closes
/// last keeps the file (see `docs/failure-classes.md`, class 25). A name
/// already free is the usual answer (one round trip); a file still delete
/// pending (another open has it now) is deleted again in the background
/// once that open has closed ([`backoff::LEFTOVER`]; not a cleanup a
/// stopping process waits for, since the sweep covers it); anything else
/// is left to the temp sweep.
pub(crate) async fn remove_leftover(tree: &Tree, path: &str) {
    match try_remove(tree, path).await {
        Ok(deleted) => left_deleted(path, deleted),
        Err(Failure::DeletePending) => {
            let (tree, path) = (tree.clone(), path.to_string());
            tokio::spawn(async move {
                let mut wait = backoff::LEFTOVER.start();
                while wait.wait().await {
                    match try_remove(&tree, &path).await {
                        Ok(deleted) => return left_deleted(&path, deleted),
                        Err(Failure::DeletePending) => {}
                        Err(_) => return,
                    }
                }
            });
        }
        Err(_) => {}
    }
}

/// Logs a leftover that [`remove_leftover`] deleted.
fn left_deleted(path: &str, deleted: bool) {
    if deleted {
        tracing::debug!(path, "deleted a file its delete-on-close had left");
    }
}

/// One delete of the temp file `path` by name: whether a file went (false:
/// nothing was there), else why not (logged, unless delete pending: the
/// sweep removes what stays).
async fn try_remove(tree: &Tree, path: &str) -> std::result::Result<bool, Failure> {
    match super::delete(tree, path, false).await {
        Ok(()) => Ok(true),
        Err(e) if matches!(e.failure(), Failure::NameNotFound | Failure::PathNotFound) => Ok(false),
        Err(e) if e.failure() == Failure::DeletePending => Err(Failure::DeletePending),
        Err(e) => {
            tracing::debug!(path, error = %e, "temp file not deleted; the sweep will remove it");
            Err(e.failure())
        }
    }
}

/// Deletes `path` over a pooled connection; a missing file is fine (it was
/// renamed into place, or never written). With `id` (the on-disk id the
/// file had when it was ours), only that file: a part claim's name is the
/// part's record, which a concurrent upload of the part may have replaced
/// with its own, and that one must stay.
pub(crate) async fn delete_by_name(path: String, pool: Pool, id: Option<u64>) {
    let tree = match pool.smb().get().await {
        Ok(t) => Tree::new(t),
        Err(e) => return tracing::debug!(error = %e, "temp file not deleted; the sweep will remove it"),
    };
    if id.is_none() || name_is(&tree, &path, id).await {
        let _ = try_remove(&tree, &path).await;
    }
}
