//! How the store keeps the object cache ([`super::object_cache`]) true to
//! the share: an entry is filled by holding the file first and looking at
//! it second, so nothing can change between the look and the hold unseen;
//! and before this instance renames over an object it warns every holder
//! (on any instance) from another connection, keeping that open until the
//! rename is done.

use super::backoff;
use super::keys::map_key;
use super::object_cache::Cached;
use super::path::SharePath;
use super::share::{self, is_not_found, CreateResponse, Failure, Handle, Tree};
use super::types::ObjectInfo;
use super::Store;

/// What [`Store::warn_holders`] did before a rename over an object.
pub(crate) enum Warning {
    /// Every holder of the file at the path has closed, and none comes back
    /// while this open lasts.
    Held(Box<Handle>),
    /// Nothing is at the path: publish without replacing (a file that
    /// appears meanwhile was not warned about), and warn again if one did.
    Absent,
    /// No warning (the cache is off, or it could not be had): publish as
    /// asked.
    Unwarned,
}

impl Warning {
    /// True if the rename may replace a file: asked to, and a file there
    /// was warned about or nothing could be warned.
    pub(crate) fn may_replace(&self, replace: bool) -> bool {
        replace && !matches!(self, Warning::Absent)
    }
}

/// True if the file a holder opened (`held`) is the one `info` describes:
/// the same on-disk id where the server gives one, size and LastWriteTime.
fn same_file(held: &CreateResponse, info: &ObjectInfo) -> bool {
    held.on_disk_id() == info.disk_id
        && held.times.end_of_file == info.size
        && held.times.last_write == info.last_modified
}

impl Store {
    /// Objects the cache holds now, and the bytes they count.
    pub fn object_cache_usage(&self) -> (usize, usize) {
        self.inner.objects.usage()
    }

    /// The share path an object of `key` is cached under, if such an object
    /// may be cached: the cache is on, records are EAs (whose changes this
    /// store warns holders of), and the key is not a directory marker.
    fn cache_path(&self, bucket: &str, key: &str) -> Option<SharePath> {
        if !self.inner.objects.enabled() || !self.records().in_eas() {
            return None;
        }
        let mapped = map_key(key).ok().filter(|m| !m.dir_marker)?;
        Some(self.object_path(bucket, &mapped))
    }

    /// The cached info (and small body) of `key`, if an entry holds it and
    /// its lease still stands. An entry past half its age is renewed in the
    /// background.
    pub(crate) fn cached(&self, bucket: &str, key: &str) -> Option<Cached> {
        let path = self.cache_path(bucket, key)?;
        let (hit, aging) = self.inner.objects.get(path.as_str())?;
        if aging {
            self.renew_later(path);
        }
        Some(hit)
    }

    /// Renews the entry of `path` in the background: one look at the path
    /// (CREATE + CLOSE) shows whether it still names the held file
    /// ([`super::object_cache::ObjectCache::renew`]); a third of a fill's
    /// cost, and no new lease.
    fn renew_later(&self, path: SharePath) {
        let Some(filling) = self.inner.objects.start_fill(path.as_str()) else { return };
        let store = self.clone();
        tokio::spawn(async move {
            let _filling = filling;
            let Ok(tree) = store.tree().await else { return };
            let asked = std::time::Instant::now();
            match share::stat_created(&tree, path.as_str()).await {
                Ok(now) => {
                    store.inner.objects.renew(path.as_str(), &now, asked);
                }
                Err(_) => store.inner.objects.forget(path.as_str()),
            }
        });
    }

    /// After an uncached HEAD or GET found `info` for `key`: fills the
    /// cache's entry in the background if the object was missed before
    /// (see [`super::object_cache::ObjectCache::missed_again`]), so that
    /// this request waits for nothing. Skipped for an object kept elsewhere
    /// than its own path, while the pool has fewer than two healthy
    /// connections (a writer's warning must come from another connection
    /// than its rename), and while too many fills are in flight.
    pub(crate) fn fill_later(&self, bucket: &str, key: &str, info: &ObjectInfo) {
        let Some(path) = self.cache_path(bucket, key) else { return };
        if info.path != path.as_str() || info.meta.marker || self.pool().healthy() < 2 {
            return;
        }
        // Claimed first, so that a miss with no fill free keeps its mark.
        let Some(filling) = self.inner.objects.start_fill(path.as_str()) else { return };
        if !self.inner.objects.missed_again(path.as_str()) {
            return;
        }
        let (store, bucket, key) = (self.clone(), bucket.to_string(), key.to_string());
        tokio::spawn(async move {
            let _filling = filling;
            store.hold_and_fill(&bucket, &key, &path).await;
        });
    }

    /// Holds the file at `path`, then looks it up as a HEAD does, then
    /// reads it if it is small; keeps the result if the look found the held
    /// file and the lease still stands. Anything that fails leaves the
    /// entry out (the holder's handle closes when dropped).
    async fn hold_and_fill(&self, bucket: &str, key: &str, path: &SharePath) {
        let Ok(tree) = self.tree().await else { return };
        let held = match share::hold(&tree, path.as_str()).await {
            Ok(Some(held)) => held,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, path = path.as_str(), "object cache: not held");
                return;
            }
        };
        let Ok(info) = self.objects().head_uncached(bucket, key).await else { return };
        if info.path != path.as_str() || !same_file(held.created(), &info) {
            return;
        }
        let body = match info.size <= u64::from(self.inner.objects.options().object_max) {
            true => match share::read_held(&held, info.size as u32).await {
                Ok(b) if b.len() as u64 == info.size => Some(b),
                _ => return,
            },
            false => None,
        };
        if held.holds() {
            tracing::debug!(path = path.as_str(), etag = info.etag, "object cache: filled");
            self.inner.objects.insert(path.as_str(), Cached { info, body }, held);
        }
    }

    /// Before this instance renames over `path` on `renaming`'s connection:
    /// drops its own entry and warns every holder ([`share::warn_holders`])
    /// from another pooled connection, waiting its turn behind other
    /// writers' warnings. [`Store::warned`] ends the warning once the
    /// rename is done. Nothing with the cache off.
    pub(crate) async fn warn_holders(&self, renaming: &Tree, path: &str) -> Warning {
        if !self.inner.opts.cache.enabled {
            return Warning::Unwarned;
        }
        self.inner.objects.forget(path);
        let Some(other) = share::other_connections(self.pool(), usize::MAX, &[renaming]).into_iter().next() else {
            // One connection: warn and close at once (a holder could come
            // back before the rename, and then holds the old file until
            // `--cache-max-age`).
            share::warn_holders_after(renaming, path).await;
            return Warning::Unwarned;
        };
        let sharing = |e: &share::ShareError| e.failure() == Failure::SharingViolation;
        match backoff::retry(&backoff::WARNING, sharing, || share::warn_holders(&other, path)).await {
            Ok(h) => {
                tracing::debug!(path, "object cache: holders warned");
                Warning::Held(Box::new(h))
            }
            Err(e) if is_not_found(&e) => Warning::Absent,
            Err(e) => {
                tracing::debug!(error = %e, path, "publishing without warning the object cache's holders");
                Warning::Unwarned
            }
        }
    }

    /// Ends a warning from [`Store::warn_holders`].
    pub(crate) async fn warned(&self, warning: Warning) {
        if let Warning::Held(h) = warning {
            let _ = h.close().await;
        }
    }

    /// After this instance changed `path` in place (its record): drops its
    /// own entry and breaks every holder's lease. Nothing with the cache
    /// off.
    pub(crate) async fn warn_holders_after(&self, tree: &Tree, path: &str) {
        if !self.inner.opts.cache.enabled {
            return;
        }
        self.inner.objects.forget(path);
        share::warn_holders_after(tree, path).await;
    }
}
