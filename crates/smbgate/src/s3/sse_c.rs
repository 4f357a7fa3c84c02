//! SSE-C in S3's terms: the three `x-amz-server-side-encryption-customer-*`
//! headers made one key (or AWS's refusal), and the two that answers of an
//! SSE-C object carry. What the key does to the object is the store's
//! (`store::sse_c`).

use s3s::{S3Error, S3ErrorCode, S3Result};

use crate::store::meta::ObjectMeta;
use crate::store::sse_c::{CustomerKey, KeyRefusal, ALGORITHM};

/// The key the request's SSE-C headers give, `None` without them.
///
/// Errors: 400 InvalidEncryptionAlgorithmError for another algorithm than
/// AES256; 400 InvalidArgument for a missing header, a key that is not
/// 256 bits of base64, or an MD5 that is not the key's.
pub(super) fn customer_key(
    algorithm: Option<&str>,
    key: Option<&str>,
    md5: Option<&str>,
) -> S3Result<Option<CustomerKey>> {
    CustomerKey::from_headers(algorithm, key, md5).map_err(|e| {
        let code = match e {
            KeyRefusal::Algorithm => S3ErrorCode::InvalidEncryptionAlgorithmError,
            KeyRefusal::Argument(_) => S3ErrorCode::InvalidArgument,
        };
        S3Error::with_message(code, e.to_string())
    })
}

/// [`customer_key`] of an s3s input with the three SSE-C fields.
macro_rules! customer_key_of {
    ($i:expr) => {
        super::sse_c::customer_key(
            $i.sse_customer_algorithm.as_deref(),
            $i.sse_customer_key.as_deref(),
            $i.sse_customer_key_md5.as_deref(),
        )
    };
}
pub(super) use customer_key_of;

/// [`customer_key`] of a copy's source, from an s3s input with the three
/// `copy_source_sse_customer_*` fields.
macro_rules! source_key_of {
    ($i:expr) => {
        super::sse_c::customer_key(
            $i.copy_source_sse_customer_algorithm.as_deref(),
            $i.copy_source_sse_customer_key.as_deref(),
            $i.copy_source_sse_customer_key_md5.as_deref(),
        )
    };
}
pub(super) use source_key_of;

/// What an answer about the object of record `meta` says of its SSE-C
/// key: (`x-amz-server-side-encryption-customer-algorithm`, `...-key-MD5`),
/// none for an object stored without one.
pub(super) fn answer_fields(meta: &ObjectMeta) -> (Option<String>, Option<String>) {
    answer_for(meta.sse_c.as_ref().map(|r| r.key_md5.as_str()))
}

/// The same two fields for a write sealed under the key whose MD5 is
/// `key_md5` (none for a write without a key).
pub(super) fn answer_for(key_md5: Option<&str>) -> (Option<String>, Option<String>) {
    match key_md5 {
        Some(md5) => (Some(ALGORITHM.to_string()), Some(md5.to_string())),
        None => (None, None),
    }
}
