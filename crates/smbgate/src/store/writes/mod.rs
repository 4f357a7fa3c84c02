//! PUT, POST, CopyObject and object tags ([`Writes`](super::Writes)). A PUT
//! runs `put` (the body streamed to a temp file, on one connection or
//! `spread` over several in lanes that `put_lanes` sizes, then verified),
//! then `publish` (the rename into place under the write's conditions:
//! `swap` for If-Match; `place` renames into the key's path, beside a
//! directory of its name, and `parents` makes the folders it needs). `copy` copies on the server (the bytes: `server_copy`), `sealed_copy`
//! through the gateway where SSE-C seals either side; `object_tags`
//! rewrites an object's record.

pub mod copy;
pub(super) mod object_tags;
pub(super) mod parents;
pub(super) mod place;
pub(super) mod publish;
pub(super) mod put;
pub mod put_lanes;
pub(super) mod sealed_copy;
mod server_copy;
pub(super) mod spread;
pub(super) mod swap;
