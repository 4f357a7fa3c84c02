//! Pipelined READ and WRITE streams on one connection: many requests in
//! flight within the credit window and a byte budget, each batch built in
//! one buffer and sent with one write, results delivered in file order.

use std::collections::VecDeque;

use bytes::Bytes;
use smb_proto::create::FileId;
use smb_proto::header::credit_charge;
use smb_proto::io::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use smb_proto::{NtStatus, Request};

use crate::connection::ResponseFuture;
use crate::error::{Error, Result};
use crate::tree::Tree;

/// Default cap on bytes requested but not yet received, per stream.
pub const DEFAULT_IN_FLIGHT_BYTES: usize = 64 << 20;

impl Tree {
    /// Reads `length` bytes from `offset` with pipelined READs of up to the
    /// negotiated MaxReadSize, keeping at most `max_in_flight` bytes
    /// outstanding. `sink` receives the data in file order as zero-copy
    /// slices of the received frames. Stops early at end of file.
    ///
    /// Returns the bytes delivered. Errors: the first failing NTSTATUS or
    /// transport error, or whatever `sink` returns.
    pub async fn read_pipelined(
        &self,
        file_id: FileId,
        offset: u64,
        length: u64,
        max_in_flight: usize,
        mut sink: impl FnMut(Bytes) -> Result<()>,
    ) -> Result<u64> {
        let chunk = self.max_read() as u64;
        let end = offset
            .checked_add(length)
            .ok_or_else(|| Error::InvalidArgument("offset + length overflows".into()))?;
        let budget = (max_in_flight as u64).max(chunk);
        let mut next = offset;
        let mut queue: VecDeque<(u64, u32, ResponseFuture)> = VecDeque::new();
        let mut in_flight = 0u64;
        let mut delivered = 0u64;
        loop {
            let mut batch: Vec<ReadRequest> = Vec::new();
            let mut credits = self.conn().credits_available() as u64;
            while next < end && in_flight + chunk.min(end - next) <= budget {
                let len = chunk.min(end - next) as u32;
                let charge = credit_charge(len as u64) as u64;
                if !batch.is_empty() && charge > credits {
                    break;
                }
                credits = credits.saturating_sub(charge);
                batch.push(ReadRequest {
                    file_id,
                    length: len,
                    offset: next,
                    minimum_count: 0,
                });
                next += len as u64;
                in_flight += len as u64;
            }
            if !batch.is_empty() {
                let bodies: Vec<&dyn Request> = batch.iter().map(|r| r as &dyn Request).collect();
                let rxs = self.send_many(&bodies).await?;
                for (r, rx) in batch.iter().zip(rxs) {
                    queue.push_back((r.offset, r.length, rx));
                }
            }
            let Some((off, len, rx)) = queue.pop_front() else {
                break;
            };
            in_flight -= len as u64;
            let resp = self.conn().wait(rx).await?;
            if resp.status() == NtStatus::STATUS_END_OF_FILE {
                break;
            }
            let data = ReadResponse::decode(&resp.ok_or_status(&[])?.msg)?.data;
            let got = data.len() as u64;
            if got > len as u64 {
                return Err(Error::Protocol(format!(
                    "READ returned {got} bytes for {len} asked"
                )));
            }
            delivered += got;
            sink(data)?;
            if got < len as u64 {
                // Short read: fill the gap before later chunks so the order
                // holds; an empty read means end of file.
                let mut pos = off + got;
                let stop = off + len as u64;
                let mut eof = false;
                while pos < stop {
                    let d = self.read(file_id, pos, (stop - pos) as u32).await?;
                    if d.is_empty() {
                        eof = true;
                        break;
                    }
                    pos += d.len() as u64;
                    delivered += d.len() as u64;
                    sink(d)?;
                }
                if eof {
                    break;
                }
            }
        }
        Ok(delivered)
    }

    /// Writes `data` at `offset` with pipelined WRITEs of up to the
    /// negotiated MaxWriteSize, at most `max_in_flight` bytes outstanding.
    ///
    /// Returns the bytes written (always `data.len()` on success). Errors:
    /// the first failing NTSTATUS, a WRITE that makes no progress, or a
    /// transport error.
    pub async fn write_pipelined(
        &self,
        file_id: FileId,
        offset: u64,
        data: &[u8],
        max_in_flight: usize,
    ) -> Result<u64> {
        let chunk = self.max_write() as usize;
        let budget = max_in_flight.max(chunk);
        let mut next = 0usize;
        let mut queue: VecDeque<(usize, usize, ResponseFuture)> = VecDeque::new();
        let mut in_flight = 0usize;
        loop {
            let mut batch: Vec<WriteRequest<'_>> = Vec::new();
            let mut credits = self.conn().credits_available() as u64;
            while next < data.len() && in_flight + chunk.min(data.len() - next) <= budget {
                let len = chunk.min(data.len() - next);
                let charge = credit_charge(len as u64) as u64;
                if !batch.is_empty() && charge > credits {
                    break;
                }
                credits = credits.saturating_sub(charge);
                batch.push(WriteRequest {
                    file_id,
                    offset: offset + next as u64,
                    data: &data[next..next + len],
                });
                next += len;
                in_flight += len;
            }
            if !batch.is_empty() {
                let bodies: Vec<&dyn Request> = batch.iter().map(|r| r as &dyn Request).collect();
                let rxs = self.send_many(&bodies).await?;
                for (w, rx) in batch.iter().zip(rxs) {
                    queue.push_back(((w.offset - offset) as usize, w.data.len(), rx));
                }
            }
            let Some((start, len, rx)) = queue.pop_front() else {
                break;
            };
            in_flight -= len;
            let resp = self.conn().wait(rx).await?.ok_or_status(&[])?;
            let mut done = WriteResponse::decode(&resp.msg)?.count as usize;
            if done > len {
                return Err(Error::Protocol(format!(
                    "WRITE reported {done} bytes for {len} sent"
                )));
            }
            while done < len {
                let n = self
                    .write(
                        file_id,
                        offset + (start + done) as u64,
                        &data[start + done..start + len],
                    )
                    .await? as usize;
                if n == 0 {
                    return Err(Error::Protocol("WRITE made no progress".into()));
                }
                done += n;
            }
        }
        Ok(data.len() as u64)
    }
}
