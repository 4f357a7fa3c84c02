//! Bodies sealed into packages as they arrive ([`Sealer`]), and the stored
//! bytes of a range opened back into the object's bytes ([`Opener`]).

use std::ops::Range;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};

use super::customer_key::{CustomerKey, ObjectKey};
use super::{package_len, stored_len, Damaged, SseCRecord, B64, PACKAGE, TAG};

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
        SseCRecord { key_md5: customer.key_md5().to_string(), salt: self.salt.clone(), size, parts: Vec::new() }
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
        let layout = record.layout();
        // Where each part starts, in the object and in the file.
        let (mut plain, mut stored) = (0u64, 0u64);
        let mut starts = Vec::with_capacity(layout.len());
        for (_, size, _) in &layout {
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
        let (at, last_part) = match range.is_empty() {
            true => (0..0, first_part),
            false => {
                let (last_part, last) = find(range.end - 1);
                let end = starts[last_part].1 + last * (PACKAGE + TAG) + package_len(layout[last_part].1, last) + TAG;
                (starts[first_part].1 + first * (PACKAGE + TAG)..end, last_part)
            }
        };
        // Only the parts the range touches are kept.
        let parts = layout[first_part..=last_part].iter().map(|&(n, size, salt)| (n, size, salt.to_string())).collect();
        let skip = (range.start.saturating_sub(starts[first_part].0 + first * PACKAGE)) as usize;
        let remaining = range.end - range.start;
        let opener = Opener {
            customer: customer.clone(),
            parts,
            part: 0,
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
    use crate::store::sse_c::customer_key::key_of;
    use crate::store::sse_c::SealedPart;

    fn key() -> CustomerKey {
        key_of(7)
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
        let (mut o, _) = Opener::new(&key_of(8), &record, 0..n);
        assert_eq!(o.push(&stored).map(|_| ()), Err(Damaged));
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
    fn each_object_gets_its_own_salt() {
        let (a, ra) = seal(b"same", 4);
        let (b, rb) = seal(b"same", 4);
        assert_ne!(ra.salt, rb.salt);
        assert_ne!(a, b);
    }
}
