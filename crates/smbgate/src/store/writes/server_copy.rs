//! CopyObject's bytes, over any [`ShareData`]: a range of the open source
//! copied by the server (COPYCHUNK) into the target's temp file, then the
//! source asked again, so that a copy of a source that changed meanwhile
//! (rewritten in place by someone on the share, or cut short) is refused
//! rather than published as a mix of two versions. The gateway runs it on
//! the live share (`copy.rs`); its unit tests on the in-memory share
//! (`server_copy_test.rs`).

use std::ops::Range;

use crate::store::share_data::ShareData;
use crate::store::types::ObjectInfo;
use crate::store::{StoreError, StoreResult};

/// Copies `range` of `src`, the source `info` describes, to the start of
/// `temp`, and checks that the source is still what `info` says (size and
/// LastWriteTime). Returns the bytes copied.
///
/// Errors: Busy (503, to retry) if the copy stopped short or the source
/// changed during it (also when that failed the copy); SMB failures.
pub(in crate::store) async fn copy_range<S: ShareData>(
    s: &S,
    src: &S::Handle,
    info: &ObjectInfo,
    range: Range<u64>,
    temp: &S::Handle,
) -> StoreResult<u64> {
    let len = range.end - range.start;
    let copied = match len {
        0 => Ok(0),
        _ => s.copy_chunks(src, range.start, temp, 0, len).await,
    };
    // Asked even after a failed copy: a source cut short meanwhile fails
    // the copy (its range is past the end), which is a change to retry,
    // not the server's error.
    let now = s.query_times(src).await?;
    if now.end_of_file != info.size || now.last_write != info.last_modified {
        return Err(StoreError::Busy("the source changed during the copy; retry".into()));
    }
    let n = copied?;
    if n != len {
        return Err(StoreError::Busy(format!("copy stopped after {n} of {len} bytes")));
    }
    Ok(len)
}

#[cfg(test)]
#[path = "server_copy_test.rs"]
mod tests;
