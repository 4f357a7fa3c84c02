//! The share's size and free space, as the server answers for the volume
//! a directory is on (SMB2 QUERY_INFO FileFsFullSizeInformation).

use super::requests::read_req;
use super::{Result, Tree};

/// The size and free space of the volume `path` is on, in bytes: the
/// total, and what the gateway's account may still write (quotas
/// included: CallerAvailableAllocationUnits).
///
/// Errors: the CREATE's or QUERY_INFO's NTSTATUS.
pub async fn space(tree: &Tree, path: &str) -> Result<(u64, u64)> {
    let handle = tree.open(&read_req(path)).await?;
    let got = handle.smb().tree().fs_full_size(handle.smb().id()).await;
    let _ = handle.close().await;
    let s = got?;
    let unit = u64::from(s.sectors_per_unit) * u64::from(s.bytes_per_sector);
    Ok((s.total_units.saturating_mul(unit), s.caller_available_units.saturating_mul(unit)))
}
