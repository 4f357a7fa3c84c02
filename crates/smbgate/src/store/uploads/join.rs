//! How CompleteMultipartUpload joins the parts, over any [`ShareData`]:
//! in place, copying the parts stored apart into the upload's data file at
//! their place and cutting it to the object's size; or by copy, every part
//! in order into a temp file whose size is then checked. A part file is
//! copied only if it is still the file the plan was made of: a part
//! uploaded again meanwhile is refused, never joined under the old ETag.
//! The server copies the bytes (COPYCHUNK), so none pass through the
//! gateway. The gateway runs these on the live share (`complete.rs`); their
//! unit tests on the in-memory share (`join_test.rs`).

use super::multipart::PartInfo;
use crate::store::path::SharePath;
use crate::store::share_data::ShareData;
use crate::store::share_lookups::ShareLookups;
use crate::store::{StoreError, StoreResult};

/// Copies the parts of `parts` stored apart (their files named by
/// `part_path`) into the data file `data` at their place (`i` × `stride`
/// for the `i`-th), then cuts it to `size` bytes.
///
/// Errors: InvalidPart for a part uploaded again since the plan; Busy for
/// a copy cut short; SMB failures.
pub(in crate::store) async fn join_in_place<S: ShareData>(
    s: &S,
    data: &S::Handle,
    parts: &[PartInfo],
    part_path: impl Fn(i32) -> SharePath,
    stride: u64,
    size: u64,
) -> StoreResult<()> {
    for (i, p) in parts.iter().enumerate() {
        if p.data_offset.is_none() && p.size > 0 {
            let f = s.open_read(&part_path(p.number)).await?;
            is_planned(s, &f, p)?;
            copy_whole(s, &f, 0, data, i as u64 * stride, p.size, p.number).await?;
        }
    }
    s.set_end_of_file(data, size).await?;
    Ok(())
}

/// Copies every part of `parts` in order into `temp`: from the data file
/// at its offset (`data_path`), or from its own file (`part_path`, which
/// must still be the planned one). Checks that `temp` then holds their
/// sum.
///
/// Errors: InvalidPart for a part uploaded again since the plan; Busy for
/// a copy cut short or a temp file of another size; SMB failures.
pub(in crate::store) async fn join_by_copy<S: ShareData>(
    s: &S,
    temp: &S::Handle,
    parts: &[PartInfo],
    data_path: &str,
    part_path: impl Fn(i32) -> SharePath,
) -> StoreResult<()> {
    let mut off = 0u64;
    for p in parts {
        if p.stored > 0 {
            let (f, src_off) = match p.data_offset {
                Some(o) => (s.open_read(data_path).await?, o),
                None => {
                    let f = s.open_read(&part_path(p.number)).await?;
                    is_planned(s, &f, p)?;
                    (f, 0)
                }
            };
            copy_whole(s, &f, src_off, temp, off, p.stored, p.number).await?;
        }
        off += p.stored;
    }
    let t = s.query_times(temp).await?;
    if t.end_of_file != off {
        return Err(StoreError::Busy("assembled object has the wrong size".into()));
    }
    Ok(())
}

/// Copies `len` bytes of `src` at `src_off` to `dst` at `dst_off` for
/// part `number`.
///
/// Errors: Busy if fewer were copied; the copy's SMB failure.
async fn copy_whole<S: ShareData>(
    s: &S,
    src: &S::Handle,
    src_off: u64,
    dst: &S::Handle,
    dst_off: u64,
    len: u64,
    number: i32,
) -> StoreResult<()> {
    let n = s.copy_chunks(src, src_off, dst, dst_off, len).await?;
    if n != len {
        return Err(StoreError::Busy(format!("part {number} copy was short")));
    }
    Ok(())
}

/// InvalidPart unless the part file `f` opened is the one the plan was
/// made of: same on-disk id, LastWriteTime and size. A part uploaded again
/// meanwhile would be joined under the ETag of the old one.
fn is_planned<S: ShareLookups>(s: &S, f: &S::Handle, p: &PartInfo) -> StoreResult<()> {
    let now = s.created(f);
    match (now.on_disk_id(), now.times.last_write, now.times.end_of_file) == (p.disk_id, p.last_modified, p.stored) {
        true => Ok(()),
        false => Err(StoreError::InvalidPart(format!("part {} was uploaded again while completing", p.number))),
    }
}

#[cfg(test)]
#[path = "join_test.rs"]
mod tests;
