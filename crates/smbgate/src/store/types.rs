//! The store's shared types: what a PUT asks for and gets, where a verified
//! file is published, and what a client sees of an object.

use std::collections::BTreeMap;

use super::share::CreateResponse;
use super::share::Handle;

use super::checksum::Algorithm;
use super::conditions::WriteConditions;
use super::keys::MappedKey;
use super::meta::ObjectMeta;

/// What a client sent with a PUT, besides the body.
#[derive(Debug, Default, Clone)]
pub struct PutRequest {
    /// Content-* headers and user metadata to store (etag/size are filled in).
    pub meta: ObjectMeta,
    /// Content-MD5 (base64) to verify.
    pub content_md5: Option<String>,
    /// Expected checksums (base64) by algorithm, from headers.
    pub checksums: BTreeMap<Algorithm, String>,
    /// Algorithms to compute and store even if no value came in a header
    /// (x-amz-checksum-algorithm / x-amz-sdk-checksum-algorithm, or one
    /// that arrives in a trailer).
    pub checksum_algorithms: Vec<Algorithm>,
    /// Algorithms announced in `x-amz-trailer`: their values must arrive in
    /// the aws-chunked trailer.
    pub trailer_checksums: Vec<Algorithm>,
    /// Content-Length in bytes, if declared.
    pub content_length: Option<u64>,
    /// If-Match / If-None-Match on the target.
    pub conditions: WriteConditions,
    /// The body's progress since the request was read (see
    /// [`super::body_pace`]).
    pub pace: super::body_pace::BodyPace,
    /// The client's key to store the object encrypted with (SSE-C, see
    /// [`super::sse_c`]).
    pub sse_c: Option<super::sse_c::CustomerKey>,
    /// For a part of an upload with an SSE-C key: the part's number, which
    /// the part is sealed under.
    pub sse_c_part: Option<u32>,
}

impl PutRequest {
    /// Every checksum algorithm to compute for this body.
    pub fn algorithms(&self) -> Vec<Algorithm> {
        self.checksums.keys().chain(&self.checksum_algorithms).copied().collect()
    }
}

/// Where a verified temporary file is published.
#[derive(Debug, Clone)]
pub enum Target {
    /// An object key in a bucket (parents created as needed).
    Object {
        /// Bucket name.
        bucket: String,
        /// The mapped key.
        key: MappedKey,
    },
    /// A share-relative path whose parent must already exist (multipart
    /// parts); a missing parent means the upload is gone.
    Part(String),
}

impl Target {
    /// The S3 key of an object target.
    pub fn key(&self) -> Option<String> {
        match self {
            Target::Object { key, .. } => Some(key.original()),
            Target::Part(_) => None,
        }
    }
}

/// What a successful PUT stored.
#[derive(Debug, Clone)]
pub struct PutResult {
    /// ETag value (unquoted).
    pub etag: String,
    /// Checksums stored (base64), by algorithm.
    pub checksums: BTreeMap<Algorithm, String>,
    /// Bytes stored.
    pub size: u64,
    /// LastWriteTime of the new object (FILETIME), where the write learnt it.
    pub last_modified: Option<u64>,
    /// The version ID it was stored as (`None` on a bucket that was never
    /// versioned; see [`super::versions`]).
    pub version_id: Option<String>,
}

/// An object's externally visible state.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    /// Size in bytes.
    pub size: u64,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
    /// ETag value (unquoted).
    pub etag: String,
    /// Stored metadata (default for foreign files).
    pub meta: ObjectMeta,
    /// Share-relative path of the file.
    pub path: String,
    /// The server's on-disk file id (QFid context), if it reports one: a
    /// file renamed over the key has another, even at the same size and
    /// LastWriteTime.
    pub disk_id: Option<u64>,
}

impl ObjectInfo {
    /// Bytes of its file: [`ObjectInfo::size`], or more for an SSE-C object
    /// (its packages' tags).
    pub fn stored_size(&self) -> u64 {
        self.meta.sse_c.as_ref().map_or(self.size, |e| e.stored_len())
    }

    /// What conditional requests are evaluated against.
    pub fn current(&self) -> super::conditions::Current<'_> {
        super::conditions::Current { etag: &self.etag, last_modified: self.last_modified }
    }

    /// The visible info from a CREATE answer and a matching record of ours
    /// (`None`: a file someone else put on the share, with a derived ETag).
    pub fn new(create: &CreateResponse, meta: Option<ObjectMeta>, path: &str) -> ObjectInfo {
        let size = create.times.end_of_file;
        let last_modified = create.times.last_write;
        let disk_id = create.on_disk_id();
        // A record without an ETag holds only tags of a file someone else
        // put there: its ETag stays the derived one.
        let (etag, meta) = match meta {
            Some(m) if !m.etag.is_empty() => (m.etag.clone(), m),
            m => (
                super::meta::derived_etag(size, last_modified, disk_id.unwrap_or(create.file_id.persistent)),
                m.unwrap_or_default(),
            ),
        };
        // An SSE-C object is smaller than its file (the packages' tags).
        let size = meta.sse_c.as_ref().map_or(size, |e| e.size);
        ObjectInfo { size, last_modified, etag, meta, path: path.to_string(), disk_id }
    }
}

/// An object open for reading: its handle (which closes itself when
/// dropped) and our record, if present and matching the file.
pub struct Opened {
    /// The handle, on the connection that opened it.
    pub handle: Handle,
    /// Our metadata record.
    pub meta: Option<ObjectMeta>,
}

impl Opened {
    /// What the CREATE said (times, size, attributes, on-disk id).
    pub fn create(&self) -> &CreateResponse {
        self.handle.info()
    }

    /// Closes the handle, waiting for the CLOSE (errors ignored: the handle
    /// dies with its session anyway).
    pub async fn close(self) {
        let _ = self.handle.close().await;
    }
}

pub use super::meta::filetime_to_unix;
