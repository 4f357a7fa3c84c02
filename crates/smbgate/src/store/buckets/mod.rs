//! Buckets ([`Buckets`](super::Buckets)): `bucket` (the top-level
//! directories: list, create, head, delete), and what the gateway keeps of
//! a bucket in its own small files (`state_files`): `bucket_tags` and
//! `bucket_cors`.

pub mod bucket;
pub(super) mod bucket_cors;
pub(super) mod bucket_tags;
pub(super) mod state_files;
