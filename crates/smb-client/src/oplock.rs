//! Oplocks held by this connection's durable handles (MS-SMB2 3.2.5.19.1).
//!
//! Samba keeps a durable handle across a lost connection only while its
//! open holds a batch oplock (or a handle lease), so durable opens ask for
//! one. When another open of the file breaks it, the server waits for our
//! acknowledgment before that open goes on: the reader task hands each
//! break to [`Oplocks::on_break`], which records the new level and says
//! what to acknowledge, and the connection sends it at once. The level
//! held also tells a reconnect whether the server can still have kept the
//! handle ([`Oplocks::level`]).

use std::collections::HashMap;
use std::sync::Mutex;

use smb_proto::create::{oplock, FileId};
use smb_proto::oplock::{OplockBreak, OplockBreakAck};

/// One held oplock: where its handle lives and the level now held.
#[derive(Debug, Clone, Copy)]
struct Held {
    tree_id: u32,
    encrypt: bool,
    level: u8,
}

/// The oplocks of one connection, by FileId.
#[derive(Default)]
pub(crate) struct Oplocks {
    held: Mutex<HashMap<FileId, Held>>,
}

/// An acknowledgment to send: on `tree_id`, encrypted or not.
pub(crate) struct Ack {
    pub(crate) tree_id: u32,
    pub(crate) encrypt: bool,
    pub(crate) body: OplockBreakAck,
}

impl Oplocks {
    /// Records that `file_id` on `tree_id` was granted `level`; level
    /// NONE records nothing.
    pub(crate) fn hold(&self, file_id: FileId, tree_id: u32, encrypt: bool, level: u8) {
        if level != oplock::NONE {
            self.held.lock().unwrap().insert(file_id, Held { tree_id, encrypt, level });
        }
    }

    /// The level held on `file_id` now (NONE if none or unknown).
    pub(crate) fn level(&self, file_id: FileId) -> u8 {
        self.held.lock().unwrap().get(&file_id).map_or(oplock::NONE, |h| h.level)
    }

    /// Forgets `file_id` (its handle was closed).
    pub(crate) fn release(&self, file_id: FileId) {
        self.held.lock().unwrap().remove(&file_id);
    }

    /// A break notification: records the level it breaks to and returns
    /// the acknowledgment the server waits for (a break from batch or
    /// exclusive; a level II oplock breaks to none without one). A break
    /// of a handle we hold no oplock on is ignored.
    pub(crate) fn on_break(&self, b: OplockBreak) -> Option<Ack> {
        let mut held = self.held.lock().unwrap();
        let h = held.get_mut(&b.file_id)?;
        let was = h.level;
        h.level = b.oplock_level.min(was);
        let needs_ack = matches!(was, oplock::BATCH | oplock::EXCLUSIVE);
        let ack = needs_ack.then_some(Ack {
            tree_id: h.tree_id,
            encrypt: h.encrypt,
            body: OplockBreakAck { oplock_level: h.level, file_id: b.file_id },
        });
        if h.level == oplock::NONE {
            held.remove(&b.file_id);
        }
        ack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: FileId = FileId { persistent: 1, volatile: 2 };

    #[test]
    fn a_batch_break_is_acknowledged_at_the_new_level_and_remembered() {
        let o = Oplocks::default();
        o.hold(F, 5, true, oplock::BATCH);
        let ack = o.on_break(OplockBreak { oplock_level: oplock::LEVEL_II, file_id: F }).expect("ack");
        assert_eq!((ack.tree_id, ack.encrypt, ack.body.oplock_level), (5, true, oplock::LEVEL_II));
        assert_eq!(o.level(F), oplock::LEVEL_II);
        // Level II to none: no acknowledgment, nothing held.
        assert!(o.on_break(OplockBreak { oplock_level: oplock::NONE, file_id: F }).is_none());
        assert_eq!(o.level(F), oplock::NONE);
    }

    #[test]
    fn a_break_of_an_unknown_handle_is_ignored() {
        let o = Oplocks::default();
        assert!(o.on_break(OplockBreak { oplock_level: oplock::NONE, file_id: F }).is_none());
        o.hold(F, 1, false, oplock::NONE);
        assert_eq!(o.level(F), oplock::NONE);
    }
}
