//! The connection slots of a listener: `--max-connections` in all, a
//! share per client address (an IPv6 client's /64), and, when every slot
//! is taken, the slot of the connection that has made no progress longest
//! (idle, or with every request waiting for body bytes that do not come:
//! `Activity::idle_since`) given to a new connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::conn_limits::Activity;

/// A connection idle for less than this is never closed to make room: a
/// client that has just connected is about to send its request.
const EVICT_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The connection slots of one listener (`--max-connections`), and the
/// connections holding them.
pub struct Slots {
    free: Arc<tokio::sync::Semaphore>,
    held: Arc<Mutex<HashMap<u64, Activity>>>,
    next_id: AtomicU64,
}

impl Slots {
    /// `n` slots (at least 1).
    pub fn new(n: usize) -> Slots {
        Slots {
            free: Arc::new(tokio::sync::Semaphore::new(n.max(1))),
            held: Arc::default(),
            next_id: AtomicU64::new(0),
        }
    }

    /// A slot for a connection just accepted, held until the returned
    /// value is dropped. At once if one is free; else the connection idle
    /// longest (at least [`EVICT_IDLE_AFTER`]) is told to close
    /// ([`Activity::evicted`]) and its slot taken; else this waits for a
    /// connection to end. So idle connections can delay a new client by at
    /// most about a second, never keep it out.
    pub async fn admit(&self) -> Slot {
        let permit = match self.free.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let mut pause = tokio::time::interval(EVICT_IDLE_AFTER / 4);
                loop {
                    tokio::select! {
                        p = self.free.clone().acquire_owned() => break p.expect("never closed"),
                        _ = pause.tick() => self.evict_idlest(),
                    }
                }
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Activity::new();
        self.held.lock().unwrap_or_else(|e| e.into_inner()).insert(id, activity.clone());
        Slot { id, activity, held: self.held.clone(), _permit: permit }
    }

    /// Tells the connection idle longest, if any has been idle long
    /// enough, to close.
    fn evict_idlest(&self) {
        let now = Instant::now();
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let idlest = held
            .values()
            .filter_map(|a| a.idle_since().map(|t| (t, a)))
            .filter(|(t, _)| now.saturating_duration_since(*t) >= EVICT_IDLE_AFTER)
            .min_by_key(|(t, _)| *t);
        if let Some((_, a)) = idlest {
            a.evict();
        }
    }
}

/// One connection's slot, and what it does ([`Slot::activity`]).
pub struct Slot {
    id: u64,
    activity: Activity,
    held: Arc<Mutex<HashMap<u64, Activity>>>,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Slot {
    /// The requests of the connection in this slot.
    pub fn activity(&self) -> &Activity {
        &self.activity
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
    }
}

/// Connection slots per client address: at most `per_client` connections
/// from one address at once, except from the trusted addresses (a load
/// balancer in front of several instances connects from one address and
/// may use every slot).
#[derive(Clone)]
pub struct PerClient {
    per_client: usize,
    trusted: Vec<IpAddr>,
    held: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerClient {
    /// `per_client` connections per address (at least 1); `trusted`
    /// addresses have no share of their own.
    pub fn new(per_client: usize, trusted: Vec<IpAddr>) -> PerClient {
        PerClient { per_client: per_client.max(1), trusted, held: Arc::default() }
    }

    /// Whether `ip` is a trusted proxy's address (no share of its own).
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.contains(&canonical(ip))
    }

    /// A slot for a connection from `ip`, held until the returned value is
    /// dropped; `None` when `ip` already holds its share.
    pub fn take(&self, ip: IpAddr) -> Option<ClientSlot> {
        let ip = canonical(ip);
        if self.trusted.contains(&ip) {
            return Some(ClientSlot { ip, held: None });
        }
        let ip = share_of(ip);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_insert(0);
        if *n >= self.per_client {
            return None;
        }
        *n += 1;
        Some(ClientSlot { ip, held: Some(self.held.clone()) })
    }
}

/// One connection's place in its address's share.
pub struct ClientSlot {
    ip: IpAddr,
    held: Option<Arc<Mutex<HashMap<IpAddr, usize>>>>,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Some(held) = &self.held {
            let mut held = held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(n) = held.get_mut(&self.ip) {
                *n -= 1;
                if *n == 0 {
                    held.remove(&self.ip);
                }
            }
        }
    }
}

/// The address whose share a client takes: its IPv4 address, or the /64
/// its IPv6 address lies in (one host is commonly given a whole /64, so
/// counting single addresses would give it millions of shares).
fn share_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

/// An IPv4 client on a dual-stack socket arrives as `::ffff:a.b.c.d`;
/// it is the same client as `a.b.c.d`.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_holds_at_most_its_share_and_gets_it_back() {
        let slots = PerClient::new(2, vec!["10.0.0.9".parse().unwrap()]);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let (s1, s2) = (slots.take(a).unwrap(), slots.take(a).unwrap());
        assert!(slots.take(a).is_none());
        assert!(slots.take("::ffff:10.0.0.1".parse().unwrap()).is_none(), "the same client over IPv6");
        assert!(slots.take("10.0.0.2".parse().unwrap()).is_some(), "another address has its own share");
        // IPv6 clients are counted by their /64.
        let v6: Vec<ClientSlot> = ["2001:db8:1:2::1", "2001:db8:1:2:ffff::9"]
            .iter()
            .map(|a| slots.take(a.parse().unwrap()).unwrap())
            .collect();
        assert!(slots.take("2001:db8:1:2:abcd::1".parse().unwrap()).is_none(), "the same /64");
        assert!(slots.take("2001:db8:1:3::1".parse().unwrap()).is_some(), "another /64");
        drop(v6);
        drop(s1);
        let s3 = slots.take(a).unwrap();
        let trusted: Vec<ClientSlot> = (0..10).map(|_| slots.take("10.0.0.9".parse().unwrap()).unwrap()).collect();
        assert_eq!(trusted.len(), 10);
        drop((s2, s3));
        assert!(slots.held.lock().unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_table_gives_the_longest_idle_slot_to_a_new_connection() {
        let slots = Slots::new(2);
        let busy = slots.admit().await;
        let _request = busy.activity().begin();
        let idle = slots.admit().await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let evicted = tokio::spawn({
            let a = idle.activity().clone();
            async move { a.evicted().await }
        });
        let t0 = Instant::now();
        let admit = tokio::spawn(async move {
            let slots = slots;
            let s = slots.admit().await;
            (slots, s)
        });
        evicted.await.unwrap();
        assert!(busy.activity().told_to_close().is_none(), "a busy connection is kept");
        drop(idle);
        let (slots, _new) = admit.await.unwrap();
        assert!(t0.elapsed() <= EVICT_IDLE_AFTER);
        assert_eq!(slots.held.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waiting_for_a_body_that_does_not_come_makes_way() {
        let slots = Slots::new(2);
        let working = slots.admit().await;
        let _working_request = working.activity().begin();
        let stalled = slots.admit().await;
        let _stalled_request = stalled.activity().begin();
        // Its body is waiting for bytes (as RequestBody notes on Pending).
        stalled.activity().note_body_waiting(true);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(stalled.activity().idle_since().is_some() && working.activity().idle_since().is_none());
        let evicted = tokio::spawn({
            let a = stalled.activity().clone();
            async move { a.evicted().await }
        });
        let t0 = Instant::now();
        let admit = tokio::spawn(async move {
            let s = slots.admit().await;
            (slots, s)
        });
        evicted.await.unwrap();
        assert!(t0.elapsed() <= EVICT_IDLE_AFTER, "{:?}", t0.elapsed());
        assert!(working.activity().told_to_close().is_none(), "a request being worked on stays");
        drop(stalled);
        admit.await.unwrap();
    }
}
