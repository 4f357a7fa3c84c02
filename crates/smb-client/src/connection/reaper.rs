//! Closes handles that no caller will close (failure class 26).
//!
//! A handle is lost in two ways: a CREATE's answer arrives for a caller
//! that has gone (its request future was dropped: a client hung up, a
//! look-ahead listing was abandoned), or a [`crate::file::Handle`] is
//! dropped without [`crate::file::Handle::close`]. Either way Drop cannot
//! send a CLOSE itself: it may not block, and a CLOSE needs credits and a
//! MessageId. So Drop queues the FileId here, and one task per connection
//! ([`reaper_task`], below) sends the CLOSEs in batches on that
//! same connection. The queue never
//! blocks. If the connection dies first, the server closes the handles
//! with the session (MS-SMB2 3.3.7.1), so nothing is left behind.
//!
//! A CREATE that made a new file (FILE_CREATE, a non-directory, opened
//! with DELETE access) and whose answer nobody claimed is undone: the
//! reaper marks the file delete-pending before closing it. The caller that
//! asked for the file never learned it exists, so a cancelled call leaves
//! nothing behind, as a temporary file's creator expects. Files opened any
//! other way are only closed, never deleted: someone else may use them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smb_proto::create::CloseRequest;
use smb_proto::create::{access, options, CreateResponse, Disposition, FileId};
use smb_proto::info::SetFileInfo;
use smb_proto::message::OpenIntent;
use smb_proto::query::SetInfoRequest;
use smb_proto::{Command, NtStatus};
use tokio::sync::mpsc;

use super::{Connection, Inner, Op};

/// One handle to close.
pub(crate) struct Orphan {
    pub(crate) tree_id: u32,
    pub(crate) file_id: FileId,
    pub(crate) encrypt: bool,
    /// Mark the file delete-pending before the CLOSE: its CREATE made it
    /// and nobody claimed it.
    pub(crate) delete: bool,
}

/// Whether an unclaimed answer to `req` made a file that is to be deleted
/// (see the module docs): FILE_CREATE of a non-directory with DELETE access.
pub(crate) fn undo_if_abandoned(req: OpenIntent) -> bool {
    req.disposition == Disposition::Create
        && req.options & options::NON_DIRECTORY_FILE != 0
        && req.desired_access & (access::DELETE | access::GENERIC_ALL) != 0
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
        let _ = self.tx.send(Orphan { tree_id, file_id, encrypt, delete: false });
    }

    /// Handles the reaper has closed (CLOSE answered, whatever its status).
    pub(crate) fn closed(&self) -> u64 {
        self.closed.load(Ordering::Relaxed)
    }

    /// Counts one more handle closed.
    pub(crate) fn count_closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
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
    /// The CREATE made a new file to delete if unclaimed
    /// ([`undo_if_abandoned`]).
    pub(crate) delete: bool,
}

impl Ticket {
    /// Queues the handle a successful CREATE answer `msg` opened.
    pub(crate) fn reap(self, status: NtStatus, msg: &bytes::Bytes) {
        if status != NtStatus::STATUS_SUCCESS {
            return;
        }
        if let Ok(c) = CreateResponse::decode(msg) {
            // Delete only what this CREATE made (CreateAction FILE_CREATED).
            let delete = self.delete && c.create_action == smb_proto::create::create_action::CREATED;
            tracing::debug!(file_id = ?c.file_id, delete, "closing a handle whose opener has gone");
            let o = Orphan { tree_id: self.tree_id, file_id: c.file_id, encrypt: self.encrypt, delete };
            let _ = self.reaper.tx.send(o);
        }
    }
}

/// Most CLOSEs the reaper sends in one batch (one buffer, one write).
const REAP_BATCH: usize = 64;

/// The reaper task of one connection: sends queued CLOSEs until the
/// connection is gone.
pub(crate) async fn reaper_task(
    weak: std::sync::Weak<Inner>,
    reaper: Reaper,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Orphan>,
) {
    while let Some(first) = rx.recv().await {
        let Some(inner) = weak.upgrade() else { return };
        let conn = Connection::unguarded(inner);
        if conn.is_poisoned() {
            continue; // the server dropped these handles with the connection
        }
        // Never ask for more credits than the window holds (failure class 2).
        let most = (conn.credit_window() as usize).clamp(1, REAP_BATCH);
        let mut batch = vec![first];
        while batch.len() < most {
            match rx.try_recv() {
                Ok(o) => batch.push(o),
                Err(_) => break,
            }
        }
        for encrypt in [false, true] {
            let mine: Vec<&Orphan> = batch.iter().filter(|o| o.encrypt == encrypt).collect();
            if mine.is_empty() {
                continue;
            }
            // A file to undo is marked delete-pending, then closed, in one
            // chain: the CLOSE runs even if the mark fails.
            let marks: Vec<SetInfoRequest<'_>> = mine
                .iter()
                .map(|o| SetInfoRequest { file_id: o.file_id, info: SetFileInfo::Disposition { delete_pending: true } })
                .collect();
            let closes: Vec<CloseRequest> =
                mine.iter().map(|o| CloseRequest { file_id: o.file_id, post_query: false }).collect();
            let ops: Vec<Vec<Op<'_>>> = mine
                .iter()
                .zip(marks.iter().zip(&closes))
                .map(|(o, (mark, close))| {
                    let close = Op { body: close, tree_id: o.tree_id };
                    if o.delete {
                        vec![Op { body: mark, tree_id: o.tree_id }, close]
                    } else {
                        vec![close]
                    }
                })
                .collect();
            let chains: Vec<&[Op<'_>]> = ops.iter().map(|o| &o[..]).collect();
            let rxs = match conn.send_batch(&chains, encrypt).await {
                Ok(rxs) => rxs,
                Err(e) => {
                    tracing::debug!(error = %e, "reaper: connection gone; the server closes its handles");
                    break;
                }
            };
            let mut rxs = rxs.into_iter();
            for chain in &ops {
                let mut closed = false;
                for op in chain {
                    let r = conn.wait(rxs.next().expect("one future per message")).await;
                    closed = op.body.command() == Command::Close && r.is_ok();
                }
                if closed {
                    reaper.count_closed();
                }
            }
        }
    }
}
