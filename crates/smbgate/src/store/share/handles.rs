//! What the store asks of a file it holds open, beside reading and writing
//! its bytes: its times and size now, and whether it is being deleted.

use super::Result;
use smb_client::Handle;
use smb_proto::info::FileTimes;

/// The times, size and attributes of the open `handle` now
/// (QUERY_INFO FileBasicInformation and FileStandardInformation).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn query_times(handle: &Handle) -> Result<FileTimes> {
    handle.tree().query_times(handle.id()).await.map_err(Into::into)
}

/// True if the open `handle`'s file is being deleted: its last handle is
/// closing with a delete pending (FileStandardInformation.DeletePending).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn is_going(handle: &Handle) -> Result<bool> {
    Ok(handle.tree().query_standard(handle.id()).await?.is_going())
}
