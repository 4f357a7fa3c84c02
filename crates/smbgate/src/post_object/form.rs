//! Reading a POST Object form (`multipart/form-data`): its fields up to
//! the file part, bounded as AWS bounds them, and the file part itself as
//! a stream that is never held whole. Fields after the file are ignored,
//! as AWS ignores them.

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
/// field named `file`, in any case).
///
/// Errors: 400 MalformedPOSTRequest for a body that is not multipart
/// (no boundary, a broken part, a field that is not UTF-8);
/// 400 MaxPostPreDataLengthExceededError when the fields before the file
/// pass [`MAX_FIELDS_BYTES`]; 400 IncorrectNumberOfFilesInPostRequest
/// when there is no file part.
pub async fn read<S, E>(content_type: &str, body: S) -> S3Result<Form>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<Box<dyn std::error::Error + Send + Sync>> + 'static,
{
    let boundary = multer::parse_boundary(content_type).map_err(|_| malformed())?;
    let mut parts = multer::Multipart::new(Paced { inner: Box::pin(body), run: 0 }, boundary);
    let (mut fields, mut total) = (Vec::new(), 0usize);
    loop {
        let Some(mut part) = parts.next_field().await.map_err(|_| malformed())? else {
            return Err(S3Error::with_message(
                S3ErrorCode::IncorrectNumberOfFilesInPostRequest,
                "POST requires exactly one file upload per request.",
            ));
        };
        let name = part.name().unwrap_or_default().to_ascii_lowercase();
        if name == "file" {
            let filename = part.file_name().unwrap_or_default().to_string();
            return Ok(Form { fields: Fields::from_pairs(fields), filename, file: part });
        }
        total += name.len();
        let mut value = Vec::new();
        while let Some(chunk) = part.chunk().await.map_err(|_| malformed())? {
            total += chunk.len();
            if total > MAX_FIELDS_BYTES {
                return Err(S3Error::with_message(
                    S3ErrorCode::MaxPostPreDataLengthExceededError,
                    "Your POST request fields preceeding the upload file was too large.",
                ));
            }
            value.extend_from_slice(&chunk);
        }
        fields.push((name, String::from_utf8(value).map_err(|_| malformed())?));
    }
}

/// Most bytes the form parser takes from the body in one go.
const MAX_RUN: usize = 256 << 10;

/// The request body as the form parser reads it: after [`MAX_RUN`] bytes
/// in a row it answers "not yet" once (and is woken at once). multer takes
/// body chunks until the body has none ready, and a fast client always has
/// one ready, so without this the parser would buffer the file as fast as
/// it arrives, however slowly the share takes it.
struct Paced<S> {
    inner: std::pin::Pin<Box<S>>,
    run: usize,
}

impl<S, E> Stream for Paced<S>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    type Item = Result<Bytes, E>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if self.run >= MAX_RUN {
            self.run = 0;
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        }
        let next = self.inner.as_mut().poll_next(cx);
        match &next {
            std::task::Poll::Ready(Some(Ok(chunk))) => self.run += chunk.len(),
            _ => self.run = 0,
        }
        next
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

    async fn read_all(data: Vec<u8>) -> S3Result<(Fields, String, Vec<u8>)> {
        // Three bytes a chunk: parts split anywhere.
        let chunks: Vec<Result<Bytes, std::io::Error>> =
            data.chunks(3).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
        let mut form = read("multipart/form-data; boundary=XyZ", futures::stream::iter(chunks)).await?;
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
        let mut form = read("multipart/form-data; boundary=XyZ", futures::stream::iter(chunks)).await.unwrap();
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
        let no_boundary = read("multipart/form-data", futures::stream::empty::<Result<Bytes, std::io::Error>>()).await;
        assert_eq!(no_boundary.err().map(|e| e.code().clone()), Some(S3ErrorCode::MalformedPOSTRequest));
    }
}
