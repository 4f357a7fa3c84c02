//! Multipart uploads ([`Uploads`](super::Uploads)), with all state on the
//! share: `multipart` (create, parts, abort), `stride` (the size of its
//! parts, fixed by the first), `part_checksums` (the
//! upload's checksum rules), `complete` (the parts joined, by `join`, and
//! published as a PUT is), `record_fit` (the completed object's record, slimmed
//! until the share keeps it), `upload_listing` (ListMultipartUploads), `removal` (an
//! upload's folder removed, also while a part still streams into it), and
//! `sweep` (what dead clients and expired uploads left behind).

pub mod complete;
mod join;
pub mod multipart;
pub mod part_checksums;
mod record_fit;
pub(super) mod removal;
pub(super) mod stride;
pub(super) mod sweep;
pub mod upload_listing;
