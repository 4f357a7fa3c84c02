//! Who owns which S3 operation: six owners over one share root, each
//! holding what its work needs. The S3 adapter reaches every operation
//! through one of them ([`Store::reads`] …); the rules they share (where a
//! key is kept, its creation lock, the caches a change must be told to)
//! stay on the [`Root`].
//!
//! | owner | operations | folder |
//! |---|---|---|
//! | [`Reads`] | HEAD, GET, the object cache's reading side | `reads/` |
//! | [`Writes`] | PUT, POST, CopyObject, object tags | `writes/` |
//! | [`Deletes`] | DeleteObject(s) | `delete.rs` |
//! | [`Uploads`] | multipart uploads, from create to complete, and their sweep | `uploads/` |
//! | [`Listings`] | ListObjects, ListObjectsV2 | `listings/` |
//! | [`Buckets`] | buckets, their tags and CORS rules | `buckets/` |
//!
//! On a versioned bucket each owner's operations have a versioned half in
//! `versions/` (methods of the same owners).
//!
//! An owner is cheap to clone (handles to shared state); one that builds
//! on another holds it (a copy reads, a completion publishes).

use std::sync::Arc;

use super::budget::Budget;
use super::root::Root;
use super::writes::put_lanes::LastKept;

/// HEAD and GET: cache, open, conditions, range and part bounds, read
/// plan, and the streamed body.
#[derive(Clone)]
pub struct Reads {
    pub(super) root: Root,
    /// GET read-ahead, all GETs together (and every identity's GETs).
    pub(super) read_ahead: Budget,
}

/// PUT, POST, CopyObject and object tags: bodies streamed to temp files,
/// checked, and published under their conditions.
#[derive(Clone)]
pub struct Writes {
    pub(super) root: Root,
    /// A copy reads its source; a conditional write looks at the target.
    pub(super) reads: Reads,
    /// PUT and UploadPart write-behind, all bodies together.
    pub(super) write_behind: Budget,
    /// The lanes the last adaptive PUT body kept, where the next starts
    /// from (shared by every identity's pool: one server).
    pub(super) put_lanes: LastKept,
}

/// DeleteObject and the deletes of DeleteObjects.
#[derive(Clone)]
pub struct Deletes {
    pub(super) root: Root,
    /// A conditional delete looks at the object first.
    pub(super) reads: Reads,
}

/// Multipart uploads: create, parts, list, abort, complete, and the sweep
/// of expired ones.
#[derive(Clone)]
pub struct Uploads {
    pub(super) root: Root,
    /// Parts are written and a completion published as PUTs are.
    pub(super) writes: Writes,
}

/// ListObjects and ListObjectsV2.
#[derive(Clone)]
pub struct Listings {
    pub(super) root: Root,
}

/// Buckets: list, create, head, delete, tags and CORS rules.
#[derive(Clone)]
pub struct Buckets {
    pub(super) root: Root,
}

/// The store over one share root: its six owners. A cheap handle (one
/// `Arc`), cloned per request.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Owners>,
}

struct Owners {
    root: Root,
    reads: Reads,
    writes: Writes,
    deletes: Deletes,
    uploads: Uploads,
    listings: Listings,
    buckets: Buckets,
}

impl Store {
    /// The owners over `root`, with the budgets and the lanes kept that
    /// every store of one process shares (see [`Store::for_pool`]).
    pub(super) fn assemble(root: Root, read_ahead: Budget, write_behind: Budget, put_lanes: LastKept) -> Store {
        let reads = Reads { root: root.clone(), read_ahead };
        let writes = Writes { root: root.clone(), reads: reads.clone(), write_behind, put_lanes };
        Store {
            inner: Arc::new(Owners {
                deletes: Deletes { root: root.clone(), reads: reads.clone() },
                uploads: Uploads { root: root.clone(), writes: writes.clone() },
                listings: Listings { root: root.clone() },
                buckets: Buckets { root: root.clone() },
                root,
                reads,
                writes,
            }),
        }
    }

    /// HEAD and GET.
    pub fn reads(&self) -> &Reads {
        &self.inner.reads
    }

    /// PUT, POST, CopyObject and object tags.
    pub fn writes(&self) -> &Writes {
        &self.inner.writes
    }

    /// DeleteObject(s).
    pub fn deletes(&self) -> &Deletes {
        &self.inner.deletes
    }

    /// Multipart uploads.
    pub fn uploads(&self) -> &Uploads {
        &self.inner.uploads
    }

    /// ListObjects and ListObjectsV2.
    pub fn listings(&self) -> &Listings {
        &self.inner.listings
    }

    /// Buckets, their tags and CORS rules.
    pub fn buckets(&self) -> &Buckets {
        &self.inner.buckets
    }

    /// The share root all six work on.
    pub fn root(&self) -> &Root {
        &self.inner.root
    }

    /// The GET read-ahead budget (see `stream`).
    pub fn read_ahead(&self) -> &Budget {
        &self.inner.reads.read_ahead
    }

    /// The PUT write-behind budget (see `spread`).
    pub fn write_behind(&self) -> &Budget {
        &self.inner.writes.write_behind
    }
}
