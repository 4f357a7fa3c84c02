//! Concurrent listings of one directory share its reads: one read of a
//! directory is in flight at a time, and the requests that waited for it
//! take the next read's answer together, so N clients listing the same
//! large directory at once cost at most two reads of it, not N (issue 23,
//! point 3).
//!
//! A request never takes an answer from a read that began before it
//! arrived: that read may predate a write the client already saw
//! completed. So a request that finds a read in flight waits for it, then
//! joins (or makes) the read after it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The last read of each directory being listed, with when it began; a
/// directory's entry goes when its last waiter does.
pub struct SharedReads<T> {
    dirs: Mutex<HashMap<String, Arc<LastRead<T>>>>,
}

/// One directory's last read, with when it began; locked while a read runs.
type LastRead<T> = tokio::sync::Mutex<Option<(Instant, T)>>;

impl<T> Default for SharedReads<T> {
    fn default() -> Self {
        Self { dirs: Mutex::new(HashMap::new()) }
    }
}

impl<T: Clone> SharedReads<T> {
    /// `dir`'s contents: the answer of a read of it that began after this
    /// call did, run by `read` here unless another caller's read already
    /// qualifies. An error is this caller's alone (the next caller reads
    /// again); so is a read whose caller went away mid-way.
    pub async fn read<E, F, Fut>(&self, dir: &str, read: F) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let arrived = Instant::now();
        let slot = self.dirs.lock().unwrap().entry(dir.to_string()).or_default().clone();
        let answer = {
            let mut last = slot.lock().await;
            match &*last {
                Some((began, value)) if *began >= arrived => Ok(value.clone()),
                _ => {
                    let began = Instant::now();
                    let answer = read().await;
                    *last = answer.as_ref().ok().map(|v| (began, v.clone()));
                    answer
                }
            }
        };
        let mut dirs = self.dirs.lock().unwrap();
        // Only the map and this caller hold it: nobody is waiting.
        if Arc::strong_count(&slot) == 2 {
            dirs.remove(dir);
        }
        answer
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

    async fn slow_read(reads: &AtomicUsize) -> Result<usize, String> {
        let n = reads.fetch_add(1, Ordering::SeqCst) + 1;
        crate::store::backoff::test_pause_ms(50).await;
        Ok(n)
    }

    #[tokio::test]
    async fn twenty_concurrent_listings_cost_at_most_two_reads() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (shared, reads) = (shared.clone(), reads.clone());
                tokio::spawn(async move { shared.read("big", || slow_read(&reads)).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap().unwrap();
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
            tokio::spawn(async move { shared.read("d", || slow_read(&reads)).await })
        };
        crate::store::backoff::test_pause_ms(10).await;
        // The first read may predate a write this caller saw complete.
        assert_eq!(shared.read("d", || slow_read(&reads)).await, Ok(2));
        assert_eq!(first.await.unwrap(), Ok(1));
    }

    #[tokio::test]
    async fn a_listing_after_a_read_finished_reads_again() {
        let shared = SharedReads::default();
        let reads = AtomicUsize::new(0);
        assert_eq!(shared.read("d", || slow_read(&reads)).await, Ok(1));
        assert_eq!(shared.read("d", || slow_read(&reads)).await, Ok(2));
        // Another directory is read on its own.
        assert_eq!(shared.read("e", || slow_read(&reads)).await, Ok(3));
    }

    #[tokio::test]
    async fn a_failed_read_is_not_shared() {
        let shared = Arc::new(SharedReads::default());
        let reads = Arc::new(AtomicUsize::new(0));
        let failing = {
            let (shared, reads) = (shared.clone(), reads.clone());
            tokio::spawn(async move {
                shared
                    .read("d", || async {
                        reads.fetch_add(1, Ordering::SeqCst);
                        crate::store::backoff::test_pause_ms(50).await;
                        Err::<usize, String>("gone".into())
                    })
                    .await
            })
        };
        crate::store::backoff::test_pause_ms(10).await;
        let waiter = shared.read("d", || slow_read(&reads)).await;
        assert_eq!(failing.await.unwrap(), Err("gone".into()));
        assert_eq!(waiter, Ok(2), "the waiter read for itself");
    }
}
