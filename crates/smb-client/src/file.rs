//! An open file or directory that closes itself (failure class 26).
//!
//! A [`Handle`] owns one FileId on the connection that opened it. Close it
//! with [`Handle::close`] to learn the CLOSE's answer. Otherwise dropping
//! it (an early return, an error between two steps, a request future
//! dropped because the client hung up) queues the CLOSE on the
//! connection's reaper, without blocking.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use smb_proto::create::{CloseResponse, CreateRequest, CreateResponse, FileId};

use crate::connection::Response;
use crate::error::Result;
use crate::reopen::Reopen;
use crate::tree::Tree;

/// An open handle on one tree; closes itself on drop.
pub struct Handle {
    tree: Tree,
    create: CreateResponse,
    /// False once closed (or closed by a compound that held it).
    open: bool,
    /// How to open it again after its connection is lost; set for handles
    /// opened with [`Tree::open_durable`].
    reopen: Option<Box<Reopen>>,
    /// The LeaseKey its open holds, for handles opened with
    /// [`Tree::open_leased`] (forgotten with the handle), and the open
    /// flag it shares with the connection, which may close it on a break:
    /// whoever turns the flag off sends the one CLOSE.
    lease: Option<([u8; 16], Arc<AtomicBool>)>,
    /// True once [`Handle::close`] took the right to send the CLOSE: if
    /// that future is dropped before the answer, `Drop` hands the CLOSE to
    /// the reaper.
    closing: bool,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("file_id", &self.create.file_id).field("open", &self.open).finish()
    }
}

impl Handle {
    /// Takes ownership of the handle a CREATE answer opened on `tree`.
    ///
    /// Errors: the CREATE failed ([`crate::Error::Status`] with its
    /// NTSTATUS) or its answer does not decode.
    pub fn from_response(tree: &Tree, r: Response) -> Result<Handle> {
        let create = r.into_create()?;
        Ok(Handle { tree: tree.clone(), create, open: true, reopen: None, lease: None, closing: false })
    }

    /// A handle that [`Tree::reopen`] can open again on another connection.
    pub(crate) fn with_reopen(mut self, reopen: Reopen) -> Handle {
        self.reopen = Some(Box::new(reopen));
        self
    }

    /// A handle whose open holds the lease `key` (`Tree::open_leased`),
    /// open while `open` is true.
    pub(crate) fn with_lease(mut self, key: [u8; 16], open: Arc<AtomicBool>) -> Handle {
        self.lease = Some((key, open));
        self
    }

    /// True unless the connection closed this handle on a lease break
    /// (`lease::OnBreak::CloseFirst`); then it is to be given up, and
    /// requests on its FileId fail.
    pub fn is_open(&self) -> bool {
        self.open && self.lease.as_ref().is_none_or(|(_, open)| open.load(Ordering::Acquire))
    }

    /// Takes the right to send this handle's CLOSE: false if the
    /// connection closed it on a lease break.
    fn take_close(&self) -> bool {
        self.lease.as_ref().is_none_or(|(_, open)| open.swap(false, Ordering::AcqRel))
    }

    /// What [`Tree::reopen`] needs to open this file again after this
    /// handle's connection is lost; `None` unless it was opened with
    /// [`Tree::open_durable`] (or reopened).
    pub fn reopen_info(&self) -> Option<Reopen> {
        self.reopen.as_deref().cloned()
    }

    /// The FileId, for requests on this handle.
    pub fn id(&self) -> FileId {
        self.create.file_id
    }

    /// What the CREATE answered: times, size, attributes, contexts.
    pub fn info(&self) -> &CreateResponse {
        &self.create
    }

    /// The tree, and so the connection, the handle lives on.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// CLOSE with post-query attributes (MS-SMB2 2.2.15), awaited. If this
    /// future is dropped before the answer, the reaper closes the handle
    /// again (a second CLOSE of a closed FileId only fails).
    ///
    /// Errors: the CLOSE's NTSTATUS, or a connection error (the server then
    /// closes the handle with the session).
    pub async fn close(mut self) -> Result<CloseResponse> {
        if !self.take_close() {
            self.open = false;
            self.release_oplock();
            return Err(crate::Error::Status {
                command: smb_proto::Command::Close,
                status: smb_proto::NtStatus::STATUS_FILE_CLOSED,
            });
        }
        self.closing = true;
        self.release_lease();
        let r = self.tree.close(self.create.file_id).await;
        self.open = false;
        if r.is_ok() {
            self.release_oplock();
        }
        r
    }

    /// The handle was closed by a compound that also held a CLOSE of it
    /// (`FileId::RELATED`) or by the server: forget it without a CLOSE.
    pub fn closed_elsewhere(mut self) {
        self.open = false;
        self.release_oplock();
    }

    /// Forgets the oplock a durable open recorded on its connection, or
    /// the lease a leased open did (only those record one, so other
    /// handles skip the connection's locks).
    fn release_oplock(&self) {
        if self.reopen.is_some() {
            self.tree.conn().forget_oplock(self.create.file_id);
        }
        self.release_lease();
    }

    /// Forgets the lease a leased open recorded on its connection.
    fn release_lease(&self) {
        if let Some((key, _)) = &self.lease {
            self.tree.conn().forget_lease(key);
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.open {
            // On a lost connection the oplock held is what a reopen needs
            // to know (durable::Reopen::may_be_reclaimed): keep it.
            if !self.tree.conn().is_poisoned() {
                self.release_oplock();
            }
            if self.closing || self.take_close() {
                self.tree.conn().close_later(self.tree.tree_id(), self.create.file_id, self.tree.is_encrypted());
            }
        }
    }
}

/// An open that closes itself (directory reads are in `dir_reader.rs`).
impl Tree {
    /// CREATE (MS-SMB2 2.2.13) returning a [`Handle`] that closes itself
    /// when dropped.
    ///
    /// Errors: as [`Tree::create`].
    pub async fn open(&self, req: &CreateRequest<'_>) -> Result<Handle> {
        Handle::from_response(self, self.call(req).await?)
    }
}
