//! Changes people make on the share, as events: for each bucket with a
//! notification configuration, one instance of those serving the share
//! (elected by a lock on the share, `Buckets::lock_watcher`) keeps a
//! CHANGE_NOTIFY on the bucket's whole tree and turns what it hears into
//! `s3:ObjectCreated:Put` and `s3:ObjectRemoved:Delete` events.
//!
//! A name is looked at once it has been quiet for [`SETTLE`] (a file being
//! copied in changes all along), against what the watcher last knew of the
//! bucket: a listing taken when it started, kept up to date. A file whose
//! record is the gateway's own was written through S3, whose request
//! reported it; an S3 delete leaves a mark that the watcher takes instead
//! of reporting the removal again. A folder that appears or goes yields an
//! event for each key under it. When the server's buffer overflowed
//! (STATUS_NOTIFY_ENUM_DIR), or the watch had to be set up again, the
//! whole bucket is listed again and compared with what it knew.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::{Change, Events, Origin};
use crate::store::buckets::bucket_watch::{Action, Notified, WatcherLock};
use crate::store::keys::key_of_share_name;
use crate::store::listings::walk::{ListRequest, Listed};
use crate::store::{backoff, Store, StoreError, StoreResult};

/// How often each instance looks for buckets whose watcher it could be.
pub const ELECT_EVERY: Duration = Duration::from_secs(3);

/// How long a name must be quiet before it is looked at.
pub const SETTLE: Duration = Duration::from_secs(1);

/// How often a watcher checks that its bucket still has a configuration.
const RECHECK_EVERY: Duration = Duration::from_secs(5);

/// An S3 delete's mark older than this is not taken as the gateway's own.
const MARK_MAX_AGE: Duration = Duration::from_secs(60);

/// The principal of events made by people on the share.
pub const PRINCIPAL: &str = "share";

/// Keys listed per page when the bucket is read whole.
const PAGE: usize = 1000;

/// What the watcher knows of one object: its size and LastWriteTime.
type Known = BTreeMap<String, (u64, u64)>;

/// Starts the elections of watchers on every root of `events` (none
/// without event targets).
pub fn start(events: &Events) {
    for store in events.roots() {
        tokio::spawn(elect(events.clone(), store.clone()));
    }
}

/// The elections on the root of `store`: every [`ELECT_EVERY`], takes the
/// watcher's lock of each bucket with a configuration that this instance
/// does not watch yet, and starts its watcher. Runs for the life of the
/// process.
async fn elect(events: Events, store: Store) {
    let mut running: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut last_sweep = Instant::now();
    loop {
        running.retain(|_, task| !task.is_finished());
        match store.buckets().notified_buckets().await {
            Ok(buckets) => {
                // Marks of S3 deletes no watcher took (a key made and
                // deleted within one settle time, no watcher running).
                if last_sweep.elapsed() >= MARK_MAX_AGE {
                    last_sweep = Instant::now();
                    for b in running.keys() {
                        if let Err(e) = store.buckets().sweep_delete_marks(b, MARK_MAX_AGE).await {
                            tracing::debug!(bucket = b, error = %e, "cannot sweep old marks of S3 deletes");
                        }
                    }
                }
                for bucket in buckets {
                    // One whose configuration does not parse has none.
                    if running.contains_key(&bucket) || !events.has_rules(&bucket).await {
                        continue;
                    }
                    match store.buckets().lock_watcher(&bucket).await {
                        Ok(Some(lock)) => {
                            let task = tokio::spawn(watch(events.clone(), store.clone(), bucket.clone(), lock));
                            running.insert(bucket, task);
                        }
                        Ok(None) => {}
                        Err(e) => tracing::debug!(bucket, error = %e, "cannot take the watcher's lock"),
                    }
                }
            }
            Err(e) => tracing::debug!(error = %e, "cannot list the buckets with notifications"),
        }
        tokio::time::sleep(ELECT_EVERY).await;
    }
}

/// One bucket's watcher, while it holds `lock` and the bucket has a
/// configuration.
async fn watch(events: Events, store: Store, bucket: String, lock: WatcherLock) {
    tracing::info!(bucket, "watching the bucket for changes made on the share");
    let _counted = events.watching();
    let mut w = Watcher { events, store, bucket, lock, known: Known::new(), scanned: false };
    let mut last_check = Instant::now();
    // What is there before the watch begins is no change; what changes
    // between this listing and the watch is reported by the listing after.
    while let Err(e) = w.rescan().await {
        tracing::warn!(bucket = w.bucket, error = %e, "cannot list the bucket; trying again");
        backoff::pause(RECHECK_EVERY).await;
        if !w.events.has_rules(&w.bucket).await {
            return;
        }
    }
    'arm: loop {
        if !w.still_watching().await {
            return;
        }
        let Some(mut changes) = w.arm().await else { return };
        // What changed before the watch began, or while it was down.
        if let Err(e) = w.rescan().await {
            tracing::warn!(bucket = w.bucket, error = %e, "cannot list the bucket; watching again");
            backoff::pause(SETTLE).await;
            continue 'arm;
        }
        // Each name heard of: when last, and whether names came or went
        // there (not only a file's data changing).
        let mut quiet_since: HashMap<String, (Instant, bool)> = HashMap::new();
        loop {
            let due = quiet_since.values().map(|(t, _)| *t).min().map(|t| t + SETTLE);
            let wait = due.map_or(RECHECK_EVERY, |d| d.saturating_duration_since(Instant::now()));
            tokio::select! {
                got = changes.recv() => match got {
                    Some(Ok(Notified::Changes(list))) => {
                        let now = Instant::now();
                        // The gateway's own files (a single-bucket root holds
                        // its .smbgate) are never looked at.
                        for c in list {
                            if key_of_share_name(&c.name).is_none() {
                                tracing::debug!(bucket = w.bucket, name = c.name,
                                    "a name no S3 key reaches changed; not reported");
                                continue;
                            }
                            let naming = !matches!(c.action, Action::Modified);
                            let entry = quiet_since.entry(c.name).or_insert((now, false));
                            *entry = (now, entry.1 || naming);
                        }
                    }
                    Some(Ok(Notified::Overflow)) => {
                        tracing::debug!(bucket = w.bucket, "the server's buffer overflowed; listing the bucket again");
                        quiet_since.clear();
                        if let Err(e) = w.rescan().await {
                            tracing::warn!(bucket = w.bucket, error = %e, "cannot list the bucket; watching again");
                            continue 'arm;
                        }
                    }
                    Some(Ok(Notified::Closed)) | None => {
                        backoff::pause(SETTLE).await;
                        continue 'arm;
                    }
                    Some(Err(e)) => {
                        tracing::debug!(bucket = w.bucket, error = %e, "the watch ended; watching again");
                        backoff::pause(SETTLE).await;
                        continue 'arm;
                    }
                },
                _ = tokio::time::sleep(wait) => {
                    let now = Instant::now();
                    let mut ready: Vec<(String, bool)> = quiet_since
                        .iter()
                        .filter(|(_, (t, _))| now >= *t + SETTLE)
                        .map(|(n, (_, naming))| (n.clone(), *naming))
                        .collect();
                    ready.sort_unstable();
                    for (name, naming) in ready {
                        quiet_since.remove(&name);
                        w.look_at(&name, naming).await;
                    }
                }
            }
            if last_check.elapsed() >= RECHECK_EVERY {
                last_check = Instant::now();
                if !w.still_watching().await {
                    return;
                }
            }
        }
    }
}

/// One bucket's watcher's state.
struct Watcher {
    events: Events,
    store: Store,
    bucket: String,
    /// Held while watching; checked with the configuration (a lock whose
    /// connection was lost is gone, and another instance may watch).
    lock: WatcherLock,
    known: Known,
    /// The bucket has been listed once: what was there then is no change.
    scanned: bool,
}

impl Watcher {
    /// True while the bucket has a configuration and this instance holds
    /// its watcher's lock. A lock that went with a lost connection is
    /// taken again at once where no other instance took it, so that what
    /// is known of the bucket (and the changes meanwhile) is not lost.
    async fn still_watching(&mut self) -> bool {
        if !self.events.has_rules(&self.bucket).await {
            tracing::info!(bucket = self.bucket, "the bucket has no notification configuration; not watching");
            return false;
        }
        if self.lock.held().await {
            return true;
        }
        match self.store.buckets().lock_watcher(&self.bucket).await {
            Ok(Some(lock)) => {
                self.lock = lock;
                true
            }
            Ok(None) => {
                tracing::warn!(
                    bucket = self.bucket,
                    "lost the watcher's lock with its connection; another \
                    instance watches the bucket now"
                );
                false
            }
            // Kept watching; the next check tries again.
            Err(_) => true,
        }
    }

    /// Sets up the watch, retrying while the share fails, and starts the
    /// task that hands its answers on (a watch's call is not cancel-safe,
    /// so it runs apart from the select). `None` once the bucket lost its
    /// configuration (where the server keeps no watches, only then).
    async fn arm(&self) -> Option<mpsc::Receiver<StoreResult<Notified>>> {
        let mut wait = backoff::EVENT_DELIVERY.start();
        let mut watch = loop {
            match self.store.buckets().watch_bucket(&self.bucket).await {
                Ok(w) => break w,
                Err(StoreError::Refused(m)) => {
                    tracing::warn!(bucket = self.bucket, "{m}: changes made on the share are not reported");
                    // Holding the lock, so that no instance tries again
                    // while the bucket keeps its configuration.
                    while self.events.has_rules(&self.bucket).await {
                        backoff::pause(RECHECK_EVERY).await;
                    }
                    return None;
                }
                Err(e) => {
                    if !self.events.has_rules(&self.bucket).await {
                        return None;
                    }
                    tracing::debug!(bucket = self.bucket, error = %e, "cannot watch the bucket; trying again");
                    wait.wait().await;
                }
            }
        };
        let (tx, rx) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                // Given up by the watcher (set up again): the answer an
                // abandoned call loses is of a watch no one reads.
                let got = tokio::select! {
                    got = watch.next() => got,
                    _ = tx.closed() => return,
                };
                let end = !matches!(got, Ok(Notified::Changes(_) | Notified::Overflow));
                if tx.send(got).await.is_err() || end {
                    return;
                }
            }
        });
        Some(rx)
    }

    /// Every key under `prefix` as the share has it now.
    async fn list(&self, prefix: &str) -> StoreResult<Known> {
        let mut out = Known::new();
        let mut start_after = None;
        loop {
            let continued = start_after.is_some();
            let req = ListRequest {
                prefix: prefix.to_string(),
                delimiter: None,
                start_after: start_after.take(),
                max_keys: PAGE,
                max_dirs: None,
            };
            let page = self.store.listings().list_objects(&self.bucket, &req, continued).await?;
            for e in page.entries {
                if let Listed::Object { key, size, last_modified, .. } = e {
                    out.insert(key, (size, last_modified));
                }
            }
            match page.next_marker.filter(|_| page.is_truncated) {
                Some(m) => start_after = Some(m),
                None => return Ok(out),
            }
        }
    }

    /// Lists the bucket whole and reports what differs from what was
    /// known (nothing the first time: the watcher reports changes, not
    /// what is there).
    async fn rescan(&mut self) -> StoreResult<()> {
        let now = self.list("").await?;
        if self.scanned {
            self.report_differences("", &now).await;
        }
        self.known = now;
        self.scanned = true;
        Ok(())
    }

    /// Reports the keys under `prefix` that `now` has and the known state
    /// had otherwise (created or changed), and those it no longer has
    /// (removed); then takes `now` as known there.
    async fn report_differences(&mut self, prefix: &str, now: &Known) {
        let before: Vec<(String, (u64, u64))> = self
            .known
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (key, seen) in now {
            if self.known.get(key) != Some(seen) {
                self.created(key).await;
            }
        }
        for (key, _) in before {
            if !now.contains_key(&key) {
                self.known.remove(&key);
                self.removed(&key).await;
            }
        }
    }

    /// Looks at `name` (relative to the bucket's directory) once it is
    /// quiet, and reports what changed there; where names came or went
    /// (`naming`), a folder's keys too (a folder's contents changing alone
    /// is heard of by their own names).
    async fn look_at(&mut self, name: &str, naming: bool) {
        let Some(key) = key_of_share_name(name) else {
            tracing::debug!(bucket = self.bucket, name, "a name no S3 key reaches changed; not reported");
            return;
        };
        match self.store.reads().head_object(&self.bucket, &key).await {
            Ok(info) => {
                if self.known.get(&key) != Some(&(info.size, info.last_modified)) {
                    self.report_created(&key, info).await;
                }
            }
            Err(StoreError::NoSuchKey) => {
                if self.known.remove(&key).is_some() {
                    self.removed(&key).await;
                }
                if !naming {
                    return;
                }
                // A folder made, brought in, renamed or removed.
                let prefix = format!("{key}/");
                match self.list(&prefix).await {
                    Ok(now) => self.report_differences(&prefix, &now).await,
                    Err(e) => tracing::debug!(bucket = self.bucket, key, error = %e, "cannot list a changed folder"),
                }
            }
            Err(e) => tracing::debug!(bucket = self.bucket, key, error = %e, "cannot look at a changed key"),
        }
    }

    /// Reports `key` created or changed, as [`Watcher::report_created`].
    async fn created(&mut self, key: &str) {
        if let Ok(info) = self.store.reads().head_object(&self.bucket, key).await {
            self.report_created(key, info).await;
        }
    }

    /// Reports `key` (now `info`) created or changed, unless the gateway
    /// wrote it (its record is the gateway's own, so an S3 request
    /// reported it).
    async fn report_created(&mut self, key: &str, info: crate::store::types::ObjectInfo) {
        self.known.insert(key.to_string(), (info.size, info.last_modified));
        if !info.meta.etag.is_empty() {
            return;
        }
        let change = Change {
            name: "s3:ObjectCreated:Put",
            bucket: self.bucket.clone(),
            key: key.to_string(),
            size: Some(info.size),
            etag: Some(info.etag),
            version_id: None,
        };
        self.events.emit(change, &Origin::default(), PRINCIPAL).await;
    }

    /// Reports `key` removed, unless an S3 delete left its mark.
    async fn removed(&mut self, key: &str) {
        match self.store.buckets().take_delete_mark(&self.bucket, key, MARK_MAX_AGE).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => tracing::debug!(bucket = self.bucket, key, error = %e, "cannot read an S3 delete's mark"),
        }
        let change = Change {
            name: "s3:ObjectRemoved:Delete",
            bucket: self.bucket.clone(),
            key: key.to_string(),
            size: None,
            etag: None,
            version_id: None,
        };
        self.events.emit(change, &Origin::default(), PRINCIPAL).await;
    }
}
