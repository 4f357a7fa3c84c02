//! Verifying a received body before it is published (failure class 15):
//! MD5 and the requested checksums, computed on a second core while the
//! body is written, then checked against Content-Length, Content-MD5 and
//! `x-amz-checksum-*`.
//!
//! A body's MD5 (its ETag) is the largest cost of a PUT: it is computed
//! with OpenSSL's assembly MD5, about 710 MiB/s here against 545 for the
//! `md-5` crate's Rust (and 585 with its `asm` feature); see
//! `benches/results/2026-12-04-put-md5.md`. Small digests (lock names,
//! multipart ETags) keep `md-5`.

use std::collections::BTreeMap;

use bytes::Bytes;
use openssl::hash::{Hasher, MessageDigest};

use super::checksum::{self, Algorithm, Checksums};
use super::meta::ObjectMeta;
use super::types::PutRequest;
use super::{StoreError, StoreResult};

/// MD5 and checksums of a streamed body, computed on a blocking thread
/// while the body is written to the share.
pub(crate) struct HashWorker {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    done: tokio::task::JoinHandle<Result<([u8; 16], Checksums), openssl::error::ErrorStack>>,
}

impl HashWorker {
    /// Starts hashing with MD5 and `sums`.
    pub(crate) fn start(mut sums: Checksums) -> HashWorker {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(64);
        let done = tokio::task::spawn_blocking(move || {
            let mut md5 = BodyMd5::new()?;
            while let Some(b) = rx.blocking_recv() {
                md5.update(&b)?;
                sums.update(&b);
            }
            Ok((md5.finish()?, sums))
        });
        HashWorker { tx, done }
    }

    /// Feeds the next bytes of the body, in order.
    pub(crate) async fn feed(&self, b: Bytes) {
        let _ = self.tx.send(b).await;
    }

    /// The MD5 and checksums of everything fed.
    ///
    /// Errors: Body if the hashing thread or OpenSSL failed.
    pub(crate) async fn finish(self) -> StoreResult<([u8; 16], Checksums)> {
        drop(self.tx);
        let hashed = self.done.await.map_err(|e| StoreError::Body(format!("hashing failed: {e}")))?;
        hashed.map_err(md5_failed)
    }
}

/// MD5 of a body, by OpenSSL (see the module notes).
struct BodyMd5(Hasher);

impl BodyMd5 {
    fn new() -> Result<BodyMd5, openssl::error::ErrorStack> {
        Ok(BodyMd5(Hasher::new(MessageDigest::md5())?))
    }

    fn update(&mut self, b: &[u8]) -> Result<(), openssl::error::ErrorStack> {
        self.0.update(b)
    }

    fn finish(mut self) -> Result<[u8; 16], openssl::error::ErrorStack> {
        let d = self.0.finish()?;
        let mut out = [0u8; 16];
        out.copy_from_slice(&d[..16]);
        Ok(out)
    }
}

fn md5_failed(e: openssl::error::ErrorStack) -> StoreError {
    StoreError::Body(format!("MD5 failed: {e}"))
}

/// The MD5 of `data`, by OpenSSL.
///
/// Errors: Body if OpenSSL fails (it has no reason to).
pub(crate) fn body_md5(data: &[u8]) -> StoreResult<[u8; 16]> {
    let mut md5 = BodyMd5::new().map_err(md5_failed)?;
    md5.update(data).map_err(md5_failed)?;
    md5.finish().map_err(md5_failed)
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
///
/// Errors: Body if OpenSSL fails.
pub(crate) fn hash_now(data: &[u8], algs: &[Algorithm]) -> StoreResult<([u8; 16], Checksums)> {
    let mut sums = Checksums::new(algs);
    sums.update(data);
    Ok((body_md5(data)?, sums))
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
    let (md5, sums) = hash_now(data, &algorithms)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_md5_is_md5() {
        // RFC 1321's test suite.
        assert_eq!(hex::encode(body_md5(b"").unwrap()), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex::encode(body_md5(b"abc").unwrap()), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(
            hex::encode(
                body_md5(b"12345678901234567890123456789012345678901234567890123456789012345678901234567890").unwrap()
            ),
            "57edf4a22be3c955ac49da2e2107b67a"
        );
    }

    #[tokio::test]
    async fn the_worker_hashes_a_body_fed_in_pieces() {
        use md5::Digest as _;
        let body: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let worker = HashWorker::start(Checksums::new(&[]));
        for piece in body.chunks(65_537) {
            worker.feed(Bytes::copy_from_slice(piece)).await;
        }
        let (md5, _) = worker.finish().await.unwrap();
        assert_eq!(md5, <[u8; 16]>::from(md5::Md5::digest(&body)));
    }
}
