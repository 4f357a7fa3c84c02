//! The file part of a POST Object form as the body of the PUT it becomes:
//! counted as it passes, and cut with an error once it passes the policy's
//! `content-length-range` maximum, or at its end if it is shorter than the
//! minimum, so that the store publishes nothing (a body that fails leaves
//! no object, see `Writes::put_object`). What cut it is kept for the answer.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use s3s::{S3Error, S3ErrorCode};

/// Why a file part was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Shorter than the range's minimum.
    TooSmall,
    /// Longer than the range's maximum.
    TooLarge,
    /// The form broke off or did not parse after the file began.
    Malformed,
}

impl Cut {
    /// The S3 error AWS answers with: 400 EntityTooSmall, EntityTooLarge or
    /// MalformedPOSTRequest.
    pub fn error(self) -> S3Error {
        match self {
            Cut::TooSmall => S3Error::with_message(
                S3ErrorCode::EntityTooSmall,
                "Your proposed upload is smaller than the minimum allowed size",
            ),
            Cut::TooLarge => S3Error::with_message(
                S3ErrorCode::EntityTooLarge,
                "Your proposed upload exceeds the maximum allowed size",
            ),
            Cut::Malformed => S3Error::with_message(
                S3ErrorCode::MalformedPOSTRequest,
                "The body of your POST request is not well-formed multipart/form-data.",
            ),
        }
    }
}

/// A file part bounded to `min..=max` bytes; see the module docs.
pub struct Bounded {
    file: multer::Field<'static>,
    seen: u64,
    min: u64,
    max: u64,
    cut: Arc<Mutex<Option<Cut>>>,
}

impl Bounded {
    /// `file` bounded to `min..=max` bytes, and where the reason for a cut
    /// will be found.
    pub fn new(file: multer::Field<'static>, min: u64, max: u64) -> (Bounded, Arc<Mutex<Option<Cut>>>) {
        let cut = Arc::new(Mutex::new(None));
        (Bounded { file, seen: 0, min, max, cut: cut.clone() }, cut)
    }

    fn cut(&mut self, why: Cut) -> Poll<Option<std::io::Result<Bytes>>> {
        *self.cut.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        Poll::Ready(Some(Err(std::io::Error::other(why.error().message().unwrap_or_default().to_string()))))
    }
}

impl Stream for Bounded {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match Pin::new(&mut self.file).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(chunk))) => {
                self.seen += chunk.len() as u64;
                match self.seen > self.max {
                    true => self.cut(Cut::TooLarge),
                    false => Poll::Ready(Some(Ok(chunk))),
                }
            }
            Poll::Ready(Some(Err(_))) => self.cut(Cut::Malformed),
            Poll::Ready(None) if self.seen < self.min => self.cut(Cut::TooSmall),
            Poll::Ready(None) => Poll::Ready(None),
        }
    }
}
