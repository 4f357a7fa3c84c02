//! The lease table of one connection (MS-SMB2 3.2.4.3.8, 3.2.5.19.2):
//! plain data, by LeaseKey, that the reader task consults for every break
//! and the openers of `crate::lease` register into. It decides what a
//! break lowers and what must go back to the server (an acknowledgment, a
//! CLOSE first); it sends nothing itself. See `crate::lease` for the
//! whole protocol and why keys are registered before the CREATE.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use smb_proto::create::FileId;
use smb_proto::lease::{LeaseBreak, LeaseBreakAck};
use tokio::sync::watch;

/// One registered lease: where its acknowledgment goes, and its state.
struct Held {
    tree_id: u32,
    encrypt: bool,
    /// What breaks have left: a grant that the reader sees after a break
    /// is cut down to it.
    ceiling: u32,
    state: watch::Sender<u32>,
    /// With [`OnBreak::CloseFirst`]: the handle to close when Handle
    /// caching is broken, and its open flag (shared with the [`crate::file::Handle`]).
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
pub(crate) enum Grant {
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
    /// granted yet; returns what its [`crate::lease::Lease`] watches.
    pub(crate) fn register(
        &self,
        key: [u8; 16],
        tree_id: u32,
        encrypt: bool,
        on_break: OnBreak,
    ) -> watch::Receiver<u32> {
        let (state, rx) = watch::channel(0);
        let held =
            Held { tree_id, encrypt, ceiling: u32::MAX, state, close: None, on_break, granted: false, parked: None };
        self.held.lock().unwrap().insert(key, held);
        rx
    }

    /// Records that `key` was granted `state` bits (less whatever a break
    /// already took), and the handle to close on a Handle break, if any.
    pub(crate) fn granted(&self, key: &[u8; 16], state: u32, close: Option<(FileId, Arc<AtomicBool>)>) -> Grant {
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
