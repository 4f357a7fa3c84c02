//! Buckets ([`Buckets`](super::Buckets)): `bucket` (the top-level
//! directories: list, create, head, delete), and what the gateway keeps of
//! a bucket in its own small files (`state_files`): `bucket_tags` and
//! `bucket_cors`, `bucket_notifications`; and the delivery queues of
//! bucket notifications (`event_queue`).

pub mod bucket;
pub(super) mod bucket_cors;
pub(super) mod bucket_notifications;
pub(super) mod bucket_tags;
pub mod event_queue;
pub(super) mod state_files;
