//! Compound chaining (MS-SMB2 3.2.4.1.4): several requests in one frame,
//! linked by NextCommand with 8-byte alignment, and the split of a received
//! compound response into its messages.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, DecodeResult};
use crate::header::{Header, HEADER_LEN};
use crate::message::{patch_u32, Request};
use crate::reader::{pad_to, Reader};

/// Appends messages to a buffer as one compound chain.
///
/// Each [`ChainBuilder::push`] links the previous message to the new one.
/// [`ChainBuilder::finish`] returns each message's byte range in the buffer
/// (padding included, as signed), so the caller can sign them in place.
#[derive(Debug, Default)]
pub struct ChainBuilder {
    starts: Vec<usize>,
}

impl ChainBuilder {
    /// An empty chain.
    pub fn new() -> Self {
        ChainBuilder { starts: Vec::new() }
    }

    /// Appends `header` (its `next_command` is patched later) and `body`.
    /// Returns the offset of this message's header in `out`.
    pub fn push(&mut self, out: &mut BytesMut, header: &Header, body: &dyn Request) -> usize {
        if let Some(&prev) = self.starts.last() {
            pad_to(out, prev, 8);
            let next = (out.len() - prev) as u32;
            patch_u32(out, prev + 20, next);
        }
        let start = out.len();
        header.encode(out);
        body.encode_body(out, start);
        self.starts.push(start);
        start
    }

    /// Number of messages pushed.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// True if nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The byte range of each message, the last one ending at `end`.
    pub fn finish(self, end: usize) -> Vec<Range<usize>> {
        let mut out = Vec::with_capacity(self.starts.len());
        for (i, &s) in self.starts.iter().enumerate() {
            let e = self.starts.get(i + 1).copied().unwrap_or(end);
            out.push(s..e);
        }
        out
    }
}

/// Splits a (decrypted) frame into its messages by NextCommand.
///
/// Errors if a NextCommand is shorter than a header, points past the
/// frame, or a message is shorter than a header.
pub fn split_compound(frame: &Bytes) -> DecodeResult<Vec<Bytes>> {
    let mut msgs = Vec::with_capacity(1);
    let mut off = 0usize;
    loop {
        let rest = frame.get(off..).ok_or(DecodeError::OutOfBounds("NextCommand"))?;
        if rest.len() < HEADER_LEN {
            return Err(DecodeError::Truncated("SMB2 header"));
        }
        let next = u32::from_le_bytes([rest[20], rest[21], rest[22], rest[23]]) as usize;
        if next == 0 {
            msgs.push(frame.slice(off..));
            return Ok(msgs);
        }
        if next < HEADER_LEN || next > rest.len() {
            return Err(DecodeError::OutOfBounds("NextCommand"));
        }
        msgs.push(frame.slice(off..off + next));
        off += next;
    }
}

/// Error response body (MS-SMB2 2.2.2): the ErrorData bytes, if any.
pub fn decode_error_data(msg: &Bytes) -> DecodeResult<Bytes> {
    let mut r = Reader::new(msg.get(HEADER_LEN..).unwrap_or_default());
    r.expect_u16(9, "ERROR StructureSize")?;
    r.skip(2, "ErrorContextCount/Reserved")?;
    let n = r.u32("ByteCount")? as usize;
    let start = HEADER_LEN + 8;
    if n == 0 {
        return Ok(Bytes::new());
    }
    let end = start.checked_add(n).filter(|&e| e <= msg.len()).ok_or(DecodeError::OutOfBounds("ErrorData"))?;
    Ok(msg.slice(start..end))
}
