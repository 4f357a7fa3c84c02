//! Everything that patches s3s, or stands in for it where it cannot be
//! used as it is, in one place. On an s3s upgrade, recheck each against
//! the new version (the e2e tests named in each module fail if a patch is
//! no longer right):
//!
//! - [`answers`]: answers s3s writes otherwise than AWS (a ranged HEAD's
//!   200, CompleteMultipartUpload's second XML declaration, the quoted
//!   ETag of GetObjectAttributes, PutBucketTagging's 200).
//! - [`post_object`]: POST Object, answered beside s3s, which reads a
//!   form's file whole into memory.
//! - [`sigv2`]: SigV2 signatures checked in constant time before s3s,
//!   which compares them with `!=`.
//! - [`chunk_bounds`]: aws-chunked chunk sizes held to a bound before s3s
//!   buffers a chunk whole; a trailer mode without `x-amz-trailer`
//!   admitted (s3s refuses it, AWS does not).
//! - [`query_checksum`]: a checksum signed into a URL's query, which s3s
//!   reads from headers only.
//! - [`ignored_range`]: a Range header that does not parse, which s3s
//!   refuses while decoding and AWS ignores (routed by `crate::routes`).
//! - [`delete_objects`]: DeleteObjects' key list read only after its
//!   signature and access are checked, and checked against its digest
//!   (s3s reads it first and checks no digest; routed by `crate::routes`).

pub mod answers;
pub mod chunk_bounds;
pub mod delete_objects;
pub mod ignored_range;
pub mod post_object;
pub mod query_checksum;
pub mod sigv2;
