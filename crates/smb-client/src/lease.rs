//! Leases held by this connection's opens (MS-SMB2 3.2.4.3.8, 3.2.5.19.2).
//!
//! [`Tree::open_leased`] asks for a lease with a fresh LeaseKey and
//! returns a [`Lease`] that tells what the lease still allows. The server
//! breaks a lease when another open needs what it allows (another client
//! writes the file, or opens it in a way the lease conflicts with); the
//! reader task hands each break to [`Leases::on_break`], which lowers the
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use smb_proto::create::{oplock, CreateContext, CreateRequest, FileId};
use smb_proto::lease::{LeaseBreak, LeaseBreakAck};
use tokio::sync::watch;

use crate::error::Result;
use crate::file::Handle;
use crate::tree::Tree;

/// One registered lease: where its acknowledgment goes, and its state.
struct Held {
    tree_id: u32,
    encrypt: bool,
    /// What breaks have left: a grant that the reader sees after a break
    /// is cut down to it.
    ceiling: u32,
    state: watch::Sender<u32>,
    /// With [`OnBreak::CloseFirst`]: the handle to close when Handle
    /// caching is broken, and its open flag (shared with the [`Handle`]).
    close: Option<(FileId, Arc<AtomicBool>)>,
    on_break: OnBreak,
    /// False until the opener has seen the CREATE's answer.
    granted: bool,
    /// A close-first lease's acknowledgment held back because its break
    /// came before the grant: the opener closes, then sends it.
    parked: Option<LeaseBreakAck>,
}

/// What [`Leases::granted`] found.
#[derive(Debug, PartialEq, Eq)]
enum Grant {
    /// The lease stands (or was never asked to close first).
    Kept,
    /// A break took Handle caching from a close-first lease before the
    /// grant: the opener closes the handle, then sends this
    /// acknowledgment, if the server waits for one.
    BrokenFirst(Option<LeaseBreakAck>),
}

/// What the connection does when a lease loses Handle caching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnBreak {
    /// Acknowledge at once; the caller closes the handle when it likes
    /// (an open the holder's sharing refuses then fails).
    Acknowledge,
    /// Close the lease's handle, then acknowledge: the open that caused
    /// the break goes on.
    CloseFirst,
}

/// The leases of one connection, by LeaseKey.
#[derive(Default)]
pub(crate) struct Leases {
    held: Mutex<HashMap<[u8; 16], Held>>,
}

/// A lease acknowledgment to send: on `tree_id`, encrypted or not.
pub(crate) struct LeaseAck {
    pub(crate) tree_id: u32,
    pub(crate) encrypt: bool,
    pub(crate) body: LeaseBreakAck,
    /// A handle to close before the acknowledgment goes.
    pub(crate) close_first: Option<FileId>,
    /// False if the server does not wait for an acknowledgment (only the
    /// CLOSE goes).
    pub(crate) ack: bool,
}

impl Leases {
    /// Registers `key`, about to be asked for on `tree_id`, with no state
    /// granted yet; returns what its [`Lease`] watches.
    fn register(&self, key: [u8; 16], tree_id: u32, encrypt: bool, on_break: OnBreak) -> watch::Receiver<u32> {
        let (state, rx) = watch::channel(0);
        let held =
            Held { tree_id, encrypt, ceiling: u32::MAX, state, close: None, on_break, granted: false, parked: None };
        self.held.lock().unwrap().insert(key, held);
        rx
    }

    /// Records that `key` was granted `state` bits (less whatever a break
    /// already took), and the handle to close on a Handle break, if any.
    fn granted(&self, key: &[u8; 16], state: u32, close: Option<(FileId, Arc<AtomicBool>)>) -> Grant {
        let mut held = self.held.lock().unwrap();
        let Some(h) = held.get_mut(key) else { return Grant::Kept };
        h.granted = true;
        h.state.send_replace(state & h.ceiling);
        if h.on_break == OnBreak::CloseFirst && h.ceiling & smb_proto::lease::state::HANDLE == 0 {
            return Grant::BrokenFirst(h.parked.take());
        }
        h.close = close;
        Grant::Kept
    }

    /// Forgets `key` (its open was refused or closed).
    pub(crate) fn release(&self, key: &[u8; 16]) {
        self.held.lock().unwrap().remove(key);
    }

    /// A break notification: lowers the state of `b.key` to `b.new` and
    /// returns the acknowledgment the server waits for, if it waits. A
    /// break of a key we do not hold is ignored.
    pub(crate) fn on_break(&self, b: &LeaseBreak) -> Option<LeaseAck> {
        let mut held = self.held.lock().unwrap();
        let h = held.get_mut(&b.key)?;
        h.ceiling &= b.new;
        h.state.send_modify(|s| *s &= b.new);
        let handle_lost = b.new & smb_proto::lease::state::HANDLE == 0;
        if !h.granted && h.on_break == OnBreak::CloseFirst && handle_lost {
            // The opener has not seen its handle yet; it closes it and then
            // acknowledges (`Leases::granted`).
            if b.ack_required() {
                h.parked = Some(LeaseBreakAck { key: b.key, state: b.new });
            }
            return None;
        }
        // Whoever turns the open flag off sends the one CLOSE.
        let close_first = match &h.close {
            Some((id, open)) if handle_lost => open.swap(false, Ordering::AcqRel).then_some(*id),
            _ => None,
        };
        (b.ack_required() || close_first.is_some()).then_some(LeaseAck {
            tree_id: h.tree_id,
            encrypt: h.encrypt,
            body: LeaseBreakAck { key: b.key, state: b.new },
            close_first,
            ack: b.ack_required(),
        })
    }
}

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
        let leases = &tree.conn().inner.leases;
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
        let leases = &self.conn().inner.leases;
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

#[cfg(test)]
mod tests {
    use super::*;
    use smb_proto::lease::{break_flags, state};

    const K: [u8; 16] = [3; 16];

    fn brk(new: u32, flags: u32) -> LeaseBreak {
        LeaseBreak { new_epoch: 1, flags, key: K, current: state::READ | state::HANDLE, new }
    }

    #[test]
    fn a_break_lowers_the_state_and_is_acknowledged_when_the_server_waits() {
        let l = Leases::default();
        let rx = l.register(K, 5, true, OnBreak::Acknowledge);
        assert_eq!(l.granted(&K, state::READ | state::HANDLE, None), Grant::Kept);
        assert_eq!(*rx.borrow(), state::READ | state::HANDLE);
        let ack = l.on_break(&brk(state::READ, break_flags::ACK_REQUIRED)).expect("ack");
        assert_eq!((ack.tree_id, ack.encrypt, ack.body.state), (5, true, state::READ));
        assert_eq!(*rx.borrow(), state::READ);
        assert!(l.on_break(&brk(0, 0)).is_none(), "no ack unless required");
        assert_eq!(*rx.borrow(), 0);
    }

    #[test]
    fn a_break_seen_before_the_grant_still_counts_and_unknown_keys_are_ignored() {
        let l = Leases::default();
        let rx = l.register(K, 1, false, OnBreak::Acknowledge);
        assert!(l.on_break(&brk(state::READ, break_flags::ACK_REQUIRED)).is_some());
        assert_eq!(l.granted(&K, state::READ | state::HANDLE, None), Grant::Kept);
        assert_eq!(*rx.borrow(), state::READ, "the grant is cut to what the break left");
        l.release(&K);
        assert!(l.on_break(&brk(0, break_flags::ACK_REQUIRED)).is_none());
    }

    #[test]
    fn a_handle_break_closes_a_close_first_handle_once_and_only_if_still_open() {
        let l = Leases::default();
        let _rx = l.register(K, 1, false, OnBreak::CloseFirst);
        let (id, open) = (FileId { persistent: 4, volatile: 2 }, Arc::new(AtomicBool::new(true)));
        assert_eq!(l.granted(&K, state::READ | state::HANDLE, Some((id, open.clone()))), Grant::Kept);
        assert!(l.on_break(&brk(state::READ | state::HANDLE, 0)).is_none(), "Handle kept: nothing to do");
        let ack = l.on_break(&brk(state::READ, 0)).expect("a close even when no ack is required");
        assert_eq!((ack.close_first, ack.ack), (Some(id), false));
        assert!(!open.load(Ordering::Acquire), "the handle knows it is closed");
        assert_eq!(l.on_break(&brk(0, break_flags::ACK_REQUIRED)).expect("ack").close_first, None, "closed once");
        // A handle its owner closed first is not closed again.
        let _rx = l.register(K, 1, false, OnBreak::CloseFirst);
        let open = Arc::new(AtomicBool::new(true));
        assert_eq!(l.granted(&K, state::READ | state::HANDLE, Some((id, open.clone()))), Grant::Kept);
        open.store(false, Ordering::Release);
        assert_eq!(l.on_break(&brk(state::READ, break_flags::ACK_REQUIRED)).expect("ack").close_first, None);
        // A Handle break seen before the grant: nothing goes yet; the
        // opener closes its handle, then sends the parked acknowledgment.
        let _rx = l.register(K, 1, false, OnBreak::CloseFirst);
        assert!(l.on_break(&brk(state::READ, break_flags::ACK_REQUIRED)).is_none());
        assert_eq!(
            l.granted(&K, state::READ | state::HANDLE, Some((id, Arc::new(AtomicBool::new(true))))),
            Grant::BrokenFirst(Some(LeaseBreakAck { key: K, state: state::READ }))
        );
    }
}
