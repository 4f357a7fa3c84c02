//! Every wait of the store, in one place: each retry is a named [`Policy`]
//! that says what it waits for, how its pauses grow, when it gives up, and
//! why that long. No other file of the store sleeps or writes a duration;
//! the settings (the store's `StoreOptions`) hold the rest. It lives in
//! the share layer, which waits on the server's answers too, so that the
//! layer imports nothing of the rules above it; the store reaches it as
//! `store::backoff`.
//!
//! A caller either hands an operation to [`retry`], or, where each try has
//! more than one outcome to tell apart, keeps a [`Backoff`] from
//! [`Policy::start`] and calls [`Backoff::wait`] between its tries. Every
//! backoff that waited logs, at DEBUG on target `smbgate::store::backoff`,
//! its policy, how many pauses it slept and how long it took in all, so
//! that the real waits can be measured under load (see
//! `docs/failure-classes.md`, class 25).

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// When a policy stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GiveUp {
    /// After this many pauses: the operation is tried one more time.
    AfterPauses(u32),
    /// Once this long has passed since the first try began.
    After(Duration),
}

/// One named wait-and-retry policy.
#[derive(Debug)]
pub(crate) struct Policy {
    /// What is waited for, in a few words (logged).
    pub(crate) name: &'static str,
    /// The first pause.
    pub(crate) first: Duration,
    /// Each pause is the one before times this.
    pub(crate) growth: u32,
    /// No pause is longer than this.
    pub(crate) cap: Duration,
    /// When to stop.
    pub(crate) give_up: GiveUp,
}

impl Policy {
    /// A fresh backoff under this policy, its clock started now.
    pub(crate) fn start(&'static self) -> Backoff {
        Backoff { policy: self, next: self.first, pauses: 0, slept: Duration::ZERO, started: Instant::now() }
    }

    /// The pause after `n` earlier pauses: `first × growthⁿ`, at most `cap`.
    fn pause(&self, n: u32) -> Duration {
        let factor = self.growth.checked_pow(n).unwrap_or(u32::MAX);
        self.first.checked_mul(factor).unwrap_or(self.cap).min(self.cap)
    }

    /// The most this policy sleeps in all before it gives up (the pauses
    /// only, not the tries between them).
    #[cfg(test)]
    pub(crate) fn budget(&self) -> Duration {
        match self.give_up {
            GiveUp::AfterPauses(n) => (0..n).map(|i| self.pause(i)).sum(),
            GiveUp::After(d) => d,
        }
    }
}

/// The state of one wait under a [`Policy`].
pub(crate) struct Backoff {
    policy: &'static Policy,
    next: Duration,
    pauses: u32,
    slept: Duration,
    started: Instant,
}

impl Backoff {
    /// Sleeps the next pause and returns true; or returns false at once
    /// when the policy gives up, so that the caller takes its last answer.
    pub(crate) async fn wait(&mut self) -> bool {
        let over = match self.policy.give_up {
            GiveUp::AfterPauses(n) => self.pauses >= n,
            GiveUp::After(d) => self.started.elapsed() >= d,
        };
        if over {
            return false;
        }
        tokio::time::sleep(self.next).await;
        self.pauses += 1;
        self.slept += self.next;
        self.next = self.policy.pause(self.pauses);
        true
    }

    /// Pauses slept so far.
    pub(crate) fn pauses(&self) -> u32 {
        self.pauses
    }
}

impl Drop for Backoff {
    fn drop(&mut self) {
        if self.pauses > 0 {
            tracing::debug!(
                target: "smbgate::store::backoff",
                policy = self.policy.name,
                pauses = self.pauses,
                slept_ms = self.slept.as_millis() as u64,
                took_ms = self.started.elapsed().as_millis() as u64,
                "waited"
            );
        }
    }
}

/// Calls `f` until it returns anything but an error that `again` accepts,
/// pausing between tries as `policy` says; once the policy gives up, the
/// last answer stands.
pub(crate) async fn retry<T, E, F, Fut>(policy: &'static Policy, again: impl Fn(&E) -> bool, mut f: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = policy.start();
    loop {
        match f().await {
            Err(e) if again(&e) && backoff.wait().await => {}
            r => return r,
        }
    }
}

/// A wait that is no retry: `d` from a setting (the sweep interval) or
/// from a named delay below.
pub(crate) async fn pause(d: Duration) {
    tokio::time::sleep(d).await
}

/// A test's pause of `n` milliseconds (on the paused test clock, the
/// step of the rule tests' scheduler; on a real one, a racer's head start),
/// so that the store's tests name their waits here too.
#[cfg(test)]
pub(crate) async fn test_pause_ms(n: u64) {
    pause(ms(n)).await
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// An event target that did not take an event (down, refusing, slow):
/// the event stays queued and is sent again, 100 ms growing to a pause of
/// 30 s, for as long as it takes (a full queue drops its oldest instead).
pub(crate) static EVENT_DELIVERY: Policy = Policy {
    name: "event target",
    first: ms(100),
    growth: 2,
    cap: Duration::from_secs(30),
    give_up: GiveUp::AfterPauses(u32::MAX),
};

/// Another client's open denies what ours needs (failure class 12): such
/// opens are brief (a reader's compound, a publisher's rename), so about
/// 2 s in all: 5, 10, 20 … 500 ms, ten pauses.
pub(crate) static SHARING: Policy =
    Policy { name: "sharing violation", first: ms(5), growth: 2, cap: ms(500), give_up: GiveUp::AfterPauses(10) };

/// A rename over a file another handle holds open, which Samba refuses
/// with STATUS_ACCESS_DENIED while a concurrent writer or reader has it
/// (failure class 13): about 1.5 s in all, 2 ms to 250 ms.
pub(crate) static RENAME_OVER_OPEN: Policy = Policy {
    name: "rename over an open file",
    first: ms(2),
    growth: 2,
    cap: ms(250),
    give_up: GiveUp::AfterPauses(12),
};

/// A file marked delete-on-close and closed that is still there, delete
/// pending, because another open still has it: another process's look of
/// one compound, which closes within milliseconds and keeps the file, or a
/// GET's stream, which knows the new name and deletes it itself when it
/// closes. Deleted by name again in the background: 50 ms growing to
/// 5 s, about 30 s in all; the temp sweep removes what outlasts that.
pub(crate) static LEFTOVER: Policy = Policy {
    name: "delete-pending leftover",
    first: ms(50),
    growth: 2,
    cap: ms(5000),
    give_up: GiveUp::AfterPauses(12),
};

/// Another If-Match writer's turn at a key (it holds the file without
/// sharing delete, failure class 25). Every racer takes its turn, and each
/// turn costs a round trip more where records are streams or sidecars (and
/// one more to check the pinned path): 20 racers of 3 MiB on a loaded
/// 2-core machine outlasted 5 s (one 503 in CI), so about 10 s in all:
/// 5 ms to 500 ms, 26 pauses.
pub(crate) static SWAP_TURN: Policy =
    Policy { name: "If-Match writer's turn", first: ms(5), growth: 2, cap: ms(500), give_up: GiveUp::AfterPauses(26) };

/// A key found at neither name while an If-Match swap may be between its
/// two renames (two steps of one compound on the server): looked at twice
/// more, after 5 and 20 ms.
pub(crate) static SWAP_GAP: Policy =
    Policy { name: "key between swap renames", first: ms(5), growth: 4, cap: ms(20), give_up: GiveUp::AfterPauses(2) };

/// Another publisher's creation lock on the same key. Racers take turns;
/// 20 creators of 3 MiB on a loaded 2-core machine outlasted 5 s (one 503
/// in CI), so the wait matches [`SWAP_TURN`]'s: 10 s, polling every 2 ms
/// at first and every 50 ms at most.
pub(crate) static CREATION_LOCK: Policy = Policy {
    name: "creation lock",
    first: ms(2),
    growth: 2,
    cap: ms(50),
    give_up: GiveUp::After(Duration::from_secs(10)),
};

/// Another writer's warning to the object cache's holders on the same
/// file (`coherence`): writers of one key take turns, each for a rename,
/// so the wait matches [`CREATION_LOCK`]'s. Past it the writer publishes
/// without warning rather than fail.
pub(crate) static WARNING: Policy = Policy {
    name: "another writer's warning",
    first: ms(2),
    growth: 2,
    cap: ms(50),
    give_up: GiveUp::After(Duration::from_secs(10)),
};

/// An object to be moved beside its new directory (`beside`) while a
/// writer holds it without sharing delete, or while a new version lands
/// at its name: 5 ms to 500 ms, twelve pauses (about 3 s), then 503.
pub(crate) static DISPLACE: Policy =
    Policy { name: "move beside a directory", first: ms(5), growth: 2, cap: ms(500), give_up: GiveUp::AfterPauses(12) };

/// The rename that gives an object kept beside its removed directory its
/// name back, while that directory lingers delete-pending (a reader still
/// holds it) or the object is held: 2 ms to 200 ms, ten pauses (about
/// 0.85 s, 1 s with the tries), then the object stays beside.
pub(crate) static RENAME_BACK: Policy =
    Policy { name: "move back from beside", first: ms(2), growth: 2, cap: ms(200), give_up: GiveUp::AfterPauses(10) };

/// A folder of a key's path removed while it was being made (a delete
/// pruned it, or it lingers delete-pending while a look holds it): the
/// walk starts over after 2, 4 … 32 ms, seven pauses (about 0.1 s).
pub(crate) static FOLDER_GOING: Policy =
    Policy { name: "folder being pruned", first: ms(2), growth: 2, cap: ms(32), give_up: GiveUp::AfterPauses(7) };

/// A folder a delete would prune whose creation lock another holds (a
/// marker's writer, another prune, a reader's look at the lock): 2, 4, 8
/// and 16 ms, then the folder stays (pruning is best effort).
pub(crate) static PRUNE_LOCK: Policy =
    Policy { name: "folder's lock for pruning", first: ms(2), growth: 2, cap: ms(16), give_up: GiveUp::AfterPauses(4) };

/// An upload's folder that a part being uploaded keeps (its files delete
/// pending while the writer holds them, or a part claimed after the
/// listing): listed and removed again after 20, 40 … 640 ms, six pauses
/// (about 1.3 s), then 503.
pub(crate) static UPLOAD_REMOVAL: Policy =
    Policy { name: "upload's folder in use", first: ms(20), growth: 2, cap: ms(640), give_up: GiveUp::AfterPauses(6) };

/// A plain key found at neither its own name nor beside while its creation
/// lock is held (a writer is moving it): 5, 10, 20, 40 and 80 ms.
pub(crate) static KEY_IN_MOTION: Policy =
    Policy { name: "key being moved", first: ms(5), growth: 2, cap: ms(80), give_up: GiveUp::AfterPauses(5) };

/// An open whose record names another file (a version replaced while the
/// open waited on the server, whose sidecar may be gone): 10, 20, 40, 80
/// and 160 ms, then the last open's answer stands.
pub(crate) static OTHER_VERSION: Policy = Policy {
    name: "record of another version",
    first: ms(10),
    growth: 2,
    cap: ms(160),
    give_up: GiveUp::AfterPauses(5),
};

/// An open that pins its path (shares no delete) and came back with a file
/// no longer at that path (clustered Samba): 10, 20 and 40 ms, then the
/// open counts as a sharing violation.
pub(crate) static STALE_PIN: Policy =
    Policy { name: "pinning open went stale", first: ms(10), growth: 2, cap: ms(40), give_up: GiveUp::AfterPauses(3) };

/// An upload's stride file that its creator writes in the compound of its
/// CREATE, met empty: 2, 4, 8, 16 and 32 ms (about 60 ms), then 503.
pub(crate) static STRIDE: Policy = Policy {
    name: "upload stride being written",
    first: ms(2),
    growth: 2,
    cap: ms(32),
    give_up: GiveUp::AfterPauses(5),
};

/// A sidecar record whose old version a delayed forget holds for one
/// round trip: 2 ms to 256 ms, eight pauses.
pub(crate) static SIDECAR_HELD: Policy =
    Policy { name: "sidecar held by a forget", first: ms(2), growth: 2, cap: ms(256), give_up: GiveUp::AfterPauses(8) };

/// A split-streaming segment whose connection failed: after the pool
/// starts replacing broken connections, 50, 200 and 800 ms. A server that
/// dropped every connection at once needs a moment to take new ones;
/// retrying at once would only meet the other dying connections.
pub(crate) static SEGMENT: Policy =
    Policy { name: "segment retry", first: ms(50), growth: 4, cap: ms(800), give_up: GiveUp::AfterPauses(3) };

/// How long a replaced or deleted file's sidecar outlives it: for readers
/// that opened the file just before and read its sidecar next (they would
/// otherwise see a file without a record, with a derived ETag).
pub(crate) const SIDECAR_FORGET_DELAY: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use super::*;

    fn pauses(p: &Policy) -> Vec<u64> {
        match p.give_up {
            GiveUp::AfterPauses(n) => (0..n).map(|i| p.pause(i).as_millis() as u64).collect(),
            GiveUp::After(_) => Vec::new(),
        }
    }

    /// The budgets the docs and CI's experience rely on.
    #[test]
    fn the_policies_wait_what_their_docs_say() {
        assert_eq!(pauses(&SWAP_GAP), [5, 20]);
        assert_eq!(pauses(&KEY_IN_MOTION), [5, 10, 20, 40, 80]);
        assert_eq!(pauses(&OTHER_VERSION), [10, 20, 40, 80, 160]);
        assert_eq!(pauses(&STALE_PIN), [10, 20, 40]);
        assert_eq!(pauses(&STRIDE), [2, 4, 8, 16, 32]);
        assert_eq!(pauses(&FOLDER_GOING), [2, 4, 8, 16, 32, 32, 32]);
        assert_eq!(pauses(&PRUNE_LOCK), [2, 4, 8, 16]);
        assert_eq!(pauses(&UPLOAD_REMOVAL), [20, 40, 80, 160, 320, 640]);
        assert_eq!(pauses(&SEGMENT), [50, 200, 800]);
        let delivery: Vec<u64> = (0..12).map(|i| EVENT_DELIVERY.pause(i).as_millis() as u64).collect();
        assert_eq!(delivery, [100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000]);
        assert_eq!(SHARING.budget(), ms(2135));
        assert_eq!(RENAME_OVER_OPEN.budget(), ms(1504));
        assert_eq!(SWAP_TURN.budget(), ms(10_135));
        assert_eq!(CREATION_LOCK.budget(), Duration::from_secs(10));
        assert_eq!(DISPLACE.budget(), ms(3135));
        assert_eq!(RENAME_BACK.budget(), ms(854));
        assert_eq!(pauses(&LEFTOVER), [50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000, 5000, 5000]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_backoff_sleeps_its_pauses_then_gives_up() {
        let t0 = Instant::now();
        let mut b = STALE_PIN.start();
        assert!(b.wait().await && b.wait().await && b.wait().await);
        assert!(!b.wait().await, "three pauses, then no more");
        assert_eq!(b.pauses(), 3);
        assert_eq!(t0.elapsed(), ms(70));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_policy_gives_up_on_time() {
        let t0 = Instant::now();
        let mut b = CREATION_LOCK.start();
        let mut n = 0;
        while b.wait().await {
            n += 1;
        }
        let took = t0.elapsed();
        assert!(took >= Duration::from_secs(10) && took < Duration::from_secs(10) + ms(50), "{took:?}");
        assert_eq!(n, 5 + (10_000 - 62) / 50 + 1, "polls every 50 ms once grown");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_stops_on_another_outcome_and_keeps_the_last_answer() {
        let mut calls = 0;
        let r: Result<(), u32> = retry(
            &SWAP_GAP,
            |e| *e == 1,
            || {
                calls += 1;
                async { Err(1) }
            },
        )
        .await;
        assert_eq!((r, calls), (Err(1), 3), "two pauses, three tries");
        let mut calls = 0;
        let r: Result<(), u32> = retry(
            &SWAP_GAP,
            |e| *e == 1,
            || {
                calls += 1;
                async { Err(2) }
            },
        )
        .await;
        assert_eq!((r, calls), (Err(2), 1), "an error it does not take ends it at once");
    }
}
