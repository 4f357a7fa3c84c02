//! Opens that delete or replace what a path names: checked against its
//! record (conditional deletes, If-Match), pinned to the file the path
//! names now (clustered Samba), the If-Match swap, and the renames and
//! deletes through a handle.

use super::Result;
use super::{Handle, Tree};
use smb_proto::create::{access, options, share, CloseRequest, CreateRequest, FileId};
use smb_proto::info::SetFileInfo;
use smb_proto::query::SetInfoRequest;
use smb_proto::NtStatus;

use super::backoff;
use super::lookup::{compound_with_record, decode_name, opening, record_or_retry, stat_key};
use super::records::Records;
use super::requests::{delete_req, meta_query, read_req, take, CLOSE_RELATED, NAME_QUERY};
use crate::store::meta::{ObjectMeta, META_EA};

/// Opens an existing file for DELETE, sharing everything (`exclusive`:
/// sharing nothing, so another open makes it fail with
/// STATUS_SHARING_VIOLATION).
pub async fn open_for_delete(tree: &Tree, path: &str, exclusive: bool) -> Result<Handle> {
    tree.open(&delete_req(path, if exclusive { 0 } else { share::ALL })).await.map_err(Into::into)
}

/// CREATE(DELETE, read attributes and EAs; not a directory) + QUERY_INFO(our
/// EA), the handle left open: a delete that must first check whose file it
/// is (case-insensitive shares), or its ETag (If-Match). With `exclusive`
/// it shares only READ, so that of racing conditional deletes one holds the
/// file at a time and the next finds it gone.
///
/// Errors: the CREATE's NTSTATUS, e.g. STATUS_FILE_IS_A_DIRECTORY, or
/// STATUS_SHARING_VIOLATION while an `exclusive` holder has it.
pub async fn open_delete_with_meta(
    tree: &Tree,
    rec: &Records,
    path: &str,
    name: bool,
    exclusive: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    open_for_delete_with_meta(tree, rec, path, if exclusive { share::READ } else { share::ALL }, name).await
}

/// CREATE(DELETE, read attributes and EAs; not a directory; sharing only
/// READ) + QUERY_INFO(our EA), the handle left open: the compare-and-swap
/// lock of an If-Match write. While it is open nobody else can write,
/// rename or delete the file, or rename another over it (their opens meet a
/// sharing violation); readers still read.
///
/// Errors: the CREATE's NTSTATUS (STATUS_SHARING_VIOLATION while another
/// writer holds the file, not-found statuses).
pub async fn open_to_replace(tree: &Tree, rec: &Records, path: &str) -> Result<(Handle, Option<ObjectMeta>)> {
    let (handle, meta, _) = open_for_delete_with_meta(tree, rec, path, share::READ, false).await?;
    Ok((handle, meta))
}

/// [`open_for_delete_once`], checked, when the open pins its path, to hold
/// the file that path names now. A clustered Samba (CTDB) can answer an
/// open that waited on a sharing violation with the file the path named
/// when it began, though the holder renamed it away meanwhile; that handle
/// would then compare an old ETag and rename or delete by a stale name
/// (two If-Match winners across nodes). Once the pinning handle is open the
/// file cannot move, so a stat of the path that finds its on-disk id holds
/// for as long as the handle does.
///
/// Errors: as [`open_for_delete_once`]; STATUS_SHARING_VIOLATION if every
/// try came back stale.
pub(crate) async fn open_for_delete_with_meta(
    tree: &Tree,
    rec: &Records,
    path: &str,
    share_access: u32,
    name: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    let pins = share_access & share::DELETE == 0;
    let mut stale = backoff::STALE_PIN.start();
    loop {
        let (handle, meta, on_disk) = open_for_delete_once(tree, rec, path, share_access, name).await?;
        let id = handle.info().on_disk_id();
        if !pins || id.is_none() {
            return Ok((handle, meta, on_disk));
        }
        match stat_key(tree, path).await {
            Ok(Some(now)) if Some(now.id) == id => return Ok((handle, meta, on_disk)),
            Ok(_) => {}
            Err(e) => {
                let _ = handle.close().await;
                return Err(e);
            }
        }
        let _ = handle.close().await;
        tracing::debug!(path, stale = stale.pauses() + 1, "a pinning open came back with a file no longer at its path");
        if !stale.wait().await {
            break;
        }
    }
    Err(super::failure::sharing_violation())
}

pub(crate) async fn open_for_delete_once(
    tree: &Tree,
    rec: &Records,
    path: &str,
    share_access: u32,
    name: bool,
) -> Result<(Handle, Option<ObjectMeta>, Option<String>)> {
    let create = CreateRequest {
        desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA,
        share_access,
        options: options::NON_DIRECTORY_FILE,
        ..read_req(path)
    };
    let names = [META_EA];
    let q = meta_query(&names);
    let mut chain = opening(rec, &create, &q);
    if name {
        chain.push(&NAME_QUERY);
    }
    let pins = share_access & share::DELETE == 0;
    let mut other_version = backoff::OTHER_VERSION.start();
    loop {
        let (rs, answer) = compound_with_record(tree, rec, path, &chain, pins).await?;
        let mut rs = rs.into_iter();
        let handle = Handle::from_response(tree, rs.next().expect("one answer per request"))?;
        let on_disk = match rs.next() {
            Some(r) if name => decode_name(&r)?,
            _ => None,
        };
        match record_or_retry(rec, tree, path, answer, handle.info(), &mut other_version).await? {
            Some(meta) => return Ok((handle, meta, on_disk)),
            // Closed before the next open, which it would refuse.
            None => {
                let _ = handle.close().await;
            }
        }
    }
}

/// The swap of an If-Match write, in one unrelated compound on the lock's
/// connection (each step on its own handle): SET_INFO(rename the locked
/// file to `backup`) then SET_INFO(rename `file`, the new version, to
/// `target`), neither replacing anything. The second can only succeed once
/// the first has freed the name, and readers meet the name free only
/// between two steps of one compound. Returns each rename's result.
///
/// Errors: a connection error (neither result is known).
pub async fn swap_in(lock: &Handle, backup: &str, file: &Handle, target: &str) -> Result<(Result<()>, Result<()>)> {
    let (b, t) = (smb_client::tree::smb_path(backup), smb_client::tree::smb_path(target));
    let away =
        SetInfoRequest { file_id: lock.smb().id(), info: SetFileInfo::Rename { target: &b, replace_if_exists: false } };
    let into =
        SetInfoRequest { file_id: file.smb().id(), info: SetFileInfo::Rename { target: &t, replace_if_exists: false } };
    let [a, i] = take(lock.smb().tree().compound_unrelated(&[&away, &into]).await?)?;
    Ok((a.ok_or_status(&[]).map(|_| ()).map_err(Into::into), i.ok_or_status(&[]).map(|_| ()).map_err(Into::into)))
}

/// CREATE(`source`, DELETE) + SET_INFO(rename to `target`, over an existing
/// file only if `replace`) + CLOSE in one round trip: a rename through a
/// handle of this connection.
///
/// Errors: the first failing step's NTSTATUS (a failed CLOSE after the
/// rename does not undo it and is not an error).
pub async fn rename_through_new_handle(tree: &Tree, source: &str, target: &str, replace: bool) -> Result<()> {
    let name = smb_client::tree::smb_path(source);
    let open = delete_req(&name, share::ALL);
    let t = smb_client::tree::smb_path(target);
    let rename = SetInfoRequest {
        file_id: FileId::RELATED,
        info: SetFileInfo::Rename { target: &t, replace_if_exists: replace },
    };
    let [created, renamed, _closed] = take(tree.smb().compound(&[&open, &rename, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    renamed.ok_or_status(&[])?;
    Ok(())
}

/// Renames the open `handle` to `target`, over an existing file only if
/// `replace` (else STATUS_OBJECT_NAME_COLLISION).
pub async fn rename(handle: &Handle, target: &str, replace: bool) -> Result<()> {
    handle.smb().tree().rename(handle.smb().id(), target, replace).await.map_err(Into::into)
}

/// Marks the open `handle` delete-on-close.
pub async fn delete_on_close(handle: &Handle) -> Result<()> {
    handle
        .smb()
        .tree()
        .set_info(handle.smb().id(), SetFileInfo::Disposition { delete_pending: true })
        .await
        .map_err(Into::into)
}

/// SET_INFO(delete-on-close) + CLOSE of `handle` in one round trip: the
/// file goes once its other opens close.
///
/// Errors: the mark's NTSTATUS (the CLOSE runs either way).
pub async fn close_and_delete(handle: Handle) -> Result<()> {
    let mark = SetInfoRequest { file_id: handle.smb().id(), info: SetFileInfo::Disposition { delete_pending: true } };
    let close = CloseRequest { file_id: handle.smb().id(), post_query: false };
    let r = handle.smb().tree().compound(&[&mark, &close]).await.map_err(Into::into).and_then(take::<2>);
    match r {
        Ok([marked, closed]) => {
            if closed.status() == NtStatus::STATUS_SUCCESS {
                handle.into_smb().closed_elsewhere();
            }
            marked.ok_or_status(&[]).map(|_| ()).map_err(Into::into)
        }
        Err(e) => Err(e), // the handle, dropped, is closed by its reaper
    }
}
