//! SigV2 signatures (header `Authorization: AWS key:signature`, or a
//! presigned URL's `AWSAccessKeyId`, `Expires` and `Signature`) checked in
//! constant time before s3s sees the request.
//!
//! s3s checks SigV2 too, but compares the signatures with `!=`, whose time
//! tells how many leading characters of a guess are right. Checking first,
//! with [`subtle`], means s3s only ever compares signatures that match.
//! The string to sign is AWS's ("Signing and authenticating REST
//! requests"): the verb, `Content-MD5`, `Content-Type`, the date (empty
//! when `x-amz-date` is sent; a presigned URL's `Expires`), the `x-amz-*`
//! headers (lowercase, sorted, repeated values joined with `,`), then the
//! resource: `/bucket` when the Host names it, the path as sent, and the
//! sub-resources of the query in name order, values decoded.
//!
//! What this check cannot decide it leaves to s3s, which then answers as
//! before: an unknown access key (InvalidAccessKeyId), an expired or
//! malformed presigned URL, header values that are not UTF-8.

use subtle::ConstantTimeEq;

use crate::precheck::Refusal;

/// Query parameters that are part of SigV2's canonical resource, in the
/// order they are written (sorted by name).
const SUB_RESOURCES: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// Checks SigV2 signatures against the users in force.
pub struct Verifier {
    users: crate::users::Directory,
    domain: Option<crate::vhost::Domain>,
}

/// How a request is signed with SigV2, as far as this check reads it.
enum Signed {
    Header { key: String, signature: String },
    Presigned { key: String, signature: String, expires: String },
}

impl Verifier {
    /// A verifier over `users` (the table in force, reloaded with it) for
    /// a gateway answering virtual-hosted names under `domain`.
    pub fn new(users: crate::users::Directory, domain: Option<crate::vhost::Domain>) -> Verifier {
        Verifier { users, domain }
    }

    /// Checks `req`'s SigV2 signature, if it has one, at `now`.
    ///
    /// Errors: 403 SignatureDoesNotMatch when the signature is not the
    /// one its access key's secret makes. A request that is not SigV2, or
    /// whose key is unknown or URL expired, passes (s3s answers it).
    pub fn check<B>(&self, req: &http::Request<B>, now: time::OffsetDateTime) -> Result<(), Refusal> {
        let Some(signed) = signed(req) else { return Ok(()) };
        let (key, signature, date) = match &signed {
            Signed::Header { key, signature } => (key, signature, None),
            Signed::Presigned { key, signature, expires } => {
                match expires.parse::<i64>() {
                    Ok(t) if t >= 0 && t >= now.unix_timestamp() => {}
                    _ => return Ok(()),
                }
                (key, signature, Some(expires.as_str()))
            }
        };
        let Some(user) = self.users.get(key) else { return Ok(()) };
        let Some(text) = string_to_sign(req, date, self.domain.as_ref()) else { return Ok(()) };
        match bool::from(signature_of(user.secret_key(), &text).as_bytes().ct_eq(signature.as_bytes())) {
            true => Ok(()),
            false => Err(Refusal::signature_does_not_match()),
        }
    }
}

/// SigV2's signature of `text` with `secret`: base64 of its HMAC-SHA1.
pub(crate) fn signature_of(secret: &str, text: &str) -> String {
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, secret.as_bytes());
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, aws_lc_rs::hmac::sign(&key, text.as_bytes()))
}

/// The one item of `items`: `None` if there is none or more than one (a
/// repeated header or query parameter counts as absent, as s3s reads it).
fn single<T>(mut items: impl Iterator<Item = T>) -> Option<T> {
    let first = items.next()?;
    items.next().is_none().then_some(first)
}

/// The SigV2 signature `req` carries: a presigned URL's (the query names
/// `Signature`, as s3s decides), else an `Authorization: AWS` header's.
fn signed<B>(req: &http::Request<B>) -> Option<Signed> {
    let q = req.uri().query().unwrap_or("");
    if q.contains("Signature") {
        let query: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes()).into_owned().collect();
        if query.iter().any(|(k, _)| k == "Signature") {
            let unique = |name: &str| single(query.iter().filter(|(k, _)| k == name)).map(|(_, v)| v.clone());
            // s3s decodes the signature once more after the query.
            let signature = unique("Signature")?;
            let signature = percent_encoding::percent_decode_str(&signature).decode_utf8().ok()?.into_owned();
            return Some(Signed::Presigned { key: unique("AWSAccessKeyId")?, signature, expires: unique("Expires")? });
        }
    }
    let value = single(req.headers().get_all(http::header::AUTHORIZATION).iter())?.to_str().ok()?;
    let (key, signature) = value.strip_prefix("AWS ")?.split_once(':')?;
    Some(Signed::Header { key: key.to_string(), signature: signature.to_string() })
}

/// SigV2's string to sign for `req`; `expires` is a presigned URL's
/// (`None` for header signing). `None` when a header it needs is not
/// UTF-8 (s3s then refuses the request itself).
fn string_to_sign<B>(
    req: &http::Request<B>,
    expires: Option<&str>,
    domain: Option<&crate::vhost::Domain>,
) -> Option<String> {
    let h = req.headers();
    // One value, or none if the header is absent or repeated (as s3s reads).
    let unique = |name: &str| single(h.get_all(name).iter()).and_then(|v| std::str::from_utf8(v.as_bytes()).ok());
    let mut s = String::with_capacity(256);
    s.push_str(req.method().as_str());
    s.push('\n');
    s.push_str(unique("content-md5").unwrap_or(""));
    s.push('\n');
    s.push_str(unique("content-type").unwrap_or(""));
    s.push('\n');
    match expires {
        Some(e) => s.push_str(e),
        None if unique("x-amz-date").is_some() => {}
        None => s.push_str(unique("date").unwrap_or("")),
    }
    s.push('\n');
    let mut amz: Vec<&str> = h.keys().map(http::HeaderName::as_str).filter(|n| n.starts_with("x-amz-")).collect();
    amz.sort_unstable();
    for name in amz {
        let values: Vec<&str> =
            h.get_all(name).iter().filter_map(|v| std::str::from_utf8(v.as_bytes()).ok()).map(str::trim).collect();
        if values.is_empty() {
            continue;
        }
        s.push_str(name);
        s.push(':');
        s.push_str(&values.join(","));
        s.push('\n');
    }
    if let Some(a) = crate::vhost::addressed(domain, req).filter(|a| a.by_host) {
        s.push('/');
        s.push_str(&a.bucket);
    }
    s.push_str(req.uri().path());
    let query: Vec<(String, String)> =
        form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()).into_owned().collect();
    let mut first = true;
    for name in SUB_RESOURCES {
        let Some((_, value)) = single(query.iter().filter(|(k, _)| k == name)) else { continue };
        s.push(if std::mem::take(&mut first) { '?' } else { '&' });
        s.push_str(name);
        if !value.is_empty() {
            s.push('=');
            s.push_str(value);
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "AKIAIOSFODNN7EXAMPLE";
    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

    fn verifier(domain: Option<&str>) -> Verifier {
        let t: toml::Table =
            format!("[users.example]\naccess_key = \"{KEY}\"\nsecret_key = \"{SECRET}\"\nbuckets = [\"*\"]\n")
                .parse()
                .unwrap();
        let table =
            crate::users::UserTable::from_toml(t["users"].as_table().unwrap(), std::path::Path::new("/nonexistent"))
                .unwrap();
        Verifier::new(crate::users::Directory::new(table), domain.map(|d| crate::vhost::Domain::new(d).unwrap()))
    }

    fn at(unix: i64) -> time::OffsetDateTime {
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap()
    }

    // The requests of AWS's examples ("Signing and authenticating REST
    // requests"); the signatures are HMAC-SHA1 of the strings to sign as
    // the algorithm defines them (some printed examples differ from it).
    #[test]
    fn aws_examples_pass_and_one_changed_character_does_not() {
        let v = verifier(Some("s3.us-west-1.amazonaws.com"));
        let get = |sig: &str| {
            http::Request::get("/photos/puppy.jpg")
                .header("host", "awsexamplebucket1.s3.us-west-1.amazonaws.com")
                .header("date", "Tue, 27 Mar 2007 19:36:42 +0000")
                .header("authorization", format!("AWS {KEY}:{sig}"))
                .body(())
                .unwrap()
        };
        let now = at(0);
        assert_eq!(v.check(&get("qgk2+6Sv9/oM7G3qLEjTH1a1l1g="), now), Ok(()));
        assert_eq!(v.check(&get("qgk2+6Sv9/oM7G3qLEjTH1a1l1h="), now), Err(Refusal::signature_does_not_match()));
        let put = |sig: &str| {
            http::Request::put("/photos/puppy.jpg")
                .header("host", "awsexamplebucket1.s3.us-west-1.amazonaws.com")
                .header("content-type", "image/jpeg")
                .header("content-length", "94328")
                .header("date", "Tue, 27 Mar 2007 21:15:45 +0000")
                .header("authorization", format!("AWS {KEY}:{sig}"))
                .body(())
                .unwrap()
        };
        assert_eq!(v.check(&put("iqRzw+ileNPu1fhspnRs8nOjjIA="), now), Ok(()));
        assert_eq!(v.check(&put("iqRzw+ileNPu1fhspnRs8nOjjIB="), now), Err(Refusal::signature_does_not_match()));
        // Sub-resources and x-amz-date (the Date line is then empty).
        let list = |sig: &str| {
            http::Request::get("/?acl")
                .header("host", "awsexamplebucket1.s3.us-west-1.amazonaws.com")
                .header("date", "Tue, 27 Mar 2007 19:44:46 +0000")
                .header("authorization", format!("AWS {KEY}:{sig}"))
                .body(())
                .unwrap()
        };
        assert_eq!(v.check(&list("82ZHiFIjc+WbcwFKGUVEQspPn+0="), now), Ok(()));
        let delete = |sig: &str| {
            http::Request::delete("/awsexamplebucket1/photos/puppy.jpg")
                .header("host", "s3.us-west-1.amazonaws.com")
                .header("date", "Tue, 27 Mar 2007 21:20:27 +0000")
                .header("x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000")
                .header("authorization", format!("AWS {KEY}:{sig}"))
                .body(())
                .unwrap()
        };
        assert_eq!(v.check(&delete("Ri1hpB1zpS9pGqR7y8kuNFCl4sE="), now), Ok(()));
        assert_eq!(v.check(&delete("Ri1hpB1zpS9pGqR7y8kuNFCl4sF="), now), Err(Refusal::signature_does_not_match()));
    }

    #[test]
    fn presigned_urls_are_checked_until_they_expire() {
        let v = verifier(Some("s3.us-west-1.amazonaws.com"));
        let url = |sig: &str| {
            http::Request::get(format!("/photos/puppy.jpg?AWSAccessKeyId={KEY}&Signature={sig}&Expires=1175139620"))
                .header("host", "awsexamplebucket1.s3.us-west-1.amazonaws.com")
                .body(())
                .unwrap()
        };
        let before = at(1_175_139_000);
        assert_eq!(v.check(&url("1No4mq5ETf02z8aet9voy6gui6E%3D"), before), Ok(()));
        assert_eq!(v.check(&url("1No4mq5ETf02z8aet9voy6gui6F%3D"), before), Err(Refusal::signature_does_not_match()));
        // Expired: s3s answers that, whatever the signature.
        assert_eq!(v.check(&url("1No4mq5ETf02z8aet9voy6gui6F%3D"), at(1_175_139_621)), Ok(()));
    }

    #[test]
    fn what_s3s_answers_is_left_to_it() {
        let v = verifier(None);
        let req = |auth: &str| http::Request::get("/b/k").header("authorization", auth).body(()).unwrap();
        // An unknown key: InvalidAccessKeyId from s3s.
        assert_eq!(v.check(&req("AWS NOSUCHKEY:c2lnbmF0dXJl"), at(0)), Ok(()));
        // Not SigV2.
        assert_eq!(v.check(&req("AWS4-HMAC-SHA256 Credential=x"), at(0)), Ok(()));
        assert_eq!(v.check(&http::Request::get("/b/k").body(()).unwrap(), at(0)), Ok(()));
    }
}
