//! Durable handles v2 (MS-SMB2 3.2.4.3.2, 3.2.4.4): opens that survive a
//! lost connection, and their reconnection on another one.
//!
//! [`Tree::open_durable`] asks for a durable handle (DH2Q, with a fresh
//! CreateGuid) together with a batch oplock, which Samba requires before it
//! keeps a handle across a disconnect. Its [`Handle`] remembers what it
//! takes to open the file again ([`Reopen`]). After the connection is lost,
//! [`Tree::reopen`] on a healthy connection of the same user:
//! 1. reclaims the handle (DH2C) while the server can still hold it: it was
//!    granted durability and the oplock was not broken. The server may not
//!    have noticed the old connection's end yet, so a reclaim that finds
//!    nothing is tried again for [`RECLAIM_WAIT`];
//! 2. otherwise opens the file again by name and checks that it is the same
//!    file (the on-disk id from QFid), so that a file put at that name in
//!    between is never written to by mistake.
//!
//! What was written but not acknowledged before the loss is the caller's to
//! send again (`pipeline::PipelinedWriter::into_unacked`).

use smb_proto::create::{oplock, CreateContext, CreateRequest, CreateResponseContext};
use smb_proto::NtStatus;

use crate::error::{Error, Result};
use crate::file::Handle;
pub use crate::reopen::Reopen;
use crate::tree::Tree;

/// How long the server is asked to keep a disconnected durable handle, in
/// milliseconds (Samba caps it at 300,000).
pub const DURABLE_TIMEOUT_MS: u32 = 60_000;

pub use crate::waits::RECLAIM_WAIT;

/// How [`Tree::reopen`] got the file back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reopened {
    /// The server still held the open: its durable handle was reclaimed.
    Reclaimed,
    /// Opened again by name, and checked to be the same file.
    ByName,
}

impl Tree {
    /// CREATE `req` as a durable handle (MS-SMB2 3.2.4.3.2): adds DH2Q with
    /// a new CreateGuid, QFid, and a batch oplock request. The server may
    /// grant less (no durability, a lower oplock); the handle can then
    /// still be opened again by name ([`Tree::reopen`]).
    ///
    /// Errors: as [`Tree::open`].
    pub async fn open_durable(&self, req: &CreateRequest<'_>) -> Result<Handle> {
        let create_guid: [u8; 16] = rand::random();
        let mut contexts: Vec<CreateContext<'_>> = req.contexts.to_vec();
        if !contexts.iter().any(|c| matches!(c, CreateContext::QueryOnDiskId)) {
            contexts.push(CreateContext::QueryOnDiskId);
        }
        contexts.push(CreateContext::DurableV2 { timeout_ms: DURABLE_TIMEOUT_MS, create_guid });
        let req = CreateRequest { oplock_level: oplock::BATCH, contexts: &contexts, ..req.clone() };
        let h = self.open(&req).await?;
        let info = h.info();
        let granted = info.contexts.iter().any(|c| matches!(c, CreateResponseContext::DurableV2 { .. }));
        let reopen = Reopen {
            name: req.name.to_string(),
            desired_access: req.desired_access,
            share_access: req.share_access,
            file_attributes: req.file_attributes,
            options: req.options,
            file_id: info.file_id,
            durable: granted.then_some(create_guid),
            on_disk_id: info.on_disk_id(),
            was_on: self.conn().downgrade(),
        };
        Ok(self.adopt(h, reopen))
    }

    /// Opens again, on this tree, the file a handle on a lost connection
    /// had open; see the module docs for the order of attempts. Returns the
    /// new handle and how it was got.
    ///
    /// Errors: [`Error::NotSameFile`] if the file now at the name is
    /// another one; STATUS_OBJECT_NAME_NOT_FOUND if it is gone; a
    /// connection error of this tree.
    pub async fn reopen(&self, was: &Reopen) -> Result<(Handle, Reopened)> {
        if let Some(create_guid) = was.durable.filter(|_| was.may_be_reclaimed()) {
            let deadline = tokio::time::Instant::now() + RECLAIM_WAIT;
            loop {
                let ctx = [CreateContext::DurableV2Reconnect { file_id: was.file_id, create_guid }];
                match self.open(&was.request(&ctx)).await {
                    Ok(h) => {
                        tracing::info!(name = %was.name, "durable handle reclaimed");
                        let reopen =
                            Reopen { file_id: h.info().file_id, was_on: self.conn().downgrade(), ..was.clone() };
                        return Ok((self.adopt(h, reopen), Reopened::Reclaimed));
                    }
                    Err(e) if e.status() == Some(NtStatus::STATUS_OBJECT_NAME_NOT_FOUND) => {
                        if tokio::time::Instant::now() >= deadline {
                            tracing::debug!(name = %was.name, "durable handle not reclaimed; opening by name");
                            break;
                        }
                        tokio::time::sleep(crate::waits::RECLAIM_RETRY).await;
                    }
                    // The server no longer knows the handle as durable (or
                    // refuses DH2C): the name is all that is left.
                    Err(e) if e.status().is_some() && e.status() != Some(NtStatus::STATUS_ACCESS_DENIED) => {
                        tracing::debug!(name = %was.name, error = %e, "durable reclaim refused; opening by name");
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        let h = self.open_durable(&was.request(&[])).await?;
        match (was.on_disk_id, h.info().on_disk_id()) {
            (Some(a), Some(b)) if a != b => {
                Err(Error::NotSameFile(format!("{}: on-disk id {b:#x}, was {a:#x}", was.name)))
            }
            _ => {
                tracing::info!(name = %was.name, "reopened by name: the same file");
                Ok((h, Reopened::ByName))
            }
        }
    }

    /// Records the oplock `h` holds on this connection and attaches `reopen`.
    fn adopt(&self, h: Handle, reopen: Reopen) -> Handle {
        let info = h.info();
        self.conn().oplocks().hold(info.file_id, self.tree_id(), self.is_encrypted(), info.oplock_level);
        h.with_reopen(reopen)
    }
}
