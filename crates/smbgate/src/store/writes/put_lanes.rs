//! How many connections (lanes) one large PUT or UploadPart body is
//! written over, fixed or chosen from what pays (issue 24, part 2).
//!
//! More lanes pay only when the lanes set the body's pace and each one
//! brings bandwidth of its own: a NAS that caps each connection, or serves
//! each from one slow process. Where the gateway's or the server's CPU is
//! the limit (two cores, say), more lanes split the same rate and only add
//! handles.
//!
//! An adaptive body starts at half of the count the last body kept
//! ([`LastKept`]; one for the first) and, while it waited on its lanes for
//! at least [`WAITED`] of the time, doubles them: it keeps the doubled
//! count if the body's rate rose by at least [`GAIN`], and otherwise goes
//! back and tries again only after [`FIRST_HOLD`] segments, twice as long
//! after each try that did not pay. Doubling reaches a NAS's best count
//! within a few segments of a body, where adding one lane at a time would
//! spend most of a 256 MiB body getting there; starting at half of the
//! last count tries that count again early, and brings the start down by
//! half each body on a server where it stopped paying. A rate is measured
//! over [`MEASURE`] segments or a round of the lanes, whichever is more,
//! after the segments that new lanes accept at memory speed while their
//! bytes in flight fill up. Sans-I/O: the caller reports each segment's size, its
//! time and how long the body spent handing it to its lane (copying, signing,
//! waiting for room in the lane's bytes in flight).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::store::fan_out::FanOut;

/// Most lanes an adaptive body uses; fewer when the write-behind budget
/// fills fewer segments or the pool has no other connection.
pub const ADAPTIVE_MAX: usize = 8;

/// Share of a measurement's time the body must have spent on its lanes
/// (handing segments over) for doubling them to be worth a try.
pub const WAITED: f64 = 0.5;

/// How much more of the body's rate the doubled lanes must bring to be
/// kept (a fifth: well above the noise of one measurement's timing).
pub const GAIN: f64 = 0.2;

/// Segments one rate is measured over, at least (and at least one per
/// lane in use).
pub const MEASURE: u32 = 2;

/// Segments between a try that did not pay and the next one, at first.
pub const FIRST_HOLD: u32 = 16;

/// The most lanes a body may use under `--put-parallel`: the fixed
/// count, or [`ADAPTIVE_MAX`] for `auto`.
pub fn max_lanes(put_parallel: FanOut) -> usize {
    match put_parallel {
        FanOut::Fixed(n) => n.max(1),
        FanOut::Auto => ADAPTIVE_MAX,
    }
}

/// The lanes the last adaptive body kept (1 before any), shared by the
/// store's bodies: a hint, so concurrent bodies may overwrite each other.
#[derive(Debug, Clone, Default)]
pub struct LastKept(Arc<AtomicUsize>);

impl LastKept {
    /// Lanes a new adaptive body starts on: half of the last kept, at least 1.
    pub fn start(&self) -> usize {
        (self.0.load(Ordering::Relaxed) / 2).max(1)
    }

    /// A body ended having kept `lanes` ([`LaneCount::kept`]).
    pub fn set(&self, lanes: usize) {
        self.0.store(lanes, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Segments left before measuring (a new lane filling its bytes in flight).
    Settling(u32),
    /// Measuring: bytes, seconds and seconds waited so far, segments seen.
    Measuring { bytes: u64, secs: f64, waited: f64, seen: u32 },
}

/// The lanes one body writes over now; see the module docs.
#[derive(Debug, Clone)]
pub struct LaneCount {
    n: usize,
    max: usize,
    adaptive: bool,
    /// Segments one lane holds in flight.
    in_flight: u32,
    phase: Phase,
    /// While a try runs: the rate (bytes per second) and the lanes before it.
    before: Option<(f64, usize)>,
    /// Segments before the next try may start.
    hold: u32,
    /// The hold after the next try that does not pay.
    next_hold: u32,
    /// A rate was measured.
    measured: bool,
}

const MEASURING: Phase = Phase::Measuring { bytes: 0, secs: 0.0, waited: 0.0, seen: 0 };

impl LaneCount {
    /// Always `n` lanes (at least 1).
    pub fn fixed(n: usize) -> LaneCount {
        let n = n.max(1);
        LaneCount {
            n,
            max: n,
            adaptive: false,
            in_flight: 0,
            phase: MEASURING,
            before: None,
            hold: 0,
            next_hold: FIRST_HOLD,
            measured: false,
        }
    }

    /// Starts on `start` lanes and adapts between 1 and `max`; `in_flight`:
    /// the segments one lane's bytes in flight hold (its bytes in flight
    /// over the segment size, rounded up), which a new lane accepts at
    /// memory speed before its rate shows. The caller gives segments to
    /// the lanes in use in turn, to the ones just added first.
    pub fn adaptive(max: usize, start: usize, in_flight: u32) -> LaneCount {
        let max = max.max(1);
        let n = start.clamp(1, max);
        let first = in_flight * n as u32;
        let phase = if first > 0 { Phase::Settling(first) } else { MEASURING };
        LaneCount { n, max, adaptive: true, in_flight, phase, ..LaneCount::fixed(1) }
    }

    /// The lanes this body has shown to be enough, once it has measured a
    /// rate: the current count, or the one before a try still being
    /// measured. Always `None` for a fixed count, which measures nothing.
    pub fn kept(&self) -> Option<usize> {
        self.measured.then(|| self.before.map_or(self.n, |(_, had)| had))
    }

    /// Lanes to write over now.
    pub fn current(&self) -> usize {
        self.n
    }

    /// No more than `n` lanes can be had (no other connection to open one
    /// on): the count stays at most `n` from now on.
    pub fn cap(&mut self, n: usize) {
        self.max = self.max.min(n.max(1));
        // A try still running goes on with fewer lanes, and is judged.
        self.n = self.n.min(self.max);
    }

    /// The body's segment of `bytes` was accepted in `took`, of which it
    /// spent `waited` handing it to its lane.
    pub fn segment_done(&mut self, bytes: u64, took: Duration, waited: Duration) {
        if !self.adaptive || bytes == 0 {
            return;
        }
        self.hold = self.hold.saturating_sub(1);
        let (sum_bytes, secs, waited_secs) = match &mut self.phase {
            Phase::Settling(left) => {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    self.phase = MEASURING;
                }
                return;
            }
            Phase::Measuring { bytes: b, secs, waited: w, seen } => {
                *b += bytes;
                *secs += took.as_secs_f64();
                *w += waited.as_secs_f64();
                *seen += 1;
                // A whole round of the lanes at least: a lane's segment takes
                // as long as its bytes in flight take to drain, which depends on
                // where in the round the measurement starts.
                if *seen < MEASURE.max(self.n as u32) {
                    return;
                }
                (*b, *secs, *w)
            }
        };
        self.phase = MEASURING;
        if secs <= 0.0 {
            return;
        }
        self.measured = true;
        let rate = sum_bytes as f64 / secs;
        if let Some((before, had)) = self.before.take() {
            if rate < before * (1.0 + GAIN) {
                // The added lanes did not pay: go back, and wait to try again.
                self.n = had;
                self.hold = self.next_hold;
                self.next_hold = self.next_hold.saturating_mul(2);
                return;
            }
        }
        if waited_secs >= WAITED * secs && self.n < self.max && self.hold == 0 {
            self.before = Some((rate, self.n));
            let grown = (self.n * 2).min(self.max);
            // The new lanes take one segment each, then one a round of all
            // lanes, until their bytes in flight are full.
            let settle = (grown - self.n) as u32 + self.in_flight.saturating_sub(1) * grown as u32;
            self.phase = if settle > 0 { Phase::Settling(settle) } else { MEASURING };
            self.n = grown;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// One 8 MiB segment at `mib_s` MiB/s in all, the body waiting on its
    /// lanes for `waited` of the time.
    fn seg(c: &mut LaneCount, mib_s: f64, waited: f64) {
        let took = 8.0 / mib_s;
        c.segment_done(8 * MIB, Duration::from_secs_f64(took), Duration::from_secs_f64(took * waited));
    }

    /// `segments` segments where each of up to `paying` lanes brings its own
    /// 100 MiB/s (more add nothing) and the body waits on its lanes; the
    /// count after each.
    fn capped(c: &mut LaneCount, segments: usize, paying: usize) -> Vec<usize> {
        (0..segments)
            .map(|_| {
                let total = 100.0 * c.current().min(paying) as f64;
                seg(c, total, 0.9);
                c.current()
            })
            .collect()
    }

    #[test]
    fn capped_connections_grow_the_lanes_to_the_maximum() {
        // Each connection carries 100 MiB/s however many run.
        let seen = capped(&mut LaneCount::adaptive(8, 1, 1), 20, 8);
        // One segment settling and two measured on one lane; one and two on
        // two lanes; two and four on four; then eight.
        assert_eq!(seen[..12], [1, 1, 2, 2, 2, 4, 4, 4, 4, 4, 4, 8], "{seen:?}");
        assert!(seen[12..].iter().all(|&n| n == 8), "{seen:?}");
    }

    #[test]
    fn lanes_holding_two_segments_in_flight_settle_for_a_round_more() {
        let seen = capped(&mut LaneCount::adaptive(8, 1, 2), 16, 8);
        // Two segments fill the first lane; two measured; then the new
        // lane's first segment and a round of both; two measured; ...
        assert_eq!(seen, [1, 1, 1, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4]);
    }

    #[test]
    fn a_shared_bottleneck_stays_on_one_lane_nearly_always() {
        // 900 MiB/s in all however many lanes run (a few percent better on two).
        let mut c = LaneCount::adaptive(8, 1, 1);
        let mut on = [0usize; 9];
        for _ in 0..400 {
            let total = if c.current() == 1 { 900.0 } else { 950.0 };
            seg(&mut c, total, 0.9);
            on[c.current()] += 1;
        }
        assert!(on[3..].iter().all(|&n| n == 0), "{on:?}");
        assert!(on[1] > 380, "{on:?}");
    }

    #[test]
    fn a_client_slower_than_the_lanes_keeps_one_lane() {
        let mut c = LaneCount::adaptive(8, 1, 3);
        for _ in 0..100 {
            seg(&mut c, 50.0, 0.1);
        }
        assert_eq!(c.current(), 1);
    }

    #[test]
    fn lanes_that_stop_paying_are_given_back() {
        // Up to four lanes add their own 100 MiB/s; more add nothing.
        let mut c = LaneCount::adaptive(8, 1, 1);
        capped(&mut c, 60, 4);
        assert_eq!(c.current(), 4);
    }

    #[test]
    fn no_lane_beyond_the_cap() {
        let mut c = LaneCount::adaptive(8, 1, 0);
        capped(&mut c, 6, 8);
        assert!(c.current() >= 4);
        c.cap(3);
        assert_eq!(c.current(), 3);
        capped(&mut c, 40, 8);
        assert_eq!(c.current(), 3);
    }

    #[test]
    fn a_body_starts_at_half_of_what_the_last_kept_and_tries_it_again() {
        let last = LastKept::default();
        assert_eq!(last.start(), 1);
        last.set(8);
        let mut c = LaneCount::adaptive(8, last.start(), 1);
        assert_eq!(c.current(), 4);
        let seen = capped(&mut c, 8, 8);
        // One segment into each of the four lanes, a round of four
        // measured, then eight.
        assert_eq!(seen, [4, 4, 4, 4, 4, 4, 4, 8]);
        assert_eq!(c.kept(), Some(4), "eight not yet measured");
        // The four new lanes' settling segments, then a round of eight.
        for _ in 0..12 {
            seg(&mut c, 800.0, 0.9);
        }
        assert_eq!(c.kept(), Some(8));

        // Where more lanes stopped paying, each body starts lower.
        let mut starts = Vec::new();
        for _ in 0..4 {
            let mut c = LaneCount::adaptive(8, last.start(), 1);
            starts.push(c.current());
            for _ in 0..40 {
                seg(&mut c, 300.0, 0.9);
            }
            last.set(c.kept().unwrap());
        }
        assert_eq!(starts, [4, 2, 1, 1]);

        // A body whose client sets the pace tries nothing, and the next
        // starts lower still; one too short to measure changes nothing.
        last.set(8);
        let mut c = LaneCount::adaptive(8, last.start(), 1);
        let mut short = c.clone();
        for _ in 0..10 {
            seg(&mut c, 50.0, 0.1);
        }
        assert_eq!((c.current(), c.kept()), (4, Some(4)));
        seg(&mut short, 50.0, 0.1);
        assert_eq!(short.kept(), None);
    }

    #[test]
    fn a_fixed_count_stays() {
        assert_eq!((max_lanes(FanOut::Fixed(3)), max_lanes(FanOut::Auto)), (3, ADAPTIVE_MAX));
        let mut c = LaneCount::fixed(4);
        for _ in 0..10 {
            seg(&mut c, 10.0, 1.0);
        }
        assert_eq!(c.current(), 4);
        assert_eq!(LaneCount::fixed(0).current(), 1);
    }
}
