//! Closes handles that no caller will close (failure class 26).
//!
//! A handle is lost in two ways: a CREATE's answer arrives for a caller
//! that has gone (its request future was dropped: a client hung up, a
//! look-ahead listing was abandoned), or a [`crate::file::Handle`] is
//! dropped without [`crate::file::Handle::close`]. Either way Drop cannot
//! send a CLOSE itself: it may not block, and a CLOSE needs credits and a
//! MessageId. So Drop queues the FileId here, and one task per connection
//! sends the CLOSEs in batches on that same connection. The queue never
//! blocks. If the connection dies first, the server closes the handles
//! with the session (MS-SMB2 3.3.7.1), so nothing is left behind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use smb_proto::create::{CloseRequest, CreateResponse, FileId};
use smb_proto::NtStatus;
use tokio::sync::mpsc;

use crate::connection::{Connection, Inner, Op};

/// Most CLOSEs sent in one batch (one buffer, one write).
const BATCH: usize = 64;

/// One handle to close.
pub(crate) struct Orphan {
    tree_id: u32,
    file_id: FileId,
    encrypt: bool,
}

/// The sending side of a connection's reaper queue; cheap to clone.
#[derive(Clone)]
pub(crate) struct Reaper {
    tx: mpsc::UnboundedSender<Orphan>,
    /// Handles closed by the reaper so far.
    closed: Arc<AtomicU64>,
}

impl Reaper {
    /// A queue and the receiver its task reads.
    pub(crate) fn new() -> (Reaper, mpsc::UnboundedReceiver<Orphan>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Reaper { tx, closed: Arc::default() }, rx)
    }

    /// Queues a CLOSE of `file_id` on `tree_id`; never blocks.
    pub(crate) fn queue(&self, tree_id: u32, file_id: FileId, encrypt: bool) {
        let _ = self.tx.send(Orphan { tree_id, file_id, encrypt });
    }

    /// Handles the reaper has closed (CLOSE answered, whatever its status).
    pub(crate) fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }
}

/// Carried by the answer to a CREATE that its chain does not close: if the
/// answer is dropped before a caller claims the handle
/// ([`crate::connection::Response::into_create`]), the handle is queued
/// for closing.
pub(crate) struct Ticket {
    pub(crate) reaper: Reaper,
    pub(crate) tree_id: u32,
    pub(crate) encrypt: bool,
}

impl Ticket {
    /// Queues the handle a successful CREATE answer `msg` opened.
    pub(crate) fn reap(self, status: NtStatus, msg: &bytes::Bytes) {
        if status != NtStatus::STATUS_SUCCESS {
            return;
        }
        if let Ok(c) = CreateResponse::decode(msg) {
            tracing::debug!(file_id = ?c.file_id, "closing a handle whose opener has gone");
            self.reaper.queue(self.tree_id, c.file_id, self.encrypt);
        }
    }
}

/// The reaper task of one connection: sends queued CLOSEs until the
/// connection is gone.
pub(crate) async fn run(weak: Weak<Inner>, reaper: Reaper, mut rx: mpsc::UnboundedReceiver<Orphan>) {
    while let Some(first) = rx.recv().await {
        let Some(inner) = weak.upgrade() else { return };
        let conn = Connection::unguarded(inner);
        if conn.is_poisoned() {
            continue; // the server dropped these handles with the connection
        }
        // Never ask for more credits than the window holds (failure class 2).
        let most = (conn.credit_window() as usize).clamp(1, BATCH);
        let mut batch = vec![first];
        while batch.len() < most {
            match rx.try_recv() {
                Ok(o) => batch.push(o),
                Err(_) => break,
            }
        }
        for encrypt in [false, true] {
            let closes: Vec<(u32, CloseRequest)> = batch
                .iter()
                .filter(|o| o.encrypt == encrypt)
                .map(|o| (o.tree_id, CloseRequest { file_id: o.file_id, post_query: false }))
                .collect();
            if closes.is_empty() {
                continue;
            }
            let ops: Vec<[Op<'_>; 1]> = closes.iter().map(|(t, c)| [Op { body: c, tree_id: *t }]).collect();
            let chains: Vec<&[Op<'_>]> = ops.iter().map(|o| &o[..]).collect();
            let rxs = match conn.send_batch(&chains, encrypt).await {
                Ok(rxs) => rxs,
                Err(e) => {
                    tracing::debug!(error = %e, "reaper: connection gone; the server closes its handles");
                    break;
                }
            };
            for r in rxs {
                if conn.wait(r).await.is_ok() {
                    reaper.closed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}
