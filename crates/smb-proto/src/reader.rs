//! A bounds-checked little-endian cursor. Every decoder reads through it, so a
//! lying length field fails with [`DecodeError::Truncated`] instead of reading
//! past its parent.

use crate::error::{DecodeError, DecodeResult};

/// Cursor over a borrowed byte slice; `pos` is relative to the slice start.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Takes the next `n` bytes, or fails naming `what`.
    pub fn take(&mut self, n: usize, what: &'static str) -> DecodeResult<&'a [u8]> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated(what));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Skips `n` bytes.
    pub fn skip(&mut self, n: usize, what: &'static str) -> DecodeResult<()> {
        self.take(n, what).map(|_| ())
    }

    /// Reads a fixed-size array.
    pub fn array<const N: usize>(&mut self, what: &'static str) -> DecodeResult<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &'static str) -> DecodeResult<u8> {
        Ok(self.take(1, what)?[0])
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self, what: &'static str) -> DecodeResult<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self, what: &'static str) -> DecodeResult<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self, what: &'static str) -> DecodeResult<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Reads a u16 and checks it equals `want` (StructureSize fields).
    pub fn expect_u16(&mut self, want: u16, what: &'static str) -> DecodeResult<()> {
        let got = self.u16(what)?;
        if got != want {
            return Err(DecodeError::BadValue { field: what, got: got.into() });
        }
        Ok(())
    }
}

/// Returns `msg[offset..offset+len]` for an offset measured from the start of
/// the SMB2 header, or [`DecodeError::OutOfBounds`].
pub fn slice_at<'a>(msg: &'a [u8], offset: usize, len: usize, what: &'static str) -> DecodeResult<&'a [u8]> {
    let end = offset.checked_add(len).ok_or(DecodeError::OutOfBounds(what))?;
    msg.get(offset..end).ok_or(DecodeError::OutOfBounds(what))
}

/// Range `offset..offset+len` checked against a message of `msg_len` bytes.
pub fn range_at(msg_len: usize, offset: usize, len: usize, what: &'static str) -> DecodeResult<std::ops::Range<usize>> {
    let end = offset.checked_add(len).ok_or(DecodeError::OutOfBounds(what))?;
    if end > msg_len {
        return Err(DecodeError::OutOfBounds(what));
    }
    Ok(offset..end)
}

/// Decodes UTF-16LE bytes into a `String`.
pub fn utf16_to_string(b: &[u8], what: &'static str) -> DecodeResult<String> {
    if !b.len().is_multiple_of(2) {
        return Err(DecodeError::BadUtf16(what));
    }
    let units = b.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]]));
    char::decode_utf16(units).collect::<Result<String, _>>().map_err(|_| DecodeError::BadUtf16(what))
}

/// Appends `s` as UTF-16LE; returns the number of bytes written.
pub fn put_utf16(out: &mut bytes::BytesMut, s: &str) -> usize {
    let start = out.len();
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out.len() - start
}

/// Pads `out` with zeros up to a multiple of `align` measured from `base`.
pub fn pad_to(out: &mut bytes::BytesMut, base: usize, align: usize) {
    let rem = (out.len() - base) % align;
    if rem != 0 {
        out.resize(out.len() + align - rem, 0);
    }
}
