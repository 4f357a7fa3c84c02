//! ListObjects over the share: the SMB directory source for the S3-order
//! walk in [`super::walk`], and ETags for the returned objects fetched with
//! concurrent CREATE+QUERY_INFO+CLOSE compounds.

use crate::store::Listings;

use futures::stream::{self, StreamExt};

use super::dir_window::WindowBuilder;
use super::entry_lookups::LOOKUPS_IN_FLIGHT;
use super::short_aliases::short_aliases;
use std::sync::Arc;

use super::listing_cache::{stamp, DirCache, DirRead, DirStamp, MAX_AGE};
use super::names::Hint;
use super::spill_runs::{SpillBudget, SpillRuns};
use super::walk::{list, start_dir, DirItem, DirSource, ListRequest, ListResult, Listed, Needed, Window};
use crate::store::beside::stat_stored;
use crate::store::keys::map_key;
use crate::store::keys::{self, decode_component, encode_component};
use crate::store::path::SharePath;
use crate::store::share::{self, is_not_found};
use crate::store::share_lookups::ShareLookups;
use crate::store::types::ObjectInfo;
use crate::store::{StoreError, StoreResult};

/// The walk's directories, read from a share ([`ShareLookups`]: the live one
/// in the gateway, the in-memory one in `share_source_test.rs`).
struct ShareSource<'a, S> {
    share: S,
    bucket_path: SharePath,
    cache: &'a DirCache,
    /// Continuation pages may reuse a recent listing of a directory.
    reuse: bool,
    /// Most entries of one directory held at once ([`crate::store::StoreOptions::list_window`]).
    window: usize,
    /// Local disk for what a window lets go ([`crate::store::StoreOptions::list_spill`]).
    spill: &'a SpillBudget,
}

impl<S> ShareSource<'_, S> {
    fn dir_path(&self, path: &[String]) -> String {
        path.iter().fold(self.bucket_path.clone(), |p, c| p.join(&encode_component(c))).to_string()
    }
}

impl<S: ShareLookups + Send> DirSource for ShareSource<'_, S> {
    type Error = StoreError;

    async fn list(&self, path: &[String], needed: &Needed) -> Result<Option<Window>, StoreError> {
        let dir = self.dir_path(path);
        if self.reuse {
            // A kept window, or spilled runs of what follows one, if the
            // directory is unchanged since it was read: no entry came or
            // went.
            if let Some((cached, window)) = self.cache.get(&dir, needed) {
                match self.unchanged(&dir, cached).await? {
                    Some(true) => return Ok(Some(window)),
                    Some(false) => {}
                    None => return Ok(None),
                }
            } else if let Some((cached, spill)) = self.cache.spill_for(&dir, needed) {
                match self.unchanged(&dir, cached).await? {
                    Some(true) => {
                        if let Some(window) = self.window_from_spill(&dir, cached, needed, spill).await {
                            return Ok(Some(window));
                        }
                    }
                    Some(false) => {}
                    None => return Ok(None),
                }
            }
        }
        // Concurrent listings of this directory share a read that began
        // after they arrived, for all their needs (dir_reads.rs).
        let serves = |read: &DirRead, read_for: &Needed, needed: &Needed| {
            read.as_ref().is_none_or(|(_, w, _)| w.serves_needs(read_for, needed))
        };
        let (read_for, read) = self
            .cache
            .reads
            .read(&dir, needed, serves, |read_for| {
                let dir = &dir;
                async move {
                    let Some((times, window, spill)) = self.read(dir, &read_for).await? else { return Ok(None) };
                    let spill = spill.map(Arc::new);
                    if let Some(spill) = &spill {
                        // Gone with the listing at the latest (a cache
                        // nobody uses again keeps its entries).
                        SpillRuns::expire_after(spill, MAX_AGE);
                    }
                    Ok::<_, StoreError>(Some((stamp(&times), window, spill)))
                }
            })
            .await?;
        let Some((stamp, window, spill)) = read else { return Ok(None) };
        self.cache.put_spilled(dir, stamp, &read_for, window.clone(), spill);
        Ok(Some(window))
    }
}

impl<S: ShareLookups> ShareSource<'_, S> {
    /// Whether `dir`'s stamp is still `cached`; `None` if it is gone.
    ///
    /// Errors: the share's, other than not-found.
    async fn unchanged(&self, dir: &str, cached: DirStamp) -> StoreResult<Option<bool>> {
        match self.share.times(dir).await {
            Ok(now) => Ok(Some(stamp(&now) == cached)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The window of `dir` that `needed` needs, made from the runs its
    /// last read spilled (on a blocking thread: it reads local files), and
    /// kept like a window read from the share; `None` if they cannot make
    /// it (the caller reads the share).
    async fn window_from_spill(
        &self,
        dir: &str,
        stamp: DirStamp,
        needed: &Needed,
        spill: Arc<SpillRuns>,
    ) -> Option<Window> {
        // Within the bytes all windows being made may hold, as a read of
        // the share is (listing_cache.rs).
        let mut reserved = self.cache.reserve_read();
        let max_bytes = self.cache.window_bytes();
        let max_bytes = if reserved.cover(max_bytes) { max_bytes } else { reserved.allowed() };
        let (runs, wanted, cap) = (spill.clone(), needed.clone(), self.window);
        let made = tokio::task::spawn_blocking(move || WindowBuilder::from_runs(&runs, &wanted, cap, max_bytes)).await;
        match made.map_err(std::io::Error::other).and_then(|r| r) {
            Ok(Some(window)) => {
                self.cache.put_spilled(dir.to_string(), stamp, needed, window.clone(), Some(spill));
                Some(window)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "a listing's spilled runs could not be read back; reading the directory again");
                None
            }
        }
    }

    /// The window of `dir`'s `needed` names (see [`super::dir_window`]), and
    /// the directory's times when its read began; `None` if it does not
    /// exist. A window that cannot end within the cap (all directories)
    /// is read again without one.
    #[tracing::instrument(level = "debug", name = "store.listing_window", skip_all)]
    async fn read(
        &self,
        dir: &str,
        needed: &Needed,
    ) -> StoreResult<Option<(share::FileTimes, Window, Option<SpillRuns>)>> {
        let (mut cap, mut max_bytes) = (self.window, self.cache.window_bytes());
        loop {
            let mut reader = match self.share.open_dir(dir).await {
                Ok(r) => r,
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            // What the window lets go is spilled to local disk, for the
            // windows after it (spill_runs.rs).
            let mut window = WindowBuilder::new(needed, cap, max_bytes);
            if cap != usize::MAX && self.cache.keeps() {
                window = window.spilling(self.spill.clone());
            }
            // The bytes of windows being read are bounded over every
            // listing: past what it could reserve, a window stays smaller.
            let mut reserved = self.cache.reserve_read();
            let mut beside = Vec::new();
            // One QUERY_DIRECTORY answer at a time: only the window and
            // the page being looked at are held.
            loop {
                let entries = match self.share.next_entries(&mut reader).await {
                    Ok(Some(entries)) => entries,
                    Ok(None) => break,
                    // The directory went while it was read (Samba answers
                    // STATUS_NO_SUCH_FILE): it lists as gone, as at its open.
                    Err(e) if is_not_found(&e) => return Ok(None),
                    Err(e) => return Err(e.into()),
                };
                self.add(dir, entries, &mut window, &mut beside).await?;
                // (Not on the read without a cap: one that must hold
                // every directory up to the next file.)
                if max_bytes != usize::MAX && !reserved.cover(window.used_bytes()) {
                    window.limit_bytes(reserved.allowed());
                    reserved.cover(window.used_bytes());
                }
            }
            let times = self.share.dir_times(&reader);
            self.share.close_dir(reader).await?;
            match window.finish_spilled(beside) {
                (Some(w), spill) => return Ok(Some((times, w, spill))),
                (None, _) => (cap, max_bytes) = (usize::MAX, usize::MAX),
            }
        }
    }

    /// Offers one page of `dir`'s entries to `window`, as the walk lists
    /// them; objects kept beside their directory go to `beside`, merged
    /// once the plain names are known (see `beside`).
    ///
    /// Errors: the record or alias lookups failed.
    async fn add(
        &self,
        dir: &str,
        entries: Vec<share::DirEntry>,
        window: &mut WindowBuilder,
        beside: &mut Vec<DirItem>,
    ) -> StoreResult<()> {
        let markers = self.share.marker_dirs(dir, &entries).await?;
        let aliases = short_aliases(&self.share, dir, &entries).await?;
        for e in entries {
            // A symbolic link or junction may lead out of the bucket (into
            // another, or anywhere the server reaches): it is no object.
            if aliases.contains(&e.name) || e.times.is_reparse_point() {
                continue;
            }
            let (stored, kept_beside) = match keys::split_beside(&e.name) {
                Some((stem, marker)) if !e.times.is_directory() => (stem, Some(marker)),
                _ if e.name.contains(keys::BESIDE_MARK) => continue,
                _ => (e.name.as_str(), None),
            };
            let name = decode_component(stored);
            // No key can name it (map_key refuses it), so it lists none: a
            // bucket's own gateway state lives there.
            if keys::is_internal(&name) {
                continue;
            }
            // Names another client made that our mapping cannot reproduce
            // would list as keys that do not open; leave them out.
            if encode_component(&name) != stored || name.is_empty() {
                continue;
            }
            if let Some(marker) = kept_beside {
                beside.push(DirItem {
                    name: if marker { format!("{name}/") } else { name },
                    is_dir: false,
                    size: e.times.end_of_file,
                    last_modified: e.times.last_write,
                    etag_hint: None,
                });
                continue;
            }
            let is_dir = e.times.is_directory();
            let candidate = match self.share.records_in_entries() {
                true => e.ea_size > 0,
                false => markers.contains(&e.file_id),
            };
            if is_dir && candidate {
                // A directory with an EA (or a sidecar naming it a marker):
                // possibly a marker object `name/`; confirmed when its ETag
                // is fetched.
                window.push_entry(&format!("{name}/"), false, 0, e.times.last_write, Hint::None);
            }
            // A file without EAs has no record of ours: its ETag is the
            // derived one, known from the directory entry alone (the
            // entry's FileId is the on-disk id the open would report).
            let derived = !is_dir && self.share.records_in_entries() && e.ea_size == 0;
            let hint = if derived { Hint::Derived(e.file_id) } else { Hint::None };
            window.push_entry(&name, is_dir, e.times.end_of_file, e.times.last_write, hint);
        }
        Ok(())
    }
}

/// The ETag, size and LastWriteTime of the object `key` that a listing
/// of `bucket` (its share path) saw, looked up wherever it is kept
/// ([`stat_stored`], also beside a missing own path: the object may be in
/// the middle of a move); `None` if it went since the directory was read,
/// or is a directory that is no object (no marker record, or one the
/// gateway made).
///
/// Errors: the share's, other than not-found.
async fn listed_object<S: ShareLookups>(
    s: &S,
    bucket: &SharePath,
    key: &str,
) -> StoreResult<Option<(String, u64, u64)>> {
    let Ok(mapped) = map_key(key) else { return Ok(None) };
    match stat_stored(s, bucket.join_key(&mapped), &mapped, true).await? {
        Some((c, meta, path)) => {
            let info = ObjectInfo::new(&c, meta, &path);
            Ok(Some((info.etag, info.size, info.last_modified)))
        }
        None => Ok(None),
    }
}

impl Listings {
    /// One page of ListObjects(V2) in S3 order, with ETags.
    ///
    /// Errors: NoSuchBucket, or any SMB error of a directory the page needs
    /// (a listing is never silently truncated).
    /// `continuation` marks a request for a later page (a V2 continuation
    /// token or a V1 marker): it may reuse directory listings read for the
    /// earlier pages (30 s from a page's last use, 5 minutes at most from the
    /// read; writes through this instance invalidate them).
    pub async fn list_objects(&self, bucket: &str, req: &ListRequest, continuation: bool) -> StoreResult<ListResult> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        let mut page = self.walk_page(&tree, bucket, req, continuation).await?;
        // Fill in ETags; drop marker candidates that turn out not to be
        // markers (a directory carrying some other EA).
        let lookups: Vec<(usize, String)> = page
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Listed::Object { key, etag_hint: None, .. } => Some((i, key.clone())),
                _ => None,
            })
            .collect();
        // Per looked-up entry: its index, and what `listed_object` found.
        type Lookup = (usize, StoreResult<Option<(String, u64, u64)>>);
        let bucket_path = self.root.bucket_path(bucket);
        let results: Vec<Lookup> = stream::iter(lookups)
            .map(|(i, key)| {
                let tree = share::idle_connection(self.root.pool()).unwrap_or_else(|| tree.clone());
                let bucket_path = &bucket_path;
                async move { (i, listed_object(&self.root.live(&tree), bucket_path, &key).await) }
            })
            .buffered(LOOKUPS_IN_FLIGHT)
            .collect()
            .await;
        let mut drop_idx = Vec::new();
        for (i, r) in results {
            match r? {
                Some((etag, size, lm)) => {
                    if let Listed::Object { etag_hint, size: s, last_modified, .. } = &mut page.entries[i] {
                        *etag_hint = Some(etag);
                        *s = size;
                        *last_modified = lm;
                    }
                }
                None => drop_idx.push(i),
            }
        }
        for i in drop_idx.into_iter().rev() {
            page.entries.remove(i);
        }
        Ok(page)
    }

    /// One page of keys in S3 order as the directory walk finds them,
    /// without ETags (an entry with `etag_hint: None` may be a directory
    /// that is no marker); see [`Listings::list_objects`].
    ///
    /// Errors: SMB failures of a directory the page needs.
    pub(crate) async fn walk_page(
        &self,
        tree: &share::Tree,
        bucket: &str,
        req: &ListRequest,
        continuation: bool,
    ) -> StoreResult<ListResult> {
        // The key rules first, before anything is looked up on the share:
        // a prefix no key can be under (thousands of `a/`) lists nothing.
        let Some(dirs) = start_dir(&req.prefix) else {
            return Ok(ListResult::default());
        };
        let dir_key =
            keys::MappedKey { components: dirs.iter().map(|c| encode_component(c)).collect(), dir_marker: true };
        if self.root.exact_names_for(&dir_key) && !dirs.is_empty() {
            // The walk starts in the directory the prefix names; on a
            // case-insensitive share `dir/` would open `Dir` (and an 8.3
            // alias its long name) and list keys that do not exist. The
            // names must match exactly.
            if self.root.case_mismatch(tree, bucket, &dir_key).await?.is_some() {
                return Ok(ListResult::default());
            }
        }
        let src = ShareSource {
            share: self.root.live(tree),
            bucket_path: self.root.bucket_path(bucket),
            cache: self.root.dir_cache(),
            reuse: continuation,
            window: self.root.options().list_window,
            spill: &self.root.options().list_spill,
        };
        let req = ListRequest { max_dirs: Some(self.root.options().list_max_dirs), ..req.clone() };
        list(&src, &req).await
    }
}

#[cfg(test)]
#[path = "share_source_test.rs"]
mod tests;
