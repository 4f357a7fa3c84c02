//! The pool's in-flight byte budget per stream, backed off when the server
//! drops connections under load (failure class 7): some NAS advertise large
//! I/O sizes and then reset connections that keep many megabytes
//! outstanding. Multiplicative decrease on such a loss, additive increase
//! over time, and no increase while a lost connection is still being
//! replaced. Sans-I/O: the caller passes the time.

use std::time::{Duration, Instant};

/// Losses closer together than this count as one (one burst can reset
/// every pooled connection at once).
const DECREASE_HOLDOFF: Duration = Duration::from_secs(1);

/// AIMD state for one server.
#[derive(Debug, Clone)]
pub struct Aimd {
    max: usize,
    min: usize,
    /// Bytes regained per second of loss-free running.
    step: usize,
    /// The budget at `since`; it grows from there.
    base: usize,
    since: Instant,
    last_decrease: Option<Instant>,
}

impl Aimd {
    /// A budget starting at `max` bytes, never below `min` (both clamped
    /// to at least 64 KiB, one credit's worth), regaining `max / 16` bytes
    /// per second after a decrease (16 s from `min` back to `max`).
    pub fn new(max: usize, min: usize, now: Instant) -> Aimd {
        let max = max.max(65536);
        let min = min.clamp(65536, max);
        Aimd { max, min, step: (max / 16).max(65536), base: max, since: now, last_decrease: None }
    }

    /// The budget in bytes at `now`: between `min` and `max`.
    pub fn window(&self, now: Instant) -> usize {
        let secs = now.saturating_duration_since(self.since).as_secs_f64();
        let grown = self.base as f64 + secs * self.step as f64;
        (grown as usize).min(self.max)
    }

    /// A connection was lost with requests outstanding: halves the budget
    /// (to no less than `min`), unless it was already halved less than a
    /// second ago. Returns the new budget if it changed.
    pub fn on_loss(&mut self, now: Instant) -> Option<usize> {
        if self.last_decrease.is_some_and(|t| now.saturating_duration_since(t) < DECREASE_HOLDOFF) {
            return None;
        }
        let before = self.window(now);
        self.base = (before / 2).max(self.min);
        self.since = now;
        self.last_decrease = Some(now);
        (self.base != before).then_some(self.base)
    }

    /// Records the pool's state at `now`. While connections are `broken`
    /// (lost ones are being replaced and requests retried elsewhere) the
    /// budget does not grow: growth since the previous observation is
    /// dropped. Observe at least once a second so that little is dropped.
    pub fn observe(&mut self, now: Instant, broken: bool) {
        if !broken {
            self.base = self.window(now);
        }
        self.since = now;
    }

    /// The configured maximum in bytes.
    pub fn max(&self) -> usize {
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn starts_at_max_and_halves_to_the_floor() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64 * MIB, MIB, t0);
        assert_eq!(a.window(t0), 64 * MIB);
        let mut t = t0;
        let mut seen = vec![];
        for _ in 0..8 {
            t += ms(1001);
            a.observe(t, true);
            seen.push(a.on_loss(t).map(|w| w / MIB));
        }
        assert_eq!(seen, [Some(32), Some(16), Some(8), Some(4), Some(2), Some(1), None, None]);
        assert_eq!(a.window(t), MIB);
    }

    #[test]
    fn losses_within_a_second_count_once() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64 * MIB, MIB, t0);
        assert_eq!(a.on_loss(t0), Some(32 * MIB));
        a.observe(t0 + ms(10), true);
        assert_eq!(a.on_loss(t0 + ms(10)), None);
        a.observe(t0 + ms(999), true);
        assert_eq!(a.on_loss(t0 + ms(999)), None);
        assert_eq!(a.window(t0 + ms(999)), 32 * MIB);
        a.observe(t0 + ms(1000), true);
        assert_eq!(a.on_loss(t0 + ms(1000)), Some(16 * MIB));
    }

    #[test]
    fn grows_back_linearly_and_stops_at_max() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64 * MIB, MIB, t0);
        a.on_loss(t0);
        assert_eq!(a.window(t0 + ms(1000)), 36 * MIB);
        assert_eq!(a.window(t0 + ms(4000)), 48 * MIB);
        assert_eq!(a.window(t0 + ms(8000)), 64 * MIB);
        assert_eq!(a.window(t0 + ms(600_000)), 64 * MIB);
    }

    #[test]
    fn growth_waits_until_every_connection_is_back() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64 * MIB, MIB, t0);
        a.on_loss(t0);
        // Replacement takes 5 s (observed every second): no growth.
        for s in 1..=5 {
            a.observe(t0 + ms(s * 1000), true);
        }
        assert_eq!(a.window(t0 + ms(5000)), 32 * MIB);
        a.observe(t0 + ms(6000), false);
        assert_eq!(a.window(t0 + ms(6000)), 36 * MIB);
        assert_eq!(a.window(t0 + ms(7000)), 40 * MIB);
    }

    #[test]
    fn growth_already_made_survives_a_later_idle_drop() {
        let t0 = Instant::now();
        let mut a = Aimd::new(64 * MIB, MIB, t0);
        a.on_loss(t0);
        for s in 1..=3 {
            a.observe(t0 + ms(s * 1000), false);
        }
        assert_eq!(a.window(t0 + ms(3000)), 44 * MIB);
        a.observe(t0 + ms(3500), true);
        assert_eq!(a.window(t0 + ms(3500)), 44 * MIB);
    }

    #[test]
    fn odd_limits_are_clamped() {
        let t0 = Instant::now();
        let mut a = Aimd::new(0, 0, t0);
        assert_eq!(a.window(t0), 65536);
        assert_eq!(a.on_loss(t0), None);
        let a = Aimd::new(MIB, 8 * MIB, t0);
        assert_eq!(a.window(t0), MIB);
        assert_eq!(a.max(), MIB);
    }
}
