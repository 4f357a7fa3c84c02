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
//! Sans I/O: [`Sealer`] turns body chunks into packages, [`Opener`] turns
//! the stored bytes of a range back into the object's bytes.

use std::ops::Range;

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use aws_lc_rs::hmac;
use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

/// Bytes of the object in one package (all but the last).
pub const PACKAGE: u64 = 64 * 1024;
/// Bytes of a package's tag.
pub const TAG: u64 = 16;
/// What the object keys are derived under (changes with the format).
const LABEL: &[u8] = b"smbgate SSE-C v1";
/// What ETags are derived under.
const ETAG_LABEL: &[u8] = b"smbgate SSE-C ETag v1";
/// The one algorithm SSE-C names.
pub const ALGORITHM: &str = "AES256";

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

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
    fn object_key(&self, salt: &str) -> Result<ObjectKey, Damaged> {
        let salt = B64.decode(salt).ok().and_then(|s| <[u8; 32]>::try_from(s).ok()).ok_or(Damaged)?;
        Ok(self.derive(&salt))
    }

    fn derive(&self, salt: &[u8; 32]) -> ObjectKey {
        let mac = hmac::Key::new(hmac::HMAC_SHA256, &self.key);
        let mut ctx = hmac::Context::with_key(&mac);
        ctx.update(LABEL);
        ctx.update(salt);
        let derived = ctx.sign();
        let unbound = UnboundKey::new(&AES_256_GCM, derived.as_ref()).expect("HMAC-SHA256 gives 32 bytes");
        ObjectKey(LessSafeKey::new(unbound))
    }
}

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
        SseCRecord { key_md5: customer.key_md5.clone(), salt: String::new(), size: 0, parts: Vec::new() }
    }

    /// Bytes of the object's file: each part's bytes and tags.
    pub fn stored_len(&self) -> u64 {
        self.layout().iter().map(|(_, size, _)| stored_len(*size)).sum()
    }

    /// The object's parts as (part number, bytes, salt).
    fn layout(&self) -> Vec<(u32, u64, &str)> {
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
    fn seal(&self, (part, index): (u32, u32), last: bool, buf: &mut BytesMut) {
        let tag = self
            .0
            .seal_in_place_separate_tag(Self::nonce(part, index), Aad::from([last as u8]), buf)
            .expect("AES-GCM seals any package of 64 KiB");
        buf.extend_from_slice(tag.as_ref());
    }

    /// Opens package `index` of part `part` (its bytes and tag) in place:
    /// its plaintext length.
    fn open(&self, (part, index): (u32, u32), last: bool, buf: &mut [u8]) -> Result<usize, Damaged> {
        let opened = self.0.open_in_place(Self::nonce(part, index), Aad::from([last as u8]), buf);
        opened.map(|p| p.len()).map_err(|_| Damaged)
    }
}

/// Bytes on the share of an object of `size` bytes.
pub fn stored_len(size: u64) -> u64 {
    size + TAG * size.div_ceil(PACKAGE)
}

/// Bytes of the object in package `index` of an object of `size` bytes.
fn package_len(size: u64, index: u64) -> u64 {
    size.saturating_sub(index * PACKAGE).min(PACKAGE)
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

/// Seals a body into packages as it arrives. The last full package is kept
/// back until more comes or the body ends, since the last one is sealed as
/// such.
pub struct Sealer {
    key: ObjectKey,
    salt: String,
    part: u32,
    pending: BytesMut,
    index: u32,
}

impl Sealer {
    /// A sealer for a new object under `customer`, with a fresh salt.
    pub fn new(customer: &CustomerKey) -> Sealer {
        let salt: [u8; 32] = rand::random();
        Sealer { key: customer.derive(&salt), salt: B64.encode(salt), part: 0, pending: BytesMut::new(), index: 0 }
    }

    /// A sealer for part `part` (1 to 10,000) of an upload under
    /// `customer`, with a fresh salt.
    pub fn for_part(customer: &CustomerKey, part: u32) -> Sealer {
        Sealer { part, ..Sealer::new(customer) }
    }

    /// The record of the body sealed, once it is `size` bytes long.
    pub fn record(&self, customer: &CustomerKey, size: u64) -> SseCRecord {
        SseCRecord { key_md5: customer.key_md5.clone(), salt: self.salt.clone(), size, parts: Vec::new() }
    }

    /// Takes the next `data` of the body: the packages it completes, each
    /// sealed, in order.
    pub fn push(&mut self, mut data: &[u8]) -> Vec<Bytes> {
        let mut out = Vec::new();
        while !data.is_empty() {
            if self.pending.len() as u64 == PACKAGE {
                out.push(self.seal_pending(false));
            }
            let room = (PACKAGE as usize - self.pending.len()).min(data.len());
            if self.pending.capacity() == 0 {
                self.pending.reserve((PACKAGE + TAG) as usize);
            }
            self.pending.extend_from_slice(&data[..room]);
            data = &data[room..];
        }
        out
    }

    /// The body ended: its last package, if it had any bytes.
    pub fn finish_last(&mut self) -> Option<Bytes> {
        (!self.pending.is_empty()).then(|| self.seal_pending(true))
    }

    /// Seals a whole body at once: the stored bytes.
    pub fn seal_all(&mut self, data: &[u8]) -> Bytes {
        let mut stored = BytesMut::with_capacity(stored_len(data.len() as u64) as usize);
        let chunks = data.chunks(PACKAGE as usize);
        let n = chunks.len();
        for (i, chunk) in chunks.enumerate() {
            let mut p = BytesMut::from(chunk);
            self.key.seal((self.part, i as u32), i + 1 == n, &mut p);
            stored.extend_from_slice(&p);
        }
        self.index = n as u32;
        stored.freeze()
    }

    fn seal_pending(&mut self, last: bool) -> Bytes {
        let mut p = std::mem::take(&mut self.pending);
        self.key.seal((self.part, self.index), last, &mut p);
        self.index += 1;
        p.freeze()
    }
}

/// Opens the stored bytes of a range of an object as they arrive and
/// hands out exactly that range of the object.
pub struct Opener {
    customer: CustomerKey,
    /// The object's parts: (part number, bytes, salt).
    parts: Vec<(u32, u64, String)>,
    /// The part and package the next stored bytes belong to, and that
    /// part's key once derived.
    part: usize,
    next: u64,
    key: Option<ObjectKey>,
    skip: usize,
    remaining: u64,
    buf: BytesMut,
}

impl Opener {
    /// An opener of `range` (bytes of the object, end exclusive, within
    /// it) of the object of record `record`, under `customer` (checked
    /// against the record already), and the bytes of the file to read for
    /// it.
    pub fn new(customer: &CustomerKey, record: &SseCRecord, range: Range<u64>) -> (Opener, Range<u64>) {
        let parts: Vec<(u32, u64, String)> =
            record.layout().into_iter().map(|(n, size, salt)| (n, size, salt.to_string())).collect();
        // Where each part starts, in the object and in the file.
        let (mut plain, mut stored) = (0u64, 0u64);
        let mut starts = Vec::with_capacity(parts.len());
        for (_, size, _) in &parts {
            starts.push((plain, stored));
            plain += size;
            stored += stored_len(*size);
        }
        // The package holding byte `at` of the object: (part, package).
        let find = |at: u64| {
            let p = starts.partition_point(|&(start, _)| start <= at).saturating_sub(1);
            (p, (at - starts[p].0) / PACKAGE)
        };
        let (first_part, first) = find(range.start);
        let at = match range.is_empty() {
            true => 0..0,
            false => {
                let (last_part, last) = find(range.end - 1);
                let end = starts[last_part].1 + last * (PACKAGE + TAG) + package_len(parts[last_part].1, last) + TAG;
                starts[first_part].1 + first * (PACKAGE + TAG)..end
            }
        };
        let skip = (range.start.saturating_sub(starts[first_part].0 + first * PACKAGE)) as usize;
        let remaining = range.end - range.start;
        let opener = Opener {
            customer: customer.clone(),
            parts,
            part: first_part,
            next: first,
            key: None,
            skip,
            remaining,
            buf: BytesMut::new(),
        };
        (opener, at)
    }

    /// Takes the next stored bytes: the object's bytes they complete.
    ///
    /// Errors: [`Damaged`], for a package that fails its tag.
    pub fn push(&mut self, data: &[u8]) -> Result<Vec<Bytes>, Damaged> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while self.remaining > 0 {
            let Some((number, size, salt)) = self.parts.get(self.part) else { break };
            let (number, size) = (*number, *size);
            let len = package_len(size, self.next);
            if len == 0 {
                // Past this part's last package (or an empty part).
                (self.part, self.next, self.key) = (self.part + 1, 0, None);
                continue;
            }
            let whole = (len + TAG) as usize;
            if self.buf.len() < whole {
                break;
            }
            let key = match self.key.take() {
                Some(k) => k,
                None => self.customer.object_key(salt)?,
            };
            let mut package = self.buf.split_to(whole);
            let last = (self.next + 1) * PACKAGE >= size;
            let index = u32::try_from(self.next).map_err(|_| Damaged)?;
            let opened = key.open((number, index), last, &mut package);
            self.key = Some(key);
            let opened = opened?;
            self.next += 1;
            package.truncate(opened);
            let mut plain = package.freeze().slice(self.skip.min(opened)..);
            self.skip = 0;
            plain.truncate(plain.len().min(self.remaining as usize));
            self.remaining -= plain.len() as u64;
            if !plain.is_empty() {
                out.push(plain);
            }
        }
        Ok(out)
    }

    /// The stored bytes ended.
    ///
    /// Errors: [`Damaged`], if they ended before the range did.
    pub fn finish(&self) -> Result<(), Damaged> {
        match self.remaining {
            0 => Ok(()),
            _ => Err(Damaged),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> CustomerKey {
        let k = [7u8; 32];
        CustomerKey::from_headers(Some("AES256"), Some(&B64.encode(k)), Some(&B64.encode(Md5::digest(k))))
            .unwrap()
            .unwrap()
    }

    fn body(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 % 251) as u8).collect()
    }

    /// Sealed in pieces of `piece` bytes: the stored bytes and the record.
    fn seal(data: &[u8], piece: usize) -> (Vec<u8>, SseCRecord) {
        let mut s = Sealer::new(&key());
        let mut stored = Vec::new();
        for c in data.chunks(piece.max(1)) {
            s.push(c).iter().for_each(|p| stored.extend_from_slice(p));
        }
        let record = s.record(&key(), data.len() as u64);
        if let Some(p) = s.finish_last() {
            stored.extend_from_slice(&p);
        }
        (stored, record)
    }

    fn open(stored: &[u8], record: &SseCRecord, range: Range<u64>, piece: usize) -> Result<Vec<u8>, Damaged> {
        let (mut o, at) = Opener::new(&key(), record, range);
        let mut out = Vec::new();
        for c in stored[at.start as usize..at.end as usize].chunks(piece.max(1)) {
            o.push(c)?.iter().for_each(|b| out.extend_from_slice(b));
        }
        o.finish()?;
        Ok(out)
    }

    #[test]
    fn bodies_of_any_size_and_ranges_anywhere_come_back_exactly() {
        let p = PACKAGE as usize;
        for n in [0, 1, p - 1, p, p + 1, 3 * p, 3 * p + 17] {
            let data = body(n);
            for piece in [1000, p, 5 * p] {
                let (stored, record) = seal(&data, piece);
                assert_eq!(stored.len() as u64, stored_len(n as u64), "n={n}");
                let ranges = [0..n, n / 2..n, 0..n / 3, n / 3..n / 2 + 1, n.saturating_sub(1)..n];
                for r in ranges.into_iter().filter(|r| r.end <= n && (!r.is_empty() || n == 0)) {
                    let got = open(&stored, &record, r.start as u64..r.end as u64, 4000).unwrap();
                    assert_eq!(got, &data[r.clone()], "n={n} piece={piece} range={r:?}");
                }
            }
            let mut s = Sealer::new(&key());
            let all = s.seal_all(&data);
            let record = s.record(&key(), n as u64);
            assert_eq!(open(&all, &record, 0..n as u64, 7).unwrap(), data, "seal_all n={n}");
        }
    }

    #[test]
    fn a_flipped_byte_a_cut_or_another_key_is_damage_never_other_bytes() {
        let data = body(3 * PACKAGE as usize + 100);
        let (stored, record) = seal(&data, 10_000);
        let n = data.len() as u64;
        for at in [0, PACKAGE as usize + 5, stored.len() - 1] {
            let mut bad = stored.clone();
            bad[at] ^= 1;
            assert_eq!(open(&bad, &record, 0..n, 9999), Err(Damaged), "flip at {at}");
        }
        // Cut at a package boundary, and told the object is that long.
        let cut = (2 * (PACKAGE + TAG)) as usize;
        let short = SseCRecord { size: 2 * PACKAGE, ..record.clone() };
        assert_eq!(open(&stored[..cut], &short, 0..2 * PACKAGE, 9999), Err(Damaged));
        // Cut anywhere, the size kept: too few bytes.
        let (mut o, at) = Opener::new(&key(), &record, 0..n);
        o.push(&stored[at.start as usize..at.end as usize - 1]).unwrap();
        assert_eq!(o.finish(), Err(Damaged));
        let other = CustomerKey { key: [8u8; 32], key_md5: String::new() };
        let (mut o, _) = Opener::new(&other, &record, 0..n);
        assert_eq!(o.push(&stored).map(|_| ()), Err(Damaged));
    }

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
        assert!(!format!("{:?}", key()).contains(&B64.encode([7u8; 32])), "Debug shows the key");
    }

    #[test]
    fn parts_sealed_apart_read_back_as_one_object_across_their_seams() {
        let p = PACKAGE as usize;
        // Parts 2, 5 and 9 (numbers need not follow on), the last short.
        let sizes = [(2u32, 2 * p + 10), (5, 3 * p), (9, 777)];
        let (mut stored, mut whole, mut parts) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &(n, size)) in sizes.iter().enumerate() {
            let data = body(size + i);
            let data = &data[i..];
            let mut s = Sealer::for_part(&key(), n);
            for c in data.chunks(10_000) {
                s.push(c).iter().for_each(|b| stored.extend_from_slice(b));
            }
            let salt = s.record(&key(), size as u64).salt;
            stored.extend_from_slice(&s.finish_last().unwrap());
            whole.extend_from_slice(data);
            parts.push(SealedPart { n, size: size as u64, salt });
        }
        let record = SseCRecord { size: whole.len() as u64, parts: parts.clone(), ..SseCRecord::for_upload(&key()) };
        assert_eq!(stored.len() as u64, sizes.iter().map(|&(_, s)| stored_len(s as u64)).sum::<u64>());
        let n = whole.len();
        for r in [0..n, 2 * p..2 * p + 20, 2 * p + 5..2 * p + 15, 5 * p + 9..n, n - 1..n, 3..4] {
            let got = open(&stored, &record, r.start as u64..r.end as u64, 3000).unwrap();
            assert_eq!(got, &whole[r.clone()], "range {r:?}");
        }
        // Numbered otherwise, or under another part's salt, the parts fail
        // their tags.
        let renumbered: Vec<_> = parts.iter().map(|p| SealedPart { n: p.n + 1, ..p.clone() }).collect();
        let record2 = SseCRecord { parts: renumbered, ..record.clone() };
        assert_eq!(open(&stored, &record2, 0..n as u64, 3000), Err(Damaged));
        let mut swapped = parts.clone();
        swapped[0].salt = parts[1].salt.clone();
        let record3 = SseCRecord { parts: swapped, ..record };
        assert_eq!(open(&stored, &record3, 0..n as u64, 3000), Err(Damaged));
    }

    #[test]
    fn a_part_uploaded_again_is_sealed_under_a_new_salt() {
        let (a, b) = (Sealer::for_part(&key(), 3), Sealer::for_part(&key(), 3));
        assert_ne!(a.record(&key(), 1).salt, b.record(&key(), 1).salt);
    }

    #[test]
    fn each_object_gets_its_own_salt_and_an_etag_that_is_not_its_md5() {
        let (a, ra) = seal(b"same", 4);
        let (b, rb) = seal(b"same", 4);
        assert_ne!(ra.salt, rb.salt);
        assert_ne!(a, b);
        let md5: [u8; 16] = Md5::digest(b"same").into();
        assert_ne!(etag(&key(), &ra.salt, &md5), hex::encode(md5));
        assert_eq!(etag(&key(), &ra.salt, &md5).len(), 32);
        let other = CustomerKey { key: [9u8; 32], key_md5: String::new() };
        assert_ne!(etag(&key(), &ra.salt, &md5), etag(&other, &ra.salt, &md5), "the ETag depends on the key");
    }
}
