//! Process-wide byte budgets that bound the gateway's memory whatever the
//! number of requests: GET read-ahead (READs in flight and segments fetched
//! ahead of the client) and PUT write-behind (WRITEs in flight to the
//! server). A request takes what is free when it starts and gives it back
//! when the permit drops; it never waits for budget, it reads or writes
//! with less in flight instead.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Granularity of a budget (one SMB credit's worth), in bytes.
pub const UNIT: u64 = 64 << 10;

/// A byte budget; see the module docs.
#[derive(Clone)]
pub struct Budget {
    units: Arc<Semaphore>,
    /// Units in all, taken or free.
    total: usize,
}

/// Budget held by one request; returned when dropped.
pub type Held = OwnedSemaphorePermit;

impl Budget {
    /// A budget of `bytes` (rounded down to [`UNIT`]).
    pub fn new(bytes: u64) -> Budget {
        let units = (bytes / UNIT).min(Semaphore::MAX_PERMITS as u64) as usize;
        Budget { units: Arc::new(Semaphore::new(units)), total: units }
    }

    /// The whole budget, in bytes.
    pub fn capacity(&self) -> u64 {
        self.total as u64 * UNIT
    }

    /// Bytes taken now by running requests.
    pub fn in_use(&self) -> u64 {
        self.total.saturating_sub(self.units.available_permits()) as u64 * UNIT
    }

    /// Takes `bytes` (rounded up to [`UNIT`]) if that much is free now.
    pub fn try_take(&self, bytes: u64) -> Option<Held> {
        let units = bytes.div_ceil(UNIT).min(u32::MAX as u64) as u32;
        self.units.clone().try_acquire_many_owned(units).ok()
    }

    /// Takes up to `want` bytes, as much as is free now. Returns the bytes
    /// taken (a multiple of [`UNIT`], possibly 0) and what holds them.
    pub fn take_up_to(&self, want: u64) -> (u64, Option<Held>) {
        let units = (want / UNIT).min(self.units.available_permits() as u64) as u32;
        if units == 0 {
            return (0, None);
        }
        match self.units.clone().try_acquire_many_owned(units) {
            Ok(p) => (units as u64 * UNIT, Some(p)),
            Err(_) => (0, None), // raced with another request; go without
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_what_is_free_and_gives_it_back() {
        let b = Budget::new(10 * UNIT);
        let (got, held) = b.take_up_to(4 * UNIT + 1);
        assert_eq!(got, 4 * UNIT);
        let (rest, held2) = b.take_up_to(100 * UNIT);
        assert_eq!(rest, 6 * UNIT);
        assert_eq!(b.take_up_to(UNIT).0, 0);
        assert!(b.try_take(1).is_none());
        assert_eq!((b.capacity(), b.in_use()), (10 * UNIT, 10 * UNIT));
        drop(held);
        assert_eq!(b.in_use(), 6 * UNIT);
        assert!(b.try_take(4 * UNIT).is_some());
        drop(held2);
        assert_eq!(b.in_use(), 0);
        assert_eq!(b.take_up_to(100 * UNIT).0, 10 * UNIT);
    }

    #[test]
    fn zero_budget_gives_nothing() {
        let b = Budget::new(0);
        assert_eq!(b.take_up_to(1 << 30).0, 0);
        assert!(b.try_take(1).is_none());
    }
}
