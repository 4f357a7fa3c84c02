//! Reading the bytes of an open file with pipelined READs (many in flight
//! within a byte budget, answers decoded without a copy): a range handed
//! out piece by piece as it arrives, a range gathered whole, or the whole
//! file to a sink (to hash a copy).

use std::ops::Range;

use super::Handle;
use bytes::Bytes;
use smb_client::pipeline::PipelinedReader;

use super::Result;

/// The pieces of a range of an open file, in file order; see [`read_range`].
pub struct RangeReader(PipelinedReader);

impl RangeReader {
    /// The next piece, or `None` once the range (or the file) has ended.
    ///
    /// Errors: a READ's failure; the reader is then finished.
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        self.0.next().await.map_err(Into::into)
    }
}

/// Reads `range` (bytes) of the open `handle`, keeping up to `in_flight`
/// bytes of READs outstanding.
///
/// Errors: the range overflows.
pub fn read_range(handle: &Handle, range: Range<u64>, in_flight: usize) -> Result<RangeReader> {
    let len = range.end.saturating_sub(range.start);
    Ok(RangeReader(handle.smb().tree().reader(handle.smb().id(), range.start, len, in_flight)?))
}

/// Reads `range` of the open `handle` into memory. Returns the pieces and
/// their total length in bytes, which is short if the file ended early.
///
/// Errors: a READ's failure.
pub async fn read_range_whole(handle: &Handle, range: Range<u64>, in_flight: usize) -> Result<(Vec<Bytes>, u64)> {
    let mut r = read_range(handle, range, in_flight)?;
    let (mut out, mut got) = (Vec::new(), 0u64);
    while let Some(b) = r.next().await? {
        got += b.len() as u64;
        out.push(b);
    }
    Ok((out, got))
}

/// Reads up to `len` bytes of the open `handle` from offset 0 with
/// pipelined READs, keeping up to `in_flight` bytes in flight, and hands
/// each chunk to `sink` in order. Returns the bytes handed over (fewer
/// than `len` if the file ends first).
///
/// Errors: a READ's NTSTATUS.
pub async fn read_all(handle: &Handle, len: u64, in_flight: usize, mut sink: impl FnMut(Bytes)) -> Result<u64> {
    let sink = |b| {
        sink(b);
        Ok(())
    };
    handle.smb().tree().read_pipelined(handle.smb().id(), 0, len, in_flight, sink).await.map_err(Into::into)
}
