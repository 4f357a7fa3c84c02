//! Prometheus metrics (prometheus-client, OpenMetrics text format), served
//! on the metrics listener (`--metrics-listen`) as `/metrics`.
//!
//! S3 side: requests by operation (the S3 API name, e.g. `GetObject`) and
//! status class, request duration, body bytes in and out as declared by
//! Content-Length, requests in flight. SMB side, read at each scrape:
//! connections by state, reconnects, the per-stream in-flight budget, the
//! read-ahead and write-behind budgets, and SMB errors by NTSTATUS name.

use std::sync::{Arc, LazyLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::identities::Identities;
use crate::store::Store;

/// The operation label of a request s3s refused before naming its
/// operation (a bad signature, an unknown route), or of every request when
/// no credentials are configured (`--anonymous` without keys).
pub const UNKNOWN_OPERATION: &str = "unknown";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    operation: &'static str,
    /// `2xx`, `3xx`, `4xx` or `5xx`.
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    /// See [`crate::auth_log::AuthFailure::label`].
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    /// The NTSTATUS name (`STATUS_DISK_FULL`), its hex value when it has
    /// no name, or `connection` for a lost or poisoned connection.
    status: String,
}

/// `name` (an S3 operation name from s3s) as a `&'static str` label. Each
/// distinct name is kept once for the life of the process; s3s knows about
/// a hundred.
pub fn operation_name(name: &str) -> &'static str {
    static NAMES: LazyLock<std::sync::RwLock<std::collections::HashSet<&'static str>>> =
        LazyLock::new(Default::default);
    // Every request looks its name up; only the first of each name writes.
    if let Some(n) = NAMES.read().unwrap().get(name) {
        return n;
    }
    let mut names = NAMES.write().unwrap();
    if let Some(n) = names.get(name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// The S3-side instruments and the registry they are exposed from.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Family<OperationLabels, Histogram>,
    received: Counter,
    sent: Counter,
    in_flight: Gauge,
    auth_failures: Family<ReasonLabels, Counter>,
}

impl Metrics {
    /// The registry, with the SMB-side figures of `identities` (the
    /// gateway's own pool and the count of users' pools) and the use of
    /// `bodies` (the XML body budget) read at each scrape, and the event
    /// targets' figures of `events`.
    pub fn new(
        identities: Identities,
        bodies: crate::body_budget::BodyBudget,
        events: &crate::events::Events,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("smbgate");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("s3_requests", "S3 requests answered, by operation and status class", requests.clone());
        let duration = Family::<OperationLabels, Histogram>::new_with_constructor(|| {
            // 1 ms to about 65 s.
            Histogram::new(exponential_buckets(0.001, 2.0, 17))
        });
        registry.register(
            "s3_request_duration_seconds",
            "Time to the response's headers, by operation",
            duration.clone(),
        );
        let received = Counter::default();
        registry.register("s3_received_bytes", "Request body bytes, as declared by Content-Length", received.clone());
        let sent = Counter::default();
        registry.register("s3_sent_bytes", "Response body bytes, as declared by Content-Length", sent.clone());
        let in_flight = Gauge::default();
        registry.register("s3_requests_in_flight", "S3 requests being served", in_flight.clone());
        let auth_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "s3_auth_failures",
            "Requests refused as unauthenticated or unauthorized, by reason",
            auth_failures.clone(),
        );
        events.register(&mut registry);
        registry.register_collector(Box::new(SmbGauges { store: identities.primary().clone(), identities, bodies }));
        Metrics { registry, requests, duration, received, sent, in_flight, auth_failures }
    }

    /// Marks a request as started; the returned guard records it when
    /// [`InFlight::finish`] is called, or as in flight until dropped.
    pub fn start(self: &Arc<Self>, request_bytes: u64) -> InFlight {
        self.in_flight.inc();
        self.received.inc_by(request_bytes);
        InFlight { metrics: self.clone(), started: std::time::Instant::now() }
    }

    /// Counts a request refused for `reason` (see
    /// [`crate::auth_log::AuthFailure::label`]).
    pub fn auth_failure(&self, reason: &'static str) {
        self.auth_failures.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Every metric in the OpenMetrics text format (families with no
    /// sample yet are left out).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// One request being served; see [`Metrics::start`].
pub struct InFlight {
    metrics: Arc<Metrics>,
    started: std::time::Instant,
}

impl InFlight {
    /// Records the answer: `operation` (an S3 API name, or
    /// [`UNKNOWN_OPERATION`]), its HTTP status and its body length in bytes.
    /// Returns how long the request took.
    pub fn finish(self, operation: &'static str, status: http::StatusCode, response_bytes: u64) -> std::time::Duration {
        let class = match status.as_u16() {
            200..=299 => "2xx",
            300..=399 => "3xx",
            400..=499 => "4xx",
            _ => "5xx",
        };
        let m = &self.metrics;
        m.requests.get_or_create(&RequestLabels { operation, status: class }).inc();
        let took = self.started.elapsed();
        m.duration.get_or_create(&OperationLabels { operation }).observe(took.as_secs_f64());
        m.sent.inc_by(response_bytes);
        took
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.metrics.in_flight.dec();
    }
}

/// The SMB-side figures, read from the pool and the store at each scrape.
struct SmbGauges {
    store: Store,
    identities: Identities,
    bodies: crate::body_budget::BodyBudget,
}

impl std::fmt::Debug for SmbGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmbGauges").finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnLabels {
    pool: String,
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    /// `hit` or `miss`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    pool: String,
}

impl Collector for SmbGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Names get the registry's `smbgate_` prefix, counters `_total`.
        let conns = Family::<ConnLabels, Gauge>::default();
        let reconnects = Family::<PoolLabels, Counter>::default();
        for (pool, p) in self.identities.pools() {
            let st = p.stats();
            let broken = st.size.saturating_sub(st.healthy);
            for (state, n) in [("healthy", st.healthy), ("broken", broken), ("reconnecting", st.reconnecting)] {
                conns.get_or_create(&ConnLabels { pool: pool.clone(), state }).set(n as i64);
            }
            reconnects.get_or_create(&PoolLabels { pool }).inc_by(st.reconnects);
        }
        let help = "Pooled SMB connections by pool and state (reconnecting ones are also counted as broken)";
        conns.encode(encoder.encode_descriptor("smb_connections", help, None, conns.metric_type())?)?;
        let help = "SMB connections replaced after a loss, by pool";
        reconnects.encode(encoder.encode_descriptor("smb_reconnects", help, None, reconnects.metric_type())?)?;
        let errors = Family::<StatusLabels, Counter>::default();
        for (status, n) in crate::store::share::smb_error_counts() {
            errors.get_or_create(&StatusLabels { status }).inc_by(n);
        }
        let help = "SMB errors that reached an S3 request, by NTSTATUS name";
        errors.encode(encoder.encode_descriptor("smb_errors", help, None, errors.metric_type())?)?;
        let (hits, misses) = crate::store::reads::object_cache::lookups();
        let lookups = Family::<ResultLabels, Counter>::default();
        lookups.get_or_create(&ResultLabels { result: "hit" }).inc_by(hits);
        lookups.get_or_create(&ResultLabels { result: "miss" }).inc_by(misses);
        let help = "HEAD and GET lookups in the object cache, by result (every store)";
        lookups.encode(encoder.encode_descriptor("object_cache_lookups", help, None, lookups.metric_type())?)?;
        let (entries, cached_bytes) = self.store.reads().object_cache_usage();
        let (ra, wb) = (self.store.read_ahead(), self.store.write_behind());
        let gauges = [
            (
                "smb_stream_in_flight_budget_bytes",
                "Bytes one transfer may keep in flight (halved after connection losses under load)",
                self.store.root().pool().in_flight_budget() as u64,
            ),
            ("object_cache_entries", "Objects the gateway's own store holds under leases", entries as u64),
            ("object_cache_bytes", "Bytes those entries count (bodies and overhead)", cached_bytes as u64),
            (
                "object_cache_watched_directories",
                "Directories holding those entries that the store watches on the server (CHANGE_NOTIFY)",
                self.store.reads().object_cache_watches() as u64,
            ),
            ("read_ahead_budget_bytes", "GET read-ahead budget", ra.capacity()),
            ("read_ahead_in_use_bytes", "GET read-ahead held by running GETs", ra.in_use()),
            ("write_behind_budget_bytes", "PUT write-behind budget", wb.capacity()),
            ("write_behind_in_use_bytes", "PUT write-behind held by running PUTs", wb.in_use()),
            ("xml_body_budget_bytes", "Budget for XML request bodies read whole", self.bodies.capacity() as u64),
            (
                "xml_body_in_use_bytes",
                "XML body budget held by requests reading or answering their body",
                (self.bodies.capacity() - self.bodies.available()) as u64,
            ),
            (
                "smb_identity_pools",
                "Open SMB pools of S3 users' own identities (the gateway's own pool not counted)",
                self.identities.open_pools() as u64,
            ),
        ];
        for (name, help, v) in gauges {
            let g = ConstGauge::new(v as i64);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}
