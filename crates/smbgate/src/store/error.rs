//! Store errors: S3-meaningful outcomes, independent of the HTTP layer.

use super::keys::KeyError;
use super::share::{count_smb_error, Failure, ShareError};

/// What went wrong in a store operation, in S3 terms.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The bucket directory does not exist.
    #[error("the specified bucket does not exist")]
    NoSuchBucket,
    /// The object does not exist.
    #[error("the specified key does not exist")]
    NoSuchKey,
    /// CreateBucket of an existing bucket.
    #[error("the bucket already exists and is owned by you")]
    BucketAlreadyOwnedByYou,
    /// DeleteBucket of a bucket that still holds objects.
    #[error("the bucket you tried to delete is not empty")]
    BucketNotEmpty,
    /// The key cannot be stored on an SMB share.
    #[error("{0}")]
    InvalidKey(#[from] KeyError),
    /// The server refused a name of the key as too long (its own limit,
    /// e.g. 255 bytes of UTF-8 on Linux, can be below S3's).
    #[error("a component of the key is longer than the SMB server allows")]
    NameTooLong,
    /// The key collides with an existing file or directory (a key that is
    /// both an object and a prefix of other keys, or a case-only variant
    /// on a case-insensitive share).
    #[error("{0}")]
    Conflict(String),
    /// If-Match / If-Unmodified-Since / If-None-Match on a write failed.
    #[error("at least one of the preconditions you specified did not hold")]
    PreconditionFailed,
    /// If-None-Match / If-Modified-Since on a read: not modified; the
    /// answer (304) carries the object's ETag, unquoted here.
    #[error("not modified")]
    NotModified {
        /// The current object's ETag.
        etag: String,
    },
    /// Content-MD5 or an x-amz-checksum-* did not match the body.
    #[error("{0}")]
    BadDigest(String),
    /// A checksum header was malformed.
    #[error("{0}")]
    InvalidDigest(String),
    /// The body was shorter or longer than Content-Length.
    #[error("you did not provide the number of bytes specified by the Content-Length HTTP header")]
    IncompleteBody,
    /// No body bytes arrived for the body-read timeout.
    #[error("your socket connection to the server was not read from or written to within the timeout period")]
    RequestTimeout,
    /// Range outside the object.
    #[error("the requested range is not satisfiable")]
    InvalidRange,
    /// A GET or HEAD Range of which no byte is in the object (416); the
    /// answer's Content-Range gives the object's size (`bytes */size`).
    #[error("the requested range is not satisfiable")]
    RangeNotSatisfiable {
        /// The object's size in bytes.
        size: u64,
    },
    /// A versionId that names no version of the key (404 NoSuchVersion).
    #[error("the specified version does not exist")]
    NoSuchVersion,
    /// The version asked for (`requested`: named by its versionId, 405
    /// MethodNotAllowed) or the latest one (404 NoSuchKey) is a delete
    /// marker; the answer says so in its headers.
    #[error("{}", if *requested { "the specified method is not allowed against this resource" } else { "the specified key does not exist" })]
    DeleteMarker {
        /// The marker's version ID.
        version_id: String,
        /// When the marker was made (FILETIME).
        last_modified: u64,
        /// True if the request named the marker's versionId.
        requested: bool,
    },
    /// The bucket's state forbids the request (409 InvalidBucketState),
    /// for the reason given.
    #[error("{0}")]
    InvalidBucketState(String),
    /// Unknown UploadId.
    #[error("the specified multipart upload does not exist")]
    NoSuchUpload,
    /// A part in CompleteMultipartUpload is missing or its ETag differs.
    #[error("{0}")]
    InvalidPart(String),
    /// Parts in CompleteMultipartUpload are not in ascending order.
    #[error("the list of parts was not in ascending order")]
    InvalidPartOrder,
    /// A PUT body or part over 5 GiB, S3's limit for one request.
    #[error("your proposed upload exceeds the maximum allowed size")]
    EntityTooLarge,
    /// A part other than the last is smaller than 5 MiB.
    #[error("your proposed upload is smaller than the minimum allowed object size")]
    EntityTooSmall,
    /// A tag set breaks S3's tag rules (count, length, characters,
    /// duplicate keys); the reason says which.
    #[error("{0}")]
    InvalidTag(String),
    /// A request S3 refuses as a whole (400 InvalidRequest), for the reason
    /// given.
    #[error("{0}")]
    InvalidRequest(String),
    /// Bad request argument.
    #[error("{0}")]
    InvalidArgument(String),
    /// The share refused access.
    #[error("access denied by the SMB server")]
    AccessDenied,
    /// The gateway itself refuses the request (403 AccessDenied), for the
    /// reason given.
    #[error("{0}")]
    Refused(&'static str),
    /// The share had no room for the object's record (its user metadata
    /// and tags, kept as one extended attribute): a record of this many
    /// bytes is over what the share keeps for one file (about 4 KiB on
    /// ext4). See [`record_write_error`].
    #[error(
        "the share cannot keep this object's user metadata and tags: {0} bytes as one record is over what it \
         keeps for one file; send less metadata or fewer tags"
    )]
    MetadataTooLarge(usize),
    /// The SMB server is unavailable, overloaded or out of sessions; retry.
    #[error("the SMB server is busy or unreachable: {0}")]
    Busy(String),
    /// Anything else from SMB, as the share layer told it.
    #[error("SMB error: {0}")]
    Smb(String),
    /// What the share holds failed its check (an SSE-C package's tag):
    /// altered or cut there. Nothing of it is sent.
    #[error("{0}")]
    Damaged(String),
    /// A checksum announced in `x-amz-trailer` did not arrive in the
    /// trailer.
    #[error("{0}")]
    MissingTrailer(String),
    /// The client's body stream failed (disconnect).
    #[error("request body: {0}")]
    Body(String),
}

/// Result alias.
pub type StoreResult<T> = Result<T, StoreError>;

/// What a failure of the share means to an S3 client; each is counted
/// for the metrics on the way.
impl From<ShareError> for StoreError {
    fn from(e: ShareError) -> Self {
        count_smb_error(&e);
        match e.failure() {
            Failure::AccessDenied | Failure::NetworkAccessDenied => {
                // The S3 answer names no SMB command; the log does.
                tracing::debug!(error = %e, "SMB access denied");
                StoreError::AccessDenied
            }
            Failure::SharingViolation | Failure::Exhausted | Failure::LockConflict => StoreError::Busy(e.to_string()),
            _ if e.is_connection_error() => StoreError::Busy(e.to_string()),
            _ => StoreError::Smb(e.to_string()),
        }
    }
}

/// Records up to this many bytes fit in what any share keeps for one file
/// (ext4, the tightest here, keeps about 4 KiB of extended attributes, with
/// Samba's own among them): a share without room for one is full.
const RECORD_ALWAYS_FITS: usize = 2048;

/// A failed write of a record of `record_len` bytes, in S3 terms: the
/// share's "no room" (STATUS_DISK_FULL, STATUS_EA_TOO_LARGE) for a record
/// over [`RECORD_ALWAYS_FITS`] is [`StoreError::MetadataTooLarge`] (400),
/// since a full disk and a record over the share's per-file room answer
/// alike; anything else stays the share's error.
pub(crate) fn record_write_error(e: ShareError, record_len: usize) -> StoreError {
    match e.is_record_too_large() && record_len > RECORD_ALWAYS_FITS {
        true => StoreError::MetadataTooLarge(record_len),
        false => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::share::failing_with;

    #[test]
    fn busy_servers_are_503_and_denials_403() {
        let from = |f| StoreError::from(failing_with(f));
        assert!(matches!(from(Failure::SharingViolation), StoreError::Busy(_)));
        assert!(matches!(from(Failure::Exhausted), StoreError::Busy(_)));
        assert!(matches!(from(Failure::NetworkAccessDenied), StoreError::AccessDenied));
        assert!(matches!(from(Failure::NoRoom), StoreError::Smb(_)));
        assert!(matches!(from(Failure::Other), StoreError::Busy(_)), "a lost connection");
    }
}
