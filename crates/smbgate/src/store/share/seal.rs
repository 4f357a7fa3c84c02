//! The three things the gateway holds of the share, the pool, a
//! connection and an open file, as types whose SMB calls only this layer
//! can make, but for closing an open file (which dropping it does too):
//! the store passes them back to the operations here and can do nothing
//! else with them, so no request reaches the server past the layer
//! (failure class 26). The compiler keeps that seal; what the types cannot
//! say (nobody above connects a pool, a session or a connection of their
//! own) is crates/smbgate/clippy.toml's.

use smb_proto::create::{CloseResponse, CreateResponse};

/// The pool of connections to the share (smb-client's), cheap to clone.
/// Made by [`super::connect_pool`]; above this layer it answers only how
/// it is doing, never a connection.
#[derive(Clone)]
pub struct Pool(smb_client::Pool);

impl Pool {
    pub(super) fn new(pool: smb_client::Pool) -> Pool {
        Pool(pool)
    }

    /// The client's pool, for this layer's requests.
    pub(super) fn smb(&self) -> &smb_client::Pool {
        &self.0
    }

    /// Healthy connections with no request in flight, a count.
    pub fn idle(&self) -> usize {
        self.0.idle()
    }

    /// Healthy connections, a count (health probes answer from it).
    pub fn healthy(&self) -> usize {
        self.0.healthy()
    }

    /// Healthy, reconnecting and replaced connections, a snapshot (for
    /// metrics).
    pub fn stats(&self) -> smb_client::PoolStats {
        self.0.stats()
    }

    /// Bytes one stream may keep in flight now
    /// (`smb_client::Pool::in_flight_budget`: lowered while connections
    /// are lost with data outstanding, failure class 7).
    pub fn in_flight_budget(&self) -> usize {
        self.0.in_flight_budget()
    }

    /// Starts replacing broken connections now, in the background
    /// (`smb_client::Pool::kick`).
    pub fn kick(&self) {
        self.0.kick()
    }
}

/// A pooled connection to the share (one SMB tree connect), cheap to
/// clone. Obtained from [`super::connection`] and its neighbours.
#[derive(Clone)]
pub struct Tree(smb_client::Tree);

impl Tree {
    pub(super) fn new(tree: smb_client::Tree) -> Tree {
        Tree(tree)
    }

    /// The client's tree, for this layer's requests.
    pub(super) fn smb(&self) -> &smb_client::Tree {
        &self.0
    }

    /// Opens a file with `req` (one CREATE).
    ///
    /// Errors: the CREATE's NTSTATUS.
    pub(super) async fn open(&self, req: &smb_proto::create::CreateRequest<'_>) -> smb_client::Result<Handle> {
        Ok(Handle::of(self.0.open(req).await?))
    }

    /// Opens a file with `req`, asking for a durable handle (one CREATE).
    ///
    /// Errors: the CREATE's NTSTATUS.
    pub(super) async fn open_durable(&self, req: &smb_proto::create::CreateRequest<'_>) -> smb_client::Result<Handle> {
        Ok(Handle::of(self.0.open_durable(req).await?))
    }

    /// The largest READ the server takes on this connection, in bytes.
    pub fn max_read(&self) -> u32 {
        self.0.max_read()
    }

    /// The largest WRITE the server takes on this connection, in bytes.
    pub fn max_write(&self) -> u32 {
        self.0.max_write()
    }

    /// True if `self` and `other` run on one connection (one smbd process,
    /// one credit window).
    pub fn same_connection(&self, other: &Tree) -> bool {
        self.0.conn().same_as(other.0.conn())
    }
}

/// An open file or directory on the share. It closes itself when dropped
/// (also when a request future is dropped mid-flight); [`Handle::close`]
/// closes it and waits for the server's answer.
pub struct Handle {
    file: smb_client::Handle,
}

impl Handle {
    /// Wraps `file` (which knows its own connection).
    pub(super) fn of(file: smb_client::Handle) -> Handle {
        Handle { file }
    }

    /// The handle a CREATE answer `r` (sent on `tree`) opened.
    ///
    /// Errors: the CREATE's NTSTATUS.
    pub(super) fn from_response(tree: &Tree, r: smb_client::connection::Response) -> smb_client::Result<Handle> {
        Ok(Handle::of(smb_client::Handle::from_response(&tree.0, r)?))
    }

    /// The client's handle, for this layer's requests.
    pub(super) fn smb(&self) -> &smb_client::Handle {
        &self.file
    }

    /// The client's handle, taken out (to close it, or to let it go).
    pub(super) fn into_smb(self) -> smb_client::Handle {
        self.file
    }

    /// The connection the file is open on (its file id means nothing on
    /// another), as a tree of its own: a clone, so the layer's requests on
    /// the handle use [`Handle::smb`]'s instead.
    pub fn tree(&self) -> Tree {
        Tree(self.file.tree().clone())
    }

    /// What the CREATE that opened it answered (file id, times, size,
    /// attributes).
    pub fn info(&self) -> &CreateResponse {
        self.file.info()
    }

    /// Closes the file and waits for the server's CLOSE answer.
    ///
    /// Errors: the CLOSE's NTSTATUS, or a lost connection.
    pub async fn close(self) -> smb_client::Result<CloseResponse> {
        self.file.close().await
    }
}
