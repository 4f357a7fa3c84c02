//! A bounds-checked cursor over a byte slice, shared by the DER and NTLM
//! decoders. Every read names what it was reading, so a short input turns
//! into `AuthError::Truncated("that field")` rather than a panic.

use crate::AuthError;

/// Cursor over borrowed bytes; reads consume from the front.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Consumes exactly `n` bytes, or fails without consuming anything.
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], AuthError> {
        if n > self.buf.len() {
            return Err(AuthError::Truncated(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, AuthError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16_le(&mut self, what: &'static str) -> Result<u16, AuthError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32_le(&mut self, what: &'static str) -> Result<u32, AuthError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Consumes `n` bytes and returns them as their own reader, so a nested
    /// structure can never read past the length its parent gave it.
    pub(crate) fn sub(&mut self, n: usize, what: &'static str) -> Result<Reader<'a>, AuthError> {
        self.take(n, what).map(Reader::new)
    }

    /// Everything not yet consumed.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.buf
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(&self, what: &'static str) -> Result<(), AuthError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(AuthError::TrailingData(what))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_fails_when_short_and_consumes_nothing() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.take(4, "x"), Err(AuthError::Truncated("x")));
        assert_eq!(r.u16_le("y"), Ok(0x0201));
        assert_eq!(r.u32_le("z"), Err(AuthError::Truncated("z")));
        assert_eq!(r.finish("w"), Err(AuthError::TrailingData("w")));
        assert_eq!(r.u8("v"), Ok(3));
        assert!(r.is_empty() && r.finish("w").is_ok());
    }
}
