//! What a caller gets back from a connection: a [`Response`] (which closes
//! the handle of a CREATE nobody claimed), the [`ResponseFuture`] to await
//! it with, and the [`Op`] a request is sent as.

use std::time::Duration;

use bytes::Bytes;
use smb_proto::header::Header;
use smb_proto::{NtStatus, Request};
use tokio::sync::oneshot;

use super::reaper::Ticket;
use super::Inner;
use crate::error::{Error, Result};

/// A received message: its header and the whole message bytes (header
/// first), sliced from the received frame without a copy.
///
/// The answer to a CREATE that its own chain does not close owns the
/// handle it opened: dropping the answer without
/// [`Response::into_create`] queues a CLOSE on the connection (see
/// `reaper`), so a caller that goes away mid-request leaks nothing. It is
/// therefore not `Clone`.
pub struct Response {
    /// Decoded header.
    pub header: Header,
    /// The message, header included.
    pub msg: Bytes,
    pub(super) ticket: Option<Ticket>,
    /// The connection it came on, poisoned if its body does not decode.
    pub(super) conn: std::sync::Weak<Inner>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response").field("header", &self.header).field("len", &self.msg.len()).finish()
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            t.reap(self.header.status, &self.msg);
        }
    }
}

impl Response {
    /// Decodes the body with `f`. A body that does not decode means the
    /// stream or the server cannot be trusted: the connection is poisoned
    /// (failure class 4) and the error returned.
    ///
    /// Errors: [`Error::Decode`].
    pub fn body<T>(&self, f: impl FnOnce(&Bytes) -> std::result::Result<T, smb_proto::DecodeError>) -> Result<T> {
        f(&self.msg).map_err(|e| {
            let e = Error::Decode(e);
            if let Some(inner) = self.conn.upgrade() {
                inner.poison(e.clone());
            }
            e
        })
    }

    /// Decodes a CREATE answer and hands its handle to the caller, who must
    /// now close it (or wrap it in a [`crate::file::Handle`]).
    ///
    /// Errors: the answer is not a successful CREATE ([`Error::Status`]),
    /// or does not decode.
    pub fn into_create(mut self) -> Result<smb_proto::create::CreateResponse> {
        let s = self.header.status;
        if s != NtStatus::STATUS_SUCCESS {
            return Err(Error::Status { command: self.header.command, status: s });
        }
        let c = self.body(smb_proto::create::CreateResponse::decode)?;
        self.ticket = None;
        Ok(c)
    }

    /// The NTSTATUS of the response.
    pub fn status(&self) -> NtStatus {
        self.header.status
    }

    /// `Ok(self)` for STATUS_SUCCESS (and the listed warnings), otherwise a
    /// typed [`Error::Status`].
    pub fn ok_or_status(self, also_ok: &[NtStatus]) -> Result<Response> {
        let s = self.header.status;
        if s == NtStatus::STATUS_SUCCESS || also_ok.contains(&s) {
            Ok(self)
        } else {
            Err(Error::Status { command: self.header.command, status: s })
        }
    }
}

/// One message of a chain to send.
pub struct Op<'a> {
    /// The request body.
    pub body: &'a dyn Request,
    /// TreeId for the header.
    pub tree_id: u32,
}

/// A response on its way; await it with [`super::Connection::wait`].
pub struct ResponseFuture {
    pub(super) rx: oneshot::Receiver<Result<Response>>,
    /// Its MessageId: on a timeout, the pending entry says whether an
    /// interim STATUS_PENDING came (the deadline then extends, up to
    /// [`MAX_PENDING`]).
    pub(super) message_id: u64,
    /// The round trip's trace span (`Span::none()` unless traced; see
    /// `round_trip`), closed once every answer of its batch is awaited.
    pub(super) span: tracing::Span,
}

/// Longest a request answered with an interim STATUS_PENDING may take
/// (MS-SMB2 3.2.5.1.5: the final answer may come much later).
pub const MAX_PENDING: Duration = Duration::from_secs(300);
