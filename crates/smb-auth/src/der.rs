//! The small subset of DER (X.690) that SPNEGO tokens use: single-byte tags,
//! definite lengths of up to four octets, and nesting. Decoding hands each
//! element's body to its own `Reader`; encoding writes the body first and
//! patches the length in front of it once, so nothing is encoded twice.

use crate::reader::Reader;
use crate::AuthError;

/// Reads one element whose tag must be `tag`, returning a reader over its body.
pub(crate) fn read_tlv<'a>(r: &mut Reader<'a>, tag: u8, what: &'static str) -> Result<Reader<'a>, AuthError> {
    let (found, body) = read_any(r, what)?;
    if found != tag {
        return Err(AuthError::BadTag { what, expected: tag, found });
    }
    Ok(body)
}

/// Reads one element of any tag, returning the tag and a reader over its body.
pub(crate) fn read_any<'a>(r: &mut Reader<'a>, what: &'static str) -> Result<(u8, Reader<'a>), AuthError> {
    let tag = r.u8(what)?;
    if tag & 0x1f == 0x1f {
        // Multi-byte tag numbers never occur in SPNEGO.
        return Err(AuthError::BadTag { what, expected: 0, found: tag });
    }
    let len = read_len(r, what)?;
    Ok((tag, r.sub(len, what)?))
}

fn read_len(r: &mut Reader<'_>, what: &'static str) -> Result<usize, AuthError> {
    let first = r.u8(what)?;
    if first < 0x80 {
        return Ok(usize::from(first));
    }
    let n = usize::from(first & 0x7f);
    if n == 0 || n > 4 {
        return Err(AuthError::BadLength(what));
    }
    Ok(r.take(n, what)?.iter().fold(0usize, |len, &b| (len << 8) | usize::from(b)))
}

/// Appends `tag`, a definite length and whatever `body` writes.
pub(crate) fn write_tlv(out: &mut Vec<u8>, tag: u8, body: impl FnOnce(&mut Vec<u8>)) {
    out.push(tag);
    let start = out.len();
    body(out);
    let len = out.len() - start;
    let be = (len as u32).to_be_bytes();
    let header: &[u8] = match len {
        0..=0x7f => &be[3..],
        0x80..=0xff => &[0x81, be[3]],
        0x100..=0xffff => &[0x82, be[2], be[3]],
        0x1_0000..=0xff_ffff => &[0x83, be[1], be[2], be[3]],
        _ => &[0x84, be[0], be[1], be[2], be[3]],
    };
    out.splice(start..start, header.iter().copied());
}

/// Appends a primitive element whose body is `bytes`.
pub(crate) fn write_bytes(out: &mut Vec<u8>, tag: u8, bytes: &[u8]) {
    write_tlv(out, tag, |o| o.extend_from_slice(bytes));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(len: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_bytes(&mut out, 0x04, &vec![0xab; len]);
        out
    }

    #[test]
    fn length_forms_round_trip() {
        for (len, header) in [
            (0, &[0x04, 0x00][..]),
            (0x7f, &[0x04, 0x7f]),
            (0x80, &[0x04, 0x81, 0x80]),
            (0x1234, &[0x04, 0x82, 0x12, 0x34]),
            (0x1_0000, &[0x04, 0x83, 0x01, 0x00, 0x00]),
        ] {
            let out = encoded(len);
            assert_eq!(&out[..header.len()], header, "len {len}");
            let mut r = Reader::new(&out);
            let mut body = read_tlv(&mut r, 0x04, "t").unwrap();
            assert_eq!(body.take(len, "b").unwrap().len(), len);
            assert!(body.is_empty() && r.is_empty());
        }
    }

    #[test]
    fn rejects_bad_lengths_and_tags() {
        let read = |b: &[u8]| read_tlv(&mut Reader::new(b), 0x04, "t").map(|_| ());
        assert_eq!(read(&[0x04, 0x80]), Err(AuthError::BadLength("t")));
        assert_eq!(read(&[0x04, 0x85, 1, 1, 1, 1, 1]), Err(AuthError::BadLength("t")));
        assert_eq!(read(&[0x04, 0x84, 0xff, 0xff, 0xff, 0xff]), Err(AuthError::Truncated("t")));
        assert_eq!(read(&[0x04, 0x82, 0x01]), Err(AuthError::Truncated("t")));
        assert_eq!(read(&[0x04, 0x03, 1, 2]), Err(AuthError::Truncated("t")));
        assert_eq!(read(&[]), Err(AuthError::Truncated("t")));
        assert!(matches!(read(&[0x30, 0x00]), Err(AuthError::BadTag { found: 0x30, .. })));
        assert!(matches!(read(&[0x1f, 0x00]), Err(AuthError::BadTag { .. })));
    }
}
