//! aws-chunked bodies (`x-amz-content-sha256: STREAMING-...`, what SDKs
//! send for signed streaming and for checksum trailers) are a run of
//! chunks, each a hex size line, that many bytes and CRLF, ended by a chunk
//! of size 0 and the trailer lines. s3s reads each chunk whole before it
//! checks the chunk's signature, whatever size its line claims, so one PUT
//! could make the gateway buffer as much as its client sends. The body
//! passes through [`ChunkBounded`] first, which follows the framing without
//! copying and ends the body when a size line claims more than
//! [`ChunkBounded::limit`] allows or does not end within
//! [`MAX_SIZE_LINE`]; the front then answers 400 InvalidChunkSizeError.
//! Everything else about the framing (signatures, trailers, the decoded
//! length) is left to s3s.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

/// The largest chunk any body may have, in bytes: SDKs send 8 KiB to
/// 1 MiB.
pub const MAX_CHUNK: u64 = 16 << 20;

/// The longest chunk size line, CRLF included, in bytes: the size in hex
/// and `;chunk-signature=` with 64 hex digits take 90.
pub const MAX_SIZE_LINE: usize = 4096;

/// True if `headers` announce an aws-chunked body.
pub fn is_aws_chunked(headers: &http::HeaderMap) -> bool {
    headers.get("x-amz-content-sha256").is_some_and(|v| v.as_bytes().starts_with(b"STREAMING-"))
}

/// Lets s3s read an aws-chunked body whose mode names a trailer
/// (`STREAMING-...-TRAILER`) while the request announces none (no
/// `x-amz-trailer`), as AWS accepts it when no trailer follows: s3s refuses
/// such a request for the missing header. The header is added empty, so
/// it announces no checksum, and none is required to arrive. Returns true
/// if it was added.
pub fn admit_unannounced_trailer(headers: &mut http::HeaderMap) -> bool {
    let names_trailer = headers.get("x-amz-content-sha256").is_some_and(|v| v.as_bytes().ends_with(b"-TRAILER"));
    if !names_trailer || headers.contains_key("x-amz-trailer") {
        return false;
    }
    headers.insert("x-amz-trailer", http::HeaderValue::from_static(""));
    true
}

/// Set once a [`ChunkBounded`] body ended at a chunk too large.
#[derive(Debug, Clone, Default)]
pub struct Oversized(Arc<AtomicBool>);

impl Oversized {
    /// True if the body was ended at a chunk over its limit.
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Where the reader is in the framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// In a size line: the bytes of it seen so far, and whether the last
    /// was CR.
    SizeLine { len: usize, cr: bool },
    /// In a chunk's data and its CRLF: bytes left.
    Data { left: u64 },
    /// Past the last chunk (trailers): nothing more is checked.
    Trailers,
}

/// An aws-chunked body whose chunk sizes are held to a limit; see the
/// module docs. Frames pass through unchanged.
pub struct ChunkBounded<B> {
    inner: B,
    limit: u64,
    at: At,
    /// The hex digits of the size line being read, while they still fit.
    size: u64,
    digits: bool,
    in_extension: bool,
    oversized: Oversized,
}

impl<B> ChunkBounded<B> {
    /// `inner`, its chunks held to the decoded length `headers` declare
    /// (`x-amz-decoded-content-length`) and [`MAX_CHUNK`]; the returned
    /// flag tells whether it was ended at a chunk too large.
    pub fn new(inner: B, headers: &http::HeaderMap) -> (ChunkBounded<B>, Oversized) {
        let decoded = headers
            .get("x-amz-decoded-content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(MAX_CHUNK);
        let oversized = Oversized::default();
        let body = ChunkBounded {
            inner,
            limit: decoded.min(MAX_CHUNK),
            at: At::SizeLine { len: 0, cr: false },
            size: 0,
            digits: true,
            in_extension: false,
            oversized: oversized.clone(),
        };
        (body, oversized)
    }

    /// The largest chunk this body may have, in bytes.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Follows the framing through `data`; `Err` at a size line that is
    /// too long or claims a chunk over the limit.
    fn follow(&mut self, mut data: &[u8]) -> Result<(), ()> {
        while !data.is_empty() {
            match self.at {
                At::Trailers => return Ok(()),
                At::Data { left } => {
                    let n = (data.len() as u64).min(left);
                    data = &data[n as usize..];
                    self.at = match left - n {
                        0 => self.size_line_start(),
                        left => At::Data { left },
                    };
                }
                At::SizeLine { len, cr } => {
                    let b = data[0];
                    data = &data[1..];
                    if len + 1 > MAX_SIZE_LINE {
                        return Err(());
                    }
                    if cr && b == b'\n' {
                        self.at = self.chunk_start()?;
                        continue;
                    }
                    match b {
                        b';' => self.in_extension = true,
                        b'\r' => {}
                        _ if self.in_extension => {}
                        _ => match (b as char).to_digit(16) {
                            Some(d) if self.digits => {
                                self.size = self.size.checked_mul(16).and_then(|s| s.checked_add(d.into())).ok_or(())?;
                                if self.size > self.limit {
                                    return Err(());
                                }
                            }
                            // Malformed: s3s refuses it; nothing to hold.
                            _ => self.digits = false,
                        },
                    }
                    self.at = At::SizeLine { len: len + 1, cr: b == b'\r' };
                }
            }
        }
        Ok(())
    }

    fn size_line_start(&mut self) -> At {
        self.size = 0;
        self.digits = true;
        self.in_extension = false;
        At::SizeLine { len: 0, cr: false }
    }

    /// The state after a size line: its chunk's data and CRLF, or the
    /// trailers after the last chunk.
    fn chunk_start(&mut self) -> Result<At, ()> {
        if self.size > self.limit {
            return Err(());
        }
        Ok(match self.size {
            0 => At::Trailers,
            n => At::Data { left: n + 2 },
        })
    }
}

impl<B> Body for ChunkBounded<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<s3s::StdError>,
{
    type Data = Bytes;
    type Error = s3s::StdError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, s3s::StdError>>> {
        let this = &mut *self;
        if this.oversized.happened() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    if this.follow(d).is_err() {
                        this.oversized.0.store(true, Ordering::Release);
                        return Poll::Ready(Some(Err("an aws-chunked chunk is larger than allowed".into())));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.oversized.happened() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    fn headers(decoded: Option<u64>) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert("x-amz-content-sha256", http::HeaderValue::from_static("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"));
        if let Some(d) = decoded {
            h.insert("x-amz-decoded-content-length", d.into());
        }
        h
    }

    /// Feeds `body` in pieces of `step` bytes; `Err` if it was refused.
    fn run(decoded: Option<u64>, body: &[u8], step: usize) -> Result<(), ()> {
        let (mut b, flag) = ChunkBounded::new(Full::new(Bytes::new()), &headers(decoded));
        let r = body.chunks(step.max(1)).try_for_each(|piece| b.follow(piece));
        assert!(!flag.happened(), "follow alone sets no flag");
        r
    }

    fn signed(sizes: &[usize]) -> Vec<u8> {
        let sig = "0".repeat(64);
        let mut out = Vec::new();
        for &n in sizes {
            out.extend_from_slice(format!("{n:x};chunk-signature={sig}\r\n").as_bytes());
            out.extend(std::iter::repeat_n(b'a', n));
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("0;chunk-signature={sig}\r\n\r\n").as_bytes());
        out
    }

    #[test]
    fn chunks_within_the_declared_length_pass_in_any_split() {
        let body = signed(&[65536, 65536, 1000]);
        for step in [1, 7, 90, 4096, body.len()] {
            assert_eq!(run(Some(132072), &body, step), Ok(()), "step {step}");
        }
        // Unsigned with a trailer, where hex digits in the data and
        // trailers are not taken for sizes.
        let unsigned =
            b"ffff\r\n".iter().copied().chain([b'f'; 0xffff]).chain(*b"\r\n0\r\nx-amz-checksum-crc32:AAAA\r\n\r\n");
        assert_eq!(run(Some(0xffff), &unsigned.collect::<Vec<_>>(), 3), Ok(()));
    }

    #[test]
    fn a_chunk_over_the_declared_length_or_16_mib_is_refused_at_its_size_line() {
        let sig = "0".repeat(64);
        let claim = |size: u64| format!("{size:x};chunk-signature={sig}\r\n").into_bytes();
        assert_eq!(run(Some(1000), &claim(1001), 1), Err(()));
        assert_eq!(run(Some(1000), &claim(1000), 1), Ok(()));
        assert_eq!(run(None, &claim(MAX_CHUNK + 1), 5), Err(()));
        assert_eq!(run(Some(u64::MAX), &claim(64 << 30), 5), Err(()), "64 GiB, refused before its data");
        assert_eq!(run(None, b"fffffffffffffffffffffff;", 1), Err(()), "overflow");
        // The second chunk too.
        let mut two = claim(10);
        two.extend_from_slice(b"aaaaaaaaaa\r\n");
        two.extend_from_slice(&claim(11));
        assert_eq!(run(Some(10), &two, 4), Err(()));
    }

    #[test]
    fn a_size_line_that_never_ends_is_refused() {
        let mut line = b"10;chunk-signature=".to_vec();
        line.extend(std::iter::repeat_n(b'0', MAX_SIZE_LINE));
        assert_eq!(run(Some(16), &line, 100), Err(()));
    }

    #[tokio::test]
    async fn the_body_ends_with_an_error_and_sets_the_flag() {
        let body = format!("{:x};chunk-signature={}\r\n", 64u64 << 30, "0".repeat(64));
        let (b, flag) = ChunkBounded::new(Full::new(Bytes::from(body)), &headers(Some(64 << 30)));
        assert!(b.collect().await.is_err());
        assert!(flag.happened());
        let ok = signed(&[5]);
        let (b, flag) = ChunkBounded::new(Full::new(Bytes::from(ok.clone())), &headers(Some(5)));
        assert_eq!(b.collect().await.unwrap().to_bytes(), ok);
        assert!(!flag.happened());
    }
}
