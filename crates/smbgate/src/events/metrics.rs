//! What each event target did, for `/metrics`: events sent, sends that
//! failed (each try), events queued now, events dropped (a full queue, a
//! refusal for good), and the time from queueing to the target taking an
//! event.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    target: String,
}

/// Every target's instruments.
#[derive(Clone)]
pub struct EventMetrics {
    sent: Family<TargetLabels, Counter>,
    failed: Family<TargetLabels, Counter>,
    queued: Family<TargetLabels, Gauge>,
    dropped: Family<TargetLabels, Counter>,
    latency: Family<TargetLabels, Histogram>,
    /// Buckets this instance watches for changes made on the share.
    pub watching: Gauge,
}

/// One target's instruments (over every root it is queued on).
#[derive(Clone)]
pub struct TargetMetrics {
    /// Events the target took.
    pub sent: Counter,
    /// Sends it did not take (each try).
    pub failed: Counter,
    /// Events queued now by this instance.
    pub queued: Gauge,
    /// Events dropped: from a full queue, or refused for good.
    pub dropped: Counter,
    /// Seconds from queueing to the target taking the event.
    pub latency: Histogram,
}

impl Default for EventMetrics {
    fn default() -> EventMetrics {
        EventMetrics {
            sent: Family::default(),
            failed: Family::default(),
            queued: Family::default(),
            dropped: Family::default(),
            // 1 ms to about 9 hours.
            latency: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.001, 4.0, 12))),
            watching: Gauge::default(),
        }
    }
}

impl EventMetrics {
    /// `target`'s instruments (made at zero on first use).
    pub fn of(&self, target: &str) -> TargetMetrics {
        let l = TargetLabels { target: target.to_string() };
        TargetMetrics {
            sent: self.sent.get_or_create(&l).clone(),
            failed: self.failed.get_or_create(&l).clone(),
            queued: self.queued.get_or_create(&l).clone(),
            dropped: self.dropped.get_or_create(&l).clone(),
            latency: self.latency.get_or_create(&l).clone(),
        }
    }

    /// Adds the families to `registry` (prefix `smbgate_`).
    pub fn register(&self, registry: &mut Registry) {
        registry.register("events_sent", "Events a target took, by target", self.sent.clone());
        registry.register("events_failed", "Sends of an event a target did not take (each try)", self.failed.clone());
        registry.register("events_queued", "Events queued by this instance and not yet taken", self.queued.clone());
        registry.register(
            "events_dropped",
            "Events dropped from a full queue or refused for good, by target",
            self.dropped.clone(),
        );
        registry.register(
            "event_watchers",
            "Buckets this instance watches for changes made on the share (one instance watches each)",
            self.watching.clone(),
        );
        registry.register(
            "event_delivery_seconds",
            "Time from an event's queueing to its target taking it",
            self.latency.clone(),
        );
    }
}
