//! Watching a directory for changes: CHANGE_NOTIFY (MS-SMB2 3.2.4.14) on
//! an open directory handle.
//!
//! The server answers STATUS_PENDING at once and for good only when
//! something changes, which may be hours later: the wait for the final
//! answer has no deadline once the interim one came (a lost connection
//! still ends it). Closing the directory's handle makes the server answer
//! STATUS_NOTIFY_CLEANUP, so a watcher that goes away leaves nothing
//! pending.

use smb_proto::create::FileId;
use smb_proto::notify::{decode_changes, Change, ChangeNotifyRequest, WATCH_TREE};
use smb_proto::NtStatus;

use crate::connection::{Op, Response};
use crate::error::Result;
use crate::tree::Tree;

/// The most bytes of changes one answer carries: one credit's worth, as
/// much as Windows servers send over the network.
pub const NOTIFY_BUFFER: u32 = 64 << 10;

/// What one CHANGE_NOTIFY answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notified {
    /// These names changed (relative to the directory, `\`-separated).
    Changes(Vec<Change>),
    /// More changed than the server kept (STATUS_NOTIFY_ENUM_DIR): look at
    /// the directory itself.
    Overflow,
    /// The handle was closed (STATUS_NOTIFY_CLEANUP): watch no more.
    Closed,
}

/// A CHANGE_NOTIFY sent and not yet answered ([`Tree::start_change_notify`]).
pub struct PendingNotify {
    rx: crate::connection::ResponseFuture,
}

impl Tree {
    /// Sends a CHANGE_NOTIFY on the open directory `dir`: the changes in it
    /// (and under it, with `subtree`) of the kinds `completion_filter`
    /// names ([`smb_proto::notify::filter`]). Await the answer with
    /// [`Tree::notified`]. Once one has been asked for on a handle, the
    /// server keeps the changes that happen until the next is sent
    /// (MS-SMB2 3.3.5.19).
    ///
    /// Errors: the connection is lost.
    pub async fn start_change_notify(
        &self,
        dir: FileId,
        completion_filter: u32,
        subtree: bool,
    ) -> Result<PendingNotify> {
        let req = ChangeNotifyRequest {
            flags: if subtree { WATCH_TREE } else { 0 },
            output_buffer_length: NOTIFY_BUFFER.min(self.session().negotiated.max_transact_size),
            file_id: dir,
            completion_filter,
        };
        let op = Op { body: &req, tree_id: self.tree_id() };
        let rx = self.conn().send_batch(&[&[op]], self.is_encrypted()).await?.pop().expect("one receiver");
        Ok(PendingNotify { rx })
    }

    /// Waits, with no deadline once the server said it is pending, for
    /// the answer to `pending`.
    ///
    /// Errors: the server refused (STATUS_NOT_SUPPORTED on a server without
    /// change notification, STATUS_INVALID_PARAMETER for a handle that is
    /// not a directory, ...); the connection was lost; an answer that does
    /// not decode.
    pub async fn notified(&self, pending: PendingNotify) -> Result<Notified> {
        notified_by(self.conn().wait_indefinitely(pending.rx).await?)
    }

    /// The answer to `pending` if it has come, without waiting: a refusal
    /// comes at once, before the answers to requests sent after it.
    /// After `Some`, `pending` is spent.
    pub fn try_notified(&self, pending: &mut PendingNotify) -> Option<Result<Notified>> {
        Some(self.conn().try_answer(&mut pending.rx)?.and_then(notified_by))
    }

    /// [`Tree::start_change_notify`], then [`Tree::notified`].
    ///
    /// Errors: as those.
    pub async fn change_notify(&self, dir: FileId, completion_filter: u32, subtree: bool) -> Result<Notified> {
        let pending = self.start_change_notify(dir, completion_filter, subtree).await?;
        self.notified(pending).await
    }
}

/// What a CHANGE_NOTIFY answer `r` says.
///
/// Errors: a status of error severity; a buffer that does not decode.
fn notified_by(r: Response) -> Result<Notified> {
    match r.status() {
        NtStatus::STATUS_NOTIFY_ENUM_DIR => Ok(Notified::Overflow),
        NtStatus::STATUS_NOTIFY_CLEANUP => Ok(Notified::Closed),
        _ => {
            let changes = r.ok_or_status(&[])?.body(decode_changes)?;
            // Success with no changes is how some servers say they lost
            // count (MS-SMB2 3.3.4.4: the changes did not fit).
            match changes.is_empty() {
                true => Ok(Notified::Overflow),
                false => Ok(Notified::Changes(changes)),
            }
        }
    }
}
