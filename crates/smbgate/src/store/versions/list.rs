//! ListObjectVersions: every key under a prefix with its versions, newest
//! first, merged from the bucket's files (the current versions) and the
//! versions folders (stored versions and delete markers).
//!
//! The keys under the prefix from the key marker on are gathered by name
//! (the bucket's walk without ETags from the marker, and the versions
//! folders' tree, read a level at a time with its directories in
//! parallel, leaving out what lies wholly before the marker); then one
//! page is cut from them in key order, reading a key's versions folder
//! only as the page reaches it (a few keys ahead at once), and only the
//! page's entries are looked at for their ETags and version IDs. Memory
//! grows with the keys after the marker, not with their versions.

use std::collections::BTreeMap;

use futures::stream::{self, StreamExt};

use crate::store::keys::{self, map_key, INTERNAL_DIR};
use crate::store::listings::walk::{start_dir, ListRequest, Listed};
use crate::store::path::SharePath;
use crate::store::share::{self, is_not_found, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::types::ObjectInfo;
use crate::store::{Listings, StoreResult};

use super::{version_of, StoredName};

/// Entries looked at on the share at once while a page is filled in.
const LOOKUPS: usize = 16;

/// Keys one walk of the bucket's files asks for per page.
const WALK_PAGE: usize = 1000;

/// Versions folders read at once, ahead of the page that needs them; and
/// directories of the versions tree read at once.
const FOLDERS_AHEAD: usize = 16;

/// What a ListObjectVersions asks for.
#[derive(Debug, Clone, Default)]
pub struct VersionsRequest {
    /// Only keys starting with this.
    pub prefix: String,
    /// Rolls keys up into common prefixes (`None` or empty: no roll-up).
    pub delimiter: Option<String>,
    /// Start after this key (with `version_id_marker`, after that version
    /// of it).
    pub key_marker: Option<String>,
    /// Start after this version of `key_marker`.
    pub version_id_marker: Option<String>,
    /// Most entries (versions, markers and common prefixes together).
    pub max_keys: usize,
}

/// One version or delete marker in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedVersion {
    /// Its key.
    pub key: String,
    /// Its version ID.
    pub version_id: String,
    /// True for the key's newest version.
    pub is_latest: bool,
    /// True for a delete marker (no ETag, no size).
    pub delete_marker: bool,
    /// ETag value, unquoted.
    pub etag: String,
    /// Size in bytes.
    pub size: u64,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
}

/// An entry of a versions page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionItem {
    /// A version or delete marker.
    Version(ListedVersion),
    /// A rolled-up common prefix.
    CommonPrefix(String),
}

/// One page of ListObjectVersions.
#[derive(Debug, Clone, Default)]
pub struct VersionsPage {
    /// In key order, each key's versions newest first.
    pub items: Vec<VersionItem>,
    /// True if more entries follow.
    pub is_truncated: bool,
    /// Where the next page starts (when truncated).
    pub next_key_marker: Option<String>,
    /// The version of `next_key_marker` the next page starts after.
    pub next_version_id_marker: Option<String>,
}

/// A key's versions as gathered: whether a current file stands at its path,
/// whether it has a versions folder, and once that is read, its stored
/// versions with their paths, newest first.
#[derive(Debug, Default)]
struct KeyVersions {
    current: bool,
    folder: bool,
    stored: Option<Vec<(SharePath, StoredName)>>,
}

/// A picked entry, before it is looked at.
enum Picked {
    Current { key: String, latest: bool },
    Stored { key: String, path: SharePath, name: StoredName, latest: bool },
    Prefix(String),
}

impl Listings {
    /// One page of ListObjectVersions for `bucket` (see the module docs).
    ///
    /// Errors: NoSuchBucket; SMB failures of a directory the page needs.
    pub async fn list_versions(&self, bucket: &str, req: &VersionsRequest) -> StoreResult<VersionsPage> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        if req.max_keys == 0 {
            return Ok(VersionsPage::default());
        }
        let marker = req.key_marker.as_deref().filter(|m| !m.is_empty());
        let mut keys: BTreeMap<String, KeyVersions> = BTreeMap::new();
        self.gather_current(&tree, bucket, &req.prefix, marker, &mut keys).await?;
        if let (Some(m), Some(_)) = (marker.filter(|m| m.starts_with(&req.prefix)), &req.version_id_marker) {
            // The walk starts after the marker; its own versions continue.
            if self.current_info(&tree, bucket, m).await?.is_some() {
                keys.entry(m.to_string()).or_default().current = true;
            }
        }
        self.gather_stored(&tree, bucket, &req.prefix, marker, &mut keys).await?;
        let mut keys: Vec<(String, KeyVersions)> = keys.into_iter().collect();
        let (picked, page) = self.pick(&tree, bucket, req, &mut keys).await?;
        let items = stream::iter(picked)
            .map(|p| self.look(&tree, bucket, p))
            .buffered(LOOKUPS)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(VersionsPage { items: items.into_iter().flatten().collect(), ..page })
    }

    /// The keys under `prefix`, after `marker`, that have a file in the
    /// bucket.
    async fn gather_current(
        &self,
        tree: &Tree,
        bucket: &str,
        prefix: &str,
        marker: Option<&str>,
        keys: &mut BTreeMap<String, KeyVersions>,
    ) -> StoreResult<()> {
        let start_after = marker.map(str::to_string);
        let mut req =
            ListRequest { prefix: prefix.to_string(), max_keys: WALK_PAGE, start_after, ..Default::default() };
        let mut continuation = false;
        loop {
            let page = self.walk_page(tree, bucket, &req, continuation).await?;
            for e in page.entries {
                if let Listed::Object { key, .. } = e {
                    keys.entry(key).or_default().current = true;
                }
            }
            match (page.is_truncated, page.next_marker) {
                (true, Some(next)) => req.start_after = Some(next),
                _ => return Ok(()),
            }
            continuation = true;
        }
    }

    /// The keys under `prefix`, from `marker` on, that have a versions
    /// folder: the versions tree read a level at a time, its directories in
    /// parallel, leaving out those whose keys all sort before `marker`.
    async fn gather_stored(
        &self,
        tree: &Tree,
        bucket: &str,
        prefix: &str,
        marker: Option<&str>,
        keys: &mut BTreeMap<String, KeyVersions>,
    ) -> StoreResult<()> {
        let Some(dirs) = start_dir(prefix) else { return Ok(()) };
        let mut start = self.root.versions_root(bucket);
        let mut key_prefix = String::new();
        for d in &dirs {
            start = start.join(&keys::encode_component(d));
            key_prefix.push_str(d);
            key_prefix.push('/');
        }
        // A subtree of keys starting with `under` lies wholly before the
        // marker if `under` sorts before it and the marker is not in it.
        let before = |under: &str| marker.is_some_and(|m| under < m && !m.starts_with(under));
        let mut level: Vec<(SharePath, String)> = vec![(start, key_prefix)];
        while !level.is_empty() {
            let read = stream::iter(level)
                .map(|(dir, under)| async move {
                    match self.root.live(tree).list_dir(dir.as_str()).await {
                        Ok(entries) => Ok(Some((dir, under, entries))),
                        Err(e) if is_not_found(&e) => Ok(None),
                        Err(e) => Err(crate::store::StoreError::from(e)),
                    }
                })
                .buffer_unordered(FOLDERS_AHEAD)
                .collect::<Vec<_>>()
                .await;
            let mut next = Vec::new();
            for found in read {
                let Some((dir, under, entries)) = found? else { continue };
                for e in entries.iter().filter(|e| e.times.is_directory()) {
                    if e.name.eq_ignore_ascii_case(INTERNAL_DIR) {
                        let key = under.trim_end_matches('/');
                        if !key.is_empty() && key.starts_with(prefix) && marker.is_none_or(|m| key >= m) {
                            keys.entry(key.to_string()).or_default().folder = true;
                        }
                        continue;
                    }
                    let name = keys::decode_component(&e.name);
                    if keys::encode_component(&name) != e.name {
                        continue;
                    }
                    let deeper = format!("{under}{name}/");
                    // The key `under + name` itself is in the deeper
                    // directory too: it may not be passed over by its
                    // subtree's test alone.
                    let key = &deeper[..deeper.len() - 1];
                    if (deeper.starts_with(prefix) || prefix.starts_with(&deeper)) && !(before(&deeper) && before(key))
                    {
                        next.push((dir.join(&e.name), deeper));
                    }
                }
            }
            level = next;
        }
        Ok(())
    }

    /// Reads the versions folders of the keys from `from` on that have one
    /// and are not read yet, up to [`FOLDERS_AHEAD`] of them at once.
    async fn read_folders(
        &self,
        tree: &Tree,
        bucket: &str,
        keys: &mut [(String, KeyVersions)],
        from: usize,
    ) -> StoreResult<()> {
        let wanted: Vec<usize> = (from..keys.len())
            .filter(|&i| keys[i].1.folder && keys[i].1.stored.is_none())
            .take(FOLDERS_AHEAD)
            .collect();
        let names: Vec<String> = wanted.iter().map(|&i| keys[i].0.clone()).collect();
        let read = stream::iter(names)
            .map(|key| async move {
                let Ok(mapped) = map_key(&key) else { return Ok(Vec::new()) };
                self.root.stored_versions(tree, bucket, &mapped).await
            })
            .buffered(FOLDERS_AHEAD)
            .collect::<Vec<_>>()
            .await;
        for (i, stored) in wanted.into_iter().zip(read) {
            keys[i].1.stored = Some(stored?);
        }
        Ok(())
    }

    /// Cuts one page from the gathered keys: markers applied, keys rolled
    /// up by the delimiter, at most `max_keys` entries.
    async fn pick(
        &self,
        tree: &Tree,
        bucket: &str,
        req: &VersionsRequest,
        keys: &mut [(String, KeyVersions)],
    ) -> StoreResult<(Vec<Picked>, VersionsPage)> {
        let delimiter = req.delimiter.as_deref().filter(|d| !d.is_empty());
        let marker = req.key_marker.as_deref().filter(|m| !m.is_empty());
        let mut picked = Vec::new();
        let mut page = VersionsPage::default();
        let mut last_prefix: Option<String> = None;
        let full = |picked: &Vec<Picked>| picked.len() >= req.max_keys;
        let first = keys.partition_point(|(k, _)| marker.is_some_and(|m| k.as_str() < m));
        for i in first..keys.len() {
            if keys[i].1.folder && keys[i].1.stored.is_none() {
                self.read_folders(tree, bucket, keys, i).await?;
            }
            let (key, versions) = &keys[i];
            if let (Some(d), Some(rest)) = (delimiter, key.strip_prefix(req.prefix.as_str())) {
                if let Some(at) = rest.find(d) {
                    let cp = &key[..req.prefix.len() + at + d.len()];
                    if last_prefix.as_deref() == Some(cp) || marker.is_some_and(|m| cp <= m) {
                        continue;
                    }
                    if full(&picked) {
                        page.is_truncated = true;
                        break;
                    }
                    last_prefix = Some(cp.to_string());
                    picked.push(Picked::Prefix(cp.to_string()));
                    continue;
                }
            }
            // The versions of the marker's key come after its version
            // marker only; without one, the key is passed whole.
            let mut skip_to = match marker {
                Some(m) if m == key => match &req.version_id_marker {
                    Some(v) => Some(v.as_str()),
                    None => continue,
                },
                _ => None,
            };
            let mut latest = true;
            if versions.current {
                let listed = skip_to.is_none();
                if let Some(v) = skip_to {
                    if self.current_version_id(tree, bucket, key).await?.as_deref() == Some(v) {
                        skip_to = None;
                    }
                }
                if listed {
                    if full(&picked) {
                        page.is_truncated = true;
                        break;
                    }
                    picked.push(Picked::Current { key: key.clone(), latest });
                }
                latest = false;
            }
            for (path, name) in versions.stored.iter().flatten() {
                if let Some(v) = skip_to {
                    if name.version_id == v {
                        skip_to = None;
                    }
                    latest = false;
                    continue;
                }
                if full(&picked) {
                    page.is_truncated = true;
                    break;
                }
                picked.push(Picked::Stored { key: key.clone(), path: path.clone(), name: name.clone(), latest });
                latest = false;
            }
            if page.is_truncated {
                break;
            }
        }
        if page.is_truncated {
            match picked.last() {
                Some(Picked::Prefix(p)) => page.next_key_marker = Some(p.clone()),
                Some(Picked::Current { key, .. }) => {
                    page.next_key_marker = Some(key.clone());
                    page.next_version_id_marker = self.current_version_id(tree, bucket, key).await?;
                }
                Some(Picked::Stored { key, name, .. }) => {
                    page.next_key_marker = Some(key.clone());
                    page.next_version_id_marker = Some(name.version_id.clone());
                }
                None => {}
            }
        }
        Ok((picked, page))
    }

    /// The version ID of `key`'s current file (`None` if it has none now).
    async fn current_version_id(&self, tree: &Tree, bucket: &str, key: &str) -> StoreResult<Option<String>> {
        Ok(self.current_info(tree, bucket, key).await?.map(|i| version_of(&i)))
    }

    /// `key`'s current file, wherever it is kept (`None` if it has none).
    async fn current_info(&self, tree: &Tree, bucket: &str, key: &str) -> StoreResult<Option<ObjectInfo>> {
        let Ok(mapped) = map_key(key) else { return Ok(None) };
        Ok(self
            .root
            .stat_object(tree, bucket, &mapped, false)
            .await?
            .map(|(c, meta, path)| ObjectInfo::new(&c, meta, &path)))
    }

    /// A picked entry as listed: a version looked at for its ETag, size
    /// and ID (`None` if it is gone since it was gathered).
    async fn look(&self, tree: &Tree, bucket: &str, picked: Picked) -> StoreResult<Option<VersionItem>> {
        let tree = share::idle_connection(self.root.pool()).unwrap_or_else(|| tree.clone());
        let (key, latest, info, name) = match picked {
            Picked::Prefix(p) => return Ok(Some(VersionItem::CommonPrefix(p))),
            Picked::Current { key, latest } => match self.current_info(&tree, bucket, &key).await? {
                Some(info) => (key, latest, info, None),
                None => return Ok(None),
            },
            Picked::Stored { key, name, latest, .. } if name.marker => {
                return Ok(Some(VersionItem::Version(ListedVersion {
                    key,
                    version_id: name.version_id,
                    is_latest: latest,
                    delete_marker: true,
                    etag: String::new(),
                    size: 0,
                    last_modified: name.stored_at,
                })));
            }
            Picked::Stored { key, path, name, latest } => {
                match self.root.live(&tree).stat_with_meta(path.as_str(), false).await {
                    Ok((c, meta)) => (key, latest, ObjectInfo::new(&c, meta, &path), Some(name)),
                    Err(e) if is_not_found(&e) => return Ok(None),
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let version_id = match name {
            Some(n) => n.version_id,
            None => version_of(&info),
        };
        Ok(Some(VersionItem::Version(ListedVersion {
            key,
            version_id,
            is_latest: latest,
            delete_marker: false,
            etag: info.etag,
            size: info.size,
            last_modified: info.last_modified,
        })))
    }
}
