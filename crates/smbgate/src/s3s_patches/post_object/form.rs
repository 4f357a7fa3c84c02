//! Reading a POST Object form (`multipart/form-data`): its fields up to
//! the file part, bounded as AWS bounds them (and everything around them
//! bounded too, in bytes, number and time, since none of it is
//! authenticated yet), and the file part itself as a stream that is never
//! held whole. Fields after the file are ignored, as AWS ignores them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::Stream;
use s3s::{S3Error, S3ErrorCode, S3Result};

/// Most bytes of field names and values before the file part (AWS's
/// limit on a POST's pre-file data, 20 KB).
pub const MAX_FIELDS_BYTES: usize = 20 << 10;

/// The form's fields before the file part: names in lower case (form
/// field names are case-insensitive), values as sent (case-sensitive).
#[derive(Debug, Default)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    /// Fields from (name, value) pairs; names are lower-cased.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (String, String)>) -> Fields {
        Fields(pairs.into_iter().map(|(k, v)| (k.to_ascii_lowercase(), v)).collect())
    }

    /// The value of the field `name` (lower case); the first if sent twice.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every (name, value) in the order sent.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Replaces the value of `name` (lower case), or adds it.
    pub fn set(&mut self, name: &str, value: String) {
        match self.0.iter_mut().find(|(k, _)| k == name) {
            Some(f) => f.1 = value,
            None => self.0.push((name.to_string(), value)),
        }
    }
}

/// A form read up to its file part.
pub struct Form {
    /// The fields before the file part.
    pub fields: Fields,
    /// The file part's file name (what `${filename}` in `key` stands for;
    /// empty if the part names none).
    pub filename: String,
    /// The file part's bytes, as they arrive.
    pub file: multer::Field<'static>,
}

fn malformed() -> S3Error {
    S3Error::with_message(
        S3ErrorCode::MalformedPOSTRequest,
        "The body of your POST request is not well-formed multipart/form-data.",
    )
}

/// Reads the form of `content_type` from `body` up to its file part (the
/// field named `file`, in any case), by `deadline` (pre-file data is read
/// before anything is authenticated, so it gets no longer than a request's
/// headers do).
///
/// Errors: 400 MalformedPOSTRequest for a body that is not multipart
/// (no boundary, a broken part, a field that is not UTF-8);
/// 400 MaxPostPreDataLengthExceededError when the fields before the file
/// pass [`MAX_FIELDS_BYTES`], the bytes before it [`MAX_PRE_FILE`] (refused
/// by the time [`MAX_PRE_FILE`] + [`FIELD_RUN`] have arrived), or their
/// number [`MAX_FIELDS`]; 400 InvalidArgument for a field sent twice;
/// 400 IncorrectNumberOfFilesInPostRequest when there is no file part;
/// 400 RequestTimeout when the file part has not begun by `deadline`.
pub async fn read<S, E>(content_type: &str, body: S, deadline: tokio::time::Instant) -> S3Result<Form>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    let boundary = multer::parse_boundary(content_type).map_err(|_| malformed())?;
    let gate = Arc::new(Gate::default());
    let paced = Paced { inner: Box::pin(body), run: 0, pulled: 0, held: None, gate: gate.clone() };
    let mut parts = multer::Multipart::new(paced, boundary);
    let fields = tokio::time::timeout_at(deadline, read_fields(&mut parts, &gate)).await.map_err(|_| {
        S3Error::with_message(
            S3ErrorCode::RequestTimeout,
            "Your socket connection to the server was not read from or written to within the timeout period.",
        )
    })?;
    let (fields, filename, file) = fields?;
    gate.in_file.store(true, Ordering::Release);
    Ok(Form { fields: Fields::from_pairs(fields), filename, file })
}

/// The fields up to the file part, the file part's name, and the part.
async fn read_fields(
    parts: &mut multer::Multipart<'static>,
    gate: &Gate,
) -> S3Result<(Vec<(String, String)>, String, multer::Field<'static>)> {
    let too_large = || {
        S3Error::with_message(
            S3ErrorCode::MaxPostPreDataLengthExceededError,
            "Your POST request fields preceeding the upload file was too large.",
        )
    };
    // The gate's refusal reaches multer as a stream error.
    let broken = |_| if gate.over.load(Ordering::Acquire) { too_large() } else { malformed() };
    let (mut fields, mut total) = (Vec::<(String, String)>::new(), 0usize);
    loop {
        let Some(mut part) = parts.next_field().await.map_err(broken)? else {
            return Err(S3Error::with_message(
                S3ErrorCode::IncorrectNumberOfFilesInPostRequest,
                "POST requires exactly one file upload per request.",
            ));
        };
        let name = part.name().unwrap_or_default().to_ascii_lowercase();
        if fields.iter().any(|(n, _)| *n == name) {
            // A second value could override what the policy's `eq` checked
            // in the first.
            return Err(S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("The form field '{name}' was given more than once."),
            ));
        }
        if name == "file" {
            let filename = part.file_name().unwrap_or_default().to_string();
            return Ok((fields, filename, part));
        }
        if fields.len() >= MAX_FIELDS {
            return Err(too_large());
        }
        total += name.len();
        let mut value = Vec::new();
        while let Some(chunk) = part.chunk().await.map_err(broken)? {
            total += chunk.len();
            if total > MAX_FIELDS_BYTES {
                return Err(too_large());
            }
            value.extend_from_slice(&chunk);
        }
        fields.push((name, String::from_utf8(value).map_err(|_| malformed())?));
    }
}

/// Most bytes the form may send before its file part: preamble,
/// boundaries, part headers, field names and values (AWS's fields alone
/// may be 20 KB; this bounds what surrounds them too).
pub const MAX_PRE_FILE: usize = 64 << 10;

/// Most fields before the file part.
pub const MAX_FIELDS: usize = 100;

/// Most bytes handed to the parser at a time before the file part: it
/// searches what it holds for the next boundary on every read, so small
/// runs keep both its buffer and its searching bounded.
pub const FIELD_RUN: usize = 4 << 10;

/// Most bytes the form parser takes from the body in one go once the file
/// part has begun.
const MAX_RUN: usize = 256 << 10;

/// What the reader of the fields and the body wrapper share: whether the
/// file part has begun, and whether the wrapper refused more pre-file data.
#[derive(Default)]
struct Gate {
    in_file: AtomicBool,
    over: AtomicBool,
}

/// The request body as the form parser reads it, a run at a time: after
/// a run ([`FIELD_RUN`] bytes before the file part, [`MAX_RUN`] after) it
/// answers "not yet" once (and is woken at once), so that the parser looks
/// at what it has before it asks for more. multer takes body chunks until
/// the body has none ready, and a fast client always has one ready, so
/// without this the parser would buffer the file as fast as it arrives,
/// however slowly the share takes it, and a form whose boundary never
/// comes as fast as it is sent. Before the file part, more than
/// [`MAX_PRE_FILE`] + [`FIELD_RUN`] bytes are refused with an error.
struct Paced<S> {
    inner: std::pin::Pin<Box<S>>,
    run: usize,
    /// Bytes handed to the parser before the file part.
    pulled: usize,
    /// The rest of a chunk cut to fit a run.
    held: Option<Bytes>,
    gate: Arc<Gate>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S, E> Stream for Paced<S>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: Into<BoxError>,
{
    type Item = Result<Bytes, BoxError>;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let in_file = self.gate.in_file.load(Ordering::Acquire);
        let max_run = if in_file { MAX_RUN } else { FIELD_RUN };
        if self.run >= max_run {
            self.run = 0;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if !in_file && self.pulled >= MAX_PRE_FILE + FIELD_RUN {
            self.gate.over.store(true, Ordering::Release);
            return Poll::Ready(Some(Err("the form's data before its file part is too large".into())));
        }
        let mut chunk = match self.held.take() {
            Some(c) => c,
            None => match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(c))) => c,
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) => {
                    self.run = 0;
                    return Poll::Ready(None);
                }
                Poll::Pending => {
                    self.run = 0;
                    return Poll::Pending;
                }
            },
        };
        if !in_file && chunk.len() > max_run - self.run {
            self.held = Some(chunk.split_off(max_run - self.run));
        }
        self.run += chunk.len();
        if !in_file {
            self.pulled += chunk.len();
        }
        Poll::Ready(Some(Ok(chunk)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn body(parts: &[(&str, Option<&str>, &str)]) -> Vec<u8> {
        let mut b = Vec::new();
        for (name, file, value) in parts {
            b.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"");
            b.extend_from_slice(name.as_bytes());
            b.push(b'"');
            if let Some(f) = file {
                b.extend_from_slice(format!("; filename=\"{f}\"").as_bytes());
            }
            b.extend_from_slice(b"\r\n\r\n");
            b.extend_from_slice(value.as_bytes());
            b.extend_from_slice(b"\r\n");
        }
        b.extend_from_slice(b"--XyZ--\r\n");
        b
    }

    fn later() -> tokio::time::Instant {
        tokio::time::Instant::now() + std::time::Duration::from_secs(3600)
    }

    async fn read_all(data: Vec<u8>) -> S3Result<(Fields, String, Vec<u8>)> {
        // Three bytes a chunk: parts split anywhere.
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            data.chunks(3).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let mut form = read("multipart/form-data; boundary=XyZ", futures::stream::iter(chunks), later()).await?;
        let mut file = Vec::new();
        while let Some(c) = form.file.next().await {
            file.extend_from_slice(&c.unwrap());
        }
        Ok((form.fields, form.filename, file))
    }

    #[tokio::test]
    async fn fields_before_the_file_then_the_file_as_a_stream() {
        let data = body(&[
            ("Key", None, "a/${filename}"),
            ("Content-Type", None, "text/plain"),
            ("FILE", Some("x.txt"), "bytes"),
        ]);
        let (fields, filename, file) = read_all(data).await.unwrap();
        assert_eq!(fields.get("key"), Some("a/${filename}"));
        assert_eq!(fields.get("content-type"), Some("text/plain"));
        assert_eq!((filename.as_str(), file.as_slice()), ("x.txt", &b"bytes"[..]));
    }

    #[tokio::test]
    async fn a_body_always_ready_is_taken_a_bounded_run_at_a_time() {
        // 8 MiB of file in 64 KiB chunks, every one ready at once: the parser
        // hands the file on in runs of MAX_RUN (plus one chunk), never the
        // whole of what the client has sent. The first run also holds what
        // was read while the fields before the file were parsed (a few runs).
        let mut data = body(&[("key", None, "k")]);
        data.truncate(data.len() - b"--XyZ--\r\n".len());
        data.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\n");
        data.extend(std::iter::repeat_n(7u8, 8 << 20));
        data.extend_from_slice(b"\r\n--XyZ--\r\n");
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            data.chunks(64 << 10).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let mut form = read("multipart/form-data; boundary=XyZ", futures::stream::iter(chunks), later()).await.unwrap();
        let (mut total, mut largest) = (0, 0);
        while let Some(c) = form.file.next().await {
            let c = c.unwrap();
            (total, largest) = (total + c.len(), largest.max(c.len()));
        }
        assert_eq!(total, 8 << 20);
        assert!(largest <= 4 * MAX_RUN + (64 << 10), "a chunk of {largest} bytes");
    }

    #[tokio::test]
    async fn bounds_and_malformed_forms() {
        let code = |r: S3Result<(Fields, String, Vec<u8>)>| r.err().map(|e| e.code().clone());
        let big = "v".repeat(MAX_FIELDS_BYTES);
        assert_eq!(
            code(read_all(body(&[("key", None, &big), ("file", Some("f"), "x")])).await),
            Some(S3ErrorCode::MaxPostPreDataLengthExceededError)
        );
        assert_eq!(
            code(read_all(body(&[("key", None, "k")])).await),
            Some(S3ErrorCode::IncorrectNumberOfFilesInPostRequest)
        );
        assert_eq!(code(read_all(b"not a form".to_vec()).await), Some(S3ErrorCode::MalformedPOSTRequest));
        let empty = futures::stream::empty::<Result<Bytes, std::io::Error>>();
        let no_boundary = read("multipart/form-data", empty, later()).await;
        assert_eq!(no_boundary.err().map(|e| e.code().clone()), Some(S3ErrorCode::MalformedPOSTRequest));
    }

    fn code<T>(r: S3Result<T>) -> Option<S3ErrorCode> {
        r.err().map(|e| e.code().clone())
    }

    #[tokio::test]
    async fn a_boundary_that_never_comes_is_refused_after_a_bounded_read() {
        // 512 MiB of zeros, every chunk ready at once: the parser is handed
        // at most MAX_PRE_FILE + FIELD_RUN bytes, then the form is refused.
        let handed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = handed.clone();
        let zeros = futures::stream::iter(0..8192).map(move |_| {
            counter.fetch_add(64 << 10, Ordering::Relaxed);
            Ok::<_, std::io::Error>(Bytes::from(vec![0u8; 64 << 10]))
        });
        let r = read("multipart/form-data; boundary=XyZ", zeros, later()).await;
        assert_eq!(code(r), Some(S3ErrorCode::MaxPostPreDataLengthExceededError));
        assert!(handed.load(Ordering::Relaxed) <= MAX_PRE_FILE + FIELD_RUN + (64 << 10));
    }

    #[tokio::test]
    async fn pre_file_data_is_bounded_in_bytes_count_and_duplicates() {
        // Part headers count: 50 fields with 1 KiB of headers each pass,
        // 80 do not, though their names and values are tiny.
        let with_headers = |n: usize| {
            let mut b = Vec::new();
            for i in 0..n {
                b.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"f");
                b.extend_from_slice(format!("{i}\"\r\nX-Pad: {}\r\n\r\nv\r\n", "p".repeat(1000)).as_bytes());
            }
            b.extend_from_slice(b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nbody\r\n--XyZ--\r\n");
            b
        };
        let (fields, _, file) = read_all(with_headers(50)).await.unwrap();
        assert_eq!((fields.iter().count(), file.as_slice()), (50, &b"body"[..]));
        assert_eq!(code(read_all(with_headers(80)).await), Some(S3ErrorCode::MaxPostPreDataLengthExceededError));
        let many: Vec<(String, Option<&str>, &str)> = (0..=MAX_FIELDS).map(|i| (format!("f{i}"), None, "v")).collect();
        let mut parts: Vec<(&str, Option<&str>, &str)> = many.iter().map(|(n, f, v)| (n.as_str(), *f, *v)).collect();
        parts.push(("file", Some("f"), "x"));
        assert_eq!(code(read_all(body(&parts)).await), Some(S3ErrorCode::MaxPostPreDataLengthExceededError));
        let twice = body(&[("key", None, "a"), ("Key", None, "b"), ("file", Some("f"), "x")]);
        assert_eq!(code(read_all(twice).await), Some(S3ErrorCode::InvalidArgument));
    }

    #[tokio::test(start_paused = true)]
    async fn fields_that_stop_coming_time_out() {
        let start = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"--XyZ\r\nContent-Dis"))]);
        let stalled = start.chain(futures::stream::pending());
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        let r = read("multipart/form-data; boundary=XyZ", stalled, deadline).await;
        assert_eq!(code(r), Some(S3ErrorCode::RequestTimeout));
        assert_eq!(tokio::time::Instant::now(), deadline);
    }
}
