//! The customer's key as the three SSE-C headers give it, checked as AWS
//! checks them, and what is derived from it: each object's (or part's)
//! AES-256-GCM key, which seals and opens one package, and the ETag.

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::hmac;
use base64::Engine as _;
use bytes::BytesMut;
use md5::{Digest, Md5};

use super::{Damaged, ALGORITHM, B64};

/// What the object keys are derived under (changes with the format).
const LABEL: &[u8] = b"smbgate SSE-C v1";
/// What ETags are derived under.
const ETAG_LABEL: &[u8] = b"smbgate SSE-C ETag v1";

/// A customer's AES-256 key, checked against its MD5 as the request gave
/// both. Its `Debug` shows only the MD5.
#[derive(Clone)]
pub struct CustomerKey {
    key: [u8; 32],
    key_md5: String,
}

impl std::fmt::Debug for CustomerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomerKey").field("key_md5", &self.key_md5).finish_non_exhaustive()
    }
}

/// Why a request's SSE-C headers were refused, with AWS's messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    /// The algorithm is not `AES256` (400 InvalidEncryptionAlgorithmError).
    #[error("The Encryption request you specified is not valid. Supported value: AES256.")]
    Algorithm,
    /// A header is missing, or the key is not 256 bits of base64, or its
    /// MD5 is not the one given (400 InvalidArgument).
    #[error("{0}")]
    Argument(&'static str),
}

impl CustomerKey {
    /// The key the three headers give (`algorithm`, `key` in base64, `md5`
    /// of the key in base64); `None` if none of them is there.
    ///
    /// Errors: [`KeyRefusal`], as AWS answers each case.
    pub fn from_headers(
        algorithm: Option<&str>,
        key: Option<&str>,
        md5: Option<&str>,
    ) -> Result<Option<CustomerKey>, KeyRefusal> {
        if algorithm.is_none() && key.is_none() && md5.is_none() {
            return Ok(None);
        }
        match algorithm {
            Some(a) if a.trim() == ALGORITHM => {}
            Some(_) => return Err(KeyRefusal::Algorithm),
            None => {
                return Err(KeyRefusal::Argument(
                    "Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.",
                ))
            }
        }
        let Some(key) = key else {
            return Err(KeyRefusal::Argument(
                "Requests specifying Server Side Encryption with Customer provided keys must provide an appropriate secret key.",
            ));
        };
        let Some(md5) = md5 else {
            return Err(KeyRefusal::Argument(
                "Requests specifying Server Side Encryption with Customer provided keys must provide the client calculated MD5 of the secret key.",
            ));
        };
        let bytes = B64.decode(key.trim()).ok().and_then(|k| <[u8; 32]>::try_from(k).ok());
        let Some(bytes) = bytes else {
            return Err(KeyRefusal::Argument("The secret key was invalid for the specified algorithm."));
        };
        let key_md5 = B64.encode(Md5::digest(bytes));
        if key_md5 != md5.trim() {
            return Err(KeyRefusal::Argument(
                "The calculated MD5 hash of the key did not match the hash that was provided.",
            ));
        }
        Ok(Some(CustomerKey { key: bytes, key_md5 }))
    }

    /// The key's MD5, base64 (what answers and records carry).
    pub fn key_md5(&self) -> &str {
        &self.key_md5
    }

    /// The AES key of the object whose record holds `salt` (base64).
    ///
    /// Errors: a salt that is not 32 bytes of base64 (a damaged record).
    pub(super) fn object_key(&self, salt: &str) -> Result<ObjectKey, Damaged> {
        let salt = B64.decode(salt).ok().and_then(|s| <[u8; 32]>::try_from(s).ok()).ok_or(Damaged)?;
        Ok(self.derive(&salt))
    }

    pub(super) fn derive(&self, salt: &[u8; 32]) -> ObjectKey {
        let mac = hmac::Key::new(hmac::HMAC_SHA256, &self.key);
        let mut ctx = hmac::Context::with_key(&mac);
        ctx.update(LABEL);
        ctx.update(salt);
        let derived = ctx.sign();
        let unbound = UnboundKey::new(&AES_256_GCM, derived.as_ref()).expect("HMAC-SHA256 gives 32 bytes");
        ObjectKey(LessSafeKey::new(unbound))
    }
}

/// One object's AES-256-GCM key.
pub struct ObjectKey(LessSafeKey);

impl ObjectKey {
    fn nonce(part: u32, index: u32) -> Nonce {
        let mut n = [0u8; 12];
        n[4..8].copy_from_slice(&part.to_be_bytes());
        n[8..].copy_from_slice(&index.to_be_bytes());
        Nonce::assume_unique_for_key(n)
    }

    /// Seals `buf` (one package) in place as package `index` of part
    /// `part` and appends its tag.
    pub(super) fn seal(&self, (part, index): (u32, u32), last: bool, buf: &mut BytesMut) {
        let tag = self
            .0
            .seal_in_place_separate_tag(Self::nonce(part, index), Aad::from([last as u8]), buf)
            .expect("AES-GCM seals any package of 64 KiB");
        buf.extend_from_slice(tag.as_ref());
    }

    /// Opens package `index` of part `part` (its bytes and tag) in place:
    /// its plaintext length.
    pub(super) fn open(&self, (part, index): (u32, u32), last: bool, buf: &mut [u8]) -> Result<usize, Damaged> {
        let opened = self.0.open_in_place(Self::nonce(part, index), Aad::from([last as u8]), buf);
        opened.map(|p| p.len()).map_err(|_| Damaged)
    }
}

/// The ETag of an SSE-C object sealed under `customer` with `salt`, whose
/// body's MD5 is `md5` (see the module docs).
pub fn etag(customer: &CustomerKey, salt: &str, md5: &[u8; 16]) -> String {
    let mac = hmac::Key::new(hmac::HMAC_SHA256, &customer.key);
    let mut ctx = hmac::Context::with_key(&mac);
    ctx.update(ETAG_LABEL);
    ctx.update(salt.as_bytes());
    ctx.update(md5);
    hex::encode(&ctx.sign().as_ref()[..16])
}

/// A key of 32 bytes `byte`, as its headers would give it (for tests).
#[cfg(test)]
pub(super) fn key_of(byte: u8) -> CustomerKey {
    let k = [byte; 32];
    CustomerKey::from_headers(Some(ALGORITHM), Some(&B64.encode(k)), Some(&B64.encode(Md5::digest(k))))
        .expect("a good key")
        .expect("a key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headers_are_checked_as_aws_checks_them() {
        let k = B64.encode([1u8; 32]);
        let md5 = B64.encode(Md5::digest([1u8; 32]));
        assert!(CustomerKey::from_headers(None, None, None).unwrap().is_none());
        assert_eq!(CustomerKey::from_headers(Some("AES256"), Some(&k), Some(&md5)).unwrap().unwrap().key_md5(), md5);
        assert_eq!(
            CustomerKey::from_headers(Some("aws:kms"), Some(&k), Some(&md5)).unwrap_err(),
            KeyRefusal::Algorithm
        );
        let short = B64.encode([1u8; 16]);
        for (a, key, m) in [
            (None, Some(k.as_str()), Some(md5.as_str())),
            (Some("AES256"), None, Some(md5.as_str())),
            (Some("AES256"), Some(k.as_str()), None),
            (Some("AES256"), Some(short.as_str()), Some(md5.as_str())),
            (Some("AES256"), Some("not base64!"), Some(md5.as_str())),
            (Some("AES256"), Some(k.as_str()), Some("AAAAAAAAAAAAAAAAAAAAAA==")),
        ] {
            assert!(matches!(CustomerKey::from_headers(a, key, m), Err(KeyRefusal::Argument(_))), "{a:?} {m:?}");
        }
        assert!(!format!("{:?}", key_of(7)).contains(&B64.encode([7u8; 32])), "Debug shows the key");
    }

    #[test]
    fn the_etag_is_not_the_md5_and_depends_on_the_key() {
        let md5: [u8; 16] = Md5::digest(b"same").into();
        let salt = B64.encode([3u8; 32]);
        assert_ne!(etag(&key_of(7), &salt, &md5), hex::encode(md5));
        assert_eq!(etag(&key_of(7), &salt, &md5).len(), 32);
        assert_ne!(etag(&key_of(7), &salt, &md5), etag(&key_of(9), &salt, &md5), "the ETag depends on the key");
    }
}
