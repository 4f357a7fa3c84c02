//! Pipelined READ and WRITE streams on one connection: many requests in
//! flight within the credit window and a byte budget, each batch built in
//! one buffer and sent with one write, results delivered in file order.

use std::collections::VecDeque;

use bytes::Bytes;
use smb_proto::create::FileId;
use smb_proto::header::credit_charge;
use smb_proto::header::HEADER_LEN;
use smb_proto::io::{ReadRequest, ReadResponse, WriteResponse};
use smb_proto::{NtStatus, Request};

use crate::connection::{ResponseFuture, WRITE_HEADROOM};
use crate::error::{Error, Result};
use crate::tree::Tree;

/// Default cap on bytes requested but not yet received, per stream.
pub const DEFAULT_IN_FLIGHT_BYTES: usize = 64 << 20;

impl Tree {
    /// Reads `length` bytes from `offset` with pipelined READs of up to the
    /// negotiated MaxReadSize (and `max_in_flight`), keeping at most `max_in_flight` bytes
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
        let mut r = self.reader(file_id, offset, length, max_in_flight)?;
        let mut delivered = 0u64;
        while let Some(b) = r.next().await? {
            delivered += b.len() as u64;
            sink(b)?;
        }
        Ok(delivered)
    }

    /// A pipelined READ stream over `offset..offset + length`; see
    /// [`PipelinedReader::next`].
    ///
    /// Errors: [`Error::InvalidArgument`] if the range overflows.
    pub fn reader(&self, file_id: FileId, offset: u64, length: u64, max_in_flight: usize) -> Result<PipelinedReader> {
        let end =
            offset.checked_add(length).ok_or_else(|| Error::InvalidArgument("offset + length overflows".into()))?;
        // READs no larger than the budget, so a small budget means small
        // buffers, not one large READ over budget.
        let chunk = (self.max_read() as u64).min((max_in_flight as u64).max(65536));
        Ok(PipelinedReader {
            tree: self.clone(),
            file_id,
            chunk,
            end,
            budget: (max_in_flight as u64).max(chunk),
            next: offset,
            queue: VecDeque::new(),
            in_flight: 0,
            gap: None,
            eof: false,
        })
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
        let mut w = self.writer(file_id, offset, max_in_flight);
        w.write(data).await?;
        w.finish().await
    }

    /// A streaming writer at `offset`: bytes given to
    /// [`PipelinedWriter::write`] are copied once, straight into WRITE
    /// frames of MaxWriteSize (at most a quarter of `max_in_flight`), which go out as
    /// soon as they fill while earlier ones are still in flight.
    pub fn writer(&self, file_id: FileId, offset: u64, max_in_flight: usize) -> PipelinedWriter {
        let window = (self.conn().credit_window() as usize * 65536).max(65536);
        // WRITEs of at most a quarter of the budget, so that several are in
        // flight (a WRITE as large as the budget would go stop-and-wait) and
        // a small budget means small frames, not one large WRITE over it.
        let io = (self.max_write() as usize).min(window).min((max_in_flight / 4).max(65536));
        PipelinedWriter {
            tree: self.clone(),
            file_id,
            io,
            budget: max_in_flight.max(io),
            frame: None,
            frame_offset: offset,
            queue: VecDeque::new(),
            in_flight: 0,
            written: 0,
            lost: Vec::new(),
        }
    }
}

/// One WRITE sent and not yet answered.
struct InFlight {
    offset: u64,
    len: usize,
    rx: ResponseFuture,
    /// The frame as sent (kept to redo a short write).
    sent: Bytes,
    /// A plaintext copy of the payload when the frame was encrypted in
    /// place; otherwise the payload is the frame's last `len` bytes.
    plain: Option<Bytes>,
}

impl InFlight {
    fn payload(&self) -> Bytes {
        payload_of(&self.sent, self.len, &self.plain)
    }
}

fn payload_of(sent: &Bytes, len: usize, plain: &Option<Bytes>) -> Bytes {
    plain.clone().unwrap_or_else(|| sent.slice(sent.len() - len..))
}

/// What a writer had not got acknowledged when it stopped; see
/// [`PipelinedWriter::into_unacked`].
#[derive(Debug, Default)]
pub struct Unacked {
    /// Bytes the server acknowledged.
    pub acked: u64,
    /// (file offset, bytes) not acknowledged, in file order: sent and
    /// unanswered, failed, or still buffered.
    pub pieces: Vec<(u64, Bytes)>,
}

/// A pipelined WRITE stream on one file; see [`Tree::writer`]. Call
/// [`PipelinedWriter::finish`] to wait for every WRITE: dropping it early
/// abandons the outstanding results (the data may or may not be written).
pub struct PipelinedWriter {
    tree: Tree,
    file_id: FileId,
    io: usize,
    budget: usize,
    frame: Option<bytes::BytesMut>,
    frame_offset: u64,
    queue: VecDeque<InFlight>,
    in_flight: usize,
    written: u64,
    /// WRITEs whose sending or answer failed.
    lost: Vec<(u64, Bytes)>,
}

impl PipelinedWriter {
    /// Appends `data` to the stream. Returns once it is queued, waiting
    /// only when `max_in_flight` bytes are outstanding.
    pub async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let conn = self.tree.conn();
            let frame = self.frame.get_or_insert_with(|| conn.write_frame(self.io));
            let room = self.io - (frame.len() - WRITE_HEADROOM);
            let n = room.min(data.len());
            frame.extend_from_slice(&data[..n]);
            data = &data[n..];
            if n == room {
                self.send_frame().await?;
            }
        }
        Ok(())
    }

    /// Bytes acknowledged by the server so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// File offset the next byte given to [`PipelinedWriter::write`] goes to.
    pub fn position(&self) -> u64 {
        self.frame_offset + self.frame.as_ref().map_or(0, |f| (f.len() - WRITE_HEADROOM) as u64)
    }

    /// Sends what is buffered and continues at `offset`, without waiting for
    /// earlier WRITEs (each WRITE carries its own offset).
    pub async fn seek(&mut self, offset: u64) -> Result<()> {
        self.send_frame().await?;
        self.frame_offset = offset;
        Ok(())
    }

    async fn send_frame(&mut self) -> Result<()> {
        let Some(frame) = self.frame.take() else { return Ok(()) };
        let len = frame.len() - WRITE_HEADROOM;
        if len == 0 {
            return Ok(());
        }
        while self.in_flight + len > self.budget && !self.queue.is_empty() {
            if let Err(e) = self.complete_one().await {
                self.frame = Some(frame); // still ours: into_unacked returns it
                return Err(e);
            }
        }
        let conn = self.tree.conn();
        // An encrypted frame holds ciphertext once sent: keep the payload.
        let plain =
            conn.will_encrypt(self.tree.is_encrypted()).then(|| Bytes::copy_from_slice(&frame[WRITE_HEADROOM..]));
        let at = self.frame_offset;
        self.frame_offset += len as u64;
        match conn.send_write_frame(frame, self.tree.tree_id(), self.file_id, at, self.tree.is_encrypted()).await {
            Ok((rx, sent)) => {
                self.queue.push_back(InFlight { offset: at, len, rx, sent, plain });
                self.in_flight += len;
                Ok(())
            }
            Err((e, sent)) => {
                self.lost.push((at, payload_of(&sent, len, &plain)));
                Err(e)
            }
        }
    }

    async fn complete_one(&mut self) -> Result<()> {
        let Some(InFlight { offset, len, rx, sent, plain }) = self.queue.pop_front() else { return Ok(()) };
        self.in_flight -= len;
        match self.settle(rx, offset, len, &sent, &plain).await {
            Ok(()) => {
                self.tree.conn().recycle(sent);
                self.written += len as u64;
                Ok(())
            }
            Err(e) => {
                self.lost.push((offset, payload_of(&sent, len, &plain)));
                Err(e)
            }
        }
    }

    /// Waits for the answer to the WRITE of `len` bytes at `off` (sent as
    /// `sent`) and redoes a short write's tail.
    async fn settle(
        &self,
        rx: ResponseFuture,
        off: u64,
        len: usize,
        sent: &Bytes,
        plain: &Option<Bytes>,
    ) -> Result<()> {
        let resp = self.tree.conn().wait(rx).await?.ok_or_status(&[])?;
        let mut done = resp.body(WriteResponse::decode)?.count as usize;
        if done > len {
            return Err(Error::Protocol(format!("WRITE reported {done} bytes for {len} sent")));
        }
        if done < len {
            // Redo the tail from the plaintext payload.
            if plain.is_none() && sent.len() - len != smb_proto::frame::FRAME_HEADER_LEN + HEADER_LEN + 48 {
                return Err(Error::Protocol(format!("short WRITE: {done} of {len} bytes")));
            }
            let data = payload_of(sent, len, plain);
            while done < len {
                let n = self.tree.write(self.file_id, off + done as u64, &data[done..]).await? as usize;
                if n == 0 {
                    return Err(Error::Protocol("WRITE made no progress".into()));
                }
                done += n;
            }
        }
        Ok(())
    }

    /// Stops the stream and returns what the server has not acknowledged
    /// (WRITEs in flight, failed or still buffered), for sending again on
    /// another connection after this one was lost. In-flight answers are
    /// abandoned: a WRITE sent twice writes the same bytes twice.
    pub fn into_unacked(mut self) -> Unacked {
        let mut pieces = std::mem::take(&mut self.lost);
        pieces.extend(self.queue.drain(..).map(|w| (w.offset, w.payload())));
        if let Some(f) = self.frame.take() {
            if f.len() > WRITE_HEADROOM {
                pieces.push((self.frame_offset, Bytes::copy_from_slice(&f[WRITE_HEADROOM..])));
            }
        }
        pieces.sort_by_key(|p| p.0);
        Unacked { acked: self.written, pieces }
    }

    /// Sends what is buffered and waits for every WRITE. Returns the total
    /// bytes written.
    pub async fn finish(mut self) -> Result<u64> {
        self.drain().await?;
        Ok(self.written)
    }

    /// Sends what is buffered and waits for every WRITE, keeping the
    /// writer: after an error, [`PipelinedWriter::into_unacked`] still has
    /// whatever was not acknowledged.
    pub async fn drain(&mut self) -> Result<()> {
        self.send_frame().await?;
        while !self.queue.is_empty() {
            self.complete_one().await?;
        }
        Ok(())
    }
}

/// A pipelined READ stream on one file; see [`Tree::reader`]. Requests are
/// issued ahead of the consumer up to the byte budget, so SMB reads overlap
/// whatever the consumer does with the data.
pub struct PipelinedReader {
    tree: Tree,
    file_id: FileId,
    chunk: u64,
    end: u64,
    budget: u64,
    next: u64,
    queue: VecDeque<(u64, u32, ResponseFuture)>,
    in_flight: u64,
    /// A short read left `start..stop` unread; fill it before moving on.
    gap: Option<(u64, u64)>,
    eof: bool,
}

impl PipelinedReader {
    /// The next piece of data in file order, or `None` at the end of the
    /// range or of the file. Pieces are zero-copy slices of received frames.
    ///
    /// Errors: the first failing NTSTATUS, a READ longer than asked, or a
    /// transport error.
    pub async fn next(&mut self) -> Result<Option<Bytes>> {
        if let Some((pos, stop)) = self.gap {
            let d = self.tree.read(self.file_id, pos, (stop - pos).min(self.chunk) as u32).await?;
            if d.is_empty() {
                self.finish_early();
                return Ok(None);
            }
            let pos = pos + d.len() as u64;
            self.gap = (pos < stop).then_some((pos, stop));
            return Ok(Some(d));
        }
        if self.eof {
            return Ok(None);
        }
        self.fill().await?;
        let Some((off, len, rx)) = self.queue.pop_front() else { return Ok(None) };
        self.in_flight -= len as u64;
        let resp = self.tree.conn().wait(rx).await?;
        if resp.status() == NtStatus::STATUS_END_OF_FILE {
            self.finish_early();
            return Ok(None);
        }
        let data = resp.ok_or_status(&[])?.body(ReadResponse::decode)?.data;
        let got = data.len() as u64;
        if got > len as u64 {
            return Err(Error::Protocol(format!("READ returned {got} bytes for {len} asked")));
        }
        if got == 0 {
            self.finish_early();
            return Ok(None);
        }
        if got < len as u64 {
            // Short read: the rest of this chunk comes before later chunks.
            self.gap = Some((off + got, off + len as u64));
        }
        Ok(Some(data))
    }

    fn finish_early(&mut self) {
        self.eof = true;
        self.gap = None;
        self.queue.clear(); // late responses are dropped by the connection
    }

    async fn fill(&mut self) -> Result<()> {
        // Never ask for more than the server's whole credit window in one
        // READ, or the request could wait for credits forever.
        let window = (self.tree.conn().credit_window() as u64 * 65536).max(65536);
        self.chunk = self.chunk.min(window);
        let mut batch: Vec<ReadRequest> = Vec::new();
        let mut credits = self.tree.conn().credits_available() as u64;
        while self.next < self.end && self.in_flight + self.chunk.min(self.end - self.next) <= self.budget {
            let len = self.chunk.min(self.end - self.next) as u32;
            let charge = credit_charge(len as u64) as u64;
            if !batch.is_empty() && charge > credits {
                break;
            }
            credits = credits.saturating_sub(charge);
            batch.push(ReadRequest { file_id: self.file_id, length: len, offset: self.next, minimum_count: 0 });
            self.next += len as u64;
            self.in_flight += len as u64;
        }
        if !batch.is_empty() {
            let bodies: Vec<&dyn Request> = batch.iter().map(|r| r as &dyn Request).collect();
            let rxs = self.tree.send_many(&bodies).await?;
            for (r, rx) in batch.iter().zip(rxs) {
                self.queue.push_back((r.offset, r.length, rx));
            }
        }
        Ok(())
    }
}
