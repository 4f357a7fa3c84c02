//! What the store asks of a file it holds open, beside reading and writing
//! its bytes: its times and size now, whether it is being deleted, and
//! whether what opened is a file at all.

use super::Handle;
use super::Result;
use smb_proto::info::FileTimes;

/// The times, size and attributes of the open `handle` now
/// (QUERY_INFO FileBasicInformation and FileStandardInformation).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn query_times(handle: &Handle) -> Result<FileTimes> {
    handle.smb().tree().query_times(handle.smb().id()).await.map_err(Into::into)
}

/// True if the open `handle`'s file is being deleted: its last handle is
/// closing with a delete pending (FileStandardInformation.DeletePending).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn is_going(handle: &Handle) -> Result<bool> {
    Ok(handle.smb().tree().query_standard(handle.smb().id()).await?.is_going())
}

/// True if what opened is a directory, or no file at all: an open of a
/// directory that was removed while another handle held it (delete
/// pending) succeeds on Samba with no attributes, where every file has at
/// least FILE_ATTRIBUTE_NORMAL or ARCHIVE (MS-FSCC 2.6). Taken for a
/// file, it would answer 200 with an empty body.
pub fn not_a_file(times: &FileTimes) -> bool {
    times.is_directory() || times.attributes == 0
}
