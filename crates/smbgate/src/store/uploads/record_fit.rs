//! The record of a completed multipart object, written whole where the
//! share has room for it, else without what only GetObjectAttributes'
//! part list and partNumber GETs read: never a cut record.

use crate::store::meta::ObjectMeta;
use crate::store::share_ops::ShareOps;
use crate::store::{StoreError, StoreResult};

/// Writes `meta` as the record of `file` (open at `path`, to be published
/// as `key`) on `s`. A record the share cannot hold (about 4 KiB on ext4
/// for an extended attribute; the parts' checksums of an upload of
/// hundreds of parts take more) is written again without the parts'
/// checksums, then also without the part sizes, with a warning: the
/// object keeps its ETag, metadata and whole-object checksum.
///
/// Errors: the record's write, other than for its size; the slimmest
/// record's too.
pub(crate) async fn set_record_fitting<S: ShareOps>(
    s: &S,
    file: &S::Handle,
    path: &str,
    mut meta: ObjectMeta,
    key: &str,
) -> StoreResult<()> {
    loop {
        // Over what a record can carry: too large without asking
        // (`refused` is then None).
        let refused = match !s.may_hold_record(meta.record_len()) {
            true => None,
            false => match s.set_record(file, path, &meta).await {
                Err(e) if e.is_record_too_large() => Some(e),
                other => return Ok(other?),
            },
        };
        let dropped = if !meta.part_checksums.is_empty() {
            std::mem::take(&mut meta.part_checksums);
            "the parts' checksums"
        } else if !meta.parts.is_empty() {
            std::mem::take(&mut meta.parts);
            "the part sizes"
        } else {
            return Err(match refused {
                Some(e) => e.into(),
                None => StoreError::Smb(format!("the record of {key} is over what an EA can carry")),
            });
        };
        tracing::warn!(
            key,
            dropped,
            "the completed object's record is larger than the share keeps; written without {dropped}"
        );
    }
}

#[cfg(test)]
#[path = "record_fit_test.rs"]
mod tests;
