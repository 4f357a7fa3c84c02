//! Virtual-hosted-style addressing (`bucket.s3.example.com`), with
//! `--domain`: a Host under the domain names its bucket; the domain itself,
//! and any other host (an IP address, `localhost`, a load balancer's name),
//! is path style, so path-style clients keep working.

use s3s::host::{S3Host, VirtualHost};
use s3s::S3Result;

/// The base domain buckets are subdomains of (no port).
#[derive(Debug, Clone)]
pub struct Domain(String);

impl Domain {
    /// `domain`, e.g. `s3.example.com`, lowercased.
    ///
    /// Errors: a one-line reason for something that is not a DNS name.
    pub fn new(domain: &str) -> Result<Domain, String> {
        let d = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        let ok = !d.is_empty()
            && d.split('.')
                .all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
        if ok {
            Ok(Domain(d))
        } else {
            Err(format!("--domain {domain:?} is not a DNS name (e.g. s3.example.com)"))
        }
    }

    /// The bucket a Host header names: `Some(bucket)` for
    /// `bucket.<domain>[:port]`, `None` for path style.
    pub fn bucket_of<'h>(&self, host: &'h str) -> Option<&'h str> {
        let name = match host.rsplit_once(':') {
            Some((n, port)) if !n.ends_with(']') && port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => host,
        };
        let name = name.trim_end_matches('.');
        let cut = name.len().checked_sub(self.0.len() + 1).filter(|&c| c > 0)?;
        let (bucket, rest) = (name.get(..cut)?, name.get(cut..)?);
        (rest.starts_with('.') && rest[1..].eq_ignore_ascii_case(&self.0)).then_some(bucket)
    }
}

/// Where a request is addressed (see [`addressed`]).
pub struct Addressed<'r> {
    /// The bucket, percent-decoded, not yet checked against the bucket
    /// name rules.
    pub bucket: String,
    /// True if the Host header named it (virtual-hosted style).
    pub by_host: bool,
    /// The path after the bucket, without its leading `/` (raw; empty for
    /// the bucket itself).
    pub rest: &'r str,
}

/// The bucket `req` addresses: by its Host under `domain` when set and it
/// names one, else the first segment of its path. `None` when that segment
/// does not decode to UTF-8.
pub fn addressed<'r, B>(domain: Option<&Domain>, req: &'r http::Request<B>) -> Option<Addressed<'r>> {
    let path = req.uri().path().trim_start_matches('/');
    let host = host_of(req);
    if let Some(b) = domain.zip(host).and_then(|(d, h)| d.bucket_of(h)) {
        return Some(Addressed { bucket: b.to_string(), by_host: true, rest: path });
    }
    let (first, rest) = path.split_once('/').unwrap_or((path, ""));
    let bucket = percent_encoding::percent_decode_str(first).decode_utf8().ok()?.into_owned();
    Some(Addressed { bucket, by_host: false, rest })
}

/// The host `req` is sent to: its Host header, else (HTTP/2 and later,
/// which carry it as `:authority` and send no Host) its URI's authority,
/// as s3s reads it. `None` when neither is there or Host is not ASCII.
pub fn host_of<B>(req: &http::Request<B>) -> Option<&str> {
    match req.headers().get(http::header::HOST) {
        Some(h) => h.to_str().ok(),
        None if req.version() >= http::Version::HTTP_2 => req.uri().authority().map(|a| a.as_str()),
        None => None,
    }
}

impl S3Host for Domain {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<VirtualHost<'a>> {
        Ok(match self.bucket_of(host) {
            Some(bucket) => VirtualHost::new(self.0.as_str()).with_bucket(bucket),
            None => VirtualHost::new(host),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http2_names_its_host_in_the_authority() {
        let d = Domain::new("s3.example.com").unwrap();
        let h2 = http::Request::builder()
            .version(http::Version::HTTP_2)
            .uri("http://photos.s3.example.com:9000/a/b")
            .body(())
            .unwrap();
        let a = addressed(Some(&d), &h2).unwrap();
        assert_eq!((a.bucket.as_str(), a.by_host, a.rest), ("photos", true, "a/b"));
        // HTTP/1.1 in absolute form without Host: the path names the bucket.
        let h1 = http::Request::builder().uri("http://photos.s3.example.com/a/b").body(()).unwrap();
        assert_eq!(host_of(&h1), None);
        assert_eq!(addressed(Some(&d), &h1).unwrap().bucket, "a");
        // A Host header wins over the authority.
        let both = http::Request::builder()
            .version(http::Version::HTTP_2)
            .uri("http://photos.s3.example.com/a")
            .header("host", "docs.s3.example.com")
            .body(())
            .unwrap();
        assert_eq!(addressed(Some(&d), &both).unwrap().bucket, "docs");
    }

    #[test]
    fn hosts_under_the_domain_name_buckets() {
        let d = Domain::new("S3.Example.com").unwrap();
        assert_eq!(d.bucket_of("photos.s3.example.com"), Some("photos"));
        assert_eq!(d.bucket_of("photos.s3.example.com:9000"), Some("photos"));
        assert_eq!(d.bucket_of("my.dotted.bucket.s3.example.com"), Some("my.dotted.bucket"));
        assert_eq!(d.bucket_of("s3.example.com:9000"), None);
        assert_eq!(d.bucket_of("127.0.0.1:9000"), None);
        assert_eq!(d.bucket_of("localhost"), None);
        assert_eq!(d.bucket_of("evils3.example.com"), None);
        assert_eq!(d.bucket_of("[::1]:9000"), None);
        assert!(Domain::new("not a domain").is_err());
        assert!(Domain::new("").is_err());
    }
}
