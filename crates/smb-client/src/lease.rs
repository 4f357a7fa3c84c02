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
//! The key is registered before the CREATE goes out: a break can follow
//! the grant so closely that the reader meets it before the opener has
//! seen its answer, and a break of an unknown key is never acknowledged.

use std::collections::HashMap;
use std::sync::Mutex;

use smb_proto::create::{oplock, CreateContext, CreateRequest};
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
}

impl Leases {
    /// Registers `key`, about to be asked for on `tree_id`, with no state
    /// granted yet; returns what its [`Lease`] watches.
    fn register(&self, key: [u8; 16], tree_id: u32, encrypt: bool) -> watch::Receiver<u32> {
        let (state, rx) = watch::channel(0);
        self.held.lock().unwrap().insert(key, Held { tree_id, encrypt, ceiling: u32::MAX, state });
        rx
    }

    /// Records that `key` was granted `state` bits (less whatever a break
    /// already took).
    fn granted(&self, key: &[u8; 16], state: u32) {
        if let Some(h) = self.held.lock().unwrap().get(key) {
            h.state.send_replace(state & h.ceiling);
        }
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
        b.ack_required().then_some(LeaseAck {
            tree_id: h.tree_id,
            encrypt: h.encrypt,
            body: LeaseBreakAck { key: b.key, state: b.new },
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

impl Tree {
    /// CREATE `req` asking for a lease of the `wanted`
    /// [`smb_proto::lease::state`] bits under a fresh LeaseKey (MS-SMB2
    /// 2.2.13.2.10, version 2; `req`'s own contexts are sent too and its
    /// oplock level is replaced). Returns the handle and its [`Lease`],
    /// whose state is what the server granted (0 if it granted none).
    ///
    /// Errors: as [`Tree::open`].
    pub async fn open_leased(&self, req: &CreateRequest<'_>, wanted: u32) -> Result<(Handle, Lease)> {
        let key: [u8; 16] = rand::random();
        let leases = &self.conn().inner.leases;
        let state = leases.register(key, self.tree_id(), self.is_encrypted());
        let mut contexts: Vec<CreateContext<'_>> = req.contexts.to_vec();
        contexts.push(CreateContext::LeaseV2 { key, wanted });
        let req = CreateRequest { oplock_level: oplock::LEASE, contexts: &contexts, ..req.clone() };
        let h = match self.open(&req).await {
            Ok(h) => h,
            Err(e) => {
                leases.release(&key);
                return Err(e);
            }
        };
        let granted = match (h.info().oplock_level, h.info().lease()) {
            (oplock::LEASE, Some(g)) if g.key == key => g.state,
            _ => 0,
        };
        leases.granted(&key, granted);
        let mut state = state;
        // The grant is the starting point: `changed` waits for breaks.
        state.borrow_and_update();
        Ok((h.with_lease(key), Lease { key, state }))
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
        let rx = l.register(K, 5, true);
        l.granted(&K, state::READ | state::HANDLE);
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
        let rx = l.register(K, 1, false);
        assert!(l.on_break(&brk(state::READ, break_flags::ACK_REQUIRED)).is_some());
        l.granted(&K, state::READ | state::HANDLE);
        assert_eq!(*rx.borrow(), state::READ, "the grant is cut to what the break left");
        l.release(&K);
        assert!(l.on_break(&brk(0, break_flags::ACK_REQUIRED)).is_none());
    }
}
