//! Answers s3s writes otherwise than AWS, put right on their way out, by
//! the operation s3s resolved. Recheck each on an s3s upgrade (see
//! `super`): a fix s3s has made itself would then be applied twice.

use s3s::HttpResponse;

/// `resp`, the answer to `operation` (`head`: the request was a HEAD), as
/// AWS writes it:
/// - a ranged HEAD is 206 like a GET (s3s answers 200);
/// - a CompleteMultipartUpload 200 carries one XML declaration
///   ([`one_xml_declaration`]);
/// - GetObjectAttributes' ETag is unquoted ([`unquoted_etag`]);
/// - PutBucketTagging is 204 (s3s's model says 200);
/// - a HEAD's answer has no body, an error's neither: s3s writes the error
///   document, which hyper leaves out over HTTP/1.1 but sends as DATA over
///   HTTP/2 (RFC 9110 9.3.2 forbids it; rclone and h2 refuse it).
pub fn as_aws_writes(operation: &str, head: bool, mut resp: HttpResponse) -> HttpResponse {
    let ok = resp.status() == http::StatusCode::OK;
    if head && ok && resp.headers().contains_key(http::header::CONTENT_RANGE) {
        *resp.status_mut() = http::StatusCode::PARTIAL_CONTENT;
    }
    if head {
        let (parts, _) = resp.into_parts();
        resp = http::Response::from_parts(parts, s3s::Body::empty());
    }
    match operation {
        "CompleteMultipartUpload" if ok => one_xml_declaration(resp),
        "GetObjectAttributes" if ok => unquoted_etag(resp),
        "PutBucketTagging" if ok => {
            *resp.status_mut() = http::StatusCode::NO_CONTENT;
            resp
        }
        _ => resp,
    }
}

/// A CompleteMultipartUpload answer with one XML declaration. Its 200 body
/// is a declaration, keep-alive spaces while the parts are joined, then the
/// result; s3s writes a result that is an error with a declaration of its
/// own, and a second declaration makes the body unparseable XML, so SDKs
/// cannot read the error inside the 200 (botocore reports a bare 500).
fn one_xml_declaration(resp: HttpResponse) -> HttpResponse {
    use http_body_util::BodyExt;
    let (parts, body) = resp.into_parts();
    let mut first = true;
    let body = body.map_frame(move |frame| {
        frame.map_data(|data: bytes::Bytes| {
            if std::mem::take(&mut first) || !data.starts_with(b"<?xml") {
                return data;
            }
            match data.windows(2).position(|w| w == b"?>") {
                Some(end) => data.slice(end + 2..),
                None => data,
            }
        })
    });
    http::Response::from_parts(parts, s3s::Body::http_body_unsync(body))
}

/// A GetObjectAttributes answer with its ETag unquoted, as AWS writes it
/// there (s3s quotes every ETag it writes). The answer is one small XML
/// document, in one frame.
fn unquoted_etag(resp: HttpResponse) -> HttpResponse {
    use http_body_util::BodyExt;
    let (parts, body) = resp.into_parts();
    let body = body.map_frame(|frame| {
        frame.map_data(|data: bytes::Bytes| {
            let Ok(text) = std::str::from_utf8(&data) else { return data };
            match (text.find("<ETag>\""), text.find("\"</ETag>")) {
                (Some(a), Some(b)) if a + 7 <= b => {
                    let mut out = String::with_capacity(text.len());
                    out.push_str(&text[..a + 6]);
                    out.push_str(&text[a + 7..b]);
                    out.push_str(&text[b + 1..]);
                    bytes::Bytes::from(out)
                }
                _ => data,
            }
        })
    });
    let mut resp = http::Response::from_parts(parts, s3s::Body::http_body_unsync(body));
    // The body is two bytes shorter than s3s said.
    resp.headers_mut().remove(http::header::CONTENT_LENGTH);
    resp
}
