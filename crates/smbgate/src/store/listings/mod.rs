//! ListObjects and ListObjectsV2 ([`Listings`](super::Listings)): `walk`
//! emits keys in S3 order over a tree of directories that `dir_source`
//! reads from the share (asking `entry_lookups` which directories are
//! markers, and `short_aliases` which names are only 8.3 aliases), a
//! large one in `dir_window`s, each held compactly as `names`, whose later
//! windows come from `spill_runs` on local disk;
//! `dir_reads` lets concurrent listings of one directory share a read, and
//! `listing_cache` keeps listings for the next pages.

pub(super) mod dir_reads;
pub mod dir_source;
pub mod dir_window;
pub(crate) mod entry_lookups;
pub mod listing_cache;
pub mod names;
mod short_aliases;
pub mod spill_runs;
pub mod walk;
