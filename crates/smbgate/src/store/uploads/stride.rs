//! A multipart upload's stride: the size of its parts, fixed by the first
//! part of at least S3's minimum part size that gets to the share, in the
//! upload's `stride` file. Every later part no larger than it goes into the
//! data file at (n-1) x stride (`multipart`). Whoever creates the file
//! first writes it, in the CREATE's compound; the others read it. A rule
//! over [`ShareOps`], so that it runs against the in-memory share too
//! (`stride_test.rs`).

use bytes::Bytes;

use crate::store::share::{is_not_found, Failure};
use crate::store::share_ops::ShareOps;
use crate::store::{backoff, StoreError, StoreResult};

/// The stride of the upload whose stride file is `path`, for a part of
/// `len` bytes: fixed now by this part if it `may_fix` it (it is of at
/// least the minimum part size) and is the first such, else read; `None`
/// while no such part has arrived.
///
/// Errors: NoSuchUpload if the upload's folder is gone; Busy if the file
/// stays unreadable (being written) after [`backoff::STRIDE`]; SMB
/// failures.
pub(crate) async fn stride<S: ShareOps>(s: &S, path: &str, len: u64, may_fix: bool) -> StoreResult<Option<u64>> {
    let read = |data: Bytes| -> StoreResult<Option<u64>> {
        std::str::from_utf8(&data)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| StoreError::Busy("upload stride is being written; retry".into()))
    };
    // The creator writes the stride in the same compound as its CREATE,
    // so a reader can meet the file empty for that long: read again a
    // few times ([`backoff::STRIDE`]) before answering 503.
    let settled = || async {
        let mut backoff = backoff::STRIDE.start();
        loop {
            let got = match s.read_small(path, 64).await {
                Ok(data) => read(data),
                Err(e) if is_not_found(&e) => Ok(None),
                Err(e) => Err(e.into()),
            };
            match got {
                Err(StoreError::Busy(_)) if backoff.wait().await => {}
                other => return other,
            }
        }
    };
    if !may_fix {
        return settled().await;
    }
    match s.create_once(path, len.to_string().as_bytes()).await {
        Ok(true) => Ok(Some(len)),
        Ok(false) => settled().await,
        Err(e) if e.failure() == Failure::PathNotFound => Err(StoreError::NoSuchUpload),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
#[path = "stride_test.rs"]
mod tests;
