//! The reader task of one connection and what it does with each frame:
//! reads it (large READ answers into a buffer of their own, the rest cut
//! from a staging buffer), opens it (`seal`), matches each message to its
//! request (`table`) and wakes the waiter. Anything that stops the reader
//! poisons the connection.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use smb_proto::frame::{frame_len, FRAME_HEADER_LEN, MAX_FRAME_LEN};
use smb_proto::header::{Header, HEADER_LEN};
use smb_proto::transform::TRANSFORM_HEADER_LEN;
use smb_proto::{Command, NtStatus};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

use super::response::{Op, Response};
use super::seal::{open_frame, FrameLayout};
use super::table::Answer;
use super::{Connection, Inner};
use crate::error::{Error, Result};
use crate::recvbuf::RecvPool;

impl Inner {
    /// An oplock break notification (unsolicited, so unsigned: MS-SMB2
    /// 3.3.4.6). Acknowledges it at the level it names if we hold a batch
    /// or exclusive oplock on that handle; anything else is ignored, since
    /// a forged break can only make us give up caching we never use.
    fn on_oplock_break(&self, msg: &Bytes) {
        let b = match smb_proto::oplock::OplockBreak::decode(msg) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "ignoring an OPLOCK_BREAK notification that does not decode");
                return;
            }
        };
        let Some(ack) = self.oplocks.on_break(b) else { return };
        tracing::debug!(file_id = ?b.file_id, level = b.oplock_level, "oplock broken; acknowledging");
        self.acknowledge(None, Some(ack.body), ack.tree_id, ack.encrypt);
    }

    /// Sends a break's acknowledgment `body` (if the server waits for one)
    /// on `tree_id`, after a CLOSE of `close_first` if given, from a task of its own: the reader must
    /// not wait for the answers it would read.
    fn acknowledge(
        &self,
        close_first: Option<smb_proto::create::FileId>,
        body: Option<impl smb_proto::Request + 'static>,
        tree_id: u32,
        encrypt: bool,
    ) {
        let (Some(inner), Ok(rt)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else { return };
        rt.spawn(async move {
            let conn = Connection::unguarded(inner);
            if let Some(file_id) = close_first {
                let close = smb_proto::create::CloseRequest { file_id, post_query: false };
                if let Err(e) = conn.call(Op { body: &close, tree_id }, encrypt).await {
                    tracing::debug!(error = %e, "closing a handle whose lease was broken failed");
                }
            }
            let Some(body) = body else { return };
            // Nothing waits on its answer: a server that never sends one
            // must not cost the connection (conn.call would poison it).
            match conn.call_unawaited(Op { body: &body, tree_id }, encrypt).await {
                Ok(Some(_)) => {}
                Ok(None) => tracing::warn!("a break acknowledgment got no answer; the connection goes on"),
                Err(e) => tracing::debug!(error = %e, "break acknowledgment failed"),
            }
        });
    }

    /// A lease break notification (unsolicited and unsigned, as an oplock
    /// break): lowers the lease's state and, if the server waits for it,
    /// acknowledges the new state at once. A forged break can only make us
    /// drop what we cache.
    fn on_lease_break(&self, msg: &Bytes) {
        let b = match smb_proto::lease::LeaseBreak::decode(msg) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "ignoring a lease break notification that does not decode");
                return;
            }
        };
        let Some(ack) = self.leases.on_break(&b) else { return };
        tracing::debug!(
            from = b.current,
            to = b.new,
            closing = ack.close_first.is_some(),
            "lease broken; acknowledging"
        );
        self.acknowledge(ack.close_first, ack.ack.then_some(ack.body), ack.tree_id, ack.encrypt);
    }

    /// Handles one decoded (and verified) message; `encrypted` says whether
    /// its frame was. An answer that does not match its request
    /// ([`super::table::Table::answer`]) poisons the connection, and its
    /// waiter hears why.
    fn dispatch(&self, header: Header, msg: Bytes, encrypted: bool) -> Result<()> {
        if header.message_id == u64::MAX && header.command == Command::OplockBreak {
            match smb_proto::lease::is_lease_message(&msg) {
                true => self.on_lease_break(&msg),
                false => self.on_oplock_break(&msg),
            }
            return Ok(());
        }
        let answered = self.state.lock().unwrap().table.answer(&header, encrypted);
        let p = match answered {
            Ok(Answer::Interim) => {
                self.credit_wake.notify_waiters();
                return Ok(());
            }
            Ok(Answer::Final(p)) => p,
            Err(e) => {
                if matches!(e, Error::Integrity(_)) {
                    self.poison(e.clone());
                }
                return Err(e);
            }
        };
        self.credit_wake.notify_waiters();
        if super::table::counts_in_flight(p.bind.command) {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        // The server has ended the session or the tree: the answer goes to
        // its waiter (a connection error there), and the connection is
        // replaced rather than kept answering this forever.
        let ended = matches!(
            header.status,
            NtStatus::STATUS_USER_SESSION_DELETED
                | NtStatus::STATUS_NETWORK_SESSION_EXPIRED
                | NtStatus::STATUS_NETWORK_NAME_DELETED
        );
        let status = header.status;
        let ended = ended.then(|| Error::ConnectionLost(format!("the server ended the session: {status}")));
        if let Some(e) = &ended {
            self.poison(e.clone());
        }
        // If the waiter has gone, the answer is dropped here, and a CREATE
        // answer's ticket closes the handle nobody will use.
        let _ = p.tx.send(Ok(Response { header, msg, ticket: p.ticket, conn: self.me.clone() }));
        ended.map_or(Ok(()), Err)
    }

    /// Checks one received frame in place with the session's current keys.
    pub(super) fn open_frame(&self, frame: &mut [u8]) -> Result<FrameLayout> {
        open_frame(&self.security.read().unwrap(), frame)
    }

    /// Dispatches the messages of a checked frame.
    pub(super) fn dispatch_frame(&self, frame: Bytes, layout: FrameLayout) -> Result<()> {
        let encrypted = layout.start > 0;
        let frame = frame.slice(layout.start..);
        for (off, len, header) in layout.messages {
            self.dispatch(header, frame.slice(off..off + len), encrypted)?;
        }
        Ok(())
    }
}

/// Frames longer than this (READ responses) are read into a buffer of
/// their own from [`RecvPool`]; shorter ones are cut from a staging buffer.
const LARGE_FRAME: usize = 128 << 10;
/// Most bytes one staging read asks for.
const STAGE_READ: usize = 64 << 10;

pub(super) async fn reader_task(inner: Arc<Inner>, mut rd: OwnedReadHalf) {
    let pool = RecvPool::global();
    let mut buf = BytesMut::with_capacity(2 * STAGE_READ);
    let result: Result<()> = async {
        loop {
            while buf.len() < FRAME_HEADER_LEN {
                read_more(&mut rd, &mut buf, STAGE_READ).await?;
            }
            let len = frame_len([buf[0], buf[1], buf[2], buf[3]])?;
            if len > MAX_FRAME_LEN || len < HEADER_LEN.min(TRANSFORM_HEADER_LEN) {
                return Err(Error::Protocol(format!("frame length {len}")));
            }
            if len > LARGE_FRAME {
                // Take what staging already holds, then read exactly the
                // rest, so the payload is copied once (by the kernel).
                let mut frame = pool.take(len);
                let have = buf.len().min(FRAME_HEADER_LEN + len);
                frame.extend_from_slice(&buf[FRAME_HEADER_LEN..have]);
                buf.advance(have);
                while frame.len() < len {
                    let want = len - frame.len();
                    let n = rd
                        .read_buf(&mut (&mut frame).limit(want))
                        .await
                        .map_err(|e| Error::ConnectionLost(format!("read: {e}")))?;
                    if n == 0 {
                        return Err(Error::ConnectionLost("server closed the connection".into()));
                    }
                }
                let layout = inner.open_frame(&mut frame)?;
                inner.dispatch_frame(pool.freeze(frame), layout)?;
                continue;
            }
            while buf.len() < FRAME_HEADER_LEN + len {
                let want = FRAME_HEADER_LEN + len - buf.len();
                read_more(&mut rd, &mut buf, want.max(STAGE_READ)).await?;
            }
            let mut frame = buf.split_to(FRAME_HEADER_LEN + len);
            frame.advance(FRAME_HEADER_LEN);
            let layout = inner.open_frame(&mut frame)?;
            inner.dispatch_frame(frame.freeze(), layout)?;
        }
    }
    .await;
    if let Err(e) = result {
        // Whatever stops the reader kills the connection, so every waiter
        // must see a connection error (retryable elsewhere), including for
        // protocol violations such as a bad frame length or a reply to an
        // unknown MessageId.
        let e = match e {
            Error::Protocol(m) => Error::ConnectionLost(format!("protocol violation: {m}")),
            e => e,
        };
        inner.poison(e);
    }
}

/// Reads at most `want` more bytes into `buf`, so staging never swallows
/// much of a following large frame.
async fn read_more(rd: &mut OwnedReadHalf, buf: &mut BytesMut, want: usize) -> Result<()> {
    buf.reserve(want);
    let n = rd.read_buf(&mut (&mut *buf).limit(want)).await.map_err(|e| Error::ConnectionLost(format!("read: {e}")))?;
    if n == 0 {
        return Err(Error::ConnectionLost("server closed the connection".into()));
    }
    Ok(())
}
