//! Veeam's Smart Object Storage API (`--veeam-sosapi`): two objects Veeam
//! reads from a repository's bucket, served as virtual objects, never
//! stored: `system.xml` (what the storage can do) and `capacity.xml` (the
//! size, free and used bytes of the bucket's volume, asked of the SMB
//! server at each read, so Veeam sees the NAS fill up).

use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::S3Result;

use super::convert::{etag, timestamp};
use super::{s3_error, Gateway};

/// The folder of the two objects, as Veeam names it.
const FOLDER: &str = ".system-d26a9498-cb7c-4a87-a44a-8ae204f5ba6c/";

/// Veeam's recommended block size for this storage, in KiB: 4 MiB
/// objects write and read well over SMB.
const BLOCK_KIB: u32 = 4096;

/// One of the virtual objects: its bytes and its ETag.
pub(super) struct Virtual {
    pub body: bytes::Bytes,
    pub etag: String,
}

impl Gateway {
    /// The virtual object `key` of `bucket` if `--veeam-sosapi` is on and
    /// `key` names one (`None` otherwise: an ordinary object).
    ///
    /// Errors: NoSuchBucket; SMB failures asking the share's capacity.
    pub(super) async fn sosapi_object(&self, bucket: &str, key: &str) -> Option<S3Result<Virtual>> {
        if !self.sosapi {
            return None;
        }
        let xml = match key.strip_prefix(FOLDER)? {
            "system.xml" => match self.store.buckets().head_bucket(bucket).await {
                Ok(()) => system_xml(),
                Err(e) => return Some(Err(s3_error(e))),
            },
            "capacity.xml" => match self.store.buckets().capacity(bucket).await {
                Ok(c) => format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CapacityInfo><Capacity>{}</Capacity>\
                     <Available>{}</Available><Used>{}</Used></CapacityInfo>",
                    c.total, c.available, c.used
                ),
                Err(e) => return Some(Err(s3_error(e))),
            },
            _ => return None,
        };
        let etag = hex::encode(Md5::digest(xml.as_bytes()));
        Some(Ok(Virtual { body: bytes::Bytes::from(xml), etag }))
    }
}

/// `system.xml`: SOSAPI version 1.0, capacity reports on, no upload
/// sessions or IAM/STS endpoints, and the block size Veeam should use.
fn system_xml() -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<SystemInfo><ProtocolVersion>\"1.0\"</ProtocolVersion>\
         <ModelName>\"smbgate {}\"</ModelName><ProtocolCapabilities><CapacityInfo>true</CapacityInfo>\
         <UploadSessions>false</UploadSessions><IAMSTS>false</IAMSTS></ProtocolCapabilities>\
         <SystemRecommendations><KbBlockSize>{BLOCK_KIB}</KbBlockSize></SystemRecommendations></SystemInfo>",
        env!("CARGO_PKG_VERSION")
    )
}

/// The GET answer of a virtual object.
pub(super) fn get_output(v: Virtual) -> GetObjectOutput {
    GetObjectOutput {
        content_length: Some(v.body.len() as i64),
        content_type: Some("application/xml".into()),
        e_tag: Some(etag(&v.etag)),
        last_modified: Some(timestamp(crate::store::versions::filetime_now())),
        body: Some(StreamingBlob::from(s3s::Body::from(v.body))),
        ..Default::default()
    }
}

/// The HEAD answer of a virtual object.
pub(super) fn head_output(v: Virtual) -> HeadObjectOutput {
    HeadObjectOutput {
        content_length: Some(v.body.len() as i64),
        content_type: Some("application/xml".into()),
        e_tag: Some(etag(&v.etag)),
        last_modified: Some(timestamp(crate::store::versions::filetime_now())),
        ..Default::default()
    }
}
