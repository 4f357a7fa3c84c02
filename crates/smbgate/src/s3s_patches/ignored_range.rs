//! A GET or HEAD whose `Range` header does not parse as one byte range
//! (`bytes=5-2`, `bytes=0-1,4-5`, `chars=0-1`) is answered as if it had
//! none: 200 and the whole object, as AWS answers (RFC 9110 14.2 lets a
//! server ignore a Range it cannot use).
//!
//! s3s parses Range while it decodes GetObject and HeadObject, after it has
//! verified the signature, and refuses a bad one with 400. The header is
//! usually signed, so the front cannot drop it before. Instead
//! an s3s custom route (`crate::routes`) is used: s3s offers it each request once
//! the signature holds, and it takes those with a Range that does not
//! parse. It sends them on, without Range and without their signature, to a
//! second s3s service over the same gateway, users and access check (see
//! `crate::routes` for how the verified access key travels with them).
//!
//! The store decides everything else about a GET's bytes
//! (`store::read_plan`), but it cannot ignore a Range that never reaches
//! it: s3s 0.14 refuses the request while decoding its input, before any
//! handler of ours runs. Hence this detour, until s3s can be told to drop
//! an unparsable Range itself.

use hyper::HeaderMap;

/// True if `headers` carry a Range that s3s's parser refuses: such a
/// GET or HEAD is taken by the custom route (`crate::routes`) and sent on
/// without its Range.
pub fn unusable_range(headers: &HeaderMap) -> bool {
    headers.get(hyper::header::RANGE).is_some_and(|v| v.to_str().map_or(true, |r| s3s::dto::Range::parse(r).is_err()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_s3s_refuses_are_unusable() {
        let h = |r: &str| {
            let mut h = HeaderMap::new();
            h.insert(hyper::header::RANGE, r.parse().unwrap());
            h
        };
        for bad in ["bytes=5-2", "bytes=0-1,4-5", "chars=0-1", "bytes=", "bytes=a-b"] {
            assert!(unusable_range(&h(bad)), "{bad}");
        }
        for good in ["bytes=0-1", "bytes=5-", "bytes=-3"] {
            assert!(!unusable_range(&h(good)), "{good}");
        }
        assert!(!unusable_range(&HeaderMap::new()));
    }
}
