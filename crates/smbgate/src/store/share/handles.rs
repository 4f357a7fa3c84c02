//! What the store asks of a file it holds open, beside reading and writing
//! its bytes: its times and size now, whether it is being deleted, and its
//! whole content read through the pipeline (to hash a copy).

use bytes::Bytes;
use smb_client::{Handle, Result};
use smb_proto::info::FileTimes;

/// The times, size and attributes of the open `handle` now
/// (QUERY_INFO FileBasicInformation and FileStandardInformation).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn query_times(handle: &Handle) -> Result<FileTimes> {
    handle.tree().query_times(handle.id()).await
}

/// True if the open `handle`'s file is being deleted: its last handle is
/// closing with a delete pending (FileStandardInformation.DeletePending).
///
/// Errors: the QUERY_INFO's NTSTATUS.
pub async fn is_going(handle: &Handle) -> Result<bool> {
    Ok(handle.tree().query_standard(handle.id()).await?.is_going())
}

/// Reads up to `len` bytes of the open `handle` from offset 0 with
/// pipelined READs, keeping up to `in_flight` bytes in flight, and hands
/// each chunk to `sink` in order. Returns the bytes handed over (fewer
/// than `len` if the file ends first).
///
/// Errors: a READ's NTSTATUS, or `sink`'s error.
pub async fn read_all(
    handle: &Handle,
    len: u64,
    in_flight: usize,
    sink: impl FnMut(Bytes) -> Result<()>,
) -> Result<u64> {
    handle.tree().read_pipelined(handle.id(), 0, len, in_flight, sink).await
}
