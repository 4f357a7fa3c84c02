//! Leases held by this connection's opens (MS-SMB2 3.2.4.3.8, 3.2.5.19.2).
//!
//! [`Tree::open_leased`] asks for a lease with a fresh LeaseKey and
//! returns a [`Lease`] that tells what the lease still allows. The server
//! breaks a lease when another open needs what it allows (another client
//! writes the file, or opens it in a way the lease conflicts with); the
//! reader task hands each break to the connection's lease table
//! (`connection::lease_table`, `Leases::on_break`), which lowers the
//! state every [`Lease`] of that key sees and says what to acknowledge,
//! and the connection sends that at once, so the other open does not wait
//! out the server's break timeout (35 s on Samba).
//!
//! A server keeps leases per ClientGuid and sends a break to that client;
//! every connection here negotiates a ClientGuid of its own
//! (`Session::connect`), so a lease's breaks come on the connection that
//! holds it, where its key is registered.
//!
//! A holder that caches must give the file up when it loses Handle
//! caching: the server re-checks the open that caused the break when the
//! holder answers, and a handle still open then is a sharing violation for
//! that open. With [`OnBreak::CloseFirst`] the connection closes the handle
//! before it acknowledges (the [`Handle`] then knows it is closed). That
//! CLOSE can overtake requests still in flight on the handle, which then
//! fail as on any closed handle; and a handle closed by a compound of its
//! own (`Handle::closed_elsewhere`) does not stop a break's CLOSE, so a
//! close-first handle is best closed with [`Handle::close`].
//!
//! The key is registered before the CREATE goes out: a break can follow
//! the grant so closely that the reader meets it before the opener has
//! seen its answer, and a break of an unknown key is never acknowledged.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use smb_proto::create::{oplock, CreateContext, CreateRequest};
use tokio::sync::watch;

pub use crate::connection::lease_table::OnBreak;
use crate::connection::lease_table::{Grant, Leases};
use crate::error::Result;
use crate::file::Handle;
use crate::tree::Tree;

/// What a lease allows now: [`smb_proto::lease::state`] bits, lowered by
/// every break the server sends for it.
#[derive(Clone)]
pub struct Lease {
    key: [u8; 16],
    state: watch::Receiver<u32>,
}

impl Lease {
    /// The LeaseKey.
    pub fn key(&self) -> [u8; 16] {
        self.key
    }

    /// The state bits held now.
    pub fn state(&self) -> u32 {
        *self.state.borrow()
    }

    /// Waits until the state changes (a break); returns the new state, or
    /// 0 once the lease's open is gone.
    pub async fn changed(&mut self) -> u32 {
        match self.state.changed().await {
            Ok(()) => *self.state.borrow_and_update(),
            Err(_) => 0,
        }
    }
}

/// A registered key that `Tree::open_leased` has not handed to its handle
/// yet: released if that future is dropped.
struct Registered<'a> {
    leases: &'a Leases,
    key: Option<[u8; 16]>,
}

impl Registered<'_> {
    /// The handle owns the key now (and forgets it when it closes).
    fn handed_over(mut self) {
        self.key = None;
    }
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        if let Some(key) = &self.key {
            self.leases.release(key);
        }
    }
}

/// A CREATE asking for a lease, to send alone ([`Tree::open_leased`]) or
/// first in a compound whose other requests act on the handle it opens
/// ([`Tree::lease_request`]). Its key is registered on the connection from
/// the start, so a break that overtakes the CREATE's answer still counts;
/// dropped unused, it forgets the key.
pub struct LeasedCreate<'a> {
    tree: &'a Tree,
    req: CreateRequest<'a>,
    contexts: Vec<CreateContext<'a>>,
    key: [u8; 16],
    on_break: OnBreak,
    state: watch::Receiver<u32>,
    registered: Registered<'a>,
}

impl<'a> LeasedCreate<'a> {
    /// The CREATE to send: `req` with a version 2 lease context for this
    /// key (MS-SMB2 2.2.13.2.10) after its own contexts, and its oplock
    /// level set to LEASE.
    pub fn request(&self) -> CreateRequest<'_> {
        CreateRequest { oplock_level: oplock::LEASE, contexts: &self.contexts, ..self.req.clone() }
    }

    /// Takes the handle the CREATE of [`LeasedCreate::request`] opened.
    /// Returns it with its [`Lease`], whose state is what the server
    /// granted (0 if it granted none).
    ///
    /// Errors: with [`OnBreak::CloseFirst`], STATUS_SHARING_VIOLATION if
    /// Handle caching was broken before this was called (the handle is
    /// closed then).
    pub async fn opened(self, h: Handle) -> Result<(Handle, Lease)> {
        let LeasedCreate { tree, key, on_break, mut state, registered, .. } = self;
        let leases = tree.conn().leases();
        let granted = match (h.info().oplock_level, h.info().lease()) {
            (oplock::LEASE, Some(g)) if g.key == key => g.state,
            _ => 0,
        };
        let open = Arc::new(AtomicBool::new(true));
        let close = (on_break == OnBreak::CloseFirst && granted & smb_proto::lease::state::HANDLE != 0)
            .then(|| (h.id(), open.clone()));
        let h = h.with_lease(key, open);
        registered.handed_over();
        if let Grant::BrokenFirst(ack) = leases.granted(&key, granted, close) {
            let _ = h.close().await;
            if let Some(ack) = ack {
                // As the reader's acknowledgments: an answer that never
                // comes must not poison the connection.
                let op = crate::connection::Op { body: &ack, tree_id: tree.tree_id() };
                if let Err(e) = tree.conn().call_unawaited(op, tree.is_encrypted()).await {
                    tracing::debug!(error = %e, "lease break acknowledgment failed");
                }
            }
            return Err(crate::Error::Status {
                command: smb_proto::Command::Create,
                status: smb_proto::NtStatus::STATUS_SHARING_VIOLATION,
            });
        }
        // The grant is the starting point: `changed` waits for breaks.
        state.borrow_and_update();
        Ok((h, Lease { key, state }))
    }
}

impl Tree {
    /// A CREATE of `req` asking for a lease of the `wanted`
    /// [`smb_proto::lease::state`] bits under a fresh LeaseKey, to send
    /// first in a compound ([`LeasedCreate::request`]) and to finish with
    /// the handle it opened ([`LeasedCreate::opened`]). `on_break` says
    /// what a break of Handle caching does to the handle.
    pub fn lease_request<'a>(&'a self, req: &CreateRequest<'a>, wanted: u32, on_break: OnBreak) -> LeasedCreate<'a> {
        let key: [u8; 16] = rand::random();
        let leases = self.conn().leases();
        let state = leases.register(key, self.tree_id(), self.is_encrypted(), on_break);
        let mut contexts: Vec<CreateContext<'a>> = req.contexts.to_vec();
        contexts.push(CreateContext::LeaseV2 { key, wanted });
        LeasedCreate {
            tree: self,
            req: req.clone(),
            contexts,
            key,
            on_break,
            state,
            registered: Registered { leases, key: Some(key) },
        }
    }

    /// CREATE `req` alone, asking for a lease ([`Tree::lease_request`];
    /// `req`'s own contexts are sent too and its oplock level is
    /// replaced). Returns the handle and its [`Lease`].
    ///
    /// Errors: as [`Tree::open`] and [`LeasedCreate::opened`].
    pub async fn open_leased(
        &self,
        req: &CreateRequest<'_>,
        wanted: u32,
        on_break: OnBreak,
    ) -> Result<(Handle, Lease)> {
        let leased = self.lease_request(req, wanted, on_break);
        let h = self.open(&leased.request()).await?;
        leased.opened(h).await
    }
}
