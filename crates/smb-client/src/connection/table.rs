//! The MessageId and credit table of one connection, as plain data: which
//! requests are outstanding, what each answer must match to be theirs
//! (failure class 24), how many credits are spent and granted (MS-SMB2
//! 3.2.4.1.5, 3.2.5.1.4), and whether the connection has failed. No
//! socket, task or clock: the connection holds it under one lock, and the
//! tests below drive it alone.

use std::collections::HashMap;

use smb_proto::header::{flags, Header};
use smb_proto::{Command, NtStatus};
use tokio::sync::oneshot;

use super::reaper::Ticket;
use super::response::{Response, ResponseFuture};
use crate::credits::CreditWindow;
use crate::error::{Error, Result};

/// What a response must match to answer a request (failure class 24).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bind {
    pub(crate) command: Command,
    /// SessionId the request was sent with (0 before SESSION_SETUP).
    pub(crate) session_id: u64,
    pub(crate) tree_id: u32,
    /// The request went out encrypted, so its answer must come back so.
    pub(crate) encrypted: bool,
}

/// One outstanding request.
pub(crate) struct Pending {
    /// Where its final answer (or the connection's failure) goes.
    pub(crate) tx: oneshot::Sender<Result<Response>>,
    /// Credits it charged, returned to the window by its final answer.
    pub(crate) charge: u32,
    /// For a CREATE whose chain leaves the handle open.
    pub(crate) ticket: Option<Ticket>,
    pub(crate) bind: Bind,
    /// AsyncId from an interim STATUS_PENDING; the final answer must carry it.
    pub(crate) async_id: Option<u64>,
    /// Credits its interim answers granted, held back until the final
    /// answer: interim answers are not signed (MS-SMB2 3.3.4.1.1), so a
    /// forged one must not widen the window.
    pub(crate) interim_grant: u16,
}

/// Whether a request of `command` counts as load while it waits: a
/// CHANGE_NOTIFY waits for a change on the share, not for the server, and
/// may wait for hours, so it does not (the pool's least-loaded choice and
/// idle checks would otherwise never see its connection idle).
pub(crate) fn counts_in_flight(command: Command) -> bool {
    command != Command::ChangeNotify
}

/// What one received message was, for [`Table::answer`].
pub(crate) enum Answer {
    /// An interim STATUS_PENDING: its request waits on for the final answer.
    Interim,
    /// The final answer to this request, which has left the table.
    Final(Pending),
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Interim => f.write_str("Interim"),
            Answer::Final(p) => f.debug_struct("Final").field("bind", &p.bind).field("charge", &p.charge).finish(),
        }
    }
}

/// Per message of a reservation: (MessageId, CreditCharge, CreditRequest).
pub(crate) type Slot = (u64, u16, u16);

/// Outstanding requests, the credit window and the failure, if any.
pub(crate) struct Table {
    next_message_id: u64,
    pending: HashMap<u64, Pending>,
    pub(crate) credits: CreditWindow,
    poisoned: Option<Error>,
}

impl Table {
    /// A fresh connection's table: MessageId 0 next, one credit, nothing
    /// outstanding; the window grows toward `credit_target`.
    pub(crate) fn new(credit_target: u32) -> Table {
        Table { next_message_id: 0, pending: HashMap::new(), credits: CreditWindow::new(credit_target), poisoned: None }
    }

    /// The error the connection failed with, if it has.
    pub(crate) fn poisoned(&self) -> Option<&Error> {
        self.poisoned.as_ref()
    }

    /// Spends the credits of messages charging `charges` and registers a
    /// waiter for each, with consecutive MessageIds (each message takes as
    /// many ids as it charges, MS-SMB2 3.2.4.1.5). `tickets` is empty or
    /// holds one entry per message (taken); `binds` holds one per message.
    ///
    /// Returns `Ok(None)`, spending nothing, while the window holds too few
    /// credits; otherwise one [`Slot`] and one future per message, in order.
    /// Errors: the connection has failed.
    pub(crate) fn reserve(
        &mut self,
        charges: &[u16],
        tickets: &mut [Option<Ticket>],
        binds: &[Bind],
    ) -> Result<Option<(Vec<Slot>, Vec<ResponseFuture>)>> {
        if let Some(e) = &self.poisoned {
            return Err(e.clone());
        }
        let total: u32 = charges.iter().map(|&c| c as u32).sum();
        if !self.credits.try_spend(total) {
            return Ok(None);
        }
        let mut id = self.next_message_id;
        let mut slots = Vec::with_capacity(charges.len());
        let mut rxs = Vec::with_capacity(charges.len());
        for (i, (&c, &bind)) in charges.iter().zip(binds).enumerate() {
            let ticket = tickets.get_mut(i).and_then(Option::take);
            slots.push((id, c, self.credits.request_for(c)));
            let (tx, rx) = oneshot::channel();
            self.pending.insert(id, Pending { tx, charge: c as u32, ticket, bind, async_id: None, interim_grant: 0 });
            rxs.push(ResponseFuture { rx, message_id: id, span: tracing::Span::none() });
            id += c as u64;
        }
        self.next_message_id = id;
        Ok(Some((slots, rxs)))
    }

    /// True if request `message_id` is outstanding and has had an interim
    /// STATUS_PENDING answer (its deadline may then be extended).
    pub(crate) fn is_interim(&self, message_id: u64) -> bool {
        self.pending.get(&message_id).is_some_and(|p| p.async_id.is_some())
    }

    /// Takes one received (and verified) message whose frame was
    /// `encrypted`. An interim answer records its AsyncId and the credits it
    /// grants, which count only once the final answer came: an interim
    /// answer is never signed, so anyone on the path could forge its grant.
    /// A final one must answer its request exactly (the same command,
    /// SessionId and TreeId, the AsyncId of its interim answer, encrypted
    /// if the request was), returns its request's charge to the window with
    /// its own grant and its interim's, and leaves the table.
    ///
    /// Errors: [`Error::Protocol`] for an unknown MessageId;
    /// [`Error::Integrity`] for an answer that does not match, whose
    /// request then stays in the table so that the connection's failure
    /// reaches its waiter.
    pub(crate) fn answer(&mut self, header: &Header, encrypted: bool) -> Result<Answer> {
        let is_async = header.flags & flags::ASYNC_COMMAND != 0;
        if header.status == NtStatus::STATUS_PENDING && is_async {
            let Some(p) = self.pending.get_mut(&header.message_id) else {
                return Err(Error::Protocol(format!("interim response for unknown MessageId {}", header.message_id)));
            };
            if header.command != p.bind.command || p.async_id.is_some_and(|a| Some(a) != header.async_id) {
                return Err(Error::Integrity("interim response does not match its request"));
            }
            p.async_id = header.async_id;
            p.interim_grant = p.interim_grant.saturating_add(header.credits);
            return Ok(Answer::Interim);
        }
        let Some(p) = self.pending.remove(&header.message_id) else {
            return Err(Error::Protocol(format!("response for unknown MessageId {}", header.message_id)));
        };
        if let Err(e) = check_bound(&p, header, encrypted) {
            // Back in the table, for the connection's failure to reach it.
            self.pending.insert(header.message_id, p);
            return Err(e);
        }
        self.credits.on_response(header.credits.saturating_add(p.interim_grant), p.charge);
        Ok(Answer::Final(p))
    }

    /// Marks the connection failed with `err` and empties the table.
    ///
    /// Returns the requests that were outstanding, for their waiters to
    /// hear `err`, and the credits they had charged; `None` if the
    /// connection had already failed (the first error stands).
    pub(crate) fn fail(&mut self, err: Error) -> Option<(Vec<Pending>, u32)> {
        if self.poisoned.is_some() {
            return None;
        }
        self.poisoned = Some(err);
        let pending: Vec<Pending> = self.pending.drain().map(|(_, p)| p).collect();
        // What was lost in flight: load, not the watches waiting for a change.
        let charged = pending.iter().filter(|p| counts_in_flight(p.bind.command)).map(|p| p.charge).sum();
        Some((pending, charged))
    }

    /// Registers a request with MessageId `id` without spending credits,
    /// for the fuzz harness, which makes up what was sent.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn insert_for_fuzzing(&mut self, id: u64, bind: Bind) -> oneshot::Receiver<Result<Response>> {
        let (tx, rx) = oneshot::channel();
        self.pending.insert(id, Pending { tx, charge: 1, ticket: None, bind, async_id: None, interim_grant: 0 });
        rx
    }
}

/// Checks that a final answer fits the request it claims to answer.
fn check_bound(p: &Pending, h: &Header, encrypted: bool) -> Result<()> {
    let b = &p.bind;
    if h.command != b.command {
        return Err(Error::Integrity("response command does not match its request"));
    }
    if b.encrypted && !encrypted {
        return Err(Error::Integrity("unencrypted response to an encrypted request"));
    }
    // SESSION_SETUP answers carry the SessionId being set up.
    if !matches!(b.command, Command::Negotiate | Command::SessionSetup) && h.session_id != b.session_id {
        return Err(Error::Integrity("response SessionId does not match its request"));
    }
    if h.flags & flags::ASYNC_COMMAND != 0 {
        if p.async_id.is_none() || h.async_id != p.async_id {
            return Err(Error::Integrity("async response without the AsyncId of its interim answer"));
        }
    } else if b.command != Command::TreeConnect && h.tree_id != b.tree_id {
        return Err(Error::Integrity("response TreeId does not match its request"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: u64 = 0x44;
    const TREE: u32 = 3;

    fn bind(command: Command) -> Bind {
        Bind { command, session_id: SESSION, tree_id: TREE, encrypted: false }
    }

    /// A final answer to `message_id` that matches `bind(command)`,
    /// granting `credits`.
    fn answer(command: Command, message_id: u64, credits: u16) -> Header {
        let mut h = Header::request(command);
        h.flags = flags::SERVER_TO_REDIR;
        h.message_id = message_id;
        h.session_id = SESSION;
        h.tree_id = TREE;
        h.credits = credits;
        h
    }

    /// An interim STATUS_PENDING answer to `message_id` with `async_id`.
    fn interim(command: Command, message_id: u64, async_id: u64) -> Header {
        let mut h = answer(command, message_id, 1);
        h.flags |= flags::ASYNC_COMMAND;
        h.status = NtStatus::STATUS_PENDING;
        h.async_id = Some(async_id);
        h
    }

    /// A table with `credits` available.
    fn table(credits: u32) -> Table {
        let mut t = Table::new(512);
        t.credits.available = credits;
        t
    }

    fn reserve(t: &mut Table, charges: &[u16], command: Command) -> Option<(Vec<Slot>, Vec<ResponseFuture>)> {
        let binds = vec![bind(command); charges.len()];
        t.reserve(charges, &mut [], &binds).expect("not poisoned")
    }

    #[test]
    fn message_ids_advance_by_charge_and_credits_are_spent() {
        let mut t = table(10);
        let (slots, _rx) = reserve(&mut t, &[1, 4, 2], Command::Read).expect("credits");
        let ids: Vec<u64> = slots.iter().map(|s| s.0).collect();
        assert_eq!(ids, [0, 1, 5], "each message takes as many ids as it charges");
        assert_eq!(slots.iter().map(|s| s.1).collect::<Vec<_>>(), [1, 4, 2]);
        assert_eq!((t.credits.available, t.credits.in_flight), (3, 7));
        let (slots, _rx2) = reserve(&mut t, &[3], Command::Read).expect("credits");
        assert_eq!(slots[0].0, 7);
        assert_eq!(t.credits.available, 0);
    }

    #[test]
    fn a_reservation_over_the_window_spends_nothing() {
        let mut t = table(4);
        assert!(reserve(&mut t, &[2, 3], Command::Write).is_none());
        assert_eq!((t.credits.available, t.credits.in_flight), (4, 0));
        let (slots, _rx) = reserve(&mut t, &[4], Command::Write).expect("fits exactly");
        assert_eq!(slots[0].0, 0, "the refused reservation took no MessageId");
    }

    #[test]
    fn a_final_answer_returns_its_charge_and_adds_the_grant() {
        let mut t = table(8);
        let (_, _rx) = reserve(&mut t, &[4], Command::Read).expect("credits");
        let Answer::Final(p) = t.answer(&answer(Command::Read, 0, 6), false).expect("matches") else {
            panic!("a final answer")
        };
        assert_eq!(p.charge, 4);
        assert_eq!((t.credits.available, t.credits.in_flight), (4 + 6, 0));
        let again = t.answer(&answer(Command::Read, 0, 1), false);
        assert!(matches!(again, Err(Error::Protocol(_))), "a second answer to one request: {again:?}");
    }

    #[test]
    fn an_answer_must_match_its_request() {
        type Forge = fn(&mut Header);
        let cases: [(&str, Forge, bool); 4] = [
            ("another command", |h| h.command = Command::Write, false),
            ("another SessionId", |h| h.session_id = SESSION + 1, false),
            ("another TreeId", |h| h.tree_id = TREE + 1, false),
            ("plaintext to an encrypted request", |_| {}, true),
        ];
        for (what, forge, sent_encrypted) in cases {
            let mut t = table(8);
            let b = Bind { encrypted: sent_encrypted, ..bind(Command::Read) };
            let (_, _rx) = t.reserve(&[1], &mut [], &[b]).unwrap().expect("credits");
            let mut h = answer(Command::Read, 0, 1);
            forge(&mut h);
            let r = t.answer(&h, false);
            assert!(matches!(r, Err(Error::Integrity(_))), "{what}: {r:?}");
            assert!(t.pending.contains_key(&0), "{what}: the request stays for the failure to reach it");
            assert_eq!(t.credits.in_flight, 1, "{what}: a forged answer returns no credits");
        }
    }

    #[test]
    fn the_exempt_fields_are_exactly_those_the_protocol_changes() {
        // SESSION_SETUP answers carry the SessionId being set up.
        let mut t = table(8);
        let (_, _rx) =
            t.reserve(&[1], &mut [], &[Bind { session_id: 0, ..bind(Command::SessionSetup) }]).unwrap().unwrap();
        assert!(matches!(t.answer(&answer(Command::SessionSetup, 0, 1), false), Ok(Answer::Final(_))));
        // TREE_CONNECT answers carry the TreeId being connected.
        let (_, _rx) = t.reserve(&[1], &mut [], &[Bind { tree_id: 0, ..bind(Command::TreeConnect) }]).unwrap().unwrap();
        assert!(matches!(t.answer(&answer(Command::TreeConnect, 1, 1), false), Ok(Answer::Final(_))));
        // An encrypted answer to a plaintext request is fine.
        let (_, _rx) = reserve(&mut t, &[1], Command::Read).unwrap();
        assert!(matches!(t.answer(&answer(Command::Read, 2, 1), true), Ok(Answer::Final(_))));
    }

    #[test]
    fn an_async_final_answer_needs_the_async_id_of_its_interim() {
        let mut t = table(8);
        let (_, _rx) = reserve(&mut t, &[2], Command::Read).unwrap();
        let mut fin = answer(Command::Read, 0, 2);
        fin.flags |= flags::ASYNC_COMMAND;
        fin.async_id = Some(9);
        assert!(matches!(t.answer(&fin, false), Err(Error::Integrity(_))), "async final without an interim");

        assert!(!t.is_interim(0));
        assert!(matches!(t.answer(&interim(Command::Read, 0, 9), false), Ok(Answer::Interim)));
        assert!(t.is_interim(0));
        assert_eq!((t.credits.available, t.credits.in_flight), (6, 2), "an interim's grant waits, charge stays");
        let r = t.answer(&interim(Command::Read, 0, 10), false);
        assert!(matches!(r, Err(Error::Integrity(_))), "a second interim with another AsyncId: {r:?}");
        let r = t.answer(&interim(Command::Write, 0, 9), false);
        assert!(matches!(r, Err(Error::Integrity(_))), "an interim for another command: {r:?}");
        fin.async_id = Some(10);
        assert!(matches!(t.answer(&fin, false), Err(Error::Integrity(_))), "final with another AsyncId");
        fin.async_id = Some(9);
        assert!(matches!(t.answer(&fin, false), Ok(Answer::Final(_))));
        assert_eq!(t.credits.in_flight, 0);
        assert_eq!(t.credits.available, 6 + 2 + 1, "the final answer returns its charge, its grant and the interim's");
        let r = t.answer(&interim(Command::Read, 5, 1), false);
        assert!(matches!(r, Err(Error::Protocol(_))), "interim for an unknown MessageId: {r:?}");
    }

    #[test]
    fn failing_empties_the_table_once_and_refuses_what_follows() {
        let mut t = table(8);
        let (_, rxs) = reserve(&mut t, &[1, 3], Command::Read).unwrap();
        let (pending, charged) = t.fail(Error::Timeout("test")).expect("first failure");
        assert_eq!((pending.len(), charged), (2, 4));
        for p in pending {
            let _ = p.tx.send(Err(Error::Timeout("test")));
        }
        for mut f in rxs {
            assert!(matches!(f.rx.try_recv(), Ok(Err(Error::Timeout("test")))));
        }
        assert!(t.fail(Error::ConnectionLost("later".into())).is_none(), "the first error stands");
        assert!(matches!(t.poisoned(), Some(Error::Timeout("test"))));
        let r = t.reserve(&[1], &mut [], &[bind(Command::Read)]);
        assert!(matches!(r, Err(Error::Timeout("test"))), "nothing is sent on a failed connection");
    }
}
