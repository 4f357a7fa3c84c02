//! A URL may pin its body's checksum: `x-amz-checksum-crc32` (or another
//! algorithm) as a query parameter, as SDKs write it when they hoist a
//! PutObject's headers into a presigned URL. The query is signed, so the
//! value is the signer's; but s3s reads checksums from headers only, and
//! such a body was stored unchecked. The value is copied into the header
//! of the same name before s3s reads the request, where the PUT path
//! checks the body against it (400 BadDigest, nothing stored).

use crate::precheck::Refusal;

/// The checksum headers S3 defines (`x-amz-checksum-<algorithm>`).
const CHECKSUMS: [&str; 5] = [
    "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1",
    "x-amz-checksum-sha256",
];

/// Copies each checksum named in `req`'s query (name compared decoded and
/// case aside) into its header.
///
/// Errors: 400 InvalidRequest when the header is sent too with another
/// value, or the value cannot be a header value: the request would be
/// checked against something other than what was signed.
pub fn hoist<B>(req: &mut http::Request<B>) -> Result<(), Refusal> {
    let Some(q) = req.uri().query() else { return Ok(()) };
    // Most requests name no checksum: they are not parsed.
    let names_checksum = q.as_bytes().windows(8).any(|w| w.eq_ignore_ascii_case(b"checksum"));
    if !names_checksum && !q.contains('%') {
        return Ok(());
    }
    let found: Vec<(&'static str, String)> = form_urlencoded::parse(q.as_bytes())
        .filter_map(|(k, v)| CHECKSUMS.iter().find(|c| c.eq_ignore_ascii_case(&k)).map(|c| (*c, v.into_owned())))
        .collect();
    for (name, value) in found {
        let conflict = || {
            Refusal::new(
                http::StatusCode::BAD_REQUEST,
                "InvalidRequest",
                format!("The {name} query parameter and header must agree."),
            )
        };
        match req.headers().get(name) {
            Some(h) if h.as_bytes() == value.as_bytes() => {}
            Some(_) => return Err(conflict()),
            None => {
                let v = http::HeaderValue::from_str(&value).map_err(|_| conflict())?;
                req.headers_mut().insert(name, v);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(uri: &str, header: Option<&str>) -> http::Request<()> {
        let mut b = http::Request::builder().method("PUT").uri(uri);
        if let Some(h) = header {
            b = b.header("x-amz-checksum-crc32", h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn a_checksum_in_the_query_becomes_its_header() {
        let mut r = req("/b/k?x-amz-checksum-crc32=DUoRhQ%3D%3D&X-Amz-Signature=abc", None);
        hoist(&mut r).unwrap();
        assert_eq!(r.headers()["x-amz-checksum-crc32"], "DUoRhQ==");
        // Named in any case, or percent-encoded.
        let mut r = req("/b/k?X-Amz-Checksum-SHA256=abc%3D", None);
        hoist(&mut r).unwrap();
        assert_eq!(r.headers()["x-amz-checksum-sha256"], "abc=");
        let mut r = req("/b/k?x-amz-checksum-crc32%63=AAAAAA%3D%3D", None);
        hoist(&mut r).unwrap();
        assert_eq!(r.headers()["x-amz-checksum-crc32c"], "AAAAAA==");
        // The same value in both: fine; another: refused.
        assert_eq!(hoist(&mut req("/b/k?x-amz-checksum-crc32=AA%3D%3D", Some("AA=="))), Ok(()));
        assert_eq!(
            hoist(&mut req("/b/k?x-amz-checksum-crc32=AA%3D%3D", Some("BB=="))).unwrap_err().code,
            "InvalidRequest"
        );
        // Others untouched.
        let mut r = req("/b/k?x-amz-checksum-algorithm=CRC32&partNumber=1", None);
        hoist(&mut r).unwrap();
        assert!(r.headers().is_empty());
    }
}
