//! How fast a request body must arrive: the next chunk within the
//! body-read timeout, and, once that long has passed since the body
//! started, at an average of at least the minimum rate. A client that
//! sends a byte just before each timeout would otherwise hold its SMB
//! handle and temp file for as long as it likes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// One request body's progress: when it started and how many bytes came.
/// Clones share the count.
#[derive(Debug, Clone)]
pub struct BodyPace {
    started: Instant,
    received: Arc<AtomicU64>,
}

impl Default for BodyPace {
    /// A body that starts now.
    fn default() -> Self {
        BodyPace { started: Instant::now(), received: Arc::default() }
    }
}

impl BodyPace {
    /// Counts `n` more bytes received.
    pub fn add(&self, n: usize) {
        self.received.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// How long to wait for the next chunk from `now`: at most
    /// `per_chunk`, and no later than the moment the average since the
    /// start, after a grace of `per_chunk`, would fall below `min_rate`
    /// bytes per second (0: no minimum). Zero when that moment is past.
    pub fn next_wait(&self, now: Instant, per_chunk: Duration, min_rate: u64) -> Duration {
        if min_rate == 0 {
            return per_chunk;
        }
        let received = self.received.load(Ordering::Relaxed);
        // The time `received` bytes buy at `min_rate`.
        let nanos = u128::from(received) * 1_000_000_000 / u128::from(min_rate);
        let earned = Duration::new((nanos / 1_000_000_000) as u64, (nanos % 1_000_000_000) as u32);
        let by_rate = self.started + per_chunk + earned;
        per_chunk.min(by_rate.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_once_its_average_falls_below_the_minimum() {
        let (per_chunk, rate) = (Duration::new(60, 0), 1024);
        let pace = BodyPace::default();
        let t0 = Instant::now();
        assert_eq!(pace.next_wait(t0, per_chunk, rate), per_chunk);
        // One byte just before each timeout: the second wait ends when the
        // grace does.
        pace.add(1);
        let t = t0 + Duration::new(59, 0);
        assert!(pace.next_wait(t, per_chunk, rate) <= Duration::new(1, 1_000_000));
        assert_eq!(pace.next_wait(t0 + Duration::new(61, 0), per_chunk, rate), Duration::ZERO);
        // A body at 1 MiB/s is never near the bound.
        let fast = BodyPace::default();
        fast.add(120 << 20);
        assert_eq!(fast.next_wait(t0 + Duration::new(120, 0), per_chunk, rate), per_chunk);
        // No minimum: only the per-chunk timeout.
        assert_eq!(pace.next_wait(t0 + Duration::new(3600, 0), per_chunk, 0), per_chunk);
    }
}
