//! S3 semantics on an SMB share: buckets are the top-level directories of
//! the share root, objects are plain files, metadata lives in one EA per
//! file (or a sidecar file on shares without EAs, see `records`), writes
//! are published by renaming a verified temporary file, and multipart
//! state lives on the share. Nothing here is kept in memory that another
//! gateway instance would need.
//!
//! Layers, bottom up: `share` is the only code that builds SMB requests
//! (handles that close themselves, temp files that delete themselves,
//! named compounds); `path`, `keys`, `meta` and `records` say where and
//! how an object is stored (`beside` where its name is also a directory);
//! the [`Root`] holds one share root and the rules every operation shares
//! (paths, case, creation locks, the caches a change is told to); above
//! it, six owners split the S3 operations between them ([`Reads`],
//! [`Writes`], [`Deletes`], [`Uploads`], [`Listings`], [`Buckets`]), each
//! in a folder of its name (see `operations`), sharing `conditions`,
//! `checksum` and `verify`; `versions` holds their versioned halves
//! (older versions, delete markers, Object Lock). [`Store`] is the six
//! together.

pub(crate) use share::backoff;
mod beside;
pub mod body_pace;
pub mod buckets;
pub mod budget;
mod case;
pub mod checksum;
pub mod conditions;
mod create_lock;
pub(crate) mod delete;
pub mod error;
pub mod fan_out;
mod folders;
pub mod keys;
pub mod listings;
/// The in-memory share's data path (test support).
#[cfg(test)]
#[path = "../../tests/support/memory_data.rs"]
mod memory_data;
/// The in-memory share's lookups (test support).
#[cfg(test)]
#[path = "../../tests/support/memory_lookups.rs"]
mod memory_lookups;
/// What tests put on the in-memory share and read of it (test support).
#[cfg(test)]
#[path = "../../tests/support/memory_setup.rs"]
mod memory_setup;
/// The in-memory share the store's race tests run on: test support, kept
/// out of `src/` (`tests/support/` holds no test target of its own).
#[cfg(test)]
#[path = "../../tests/support/memory_share.rs"]
mod memory_share;
/// The in-memory share's model of names and opens (test support).
#[cfg(test)]
#[path = "../../tests/support/memory_state.rs"]
mod memory_state;
pub mod meta;
pub mod operations;
pub mod path;
pub mod reads;
mod root;
mod root_open;
/// How the in-memory share's operations take turns (test support).
#[cfg(test)]
#[path = "../../tests/support/steps.rs"]
mod steps;
pub mod uploads;
pub mod writes;
pub use share::records;
pub mod share;
mod share_data;
mod share_lookups;
mod share_ops;
pub mod sse_c;
pub mod tags;
pub mod types;
pub mod verify;
pub mod versions;

use std::time::Duration;

pub use budget::Budget;
pub use error::{StoreError, StoreResult};
pub use operations::{Buckets, Deletes, Listings, Reads, Store, Uploads, Writes};
pub use root::Root;
use share::{Failure, ShareError};

/// Tuning for the data path.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bytes kept in flight per pipelined stream.
    pub in_flight: usize,
    /// Split-streaming segment size in bytes.
    pub segment_size: u64,
    /// Segments fetched ahead for large GETs (1 = no split streaming).
    pub prefetch: fan_out::FanOut,
    /// Connections one large PUT or UploadPart body is spread over: fixed
    /// (1 = one connection) or chosen per body; see [`writes::put_lanes`].
    pub put_parallel: fan_out::FanOut,
    /// Bytes all GETs together may read ahead of their clients (READs in
    /// flight plus segments fetched ahead); see [`reads::stream`].
    pub read_ahead_budget: u64,
    /// Bytes all PUT and UploadPart bodies together may have in flight to
    /// the server (WRITEs sent, not yet acknowledged).
    pub write_behind_budget: u64,
    /// Age (by the server's clock) at which a multipart upload that was
    /// neither completed nor aborted is removed.
    pub multipart_expiry: Duration,
    /// Time between two sweeps of temp files and expired uploads.
    pub sweep_interval: Duration,
    /// Longest wait for the next bytes of a PUT or UploadPart body before
    /// the request fails with RequestTimeout (400).
    pub body_read_timeout: Duration,
    /// Once a body has taken `body_read_timeout`, the least average rate
    /// it must keep, in bytes per second (0: none); slower gets
    /// RequestTimeout (400).
    pub body_min_rate: u64,
    /// How long a directory listing is kept for the next pages of a
    /// paginated ListObjects (each use checks the directory's times first,
    /// see [`listings::listing_cache::DirCache`]).
    pub listing_cache_ttl: Duration,
    /// Bytes all cached listings may hold together (see
    /// [`listings::listing_cache::ListingBudget`]); clones of these options share it.
    pub listing_cache: listings::listing_cache::ListingBudget,
    /// Most directories one ListObjects page enters; a page that reaches it
    /// ends early, truncated, with a continuation token (see
    /// [`listings::walk::ListRequest::max_dirs`]).
    pub list_max_dirs: usize,
    /// Most entries of one directory a listing holds at once: a larger
    /// directory is listed in windows of this many entries, each one full
    /// read of it on the share (see [`listings::dir_window`]).
    pub list_window: usize,
    /// Local disk (in the temporary directory) for the names a listing's
    /// window lets go, so that its later windows need no new read of the
    /// directory (see [`listings::spill_runs`]); clones share it.
    pub list_spill: listings::spill_runs::SpillBudget,
    /// Most stored versions and delete markers put in one folder of a
    /// key's versions before a new shard of it is begun (see
    /// [`versions::shards`]).
    pub versions_per_folder: usize,
    /// The object cache for HEAD and small GETs (see [`reads::object_cache`]).
    pub cache: reads::object_cache::CacheOptions,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            in_flight: 64 << 20,
            segment_size: 8 << 20,
            prefetch: fan_out::FanOut::Auto,
            put_parallel: fan_out::FanOut::Auto,
            read_ahead_budget: 512 << 20,
            write_behind_budget: 512 << 20,
            multipart_expiry: Duration::from_secs(7 * 24 * 3600),
            sweep_interval: Duration::from_secs(300),
            body_read_timeout: Duration::from_secs(60),
            body_min_rate: 1024,
            listing_cache_ttl: Duration::from_secs(30),
            listing_cache: listings::listing_cache::ListingBudget::new(64 << 20),
            list_max_dirs: 1000,
            list_window: 1_000_000,
            list_spill: listings::spill_runs::SpillBudget::new(1 << 30),
            versions_per_folder: 256,
            cache: reads::object_cache::CacheOptions::default(),
        }
    }
}

/// Directory under the root holding gateway state.
pub const INTERNAL: &str = keys::INTERNAL_DIR;

/// Retries `f` while the server reports a sharing violation
/// ([`backoff::SHARING`], failure class 12): another client's open blocks
/// ours only briefly.
pub async fn retry_sharing<T, F, Fut>(f: F) -> Result<T, ShareError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ShareError>>,
{
    backoff::retry(&backoff::SHARING, |e| e.failure() == Failure::SharingViolation, f).await
}

/// Like [`retry_sharing`], for a rename over a file that another handle
/// holds open: Samba refuses it with STATUS_ACCESS_DENIED while a
/// concurrent writer or reader has it open (failure class 13), so that is
/// retried too ([`backoff::RENAME_OVER_OPEN`]).
pub async fn retry_busy<T, F, Fut>(f: F) -> Result<T, ShareError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ShareError>>,
{
    backoff::retry(&backoff::RENAME_OVER_OPEN, share::is_busy, f).await
}

/// Like [`retry_sharing`], for an open of a key that may be in the middle
/// of an If-Match swap (renamed aside, the new version not yet renamed in:
/// two steps of one compound on the server, failure class 25): a
/// not-found is looked at again ([`backoff::SWAP_GAP`]), and a sharing
/// violation (another If-Match writer holds the key) waits for that
/// writer's turn ([`backoff::SWAP_TURN`]).
pub async fn retry_swap<T, F, Fut>(mut f: F) -> Result<T, ShareError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ShareError>>,
{
    let turn = |e: &ShareError| e.failure() == Failure::SharingViolation;
    let mut gap = backoff::SWAP_GAP.start();
    loop {
        match backoff::retry(&backoff::SWAP_TURN, turn, &mut f).await {
            Err(e) if share::is_not_found(&e) && gap.wait().await => {}
            r => return r,
        }
    }
}
