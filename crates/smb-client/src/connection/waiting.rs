//! Awaiting an answer: the request timeout, extended while the server
//! says the request is pending (MS-SMB2 3.2.5.1.5), up to a cap; a
//! timeout poisons the connection, whose stream may be desynchronised.

use std::time::Duration;

use super::{round_trip, Connection, Response, ResponseFuture, MAX_PENDING};
use crate::error::{Error, Result};

impl Connection {
    /// Awaits a response with the request timeout; a timeout poisons the
    /// connection (its stream may be desynchronised).
    ///
    /// An interim STATUS_PENDING extends the deadline by the request timeout
    /// at a time, up to [`MAX_PENDING`] in all.
    pub async fn wait(&self, rx: ResponseFuture) -> Result<Response> {
        self.wait_pending(rx, MAX_PENDING).await
    }

    /// [`Connection::wait`] for a request whose final answer may take as
    /// long as it takes once the interim STATUS_PENDING came (a
    /// CHANGE_NOTIFY): only the first answer has the request timeout; a
    /// lost connection still ends the wait.
    pub async fn wait_indefinitely(&self, rx: ResponseFuture) -> Result<Response> {
        self.wait_pending(rx, Duration::MAX).await
    }

    /// The answer to `rx` if it has come (without waiting); `None` if not
    /// yet. After `Some`, `rx` is spent.
    pub fn try_answer(&self, rx: &mut ResponseFuture) -> Option<Result<Response>> {
        match rx.rx.try_recv() {
            Ok(r) => Some(round_trip::recorded(&rx.span, r)),
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => None,
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => Some(Err(self.inner.poison_error())),
        }
    }

    /// Awaits `rx`: the request timeout, extended while an interim answer
    /// came, up to `max_pending` in all.
    async fn wait_pending(&self, rx: ResponseFuture, max_pending: Duration) -> Result<Response> {
        let ResponseFuture { mut rx, message_id, span } = rx;
        let interim = || self.inner.state.lock().unwrap().table.is_interim(message_id);
        let start = tokio::time::Instant::now();
        let step = self.inner.opts.request_timeout;
        let mut deadline = start + step;
        // `None`: no cap.
        let cap = start.checked_add(max_pending);
        loop {
            match tokio::time::timeout_at(deadline, &mut rx).await {
                Ok(Ok(r)) => return round_trip::recorded(&span, r),
                Ok(Err(_)) => {
                    let e = self.inner.poison_error();
                    round_trip::record_failure(&span, &e);
                    return Err(e);
                }
                Err(_) if cap.is_none_or(|cap| deadline < cap) && interim() => {
                    deadline = cap.map_or(deadline + step, |cap| (deadline + step).min(cap));
                }
                Err(_) => {
                    let e = Error::Timeout("no response from server");
                    round_trip::record_failure(&span, &e);
                    self.poison(e.clone());
                    return Err(e);
                }
            }
        }
    }
}
