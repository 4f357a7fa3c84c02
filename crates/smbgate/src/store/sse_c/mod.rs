//! SSE-C at rest: an object stored encrypted with the key its client
//! sends (`x-amz-server-side-encryption-customer-*`), so that the share
//! holds ciphertext and a GET needs the same key.
//!
//! The file is a run of packages: each holds [`PACKAGE`] bytes of the
//! object (the last one fewer) sealed with AES-256-GCM, its 16-byte tag
//! after it. Package `i` of an object therefore starts at byte
//! `i * (PACKAGE + TAG)` of the file, so a range GET reads and opens only
//! the packages it touches, and a package torn or altered on the share
//! fails its tag rather than yield other bytes.
//!
//! - Each object gets its own AES key: HMAC-SHA256 of the customer's key
//!   over a fixed label and 32 random bytes (the salt), which the object's
//!   record keeps with the customer key's MD5, never the key. Nonces can
//!   then count packages from zero without ever repeating under one AES
//!   key, however many objects a customer key seals.
//! - The nonce is the package's part number and its index in the part
//!   (each big-endian, in the last 8 of its 12 bytes; part 0 is a single
//!   PUT's body). The tag also covers one byte saying whether the package
//!   is its part's last, so that a file cut at a package boundary fails.
//! - Each part of a multipart upload is sealed as it is uploaded, under a
//!   salt of its own (a part uploaded again gets a new one, so no nonce
//!   ever seals two texts under one key) and its part number; the object
//!   is the parts' stored bytes one after the other, and its record lists
//!   each part's number, size and salt, so that a range finds its
//!   packages and their key.
//! - The ETag is not the MD5 of the object (AWS's rule for SSE-C objects,
//!   and what keeps the plaintext's MD5 off the listing): 16 bytes of an
//!   HMAC-SHA256 under the customer's key of the salt and the plaintext's
//!   MD5, in hex, so that nobody without the key can test a guess at the
//!   plaintext against it.
//!
//! Sans I/O, in two files: `customer_key` (the key the headers give, the
//! keys and the ETag derived from it, a package sealed and opened) and
//! `packages` ([`Sealer`] turns body chunks into packages, [`Opener`]
//! turns the stored bytes of a range back into the object's bytes).

mod customer_key;
mod packages;

use serde::{Deserialize, Serialize};

pub use customer_key::{etag, CustomerKey, KeyRefusal};
pub use packages::{Opener, Sealer};

/// Bytes of the object in one package (all but the last).
pub const PACKAGE: u64 = 64 * 1024;
/// Bytes of a package's tag.
pub const TAG: u64 = 16;
/// The one algorithm SSE-C names.
pub const ALGORITHM: &str = "AES256";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// What an SSE-C object's (or upload's) record keeps about its
/// encryption.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseCRecord {
    /// The customer key's MD5, base64.
    pub key_md5: String,
    /// The salt the object's key was derived with, base64 of 32 bytes;
    /// empty in an upload's record and a multipart object's (each part has
    /// its own).
    pub salt: String,
    /// The object's size in bytes (the file holds more: the tags); 0 in
    /// an upload's record.
    pub size: u64,
    /// A multipart object's parts in order; empty for a single PUT's body
    /// (part 0, `size` bytes, under `salt`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<SealedPart>,
}

/// One part of a multipart SSE-C object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedPart {
    /// Its part number (1 to 10,000).
    pub n: u32,
    /// Its size in bytes.
    pub size: u64,
    /// The salt it was sealed under, base64 of 32 bytes.
    pub salt: String,
}

impl SseCRecord {
    /// The record of a new upload under `customer`: its key's MD5, which
    /// every part must bring.
    pub fn for_upload(customer: &CustomerKey) -> SseCRecord {
        SseCRecord { key_md5: customer.key_md5().to_string(), salt: String::new(), size: 0, parts: Vec::new() }
    }

    /// Bytes of the object's file: each part's bytes and tags.
    pub fn stored_len(&self) -> u64 {
        match self.parts.is_empty() {
            true => stored_len(self.size),
            false => self.parts.iter().map(|p| stored_len(p.size)).sum(),
        }
    }

    /// The object's parts as (part number, bytes, salt).
    pub(super) fn layout(&self) -> Vec<(u32, u64, &str)> {
        match self.parts.is_empty() {
            true => vec![(0, self.size, self.salt.as_str())],
            false => self.parts.iter().map(|p| (p.n, p.size, p.salt.as_str())).collect(),
        }
    }
}

/// A stored object failed its check: a package's tag, its length, or its
/// record's salt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the stored object failed its integrity check (SSE-C): it was altered or cut on the share")]
pub struct Damaged;

/// Bytes on the share of an object of `size` bytes.
pub fn stored_len(size: u64) -> u64 {
    size + TAG * size.div_ceil(PACKAGE)
}

/// Bytes of the object in package `index` of an object of `size` bytes.
pub(super) fn package_len(size: u64, index: u64) -> u64 {
    size.saturating_sub(index * PACKAGE).min(PACKAGE)
}
