//! Requests that ask for a guarantee the gateway does not give are
//! refused, never accepted and ignored (failure class 34, in
//! docs/failure-classes.md): a backup tool
//! told 200 to `x-amz-object-lock-mode: COMPLIANCE` believes its backup
//! is immutable, and a client told 200 to an SSE-C key believes its data
//! is encrypted, while the share holds plain, deletable files.
//!
//! Object Lock headers are not refused here: whether a bucket has Object
//! Lock is the bucket's (see `s3::object_lock`), which answers 400
//! InvalidRequest "Bucket is missing Object Lock Configuration" for one
//! without it.
//!
//! SSE-C (`x-amz-server-side-encryption-customer-*`) is given on
//! PutObject, GetObject, HeadObject, GetObjectAttributes,
//! CreateMultipartUpload, UploadPart, CopyObject and UploadPartCopy (for
//! the copy and for its source; the store keeps such objects and parts
//! encrypted, `store::sse_c`; CompleteMultipartUpload and ListParts may
//! carry it too, as AWS allows), and only over TLS unless
//! the operator allows plain HTTP (`--sse-c-over-http`): elsewhere it is
//! 400 InvalidRequest "must be made over a secure connection", as AWS
//! answers.
//!
//! Refused, as AWS refuses them where the feature is missing:
//! - SSE-C on a form upload: 501 NotImplemented; on any other request
//!   (a delete, a listing) 400 InvalidRequest, as is a copy source's key
//!   on anything but a copy.
//! - SSE-KMS (`aws:kms`, `aws:kms:dsse`, a KMS key ID, an encryption
//!   context, a bucket key): 501 NotImplemented.
//! - SSE-S3 (`x-amz-server-side-encryption: AES256`): 501 NotImplemented
//!   unless the operator declares the share encrypted at rest
//!   (`--encrypted-at-rest`), since the gateway itself encrypts nothing.
//! - `x-amz-website-redirect-location` (website hosting) and
//!   `x-amz-write-offset-bytes` (appends): 501 NotImplemented.
//!
//! Accepted, as AWS treats them as no-ops here or the gateway keeps them:
//! ACL headers (documented as accepted without effect), storage classes,
//! `x-amz-request-payer`, `x-amz-expected-bucket-owner` (one owner per
//! gateway), `x-amz-mfa` (MFA Delete is never on: enabling it is 501),
//! and `x-amz-bypass-governance-retention` (the user's `bypass_governance`
//! decides what it allows).
//!
//! The check runs once the request is authenticated and authorised (an
//! unknown key still gets 403 first, as from AWS), on the request's
//! headers, or on a form upload's fields, which carry the same names.

use s3s::{S3Error, S3ErrorCode};

/// What the operator declared about the share (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Promises {
    /// The share's storage is encrypted at rest (`--encrypted-at-rest`):
    /// SSE-S3 requests are accepted.
    pub encrypted_at_rest: bool,
    /// SSE-C keys are accepted over plain HTTP (`--sse-c-over-http`).
    pub sse_c_over_http: bool,
}

/// The SSE-C headers of the object written or read.
const SSE_C: [&str; 3] = [
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-customer-key",
    "x-amz-server-side-encryption-customer-key-md5",
];

/// The SSE-C headers of a copy's source.
const SSE_C_SOURCE: [&str; 3] = [
    "x-amz-copy-source-server-side-encryption-customer-algorithm",
    "x-amz-copy-source-server-side-encryption-customer-key",
    "x-amz-copy-source-server-side-encryption-customer-key-md5",
];

/// SSE-KMS headers besides the algorithm.
const SSE_KMS: [&str; 3] = [
    "x-amz-server-side-encryption-aws-kms-key-id",
    "x-amz-server-side-encryption-context",
    "x-amz-server-side-encryption-bucket-key-enabled",
];

/// The operations that create an object from what they are sent.
fn creates_object(operation: &str) -> bool {
    matches!(operation, "PutObject" | "CopyObject" | "CreateMultipartUpload" | "PostObject")
}

/// The operations that take an SSE-C key for the object they write or
/// read.
fn takes_customer_key(operation: &str) -> bool {
    matches!(
        operation,
        "PutObject"
            | "GetObject"
            | "HeadObject"
            | "GetObjectAttributes"
            | "CreateMultipartUpload"
            | "UploadPart"
            // AWS takes the key here too (aws-cli sends it), though the
            // parts were sealed already: accepted, unused.
            | "CompleteMultipartUpload"
            | "ListParts"
            | "CopyObject"
            | "UploadPartCopy"
    )
}

/// The operations that take a copy source's SSE-C key.
fn copies(operation: &str) -> bool {
    matches!(operation, "CopyObject" | "UploadPartCopy")
}

fn not_implemented(what: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NotImplemented,
        format!("A header you provided implies functionality that is not implemented: {what}."),
    )
}

impl Promises {
    /// The refusal of `operation` (an S3 operation name, or `PostObject`)
    /// whose headers (or form fields) `get` looks up by lower-case name,
    /// sent over TLS if `tls`; `None` if it asks for nothing the gateway
    /// does not give.
    ///
    /// Errors returned: 400 InvalidRequest or InvalidArgument, 501
    /// NotImplemented; see the module docs.
    pub fn refusal<'a>(&self, operation: &str, tls: bool, get: impl Fn(&str) -> Option<&'a str>) -> Option<S3Error> {
        let has = |names: &[&str]| names.iter().any(|n| get(n).is_some());
        let sealed = (has(&SSE_C) && takes_customer_key(operation)) || (has(&SSE_C_SOURCE) && copies(operation));
        if sealed && !tls && !self.sse_c_over_http {
            return Some(S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                "Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.",
            ));
        }
        let not_applicable = || {
            S3Error::with_message(
                S3ErrorCode::InvalidRequest,
                "The encryption parameters are not applicable to this object.",
            )
        };
        if has(&SSE_C_SOURCE) && !copies(operation) {
            return Some(not_applicable());
        }
        if has(&SSE_C) && !takes_customer_key(operation) {
            return Some(match creates_object(operation) {
                true => not_implemented("server-side encryption with customer-provided keys (SSE-C)"),
                false => not_applicable(),
            });
        }
        if creates_object(operation) {
            return self.server_side_encryption(&get).or_else(|| self.write_refusal(&get));
        }
        None
    }

    /// The refusal of a write's headers asking for website redirects or
    /// appends, if any.
    fn write_refusal<'a>(&self, get: &impl Fn(&str) -> Option<&'a str>) -> Option<S3Error> {
        if get("x-amz-website-redirect-location").is_some() {
            return Some(not_implemented("website redirects (x-amz-website-redirect-location)"));
        }
        if get("x-amz-write-offset-bytes").is_some() {
            return Some(not_implemented("appends (x-amz-write-offset-bytes)"));
        }
        None
    }

    /// The refusal of an `x-amz-server-side-encryption` request on a
    /// write, if any.
    fn server_side_encryption<'a>(&self, get: &impl Fn(&str) -> Option<&'a str>) -> Option<S3Error> {
        if SSE_KMS.iter().any(|n| get(n).is_some()) {
            return Some(not_implemented("server-side encryption with KMS keys (SSE-KMS)"));
        }
        match get("x-amz-server-side-encryption").map(str::trim) {
            None => None,
            Some("AES256") if self.encrypted_at_rest => None,
            Some("AES256") => Some(not_implemented(
                "server-side encryption (SSE-S3); the operator has not declared this share encrypted at rest",
            )),
            Some("aws:kms" | "aws:kms:dsse") => Some(not_implemented("server-side encryption with KMS keys (SSE-KMS)")),
            Some(_) => Some(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                "The encryption method specified is not supported",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(p: Promises, op: &str, headers: &[(&str, &str)]) -> Option<(u16, String)> {
        refusal_over(p, op, true, headers)
    }

    fn refusal_over(p: Promises, op: &str, tls: bool, headers: &[(&str, &str)]) -> Option<(u16, String)> {
        let e = p.refusal(op, tls, |n| headers.iter().find(|(k, _)| *k == n).map(|(_, v)| *v))?;
        Some((e.status_code().map_or(0, |s| s.as_u16()), e.code().as_str().to_string()))
    }

    #[test]
    fn lock_headers_are_left_to_the_bucket() {
        let p = Promises::default();
        for op in ["PutObject", "CopyObject", "CreateMultipartUpload", "PostObject"] {
            assert_eq!(refusal(p, op, &[("x-amz-object-lock-mode", "COMPLIANCE")]), None, "{op}");
        }
        assert_eq!(refusal(p, "CreateBucket", &[("x-amz-bucket-object-lock-enabled", "True")]), None);
        assert_eq!(refusal(p, "PutObject", &[("x-amz-acl", "private"), ("x-amz-storage-class", "STANDARD")]), None);
    }

    #[test]
    fn encryption_is_refused_unless_declared() {
        let p = Promises::default();
        let sse_c = [("x-amz-server-side-encryption-customer-algorithm", "AES256")];
        for op in ["PutObject", "GetObject", "HeadObject", "GetObjectAttributes", "CreateMultipartUpload", "UploadPart"]
        {
            assert_eq!(refusal(p, op, &sse_c), None, "{op} over TLS");
            assert_eq!(refusal_over(p, op, false, &sse_c), Some((400, "InvalidRequest".into())), "{op} over HTTP");
            let allowed = Promises { sse_c_over_http: true, ..p };
            assert_eq!(refusal_over(allowed, op, false, &sse_c), None, "{op} over HTTP, allowed");
        }
        assert_eq!(refusal(p, "PostObject", &sse_c), Some((501, "NotImplemented".into())));
        for op in ["DeleteObject", "ListObjectsV2"] {
            assert_eq!(refusal(p, op, &sse_c), Some((400, "InvalidRequest".into())), "{op}");
        }
        let with_redirect = [sse_c[0], ("x-amz-website-redirect-location", "/x")];
        assert_eq!(refusal(p, "PutObject", &with_redirect), Some((501, "NotImplemented".into())));
        let source = [("x-amz-copy-source-server-side-encryption-customer-key", "k")];
        assert_eq!(refusal(p, "CopyObject", &source), None);
        assert_eq!(refusal_over(p, "UploadPartCopy", false, &source), Some((400, "InvalidRequest".into())));
        assert_eq!(refusal(p, "GetObject", &source), Some((400, "InvalidRequest".into())));
        let kms = [("x-amz-server-side-encryption", "aws:kms")];
        assert_eq!(refusal(p, "CreateMultipartUpload", &kms), Some((501, "NotImplemented".into())));
        let key_id = [("x-amz-server-side-encryption-aws-kms-key-id", "k")];
        assert_eq!(refusal(p, "PutObject", &key_id), Some((501, "NotImplemented".into())));
        let s3 = [("x-amz-server-side-encryption", "AES256")];
        assert_eq!(refusal(p, "PutObject", &s3), Some((501, "NotImplemented".into())));
        assert_eq!(refusal(Promises { encrypted_at_rest: true, ..p }, "PutObject", &s3), None);
        let bad = [("x-amz-server-side-encryption", "rot13")];
        assert_eq!(refusal(p, "PutObject", &bad), Some((400, "InvalidArgument".into())));
        let redirect = [("x-amz-website-redirect-location", "/x")];
        assert_eq!(refusal(p, "PutObject", &redirect), Some((501, "NotImplemented".into())));
        assert_eq!(refusal(p, "GetObject", &[]), None);
    }
}
