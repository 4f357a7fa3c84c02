//! S3 event notifications: a bucket's configuration (`rules.rs`, kept on
//! the share), the event messages in AWS's shape (`record.rs`), the
//! operator's targets (`targets.rs`: `webhook.rs`, `nats.rs`),
//! at-least-once delivery through a queue on the share (`queue.rs`), and
//! the changes people make on the share, heard by one elected watcher of
//! each bucket (`watcher.rs`).
//!
//! The S3 adapter reports each change it made ([`Events::emit`]) once the
//! store has made it and before it answers, so an answered write has its
//! event queued. Events are made there, not in the store, because an S3
//! event describes the request (its ID, the client's address, the user);
//! the store knows the share.

pub mod metrics;
pub mod nats;
pub mod queue;
pub mod record;
pub mod rules;
pub mod targets;
pub mod watcher;
pub mod webhook;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::identities::Identities;
pub use record::{Change, Origin};
use rules::Rules;

/// Set once event targets are configured: the front keeps each request's
/// IDs for its events only then (a relaxed load otherwise).
static ON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True if this process has event targets.
pub fn enabled() -> bool {
    ON.load(std::sync::atomic::Ordering::Relaxed)
}

/// How long an instance uses a bucket's configuration before reading it
/// from the share again (a change through another instance takes effect
/// within this).
pub const RULES_TTL: Duration = Duration::from_secs(5);

/// The gateway's events. Clone to share; [`Events::none`] when no target
/// is configured, where every call costs nothing.
#[derive(Clone)]
pub struct Events {
    inner: Option<Arc<Inner>>,
}

/// A watched bucket, counted in `smbgate_event_watchers` while it lives.
pub(crate) struct WatchingGuard(prometheus_client::metrics::gauge::Gauge);

impl Drop for WatchingGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// When a bucket's configuration was read, and what it was.
type Cached = (Instant, Option<Arc<Rules>>);

struct Inner {
    roots: Vec<crate::store::Store>,
    identities: Identities,
    region: String,
    targets: Vec<String>,
    /// One queue per root (`None`: `--share`) and target.
    queues: HashMap<(Option<String>, String), Arc<queue::Queue>>,
    rules: Mutex<HashMap<String, Cached>>,
    /// Buckets whose configuration one request is reading again.
    refreshing: Mutex<std::collections::HashSet<String>>,
    /// Bumped by each [`Events::forget`]: a read begun before is not kept.
    generation: std::sync::atomic::AtomicU64,
    /// Buckets and targets already warned of: a configuration naming a
    /// target this instance lacks.
    unknown_targets: Mutex<std::collections::HashSet<(String, String)>>,
    metrics: metrics::EventMetrics,
}

impl Events {
    /// No targets: nothing is configured or sent.
    pub fn none() -> Events {
        Events { inner: None }
    }

    /// The events of `targets` over the roots of `identities`, for
    /// `region`; starts each root's and target's queue task (which first
    /// takes over what the previous run left queued). The watchers of
    /// changes on the share start with `watcher::start`.
    ///
    /// Errors: a target that cannot be set up (its CA file, say).
    pub fn start(identities: Identities, targets: &[targets::TargetConfig], region: &str) -> Result<Events, String> {
        if targets.is_empty() {
            return Ok(Events::none());
        }
        let metrics = metrics::EventMetrics::default();
        let mut roots: Vec<(Option<String>, crate::store::Store)> = vec![(None, identities.primary().clone())];
        for name in identities.configured() {
            if let Some(s) = identities.configured_store(name) {
                roots.push((Some(name.to_string()), s.clone()));
            }
        }
        let mut queues = HashMap::new();
        for t in targets {
            let target = connect(t).map_err(|e| format!("[targets.{}]: {e}", t.name))?;
            for (root, store) in &roots {
                let q = queue::Queue::new(&t.name, target.clone(), store.clone(), t.queue_limit, metrics.of(&t.name));
                tokio::spawn(q.clone().run());
                queues.insert((root.clone(), t.name.clone()), q);
            }
        }
        let inner = Inner {
            roots: roots.into_iter().map(|(_, s)| s).collect(),
            identities,
            region: region.to_string(),
            targets: targets.iter().map(|t| t.name.clone()).collect(),
            queues,
            rules: Mutex::default(),
            refreshing: Mutex::default(),
            generation: Default::default(),
            unknown_targets: Mutex::default(),
            metrics,
        };
        ON.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(Events { inner: Some(Arc::new(inner)) })
    }

    /// The gateway's own stores on every root (`--share` and each
    /// configured bucket's), where events are queued and buckets watched.
    pub fn roots(&self) -> &[crate::store::Store] {
        self.inner.as_ref().map_or(&[], |i| &i.roots)
    }

    /// True if any target is configured (else no change is reported).
    pub fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// Counts a bucket watched by this instance until the guard is dropped.
    pub(crate) fn watching(&self) -> Option<WatchingGuard> {
        self.inner.as_ref().map(|i| {
            i.metrics.watching.inc();
            WatchingGuard(i.metrics.watching.clone())
        })
    }

    /// True if `name` is a configured target.
    pub fn is_target(&self, name: &str) -> bool {
        self.inner.as_ref().is_some_and(|i| i.targets.iter().any(|t| t == name))
    }

    /// Adds the per-target metrics to `registry`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        if let Some(i) = &self.inner {
            i.metrics.register(registry);
        }
    }

    /// Forgets `bucket`'s configuration (after this instance changed it);
    /// a read begun before is not kept.
    pub fn forget(&self, bucket: &str) {
        if let Some(i) = &self.inner {
            let mut all = i.rules.lock().unwrap();
            i.generation.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            all.remove(bucket);
        }
    }

    /// True if `bucket` has a notification configuration (as
    /// [`Events::rules`] reads it).
    pub async fn has_rules(&self, bucket: &str) -> bool {
        match &self.inner {
            Some(inner) => self.rules(inner, bucket).await.is_some(),
            None => false,
        }
    }

    /// `bucket`'s configuration, read from the share (as the gateway's own
    /// account) at most every [`RULES_TTL`]; `None` if it has none.
    async fn rules(&self, inner: &Inner, bucket: &str) -> Option<Arc<Rules>> {
        // Given back however the read ends (a request that goes drops it).
        struct Refreshing<'a>(&'a Mutex<std::collections::HashSet<String>>, &'a str);
        impl Drop for Refreshing<'_> {
            fn drop(&mut self) {
                self.0.lock().unwrap().remove(self.1);
            }
        }
        let generation = inner.generation.load(std::sync::atomic::Ordering::Relaxed);
        let refreshing = {
            let all = inner.rules.lock().unwrap();
            match all.get(bucket) {
                Some((at, r)) if at.elapsed() < RULES_TTL => return r.clone(),
                // Expired: one request reads it again, the others meanwhile
                // use what was read (no burst of reads every RULES_TTL).
                Some((_, r)) if !inner.refreshing.lock().unwrap().insert(bucket.to_string()) => return r.clone(),
                Some(_) => Some(Refreshing(&inner.refreshing, bucket)),
                None => None,
            }
        };
        let read = match inner.identities.store(Some(bucket), None).await {
            Ok(store) => store.buckets().bucket_notifications(bucket).await,
            Err(e) => Err(e),
        };
        drop(refreshing);
        let rules = match read {
            Ok(None) => None,
            Ok(Some(bytes)) => match serde_json::from_slice::<Rules>(&bytes) {
                Ok(r) => Some(Arc::new(r)),
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "stored notification configuration does not parse; treated as none");
                    None
                }
            },
            Err(e) => {
                // The last one read stands (not kept anew: read again at
                // the next change), so a share that fails for a moment
                // loses no event and stops no watcher.
                tracing::warn!(bucket, error = %e, "cannot read the bucket's notification configuration");
                return inner.rules.lock().unwrap().get(bucket).and_then(|(_, r)| r.clone());
            }
        };
        let mut all = inner.rules.lock().unwrap();
        // A change through this instance meanwhile: what was read may be
        // the old configuration, so it is not kept.
        if inner.generation.load(std::sync::atomic::Ordering::Relaxed) != generation {
            return rules;
        }
        if all.len() > 10_000 {
            all.clear();
        }
        all.insert(bucket.to_string(), (Instant::now(), rules.clone()));
        rules
    }

    /// Queues `s3:TestEvent` for each target of `rules`, just put as
    /// `bucket`'s configuration by the request `origin`, as S3 does, so
    /// that a receiver sees that it is wired up.
    pub async fn announce(&self, bucket: &str, rules: &Rules, origin: &Origin) {
        let Some(inner) = &self.inner else { return };
        let root = inner.identities.root_of(bucket);
        let mut targets: Vec<&str> = rules.rules.iter().map(|r| r.target.as_str()).collect();
        targets.sort_unstable();
        targets.dedup();
        for target in targets {
            let Some(queue) = inner.queues.get(&(root.clone(), target.to_string())) else { continue };
            let body = record::test_message(bucket, origin, std::time::SystemTime::now()).to_string();
            if let Err(e) = queue.push(record::next_sequencer(), body.into()).await {
                inner.metrics.of(target).failed.inc();
                tracing::warn!(bucket, target_name = target, error = %e, "cannot queue the test event");
            }
        }
    }

    /// Leaves, before an S3 delete of `key` in `bucket`, the mark that
    /// tells the bucket's watcher the removal is the gateway's own (so it
    /// does not report it again), where the bucket's configuration wants
    /// removals reported. Returns true if a mark was left (take it back
    /// with [`Events::unmark_removal`] if the delete fails).
    pub async fn mark_removal(&self, bucket: &str, key: &str) -> bool {
        let Some(inner) = &self.inner else { return false };
        let Some(rules) = self.rules(inner, bucket).await else { return false };
        if rules.wanting("s3:ObjectRemoved:Delete", &record::encoded_key(key)).is_none() {
            return false;
        }
        let marked = match inner.identities.store(Some(bucket), None).await {
            Ok(store) => store.buckets().mark_deleted(bucket, key).await,
            Err(e) => Err(e),
        };
        match marked {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(bucket, key, error = %e,
                    "cannot mark an S3 delete for the bucket's watcher; it may report the removal twice");
                false
            }
        }
    }

    /// Takes back the mark of [`Events::mark_removal`] after a delete that
    /// failed.
    pub async fn unmark_removal(&self, bucket: &str, key: &str) {
        let Some(inner) = &self.inner else { return };
        if let Ok(store) = inner.identities.store(Some(bucket), None).await {
            let _ = store.buckets().take_delete_mark(bucket, key, std::time::Duration::MAX).await;
        }
    }

    /// Queues the event of `change`, made by the request `origin` as
    /// `principal` (the S3 user's name, `anonymous`, or
    /// `share` for a change made on the share), for the
    /// target the bucket's configuration sends it to, if any. Returns once
    /// it is queued on the share. A failure is logged at ERROR and counted:
    /// the change is made and answered, its event lost.
    pub async fn emit(&self, change: Change, origin: &Origin, principal: &str) {
        if self.inner.is_none() {
            return;
        }
        // In a task of its own: a request that goes while its event is
        // being queued (a client hanging up) does not leave it half done.
        let (events, origin, principal) = (self.clone(), origin.clone(), principal.to_string());
        let queued = tokio::spawn(async move { events.queue(change, &origin, &principal).await }.in_current_span());
        let _ = queued.await;
    }

    /// [`Events::emit`], in the caller's task.
    async fn queue(&self, change: Change, origin: &Origin, principal: &str) {
        let Some(inner) = &self.inner else { return };
        let Some(rules) = self.rules(inner, &change.bucket).await else { return };
        let Some(rule) = rules.wanting(change.name, &record::encoded_key(&change.key)) else { return };
        let root = inner.identities.root_of(&change.bucket);
        let Some(queue) = inner.queues.get(&(root, rule.target.clone())) else {
            // Put through an instance whose config file defines it.
            if inner.unknown_targets.lock().unwrap().insert((change.bucket.clone(), rule.target.clone())) {
                tracing::warn!(
                    bucket = change.bucket,
                    target_name = rule.target,
                    "the bucket's notification configuration names a target this instance's config file does not \
                     define; its events are not sent from here (give every instance the same [targets])"
                );
            }
            return;
        };
        let sequencer = record::next_sequencer();
        let message = record::message(
            &change,
            origin,
            principal,
            &rule.id,
            &sequencer,
            &inner.region,
            std::time::SystemTime::now(),
        );
        let body = bytes::Bytes::from(message.to_string());
        if let Err(e) = queue.push(sequencer, body).await {
            inner.metrics.of(&rule.target).failed.inc();
            tracing::error!(bucket = change.bucket, key = change.key, event = change.name, target_name = rule.target,
                error = %e, "cannot queue an event on the share; it is lost");
        }
    }
}

/// The destination `config` describes, ready to send.
///
/// Errors: a CA file that does not parse; a client that cannot be built.
fn connect(config: &targets::TargetConfig) -> Result<Arc<dyn targets::Target>, String> {
    Ok(match &config.kind {
        targets::Kind::Webhook { url, secret, ca_file } => {
            Arc::new(webhook::Webhook::new(url.clone(), secret.clone(), ca_file.as_deref())?)
        }
        targets::Kind::Nats { url, subject, jetstream, user, ca_file } => {
            Arc::new(nats::Nats::new(url, subject, *jetstream, user.clone(), ca_file.as_deref()))
        }
    })
}
