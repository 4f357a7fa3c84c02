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
    /// This instance's queue: random, so a restart starts a new one and
    /// takes the old one over.
    queue_id: String,
    /// Most entries held before the oldest is dropped.
    limit: usize,
    /// Entries queued and not yet sent, oldest first.
    pending: Mutex<VecDeque<Pending>>,
    /// Held from the first event queued.
    lock: tokio::sync::OnceCell<QueueLock>,
    wake: tokio::sync::Notify,
    metrics: TargetMetrics,
}

/// A queued event.
#[derive(Clone)]
struct Pending {
    entry: String,
    body: Bytes,
    queued: Instant,
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
            queue_id: format!("{:016x}", rand::random::<u64>()),
            limit,
            pending: Mutex::new(VecDeque::new()),
            lock: tokio::sync::OnceCell::new(),
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
        self.lock
            .get_or_try_init(|| async {
                buckets.lock_event_queue(&self.target_name, &self.queue_id).await?.ok_or_else(|| {
                    crate::store::StoreError::Busy("this instance's event queue is held by another".into())
                })
            })
            .await?;
        buckets.queue_event(&self.target_name, &self.queue_id, &entry, &body).await?;
        let dropped = {
            let mut p = self.pending.lock().unwrap();
            p.push_back(Pending { entry, body, queued: Instant::now() });
            (p.len() > self.limit).then(|| p.pop_front()).flatten()
        };
        self.metrics.queued.inc();
        if let Some(old) = dropped {
            self.metrics.queued.dec();
            self.metrics.dropped.inc();
            tracing::warn!(target_name = %self.target_name, entry = old.entry, "event queue full: dropped its oldest event");
            let _ = buckets.remove_queued_event(&self.target_name, &self.queue_id, &old.entry).await;
        }
        self.wake.notify_one();
        Ok(())
    }

    /// The task: sends this instance's queued events in order, and takes
    /// over queues no instance holds. Runs for the life of the process.
    pub async fn run(self: Arc<Self>) {
        let mut next_scan = Instant::now();
        loop {
            if Instant::now() >= next_scan {
                self.take_over_orphans().await;
                next_scan = Instant::now() + SCAN_EVERY;
            }
            let head = self.pending.lock().unwrap().front().cloned();
            let Some(head) = head else {
                let _ = tokio::time::timeout(next_scan.saturating_duration_since(Instant::now()), self.wake.notified())
                    .await;
                continue;
            };
            self.deliver(&head.body).await;
            self.metrics.latency.observe(head.queued.elapsed().as_secs_f64());
            {
                let mut p = self.pending.lock().unwrap();
                // Unless a full queue dropped it meanwhile.
                if p.front().is_some_and(|f| f.entry == head.entry) {
                    p.pop_front();
                    self.metrics.queued.dec();
                }
            }
            if let Err(e) =
                self.store.buckets().remove_queued_event(&self.target_name, &self.queue_id, &head.entry).await
            {
                tracing::warn!(target_name = %self.target_name, entry = head.entry, error = %e,
                    "event sent, but its queue entry stays (it may be sent again)");
            }
        }
    }

    /// Sends `body` until the target takes it, pausing between tries
    /// ([`backoff::EVENT_DELIVERY`]). Logs the first failure of a streak at
    /// WARN, and when the target takes events again.
    async fn deliver(&self, body: &[u8]) {
        let mut wait = backoff::EVENT_DELIVERY.start();
        loop {
            match self.target.send(body).await {
                Ok(()) => {
                    self.metrics.sent.inc();
                    if wait.pauses() > 0 {
                        tracing::info!(target_name = %self.target_name, tries = wait.pauses() + 1,
                            "event target takes events again");
                    }
                    return;
                }
                Err(e) => {
                    self.metrics.failed.inc();
                    if wait.pauses() == 0 {
                        tracing::warn!(target_name = %self.target_name, error = %e,
                            "event target did not take an event; it stays queued and is sent again");
                    }
                    wait.wait().await;
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
        for q in queues.into_iter().filter(|q| *q != self.queue_id) {
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
                    Ok(Some(body)) => self.deliver(&body).await,
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
