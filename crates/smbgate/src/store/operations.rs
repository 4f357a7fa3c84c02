//! The store's S3 operations, in four handles over one store: objects,
//! multipart uploads, buckets and listings. Each borrows the [`Store`]
//! (one `Arc` of shared state: the pool, the records, the budgets, the
//! listing cache) and holds nothing of its own, so they cost nothing to
//! make; the S3 adapter reaches every operation through one of them, and
//! the rules they share stay on the store, private to `store`.

use super::Store;

/// GET, HEAD, PUT, copy, DELETE and tagging of objects (`object_open`,
/// `read_plan`, `put`, `copy`, `delete`, `tagging`).
#[derive(Clone, Copy)]
pub struct Objects<'a>(pub(super) &'a Store);

/// Multipart uploads: create, parts, list, abort, complete (`multipart`,
/// `complete`).
#[derive(Clone, Copy)]
pub struct Uploads<'a>(pub(super) &'a Store);

/// Buckets: list, create, head, delete, tags and CORS rules (`bucket`,
/// `tagging`, `bucket_cors`).
#[derive(Clone, Copy)]
pub struct Buckets<'a>(pub(super) &'a Store);

/// ListObjects and ListObjectsV2 (`dir_source`, `walk`).
#[derive(Clone, Copy)]
pub struct Listings<'a>(pub(super) &'a Store);

impl Store {
    /// The object operations of this store.
    pub fn objects(&self) -> Objects<'_> {
        Objects(self)
    }

    /// The multipart-upload operations of this store.
    pub fn uploads(&self) -> Uploads<'_> {
        Uploads(self)
    }

    /// The bucket operations of this store.
    pub fn buckets(&self) -> Buckets<'_> {
        Buckets(self)
    }

    /// The listing operations of this store.
    pub fn listings(&self) -> Listings<'_> {
        Listings(self)
    }
}
