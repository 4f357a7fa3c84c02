//! How many segments one GET fetches at once (W), fixed or adapted to
//! what pays (issue 24, part 4).
//!
//! More segments in flight help only while each added one brings its own
//! bandwidth: a NAS that caps each connection, or serves each from one
//! slow process, gives every segment about the same rate however many run,
//! and then W should grow. A server (or a gateway) that is already the
//! limit splits one rate among them, each segment slows, and W should
//! shrink back. So the adaptive depth grows by one each time the body had
//! to wait for a fetched segment that held the best recent rate, and
//! shrinks by one when two segments in a row came in at under [`HOLD`] of
//! that rate (one slow segment is noise: a busy core, a page-cache miss;
//! the best recent rate fades by [`FADE`] a segment, so that one fast
//! outlier does not hold the depth down either). Sans-I/O: the caller
//! reports each segment's size and time.

use std::time::Duration;

use crate::store::fan_out::FanOut;

/// A segment slower than this share of the best recent rate says that the
/// segments in flight share one bottleneck.
pub const HOLD: f64 = 0.8;

/// What the best recent rate keeps of itself per segment reported.
pub const FADE: f64 = 0.95;

/// The depth an adaptive GET starts with: the head segment and one ahead.
const START: usize = 2;

/// Most segments an adaptive GET keeps in flight; fewer when the pool
/// has no idle connection or the read-ahead budget is short.
pub const ADAPTIVE_MAX: usize = 16;

/// The segments one GET keeps in flight (the head one included).
#[derive(Debug, Clone)]
pub struct PrefetchDepth {
    w: usize,
    min: usize,
    max: usize,
    /// The best recent per-segment rate, in bytes per second.
    best: f64,
    /// Segments in a row under [`HOLD`] of `best`.
    slow: u8,
}

impl PrefetchDepth {
    /// The depth a new GET starts with under `--prefetch`: fixed, or
    /// adapted between 2 and [`ADAPTIVE_MAX`].
    pub fn for_setting(prefetch: FanOut) -> PrefetchDepth {
        match prefetch {
            FanOut::Fixed(w) => PrefetchDepth::fixed(w),
            FanOut::Auto => PrefetchDepth::adaptive(ADAPTIVE_MAX),
        }
    }

    /// Always `w` (at least 1).
    pub fn fixed(w: usize) -> PrefetchDepth {
        let w = w.max(1);
        PrefetchDepth { w, min: w, max: w, best: 0.0, slow: 0 }
    }

    /// Starts at 2 and adapts between 2 and `max` (at least 2).
    pub fn adaptive(max: usize) -> PrefetchDepth {
        let max = max.max(START);
        PrefetchDepth { w: START, min: START, max, best: 0.0, slow: 0 }
    }

    /// Segments to keep in flight now.
    pub fn current(&self) -> usize {
        self.w
    }

    /// A fetched segment of `bytes` took `took` from its start to its last
    /// byte; `waited`: the body had used up everything before it and
    /// waited for it.
    pub fn segment_done(&mut self, bytes: u64, took: Duration, waited: bool) {
        let secs = took.as_secs_f64();
        if secs <= 0.0 || bytes == 0 {
            return;
        }
        let rate = bytes as f64 / secs;
        self.best = rate.max(self.best * FADE);
        if rate < HOLD * self.best {
            self.slow += 1;
            if self.slow >= 2 {
                self.w = (self.w - 1).max(self.min);
                self.slow = 0;
            }
        } else {
            self.slow = 0;
            if waited {
                self.w = (self.w + 1).min(self.max);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A segment of 8 MiB at `mib_s` MiB/s.
    fn seg(w: &mut PrefetchDepth, mib_s: f64, waited: bool) {
        w.segment_done(8 * MIB, Duration::from_secs_f64(8.0 / mib_s), waited);
    }

    #[test]
    fn a_capped_connection_grows_the_depth_to_its_maximum() {
        // Each connection carries 100 MiB/s however many run.
        let mut w = PrefetchDepth::adaptive(8);
        for _ in 0..20 {
            seg(&mut w, 100.0, true);
        }
        assert_eq!(w.current(), 8);
    }

    #[test]
    fn a_shared_bottleneck_keeps_the_depth_small() {
        // 900 MiB/s in all, split among the segments in flight.
        let mut w = PrefetchDepth::adaptive(8);
        let mut seen = Vec::new();
        for _ in 0..40 {
            let per = 900.0 / w.current() as f64;
            seg(&mut w, per, true);
            seen.push(w.current());
        }
        assert!(seen[10..].iter().all(|&n| n <= 3), "{seen:?}");
    }

    #[test]
    fn one_slow_segment_is_noise() {
        let mut w = PrefetchDepth::adaptive(8);
        for _ in 0..6 {
            seg(&mut w, 100.0, true);
        }
        assert_eq!(w.current(), 8);
        seg(&mut w, 40.0, true);
        assert_eq!(w.current(), 8, "one slow segment");
        seg(&mut w, 100.0, true);
        seg(&mut w, 40.0, true);
        seg(&mut w, 40.0, true);
        assert_eq!(w.current(), 7, "two in a row");
    }

    #[test]
    fn a_body_that_never_waits_does_not_grow_it() {
        let mut w = PrefetchDepth::adaptive(8);
        for _ in 0..20 {
            seg(&mut w, 100.0, false);
        }
        assert_eq!(w.current(), 2);
    }

    #[test]
    fn a_fixed_depth_stays() {
        let mut w = PrefetchDepth::fixed(4);
        seg(&mut w, 100.0, true);
        seg(&mut w, 10.0, true);
        assert_eq!(w.current(), 4);
        assert_eq!(PrefetchDepth::fixed(0).current(), 1);
    }
}
