//! Verifying a received body before it is published (failure class 15):
//! MD5 and the requested checksums, computed on a second core while the
//! body is written, then checked against Content-Length, Content-MD5 and
//! `x-amz-checksum-*`.

use std::collections::BTreeMap;

use bytes::Bytes;
use md5::{Digest, Md5};

use super::checksum::{self, Algorithm, Checksums};
use super::meta::ObjectMeta;
use super::types::PutRequest;
use super::{StoreError, StoreResult};

/// MD5 and checksums of a streamed body, computed on a blocking thread
/// while the body is written to the share.
pub(crate) struct HashWorker {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    done: tokio::task::JoinHandle<([u8; 16], Checksums)>,
}

impl HashWorker {
    /// Starts hashing with MD5 and `sums`.
    pub(crate) fn start(mut sums: Checksums) -> HashWorker {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        let done = tokio::task::spawn_blocking(move || {
            let mut md5 = Md5::new();
            while let Some(b) = rx.blocking_recv() {
                md5.update(&b);
                sums.update(&b);
            }
            (md5.finalize().into(), sums)
        });
        HashWorker { tx, done }
    }

    /// Feeds the next bytes of the body, in order.
    pub(crate) async fn feed(&self, b: Bytes) {
        let _ = self.tx.send(b).await;
    }

    /// The MD5 and checksums of everything fed.
    ///
    /// Errors: Body if the hashing thread failed.
    pub(crate) async fn finish(self) -> StoreResult<([u8; 16], Checksums)> {
        drop(self.tx);
        self.done.await.map_err(|e| StoreError::Body(format!("hashing failed: {e}")))
    }
}

/// A Content-MD5 that is not 16 bytes of base64 (empty included) is
/// InvalidDigest, found before any byte of the body is stored.
pub(crate) fn check_content_md5(content_md5: Option<&str>) -> StoreResult<()> {
    use base64::Engine as _;
    match content_md5 {
        Some(want)
            if base64::engine::general_purpose::STANDARD.decode(want.trim()).ok().is_none_or(|d| d.len() != 16) =>
        {
            Err(StoreError::InvalidDigest("The Content-MD5 you specified was invalid.".into()))
        }
        _ => Ok(()),
    }
}

/// MD5 and checksums of a body held in memory.
pub(crate) fn hash_now(data: &[u8], algs: &[Algorithm]) -> ([u8; 16], Checksums) {
    let mut sums = Checksums::new(algs);
    sums.update(data);
    (Md5::digest(data).into(), sums)
}

/// Checks a body held whole (a DeleteObjects key list) against its
/// Content-MD5 and `x-amz-checksum-*` values (base64), before anything acts
/// on it.
///
/// Errors: InvalidDigest (a Content-MD5 that is not 16 bytes of base64);
/// BadDigest (a mismatch).
pub fn verify_body(data: &[u8], content_md5: Option<&str>, checksums: &BTreeMap<Algorithm, String>) -> StoreResult<()> {
    use base64::Engine as _;
    check_content_md5(content_md5)?;
    let algorithms: Vec<Algorithm> = checksums.keys().copied().collect();
    let (md5, sums) = hash_now(data, &algorithms);
    if content_md5.is_some_and(|want| want.trim() != base64::engine::general_purpose::STANDARD.encode(md5)) {
        return Err(StoreError::BadDigest("The Content-MD5 you specified did not match what we received.".into()));
    }
    checksum::verify(checksums, &sums.finish())
}

/// Checks a received body of `size` bytes, with MD5 `md5` and checksums
/// `sums`, against what the request declared (Content-Length, Content-MD5,
/// checksum headers, and the trailer's checksums), and builds the metadata
/// record to store.
///
/// Errors: IncompleteBody (length), InvalidDigest (a Content-MD5 that is
/// not 16 bytes of base64), BadDigest (a mismatch), MissingTrailer (a
/// checksum announced in `x-amz-trailer` that did not come).
pub(crate) fn verified_meta(
    req: &PutRequest,
    md5: [u8; 16],
    sums: Checksums,
    size: u64,
    trailer: impl FnOnce() -> BTreeMap<Algorithm, String>,
) -> StoreResult<ObjectMeta> {
    use base64::Engine as _;
    if req.content_length.is_some_and(|l| l != size) {
        return Err(StoreError::IncompleteBody);
    }
    check_content_md5(req.content_md5.as_deref())?;
    if let Some(want) = &req.content_md5 {
        let b64 = base64::engine::general_purpose::STANDARD;
        if want.trim() != b64.encode(md5) {
            return Err(StoreError::BadDigest("The Content-MD5 you specified did not match what we received.".into()));
        }
    }
    let computed = sums.finish();
    let mut expected = req.checksums.clone();
    let arrived = trailer();
    if let Some(a) = req.trailer_checksums.iter().find(|a| !arrived.contains_key(a)) {
        return Err(StoreError::MissingTrailer(format!(
            "the request announced x-amz-checksum-{} in x-amz-trailer but its trailer did not carry it",
            a.name().to_ascii_lowercase()
        )));
    }
    expected.extend(arrived);
    checksum::verify(&expected, &computed)?;
    let mut meta = req.meta.clone();
    meta.etag = hex::encode(md5);
    meta.size = size;
    meta.checksums = computed;
    meta.marker = false;
    Ok(meta)
}
