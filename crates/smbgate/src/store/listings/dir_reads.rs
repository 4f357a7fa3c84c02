//! Concurrent listings of one directory share its reads: one read of a
//! directory is in flight at a time, and the requests that waited for it
//! take the next read's answer together, so N clients listing the same
//! large directory at once cost at most two reads of it, not N (issue 23,
//! point 3); for a directory that fits one window, whatever prefix or
//! start each one lists from (issue 42).
//!
//! A request never takes an answer from a read that began before it
//! arrived: that read may predate a write the client already saw
//! completed. So a request that finds a read in flight waits for it, then
//! joins (or makes) the read after it. That read is for every need waiting
//! when it begins together ([`union`]): a directory that fits one window is
//! then read once for all of them. In one too large for a window, the
//! shared window may fall short of some need; that request then reads for
//! its own need, shared with the requests that need the same, and so does
//! every request for the directory until its last one has left.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::walk::Needed;

/// The last read of each directory being listed, with when it began and
/// what it was for; a directory's entry goes when its last waiter does.
pub struct SharedReads<T> {
    dirs: Mutex<HashMap<String, Arc<Slot<T>>>>,
}

/// One directory's needs waiting for its next read (each with its
/// caller's number), and its last read (locked while a read runs).
struct Slot<T> {
    waiting: Mutex<Vec<(u64, Needed)>>,
    callers: AtomicU64,
    /// A read for the needs together fell short of one of them.
    cut: AtomicBool,
    last: tokio::sync::Mutex<Option<LastRead<T>>>,
}

/// A finished read: when it began, what it was for, its answer.
struct LastRead<T> {
    began: Instant,
    read_for: Needed,
    value: T,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            waiting: Mutex::default(),
            callers: Default::default(),
            cut: Default::default(),
            last: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T> Default for SharedReads<T> {
    fn default() -> Self {
        Self { dirs: Mutex::new(HashMap::new()) }
    }
}

/// What one read must cover for all of `needs` (none: everything): the
/// smallest start, and what all the names' beginnings have in common.
pub fn union<'a>(needs: impl IntoIterator<Item = &'a Needed>) -> Needed {
    let mut needs = needs.into_iter();
    let Some(first) = needs.next() else { return Needed::default() };
    needs.fold(first.clone(), |mut all, n| {
        if n.from < all.from {
            all.from = n.from.clone();
        }
        let common = all.within.char_indices().zip(n.within.chars()).find(|((_, a), b)| a != b);
        let end = match common {
            Some(((at, _), _)) => at,
            None => all.within.len().min(n.within.len()),
        };
        all.within.truncate(end);
        all
    })
}

/// One caller's place in a slot: its need queued for the slot's next
/// read until that read takes it; on drop (also when the caller is
/// cancelled) its need leaves the queue, and the slot leaves the map with
/// its last caller.
struct Waiting<'a, T> {
    reads: &'a SharedReads<T>,
    key: String,
    slot: Arc<Slot<T>>,
    me: u64,
}

impl<'a, T> Waiting<'a, T> {
    fn new(reads: &'a SharedReads<T>, key: String, needed: &Needed) -> Self {
        let mut dirs = reads.dirs.lock().unwrap_or_else(|p| p.into_inner());
        let slot = dirs.entry(key.clone()).or_default().clone();
        let me = slot.callers.fetch_add(1, Ordering::Relaxed);
        slot.waiting.lock().unwrap_or_else(|p| p.into_inner()).push((me, needed.clone()));
        Waiting { reads, key, slot, me }
    }

    /// Takes this caller's need out of the queue (it is served otherwise).
    fn leave_queue(&self) {
        self.slot.waiting.lock().unwrap_or_else(|p| p.into_inner()).retain(|(n, _)| *n != self.me);
    }
}

impl<T> Drop for Waiting<'_, T> {
    fn drop(&mut self) {
        self.leave_queue();
        let mut dirs = self.reads.dirs.lock().unwrap_or_else(|p| p.into_inner());
        // Let go of the slot under the map's lock, so that of two callers
        // leaving at once the second sees the first gone.
        drop(std::mem::take(&mut self.slot));
        // Only the map holds it now: nobody is waiting.
        if dirs.get(&self.key).is_some_and(|s| Arc::strong_count(s) == 1) {
            dirs.remove(&self.key);
        }
    }
}

impl<T: Clone> SharedReads<T> {
    /// `dir`'s contents for `needed`, with the need they were read for: the
    /// answer of a read of it that began after this call did and `serves`
    /// it (`serves(answer, read for, needed)`), run by `read` (given what to
    /// read for) here unless another caller's read already qualifies. An
    /// error is this caller's alone (the next caller reads again); so is a
    /// read whose caller went away mid-way.
    pub async fn read<E, F, Fut>(
        &self,
        dir: &str,
        needed: &Needed,
        serves: impl Fn(&T, &Needed, &Needed) -> bool,
        read: F,
    ) -> Result<(Needed, T), E>
    where
        F: Fn(Needed) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let arrived = Instant::now();
        if let Some(answer) = self.read_in(dir.to_string(), arrived, needed, &serves, &read).await {
            return answer;
        }
        // The directory's shared window fell short of this need (it is
        // larger than a window): read for this need alone, shared with
        // the callers that need the same.
        let own = format!("{dir}\0{}\0{}", needed.from, needed.within);
        match self.read_in(own, arrived, needed, &serves, &read).await {
            Some(answer) => answer,
            None => read(needed.clone()).await.map(|v| (needed.clone(), v)),
        }
    }

    /// [`SharedReads::read`] through the slot `key`, for a caller that
    /// arrived at `arrived`; `None` if the read this caller took or made
    /// does not serve it (the slot then reads for each need alone until
    /// its last caller leaves).
    async fn read_in<E, F, Fut>(
        &self,
        key: String,
        arrived: Instant,
        needed: &Needed,
        serves: &impl Fn(&T, &Needed, &Needed) -> bool,
        read: &F,
    ) -> Option<Result<(Needed, T), E>>
    where
        F: Fn(Needed) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let waiting = Waiting::new(self, key, needed);
        let slot = &waiting.slot;
        if slot.cut.load(Ordering::Relaxed) {
            return None;
        }
        let mut last = slot.last.lock().await;
        if let Some(l) = last.as_ref().filter(|l| l.began >= arrived) {
            waiting.leave_queue();
            return serves(&l.value, &l.read_for, needed).then(|| Ok((l.read_for.clone(), l.value.clone())));
        }
        // This read is for every need waiting now (this one's too, even if
        // an earlier read took it and fell short).
        let read_for = {
            let mut queue = slot.waiting.lock().unwrap_or_else(|p| p.into_inner());
            let all = union(queue.iter().map(|(_, n)| n).chain([needed]));
            queue.clear();
            all
        };
        let began = Instant::now();
        let answer = read(read_for.clone()).await;
        *last = answer.as_ref().ok().map(|v| LastRead { began, read_for: read_for.clone(), value: v.clone() });
        match answer {
            Ok(v) if serves(&v, &read_for, needed) => Some(Ok((read_for, v))),
            Ok(_) => {
                slot.cut.store(true, Ordering::Relaxed);
                None
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Directories with a read in flight or waited for (for tests).
    #[cfg(test)]
    fn open(&self) -> usize {
        self.dirs.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A read's answer in these tests: its number, and whether it kept
    /// everything it was for (false: cut short, serving only its own need).
    type Answer = (usize, bool);

    fn need(within: &str) -> Needed {
        Needed { from: String::new(), within: within.into() }
    }

    fn serves(a: &Answer, read_for: &Needed, needed: &Needed) -> bool {
        match a.1 {
            true => needed.within.starts_with(&read_for.within) && read_for.from <= needed.from,
            false => read_for == needed,
        }
    }

    async fn slow_read(reads: &AtomicUsize, cut: impl Fn(&Needed) -> bool, read_for: Needed) -> Result<Answer, String> {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        crate::store::backoff::test_pause_ms(50).await;
        Ok((n, !cut(&read_for)))
    }

    async fn list(
        shared: &SharedReads<Answer>,
        reads: &AtomicUsize,
        dir: &str,
        within: &str,
    ) -> Result<(Needed, Answer), String> {
        shared.read(dir, &need(within), serves, |rf| slow_read(reads, |_| false, rf)).await
    }

    #[tokio::test]
    async fn twenty_concurrent_listings_with_other_prefixes_cost_at_most_two_reads() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let (shared, reads) = (shared.clone(), reads.clone());
                tokio::spawn(async move { list(&shared, &reads, "big", &format!("p{i}/")).await })
            })
            .collect();
        for (i, t) in tasks.into_iter().enumerate() {
            let (read_for, _) = t.await.unwrap().unwrap();
            assert!(format!("p{i}/").starts_with(&read_for.within), "{read_for:?} read for p{i}/");
        }
        assert!(reads.load(Ordering::SeqCst) <= 2, "{} reads", reads.load(Ordering::SeqCst));
        assert_eq!(shared.open(), 0, "the directory's entry goes with its last waiter");
    }

    #[tokio::test]
    async fn a_listing_that_arrives_mid_read_waits_for_a_newer_read() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let first = {
            let (shared, reads) = (shared.clone(), reads.clone());
            tokio::spawn(async move { list(&shared, &reads, "d", "").await })
        };
        crate::store::backoff::test_pause_ms(10).await;
        // The first read may predate a write this caller saw complete.
        assert_eq!(list(&shared, &reads, "d", "").await.map(|a| a.1 .0), Ok(2));
        assert_eq!(first.await.unwrap().map(|a| a.1 .0), Ok(1));
    }

    #[tokio::test]
    async fn a_listing_after_a_read_finished_reads_again() {
        let shared = SharedReads::default();
        let reads = AtomicUsize::new(0);
        assert_eq!(list(&shared, &reads, "d", "").await.map(|a| a.1 .0), Ok(1));
        assert_eq!(list(&shared, &reads, "d", "").await.map(|a| a.1 .0), Ok(2));
        // Another directory is read on its own.
        assert_eq!(list(&shared, &reads, "e", "").await.map(|a| a.1 .0), Ok(3));
    }

    /// A listing of `within` in "d" whose reads for more than one prefix
    /// are cut short (a directory larger than a window): such a read serves
    /// only a need it was read for exactly.
    fn spawn_cut(
        shared: &Arc<SharedReads<Answer>>,
        reads: &Arc<AtomicUsize>,
        within: &'static str,
    ) -> tokio::task::JoinHandle<Result<(Needed, Answer), String>> {
        let (shared, reads) = (shared.clone(), reads.clone());
        let cut = |rf: &Needed| rf.within.is_empty();
        tokio::spawn(async move { shared.read("d", &need(within), serves, |rf| slow_read(&reads, cut, rf)).await })
    }

    #[tokio::test]
    async fn a_read_cut_short_of_a_waiters_need_leaves_it_to_read_alone() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let first = spawn_cut(&shared, &reads, "a");
        crate::store::backoff::test_pause_ms(10).await;
        let waiters: Vec<_> = ["b", "c"].into_iter().map(|w| spawn_cut(&shared, &reads, w)).collect();
        assert_eq!(first.await.unwrap().map(|a| a.0), Ok(need("a")));
        for (w, t) in ["b", "c"].into_iter().zip(waiters) {
            let (read_for, (_, whole)) = t.await.unwrap().unwrap();
            assert_eq!((read_for, whole), (need(w), true), "{w} read alone after the shared read fell short");
        }
        assert_eq!(reads.load(Ordering::SeqCst), 4, "a, then b and c together, then b and c alone");
    }

    #[tokio::test]
    async fn needs_a_shared_read_fell_short_of_share_reads_of_their_own() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let first = spawn_cut(&shared, &reads, "a");
        crate::store::backoff::test_pause_ms(10).await;
        let waiters: Vec<_> =
            ["b", "b", "b", "b", "b", "c"].into_iter().map(|w| spawn_cut(&shared, &reads, w)).collect();
        first.await.unwrap().unwrap();
        for t in waiters {
            t.await.unwrap().unwrap();
        }
        assert_eq!(reads.load(Ordering::SeqCst), 4, "a, then all together, then the b's once and c");
        assert_eq!(shared.open(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_listing_leaves_nothing_behind() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let spawn = |within: &'static str| {
            let (shared, reads) = (shared.clone(), reads.clone());
            tokio::spawn(async move { list(&shared, &reads, "d", within).await })
        };
        let first = spawn("a");
        crate::store::backoff::test_pause_ms(10).await;
        // Both wait behind the first read; one goes away.
        let gone = spawn("zzz");
        let next = spawn("a/");
        crate::store::backoff::test_pause_ms(10).await;
        gone.abort();
        assert!(gone.await.unwrap_err().is_cancelled());
        first.await.unwrap().unwrap();
        // The next read is for the need still waiting only: the cancelled
        // one's left the queue.
        let (read_for, _) = next.await.unwrap().unwrap();
        assert_eq!(read_for, need("a/"));
        assert_eq!(shared.open(), 0, "the slot went with its last caller");
    }

    #[tokio::test]
    async fn a_failed_read_is_not_shared() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let failing = {
            let (shared, reads) = (shared.clone(), reads.clone());
            tokio::spawn(async move {
                shared
                    .read("d", &need(""), serves, |_| async {
                        reads.fetch_add(1, Ordering::SeqCst);
                        crate::store::backoff::test_pause_ms(50).await;
                        Err::<Answer, String>("gone".into())
                    })
                    .await
            })
        };
        crate::store::backoff::test_pause_ms(10).await;
        let waiter = list(&shared, &reads, "d", "").await;
        assert_eq!(failing.await.unwrap(), Err("gone".into()));
        assert_eq!(waiter.map(|a| a.1 .0), Ok(2), "the waiter read for itself");
    }

    #[test]
    fn a_union_starts_at_the_smallest_start_within_what_all_share() {
        let n = |from: &str, within: &str| Needed { from: from.into(), within: within.into() };
        assert_eq!(union([&n("m", "photos/"), &n("c", "photo-")]), n("c", "photo"));
        assert_eq!(union([&n("", "été/"), &n("x", "étage")]), n("", "ét"));
        assert_eq!(union([&n("b", "x")]), n("b", "x"));
        assert_eq!(union([&n("b", "x"), &n("a", "y")]), n("a", ""));
        assert_eq!(union(std::iter::empty()), Needed::default());
    }
}
