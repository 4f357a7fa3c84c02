//! Buckets ([`Buckets`](super::Buckets)): `bucket` (the top-level
//! directories: list, create, head, delete), and what the gateway keeps of
//! a bucket in its own small files (`state_files`): `bucket_tags` and
//! `bucket_cors`, `bucket_notifications`; and the delivery queues of
//! bucket notifications (`event_queue`) and what their watcher of
//! people's changes needs (`bucket_watch`, and the marks S3 deletes leave
//! for it: `delete_marks`); the capacity of a bucket's
//! volume (`capacity`).

pub mod bucket;
pub(super) mod bucket_cors;
pub(super) mod bucket_notifications;
pub(super) mod bucket_tags;
pub mod bucket_watch;
pub mod capacity;
pub(super) mod delete_marks;
pub mod event_queue;
pub(super) mod state_files;
