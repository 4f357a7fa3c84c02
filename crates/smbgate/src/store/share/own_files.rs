//! Opens of the files the gateway keeps for itself: lock files that exist
//! while held (the event queue's), upload state, part claims, data files and write lanes.

use super::Result;
use super::{Handle, Tree};
use smb_client::Error;
use smb_proto::create::{access, options, share, CreateRequest, Disposition, FileId};
use smb_proto::info::{class, info_type, SetFileInfo, StandardInfo};
use smb_proto::io::{WriteRequest, WriteResponse};
use smb_proto::query::{OutputBuffer, QueryInfoRequest};
use smb_proto::NtStatus;

use super::requests::{take, temp_req, upload_file_req, CLOSE_RELATED, QFID};

/// CREATE(new file `path`, sharing nothing, delete-on-close): a lock that
/// exists exactly while this handle is open, and that only one opener can
/// create (the server's create-if-absent is atomic, where its rename
/// without ReplaceIfExists is not: Samba checks the target, then renames
/// over whatever is there by then). Returns `None` if the file exists
/// already, is being deleted, or is open, or if it lost its name while it
/// was being created (below).
///
/// Samba makes the file before it records the open, so a taker that finds
/// the file unheld in between takes it for a crash's leftover and deletes
/// it; this open then holds a file without a name while the next creator
/// makes a new one, and two would hold the lock. So the same compound asks,
/// once the open is recorded (no one can delete the file after that), how
/// many names the file has (FileStandardInformation): none means the lock
/// is not held. The handle is asked, not the name: a new file at the name
/// could carry the old one's inode number and, on a coarse clock, its
/// CreationTime.
///
/// Errors: any other failing status.
pub async fn create_lock(tree: &Tree, path: &str) -> Result<Option<Handle>> {
    let create = CreateRequest::new_file(path, access::DELETE | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE)
        .sharing(0)
        .options(options::DELETE_ON_CLOSE);
    let standard = QueryInfoRequest {
        info_type: info_type::FILE,
        class: class::FILE_STANDARD_INFORMATION,
        output_buffer_length: 24,
        ea_names: &[],
        additional_information: 0,
        file_id: FileId::RELATED,
    };
    let [created, linked] = take(tree.smb().compound(&[&create, &standard]).await?)?;
    if matches!(
        created.status(),
        NtStatus::STATUS_OBJECT_NAME_COLLISION | NtStatus::STATUS_DELETE_PENDING | NtStatus::STATUS_SHARING_VIOLATION
    ) {
        return Ok(None);
    }
    let lock = Handle::from_response(tree, created)?;
    let links = linked.ok_or_status(&[]).and_then(|r| r.body(|m| StandardInfo::decode(&OutputBuffer::decode(m)?.0)));
    match links {
        Ok(info) if info.number_of_links > 0 => Ok(Some(lock)),
        Ok(_) => {
            tracing::debug!(lock = path, "a creation lock lost its name while it was made; trying again");
            // Closing deletes nothing: the server unlinks on close only a
            // name that still leads to the file.
            let _ = lock.close().await;
            Ok(None)
        }
        Err(e) => {
            let _ = lock.close().await;
            Err(e.into())
        }
    }
}

/// Opens an existing file for writing data only: another lane of a body
/// spread over several connections (`store::spread`).
pub async fn open_lane(tree: &Tree, path: &str) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::FILE_WRITE_DATA | access::SYNCHRONIZE,
        ..upload_file_req(path, Disposition::Open)
    };
    tree.open_durable(&req).await.map_err(Into::into)
}

/// Opens, or creates, a file in an upload's directory for reading and
/// writing, shared with every other open.
pub async fn open_upload_file(tree: &Tree, path: &str) -> Result<Handle> {
    tree.open_durable(&upload_file_req(path, Disposition::OpenIf)).await.map_err(Into::into)
}

/// Creates a multipart part's claim record: a new empty file, read/write/
/// delete, that others may read or delete but not write.
///
/// Errors: STATUS_OBJECT_NAME_COLLISION if the part already has a record.
pub async fn create_claim(tree: &Tree, path: &str) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        share_access: share::READ | share::DELETE,
        contexts: &QFID, // a sidecar record is keyed by the on-disk id
        ..upload_file_req(path, Disposition::Create)
    };
    tree.open_durable(&req).await.map_err(Into::into)
}

/// Opens an upload's data file to complete it in place, or creates it if
/// `create` (no part is in it yet): read/write/delete (it is renamed into
/// place), QFid, shared with readers and deleters but not writers.
///
/// Errors: not-found kinds without `create` if the file is gone.
pub async fn open_data_file(tree: &Tree, path: &str, create: bool) -> Result<Handle> {
    let req = CreateRequest {
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        share_access: share::READ | share::DELETE,
        disposition: if create { Disposition::OpenIf } else { Disposition::Open },
        ..temp_req(path, &QFID)
    };
    tree.open(&req).await.map_err(Into::into)
}

/// CREATE(new file, fails if it exists) + WRITE(`data`) + CLOSE: a small
/// file written once by whoever creates it first. Returns false if the file
/// already existed.
///
/// Errors: the CREATE's NTSTATUS other than a collision; a short or failed
/// WRITE.
pub async fn create_once(tree: &Tree, path: &str, data: &[u8]) -> Result<bool> {
    let create = upload_file_req(path, Disposition::Create);
    let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data };
    let [created, written, _closed] = take(tree.smb().compound(&[&create, &write, &CLOSE_RELATED]).await?)?;
    if created.status() == NtStatus::STATUS_OBJECT_NAME_COLLISION {
        return Ok(false);
    }
    created.ok_or_status(&[])?;
    let n = written.ok_or_status(&[])?.body(WriteResponse::decode)?.count;
    if n as usize != data.len() {
        return Err(Error::InvalidArgument(format!("short write: {n} of {} bytes", data.len())).into());
    }
    Ok(true)
}

/// Truncates or extends the open `handle` to `size` bytes.
pub async fn set_end_of_file(handle: &Handle, size: u64) -> Result<()> {
    handle.smb().tree().set_info(handle.smb().id(), SetFileInfo::EndOfFile(size)).await.map_err(Into::into)
}
