//! How the store keeps the object cache ([`super::object_cache`]) true to
//! the share: an entry is filled by holding the file and looking at it in
//! one compound, the hold first, so nothing can change between the look and
//! the hold unseen (a HEAD's own open does both);
//! and before this instance renames over an object it warns every holder
//! (on any instance) from another connection, keeping that open until the
//! rename is done.

use super::cache_watches;
use super::object_cache::{Age, Cached};
use crate::store::backoff;
use crate::store::folders::Found;
use crate::store::keys::map_key;
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::share::{self, is_not_found, CreateResponse, Failure, Handle, HeldLook, ShareError, Tree};
use crate::store::share_lookups::ShareLookups;
use crate::store::share_ops::ShareOps;
use crate::store::types::ObjectInfo;
use crate::store::{Reads, Root, StoreResult};

/// Most bytes a HEAD that holds a file reads with it (fewer if
/// `--cache-object-max` is smaller), so that a GET that follows is served
/// from memory: enough for small objects, little waste on large ones.
const HEAD_READ: u32 = 16 << 10;

/// What a HEAD's open found: a file it now holds for the cache, or, where
/// it could not hold one (another open's sharing refused it, no right to
/// read its data, not the key's own path), what a plain look found.
enum Look {
    Held(Box<HeldLook>),
    Plain(Box<(CreateResponse, Option<ObjectMeta>, Option<String>)>),
}

impl Look {
    fn created(&self) -> &CreateResponse {
        match self {
            Look::Held(l) => l.held.created(),
            Look::Plain(p) => &p.0,
        }
    }

    fn meta(&self) -> &Option<ObjectMeta> {
        match self {
            Look::Held(l) => &l.meta,
            Look::Plain(p) => &p.1,
        }
    }

    /// The record, moved out (the checks take it; nothing after them
    /// needs it here).
    fn take_meta(&mut self) -> Option<ObjectMeta> {
        match self {
            Look::Held(l) => l.meta.take(),
            Look::Plain(p) => p.1.take(),
        }
    }

    fn on_disk(&self) -> Option<&str> {
        match self {
            Look::Held(l) => l.on_disk.as_deref(),
            Look::Plain(p) => p.2.as_deref(),
        }
    }
}

/// What [`Root::warn_holders`] did before a rename over an object; `H`
/// is the warning's open.
pub(crate) enum Warning<H = Handle> {
    /// Every holder of the file at the path has closed, and none comes back
    /// while this open lasts.
    Held(Box<H>),
    /// Nothing is at the path: publish without replacing (a file that
    /// appears meanwhile was not warned about), and warn again if one did.
    Absent,
    /// No warning (the cache is off, or it could not be had): publish as
    /// asked.
    Unwarned,
}

impl<H> Warning<H> {
    /// True if the rename may replace a file: asked to, and a file there
    /// was warned about or nothing could be warned.
    pub(crate) fn may_replace(&self, replace: bool) -> bool {
        replace && !matches!(self, Warning::Absent)
    }
}

impl Reads {
    /// Objects the cache holds now, and the bytes they count.
    pub fn object_cache_usage(&self) -> (usize, usize) {
        self.root.objects().usage()
    }
    /// Directories the cache watches for changes no lease reports.
    pub fn object_cache_watches(&self) -> usize {
        self.root.watches().watched()
    }
    /// The share path an object of `key` is cached under, if such an object
    /// may be cached: the cache is on, records are EAs (whose changes this
    /// store warns holders of), and the key is not a directory marker.
    fn cache_path(&self, bucket: &str, key: &str) -> Option<SharePath> {
        if !self.root.objects().enabled() || !self.root.records().part_of_the_file() {
            return None;
        }
        let mapped = map_key(key).ok().filter(|m| !m.dir_marker)?;
        Some(self.root.object_path(bucket, &mapped))
    }
    /// The cached info (and small body) of `key`, if an entry holds it and
    /// its lease still stands. An entry past half its age is renewed in the
    /// background; one past `--cache-max-age` is used only once a look at
    /// its path (CREATE + CLOSE, one round trip) renews it, so a change no
    /// lease reports is never served from an entry older than that, and an
    /// object read again after a long pause costs a look, not a fill.
    pub(crate) async fn cached(&self, bucket: &str, key: &str) -> Option<Cached> {
        let path = self.cache_path(bucket, key)?;
        let (hit, age, generation) = self.root.objects().get(path.as_str())?;
        match age {
            Age::Fresh => Some(hit),
            Age::Aging => {
                self.renew_later(path, generation);
                Some(hit)
            }
            Age::Expired => {
                let renewed = match self.root.tree().await {
                    Ok(tree) => self.renew(&tree, &path, generation).await,
                    Err(_) => {
                        self.root.objects().forget_generation(path.as_str(), generation);
                        false
                    }
                };
                self.root.objects().counted(renewed);
                renewed.then_some(hit)
            }
        }
    }
    /// Looks at `path` once (CREATE + CLOSE) and renews its entry of
    /// `generation` if the path still names the held file
    /// ([`super::object_cache::ObjectCache::renew`], which drops it
    /// otherwise); a look that fails drops it too. True if renewed.
    async fn renew(&self, tree: &Tree, path: &SharePath, generation: u64) -> bool {
        let asked = std::time::Instant::now();
        match self.root.live(tree).stat_created(path.as_str()).await {
            Ok(now) => {
                let renewed = self.root.objects().renew(path.as_str(), &now, asked, generation);
                if renewed {
                    cache_watches::watch_dir_of(&self.root, path.as_str());
                }
                renewed
            }
            Err(_) => {
                self.root.objects().forget_generation(path.as_str(), generation);
                false
            }
        }
    }
    /// Renews the entry of `path` in the background ([`Reads::renew`]); a
    /// third of a fill's cost, and no new lease.
    fn renew_later(&self, path: SharePath, generation: u64) {
        let Some(filling) = self.root.objects().start_fill(path.as_str()) else { return };
        let store = self.clone();
        tokio::spawn(async move {
            let _filling = filling;
            let Ok(tree) = store.root.tree().await else { return };
            store.renew(&tree, &path, generation).await;
        });
    }
    /// The path `key` is cached under if a HEAD or fill may hold it now:
    /// as [`Reads::cache_path`], while the pool has two healthy connections
    /// (a writer's warning must come from another connection than its
    /// rename), and unless a holder of it lost its lease within
    /// [`super::object_cache::QUIET_BEFORE_HOLD`] (a file that changes
    /// often would make every writer wait for a break).
    pub(crate) fn may_hold(&self, bucket: &str, key: &str) -> Option<SharePath> {
        self.cache_path(bucket, key)
            .filter(|p| self.root.pool().healthy() >= 2 && self.root.objects().quiet(p.as_str()))
    }
    /// HEAD of `key`, whose cache path is `path` ([`Reads::may_hold`]), as
    /// [`Reads::head_uncached`] finds it, but the open of
    /// the key's own path is a holder's ([`share::hold_with_meta`], with
    /// the first [`HEAD_READ`] bytes): a plain object found there is then
    /// cached at no extra round trip. Where the file cannot be held
    /// (another open's sharing refuses it, no right to read its data) the
    /// look falls back to a plain one.
    ///
    /// Errors: as `head_uncached`.
    pub(crate) async fn head_and_hold(&self, bucket: &str, key: &str, path: SharePath) -> StoreResult<ObjectInfo> {
        // One holder per object at a time: concurrent misses of one key
        // (and misses beyond the fills allowed at once) look without
        // holding. Every extra lease on a file is one more break a writer
        // waits for.
        let Some(_filling) = self.root.objects().start_fill(path.as_str()) else {
            return self.head_uncached(bucket, key).await;
        };
        let seen = cache_watches::mark(&self.root, path.as_str());
        let tree = self.root.tree().await?;
        let mapped = self.map_key_to_read(&tree, bucket, key).await?;
        let exact = self.root.exact_names_for(&mapped);
        let read = HEAD_READ.min(self.root.objects().options().object_max);
        let (mut look, at, found) = self
            .open_stored(
                &tree,
                bucket,
                &mapped,
                |p, file_only| {
                    let (tree, own) = (&tree, &path);
                    async move {
                        if file_only && p == *own {
                            match self.root.live(tree).hold_with_meta(p.as_str(), read, exact).await {
                                Ok(Some(l)) => return Ok(Look::Held(Box::new(l))),
                                Ok(None) => {}
                                Err(e) if not_holdable(&e) => {}
                                Err(e) => return Err(e),
                            }
                        }
                        self.root
                            .live(tree)
                            .stat_with_meta_and_name(&p, exact, file_only)
                            .await
                            .map(|p| Look::Plain(Box::new(p)))
                    }
                },
                |l| (l.created().times, l.meta().as_ref().is_some_and(|m| m.marker)),
            )
            .await?;
        let meta = look.take_meta();
        let (_, info) =
            self.checked(&tree, bucket, (&mapped, key), look.created(), meta, look.on_disk(), (&at, found)).await?;
        if let (Look::Held(l), Found::Own) = (look, found) {
            self.keep_held(&path, &info, *l, seen);
        }
        Ok(info)
    }
    /// Keeps what a holder found of the object at `path` (`info`, made from
    /// the holder's own CREATE answer and checked as a read checks it) if
    /// it is a plain object, with its body if that was read whole and is
    /// small enough.
    ///
    /// `seen` is the directory's watch mark before the hold
    /// ([`cache_watches::mark`]): an entry whose directory changed, or whose
    /// watch began or ended, since then is kept expired, for one look to
    /// renew.
    fn keep_held(&self, path: &SharePath, info: &ObjectInfo, look: HeldLook, seen: cache_watches::Mark) {
        if info.meta.marker || info.path != path.as_str() {
            return;
        }
        let small = info.size <= u64::from(self.root.objects().options().object_max);
        // An SSE-C object's bytes on the share are not its body.
        let body = look.data.filter(|b| small && info.meta.sse_c.is_none() && b.len() as u64 == info.size);
        if look.held.holds() {
            tracing::debug!(path = path.as_str(), etag = info.etag, body = body.is_some(), "object cache: filled");
            let changed = cache_watches::mark(&self.root, path.as_str()) != seen;
            self.root.objects().insert(path.as_str(), Cached { info: info.clone(), body }, look.held, changed);
            cache_watches::watch_dir_of(&self.root, path.as_str());
        }
    }
    /// After an uncached GET found `info` for `key`: fills the cache's
    /// entry in the background (one compound) if the object was missed before
    /// (see [`super::object_cache::ObjectCache::missed_again`]), so that
    /// this request waits for nothing. Skipped for an object kept elsewhere
    /// than its own path, while the pool has fewer than two healthy
    /// connections (a writer's warning must come from another connection
    /// than its rename), and while too many fills are in flight.
    pub(crate) fn fill_later(&self, bucket: &str, key: &str, info: &ObjectInfo) {
        let Some(path) = self.may_hold(bucket, key) else { return };
        if info.path != path.as_str() || info.meta.marker {
            return;
        }
        // Claimed first, so that a miss with no fill free keeps its mark.
        let Some(filling) = self.root.objects().start_fill(path.as_str()) else { return };
        if !self.root.objects().missed_again(path.as_str()) {
            return;
        }
        let (store, bucket, key) = (self.clone(), bucket.to_string(), key.to_string());
        tokio::spawn(async move {
            let _filling = filling;
            store.hold_and_fill(&bucket, &key, &path).await;
        });
    }
    /// Holds the file at `path` and, in the same compound, reads its
    /// record, its bytes up to `--cache-object-max` and (where names must
    /// match exactly) its on-disk name ([`share::hold_with_meta`]); keeps
    /// the result if it passes a read's checks and the lease still stands.
    /// Anything that fails leaves the entry out (the holder's handle closes
    /// when dropped).
    async fn hold_and_fill(&self, bucket: &str, key: &str, path: &SharePath) {
        let Ok(tree) = self.root.tree().await else { return };
        let Ok(mapped) = map_key(key) else { return };
        let read = self.root.objects().options().object_max;
        let seen = cache_watches::mark(&self.root, path.as_str());
        let mut look =
            match self.root.live(&tree).hold_with_meta(path.as_str(), read, self.root.exact_names_for(&mapped)).await {
                Ok(Some(look)) => look,
                Ok(None) => return,
                Err(e) => {
                    tracing::debug!(error = %e, path = path.as_str(), "object cache: not held");
                    return;
                }
            };
        let meta = look.meta.take();
        let (created, on_disk) = (look.held.created(), look.on_disk.as_deref());
        let checked = self.checked(&tree, bucket, (&mapped, key), created, meta, on_disk, (path, Found::Own)).await;
        if let Ok((_, info)) = checked {
            self.keep_held(path, &info, look, seen);
        }
    }
}

impl Root {
    /// Before this instance renames over `path` on `renaming`'s connection:
    /// drops its own entry and warns every holder from another pooled
    /// connection ([`warn_holders_on`]). [`Root::warned`] ends the warning
    /// once the rename is done. Nothing with the cache off.
    pub(crate) async fn warn_holders(&self, renaming: &Tree, path: &str) -> Warning {
        if !self.forget_own(path) {
            return Warning::Unwarned;
        }
        // Chosen once: every try of the warning goes to this connection.
        let other = share::other_connections(self.pool(), usize::MAX, &[renaming]).into_iter().next();
        let other = other.as_ref().map(|t| self.live(t));
        warn_holders_on(&self.live(renaming), other.as_ref(), path).await
    }
    /// The warning of a write to `path` where a lookup just found nothing:
    /// [`Warning::Absent`] (this instance's own entry dropped) with the
    /// cache on, else [`Warning::Unwarned`] as [`Root::warn_holders`].
    pub(crate) fn absent_for_cache(&self, path: &str) -> Warning {
        match self.forget_own(path) {
            true => Warning::Absent,
            false => Warning::Unwarned,
        }
    }
    /// Before this instance changes `path`: drops its own entry. False if
    /// the cache is off (writers then warn nobody).
    fn forget_own(&self, path: &str) -> bool {
        if self.options().cache.enabled {
            self.objects().forget(path);
        }
        self.options().cache.enabled
    }
    /// Ends a warning from [`Root::warn_holders`].
    pub(crate) async fn warned(&self, warning: Warning) {
        if let Warning::Held(h) = warning {
            let _ = h.close().await;
        }
    }
    /// After this instance changed `path` in place (its record): drops its
    /// own entry and breaks every holder's lease. Nothing with the cache
    /// off.
    pub(crate) async fn warn_holders_after(&self, tree: &Tree, path: &str) {
        if self.forget_own(path) {
            self.live(tree).break_leases(path).await;
        }
    }
}

/// Warns every holder of `path` before `renaming`'s connection renames
/// over it: an open for DELETE on `other`, another connection, that
/// breaks their leases ([`ShareOps::open_breaking_leases`]), tried again
/// while another writer's warning holds the file ([`backoff::WARNING`],
/// 10 s). With no other connection the leases are broken at once on
/// `renaming` and nothing is kept (a holder could come back before the
/// rename, and then holds the old file until `--cache-max-age`).
///
/// Returns `Held` (keep it until the rename is done), `Absent` (nothing
/// at `path`: publish without replacing), or `Unwarned` when no warning
/// could be had (a directory at `path`, the wait ran out, a lost
/// connection, no other connection).
pub(crate) async fn warn_holders_on<S: ShareOps>(renaming: &S, other: Option<&S>, path: &str) -> Warning<S::Handle> {
    let Some(other) = other else {
        renaming.break_leases(path).await;
        return Warning::Unwarned;
    };
    let sharing = |e: &ShareError| e.failure() == Failure::SharingViolation;
    match backoff::retry(&backoff::WARNING, sharing, || other.open_breaking_leases(path)).await {
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

/// True for the errors on which a HEAD looks without holding: another
/// open's sharing refuses the holder's (a writer's open that shares no
/// reading, or a warning), or no right to read the file's data.
fn not_holdable(e: &ShareError) -> bool {
    matches!(e.failure(), Failure::SharingViolation | Failure::AccessDenied)
}

#[cfg(test)]
#[path = "coherence_test.rs"]
mod tests;
