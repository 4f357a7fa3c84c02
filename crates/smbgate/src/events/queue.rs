//! At-least-once delivery to one target from one share root: each event
//! is written to this instance's queue on the share before it is sent,
//! and removed once the target took it (`Buckets::queue_event` and the
//! layout in `store/buckets/event_queue.rs`). One task per queue sends in
//! the order events were queued, so a target that was down gets them all,
//! in order per key, when it is back. The task also takes over the queues
//! of instances that died or stopped (their lock gone): at its start (this
//! instance's own previous run) and every [`SCAN_EVERY`].

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::metrics::TargetMetrics;
use super::targets::Target;
use crate::store::buckets::event_queue::QueueLock;
use crate::store::{backoff, Store, StoreResult};

/// How often a queue's task looks for queues no instance holds.
pub const SCAN_EVERY: Duration = Duration::from_secs(15);

/// One target's queue on one root.
pub struct Queue {
    /// The target's name (its folder under `.smbgate/events/`).
    target_name: String,
    target: Arc<dyn Target>,
    /// The gateway's own store on the root.
    store: Store,
    /// Most entries held before the oldest is dropped.
    limit: usize,
    /// This instance's queue on the share.
    own: tokio::sync::Mutex<Own>,
    /// Entries queued and not yet sent, in the order of their names.
    pending: Mutex<VecDeque<Pending>>,
    wake: tokio::sync::Notify,
    metrics: TargetMetrics,
}

/// This instance's queue: its id (random, so a restart starts a new one
/// and takes the old one over) and its lock, taken at the first event.
struct Own {
    id: String,
    lock: Option<QueueLock>,
}

/// A queued event.
#[derive(Clone)]
struct Pending {
    queue: String,
    entry: String,
    body: Bytes,
    queued: Instant,
}

fn new_queue_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

impl Queue {
    /// The queue of `target` (named `target_name`, at most `limit`
    /// entries) on the root of `store`; its task is started with
    /// [`Queue::run`].
    pub fn new(
        target_name: &str,
        target: Arc<dyn Target>,
        store: Store,
        limit: usize,
        metrics: TargetMetrics,
    ) -> Arc<Queue> {
        Arc::new(Queue {
            target_name: target_name.to_string(),
            target,
            store,
            limit,
            own: tokio::sync::Mutex::new(Own { id: new_queue_id(), lock: None }),
            pending: Mutex::new(VecDeque::new()),
            wake: tokio::sync::Notify::new(),
            metrics,
        })
    }

    /// Queues `body` on the share under `entry` (a sequencer: entries sort
    /// in the order they were made), then hands it to the task. A full
    /// queue drops its oldest entry, counted.
    ///
    /// Errors: the share could not hold it (the event is then lost, and
    /// the caller says so).
    pub async fn push(&self, entry: String, body: Bytes) -> StoreResult<()> {
        let buckets = self.store.buckets();
        let queue = {
            let mut own = self.own.lock().await;
            if own.lock.is_none() {
                own.lock = buckets.lock_event_queue(&self.target_name, &own.id).await?;
                if own.lock.is_none() {
                    // Taken over by another instance while this one lost
                    // its lock: queue anew.
                    own.id = new_queue_id();
                    own.lock = buckets.lock_event_queue(&self.target_name, &own.id).await?;
                }
            }
            own.id.clone()
        };
        buckets.queue_event(&self.target_name, &queue, &entry, &body).await?;
        let dropped = {
            let mut p = self.pending.lock().unwrap();
            // In the order of the entries' names, which a takeover follows
            // too (concurrent requests may get here out of it).
            let at = p.partition_point(|q| q.entry < entry);
            p.insert(at, Pending { queue, entry, body, queued: Instant::now() });
            (p.len() > self.limit).then(|| p.pop_front()).flatten()
        };
        self.metrics.queued.inc();
        if let Some(old) = dropped {
            self.metrics.queued.dec();
            self.metrics.dropped.inc();
            tracing::warn!(target_name = %self.target_name, entry = old.entry, "event queue full: dropped its oldest event");
            let _ = buckets.remove_queued_event(&self.target_name, &old.queue, &old.entry).await;
        }
        self.wake.notify_one();
        Ok(())
    }

    /// True while `entry` waits in this instance's queue.
    fn is_pending(&self, entry: &str) -> bool {
        self.pending.lock().unwrap().iter().any(|p| p.entry == entry)
    }

    /// Checks that this instance still holds its queue. One whose lock
    /// went with a lost connection is taken again; one another instance
    /// took over meanwhile (it sends what was queued there) is left to it,
    /// and this instance starts a new queue at its next event.
    async fn check_own(&self) {
        let mut own = self.own.lock().await;
        let Some(lock) = &own.lock else { return };
        if lock.held().await {
            return;
        }
        let taken = match self.store.buckets().lock_event_queue(&self.target_name, &own.id).await {
            Ok(lock) => lock,
            // Unknown: the next event takes the lock again (a new queue if
            // another instance holds it); nothing is given up here.
            Err(_) => {
                own.lock = None;
                return;
            }
        };
        own.lock = taken;
        if own.lock.is_none() {
            tracing::warn!(target_name = %self.target_name, queue = own.id,
                "this instance's event queue was taken over by another; queueing anew");
            let mut p = self.pending.lock().unwrap();
            let gone = p.len() as i64;
            p.retain(|e| e.queue != own.id);
            self.metrics.queued.dec_by(gone - p.len() as i64);
            own.id = new_queue_id();
        }
    }

    /// The task: sends this instance's queued events in order, and takes
    /// over queues no instance holds. Runs for the life of the process.
    pub async fn run(self: Arc<Self>) {
        let mut next_scan = Instant::now();
        loop {
            if Instant::now() >= next_scan {
                self.check_own().await;
                self.take_over_orphans().await;
                next_scan = Instant::now() + SCAN_EVERY;
            }
            let head = self.pending.lock().unwrap().front().cloned();
            let Some(head) = head else {
                let _ = tokio::time::timeout(next_scan.saturating_duration_since(Instant::now()), self.wake.notified())
                    .await;
                continue;
            };
            let id = format!("{}-{}", head.queue, head.entry);
            if self.deliver(&id, &head.body, || self.is_pending(&head.entry)).await {
                self.metrics.latency.observe(head.queued.elapsed().as_secs_f64());
            }
            {
                let mut p = self.pending.lock().unwrap();
                // Unless a full queue dropped it meanwhile.
                if let Some(at) = p.iter().position(|f| f.entry == head.entry) {
                    p.remove(at);
                    self.metrics.queued.dec();
                }
            }
            // Off the send path: the next event need not wait for it.
            let (store, target, queue) = (self.store.clone(), self.target_name.clone(), head.queue.clone());
            tokio::spawn(async move {
                if let Err(e) = store.buckets().remove_queued_event(&target, &queue, &head.entry).await {
                    tracing::warn!(target_name = %target, entry = head.entry, error = %e,
                        "event sent, but its queue entry stays (it may be sent again)");
                }
            });
        }
    }

    /// Sends `body` (event `id`) until the target takes it, pausing
    /// between tries ([`backoff::EVENT_DELIVERY`]), while `wanted` (a full
    /// queue may drop it meanwhile). A target that refuses it for good (a
    /// webhook's 4xx) has it dropped, logged at ERROR and counted. Returns
    /// true if the target took it. Logs the first failure of a streak at
    /// WARN, and when the target takes events again.
    async fn deliver(&self, id: &str, body: &[u8], wanted: impl Fn() -> bool) -> bool {
        let mut wait = backoff::EVENT_DELIVERY.start();
        loop {
            match self.target.send(id, body).await {
                Ok(()) => {
                    self.metrics.sent.inc();
                    if wait.pauses() > 0 {
                        tracing::info!(target_name = %self.target_name, tries = wait.pauses() + 1,
                            "event target takes events again");
                    }
                    return true;
                }
                Err(e) if e.permanent => {
                    self.metrics.failed.inc();
                    self.metrics.dropped.inc();
                    tracing::error!(target_name = %self.target_name, error = %e.reason,
                        "event target refused an event for good; it is dropped");
                    return false;
                }
                Err(e) => {
                    self.metrics.failed.inc();
                    if wait.pauses() == 0 {
                        tracing::warn!(target_name = %self.target_name, error = %e.reason,
                            "event target did not take an event; it stays queued and is sent again");
                    }
                    wait.wait().await;
                    if !wanted() {
                        return false;
                    }
                }
            }
        }
    }

    /// Sends, in order, the events of every queue of this target on the
    /// root that no instance holds (this instance's own previous run, or
    /// an instance that died), then removes them.
    async fn take_over_orphans(&self) {
        let buckets = self.store.buckets();
        let queues = match buckets.event_queues(&self.target_name).await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(target_name = %self.target_name, error = %e, "cannot list event queues");
                return;
            }
        };
        let own = self.own.lock().await.id.clone();
        for q in queues.into_iter().filter(|q| *q != own) {
            let Ok(Some(_lock)) = buckets.lock_event_queue(&self.target_name, &q).await else { continue };
            let entries = match buckets.queued_events(&self.target_name, &q).await {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(target_name = %self.target_name, queue = q, error = %e, "cannot list an event queue");
                    continue;
                }
            };
            if !entries.is_empty() {
                tracing::info!(target_name = %self.target_name, queue = q, events = entries.len(),
                    "taking over an event queue no instance holds");
            }
            for entry in entries {
                match buckets.read_queued_event(&self.target_name, &q, &entry).await {
                    Ok(Some(body)) => {
                        self.deliver(&format!("{q}-{entry}"), &body, || true).await;
                    }
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(target_name = %self.target_name, queue = q, error = %e,
                            "cannot read a queued event; trying again later");
                        break;
                    }
                }
                let _ = buckets.remove_queued_event(&self.target_name, &q, &entry).await;
            }
            let _ = buckets.remove_event_queue(&self.target_name, &q).await;
        }
    }
}
