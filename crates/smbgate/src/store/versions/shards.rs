//! Where a key's stored versions lie: its versions folder, split into
//! shards once it holds many.
//!
//! A case-insensitive share (Samba's default, and Windows') looks at every
//! name of a folder before it makes a new one there, to refuse a name that
//! differs only in case. In one flat folder each new version would cost a
//! scan of all the versions before it: 2,000 versions of one key made
//! every overwrite read 2,000 directory entries in smbd, and 8 clients
//! overwriting their keys lost a third of their rate to it.
//!
//! So a key's versions folder holds its first
//! [`StoreOptions::versions_per_folder`](crate::store::StoreOptions::versions_per_folder)
//! stored versions and markers itself, and later ones go into shards,
//! subfolders named by the 16 hex digits of `u64::MAX` minus the time
//! (FILETIME) the shard was begun, each filled up to that many by the
//! instance filling it. Names inside a shard are the flat folder's
//! (`<age>.<version id>[.marker]`), so a key's versions are read by
//! reading the folder and its shards and sorting all names together: the
//! order does not depend on which shard a version is in.
//!
//! Which shard is being filled, and how full, is kept in memory per key;
//! an instance that does not know (started since, or forgotten among
//! many keys) reads the folder once, and the newest shard, to find out.
//! Instances do not share counts, so with N instances writing one key a
//! shard may hold N times as many.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};

use crate::store::keys::MappedKey;
use crate::store::path::SharePath;
use crate::store::share::{is_not_found, Tree};
use crate::store::share_ops::ShareOps;
use crate::store::{Root, StoreResult};

use super::{filetime_now, StoredName};

/// Keys whose filling shard is remembered at most; past it, those not used
/// for [`FORGET_AFTER`] are forgotten (and read again when next needed),
/// or if all were, the least recently used half.
const REMEMBERED: usize = 10_000;

/// How long an unused key's filling shard is surely remembered.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// Shards of one key read at once.
const SHARDS_AT_ONCE: usize = 8;

/// The shard each key's next stored version goes into, as this instance
/// knows it (shared by the roots of every identity's pool).
#[derive(Debug, Default)]
pub struct Filling {
    keys: Mutex<HashMap<String, Place>>,
}

/// A key's filling folder and how many versions it holds, as far as this
/// instance knows.
#[derive(Debug, Clone)]
struct Place {
    folder: SharePath,
    held: usize,
    used: Instant,
}

impl Filling {
    /// Takes a place in `key`'s known filling folder, or in a new shard of
    /// `top` if that one is full (`per_folder` each); `None` if unknown.
    fn take(&self, key: &str, top: &SharePath, per_folder: usize) -> Option<SharePath> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        let place = keys.get_mut(key)?;
        if place.held >= per_folder {
            place.folder = new_shard(top);
            place.held = 0;
        }
        place.held += 1;
        place.used = Instant::now();
        Some(place.folder.clone())
    }

    /// Remembers that `folder` is `key`'s filling folder and holds `held`.
    fn remember(&self, key: &str, folder: SharePath, held: usize) {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if keys.len() >= REMEMBERED {
            keys.retain(|_, p| p.used.elapsed() < FORGET_AFTER);
        }
        if keys.len() >= REMEMBERED {
            // All in use: the least recently used half goes.
            let mut used: Vec<Instant> = keys.values().map(|p| p.used).collect();
            let (_, &mut median, _) = used.select_nth_unstable(REMEMBERED / 2);
            keys.retain(|_, p| p.used > median);
        }
        keys.insert(key.to_string(), Place { folder, held, used: Instant::now() });
    }
}

/// A new shard of the versions folder `top`, named by now.
fn new_shard(top: &SharePath) -> SharePath {
    top.join(&format!("{:016x}", u64::MAX - filetime_now()))
}

/// True if `name` is a shard's name (16 hex digits).
fn is_shard(name: &str) -> bool {
    name.len() == 16 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A versions folder's entries, split: its stored versions and markers
/// (with their paths) and its shards (newest first).
type Split = (Vec<(SharePath, StoredName)>, Vec<SharePath>);

/// Reads the versions folder or shard `dir` on `s`; empty if there is
/// none. Names that are neither a stored version's nor a shard's (a file
/// someone put there) are passed over.
///
/// Errors: SMB failures other than not-found.
async fn read_folder(s: &impl ShareOps, dir: &SharePath) -> StoreResult<Split> {
    let entries = match s.list_dir(dir.as_str()).await {
        Ok(entries) => entries,
        Err(e) if is_not_found(&e) => return Ok(Default::default()),
        Err(e) => return Err(e.into()),
    };
    let (mut stored, mut shards) = (Vec::new(), Vec::new());
    for e in &entries {
        if e.times.is_directory() {
            if is_shard(&e.name) {
                shards.push(e.name.clone());
            }
        } else if let Some(n) = StoredName::parse(&e.name) {
            stored.push((dir.join(&e.name), n));
        }
    }
    shards.sort_by_cached_key(|s| s.to_ascii_lowercase());
    Ok((stored, shards.iter().map(|s| dir.join(s)).collect()))
}

impl Root {
    /// The folder `mapped`'s next stored version or delete marker goes into
    /// (see the module docs); the folder may not exist yet. A folder that
    /// cannot be read is written to as if flat.
    pub(crate) async fn next_version_folder(&self, tree: &Tree, bucket: &str, mapped: &MappedKey) -> SharePath {
        let top = self.versions_dir(bucket, mapped);
        let per_folder = self.options().versions_per_folder;
        let filling = &self.inner().version_folders;
        if let Some(folder) = filling.take(top.as_str(), &top, per_folder) {
            return folder;
        }
        let (folder, held) = match read_folder(&self.live(tree), &top).await {
            Ok((stored, shards)) if shards.is_empty() && stored.len() < per_folder => (top.clone(), stored.len()),
            Ok((_, shards)) => match shards.first() {
                Some(newest) => match read_folder(&self.live(tree), newest).await {
                    Ok((stored, _)) if stored.len() < per_folder => (newest.clone(), stored.len()),
                    _ => (new_shard(&top), 0),
                },
                None => (new_shard(&top), 0),
            },
            Err(e) => {
                tracing::debug!(bucket, error = %e, "a versions folder could not be read; writing to it as if flat");
                return top;
            }
        };
        filling.remember(top.as_str(), folder.clone(), held + 1);
        folder
    }

    /// The stored versions and delete markers of `mapped`, newest first,
    /// with their paths (none if the key has none): its versions folder
    /// and every shard of it.
    ///
    /// Errors: SMB failures other than not-found.
    pub(crate) async fn stored_versions(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
    ) -> StoreResult<Vec<(SharePath, StoredName)>> {
        self.stored_versions_noting_empty(tree, bucket, mapped, &mut Vec::new()).await
    }

    /// [`Root::stored_versions`], adding the shards that hold nothing to
    /// `empty` (left by a write that failed after making one), for
    /// [`Root::prune_shards`].
    ///
    /// Errors: SMB failures other than not-found.
    pub(crate) async fn stored_versions_noting_empty(
        &self,
        tree: &Tree,
        bucket: &str,
        mapped: &MappedKey,
        empty: &mut Vec<SharePath>,
    ) -> StoreResult<Vec<(SharePath, StoredName)>> {
        let (mut stored, shards) = read_folder(&self.live(tree), &self.versions_dir(bucket, mapped)).await?;
        let read: Vec<(SharePath, StoreResult<Split>)> = stream::iter(shards)
            .map(|s| async move {
                let read = read_folder(&self.live(tree), &s).await;
                (s, read)
            })
            .buffered(SHARDS_AT_ONCE)
            .collect()
            .await;
        for (shard, read) in read {
            let (in_shard, deeper) = read?;
            if in_shard.is_empty() && deeper.is_empty() {
                empty.push(shard);
            }
            stored.extend(in_shard);
        }
        stored.sort_by_cached_key(|a| a.1.name());
        Ok(stored)
    }

    /// Removes those of `folders` (the folders versions were just taken
    /// out of) that are shards left empty, so that an emptied key's
    /// versions folder, and then its bucket, can go (best effort).
    pub(crate) async fn prune_shards(&self, tree: &Tree, bucket: &str, mapped: &MappedKey, folders: &[SharePath]) {
        let top = self.versions_dir(bucket, mapped);
        let mut shards: Vec<&SharePath> = folders.iter().filter(|f| **f != top).collect();
        shards.sort_unstable_by_key(|f| f.as_str());
        shards.dedup();
        for shard in shards {
            // Fails while the shard holds anything: nothing is lost.
            let _ = self.live(tree).delete_dir(shard.as_str()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_folder_is_followed_by_a_new_shard_newer_ones_sorting_first() {
        let top = SharePath::root("v").join(".smbgate");
        let filling = Filling::default();
        assert_eq!(filling.take("k", &top, 2), None, "an unknown key is read first");
        filling.remember("k", top.clone(), 1);
        assert_eq!(filling.take("k", &top, 2), Some(top.clone()));
        let shard = filling.take("k", &top, 2).expect("known");
        assert_ne!(shard, top);
        let (parent, name) = shard.split_leaf().expect("a shard is in the folder");
        assert_eq!(parent, top);
        assert!(is_shard(name), "{name}");
        assert_eq!(filling.take("k", &top, 2), Some(shard.clone()), "a shard fills up first");
        std::thread::sleep(Duration::from_millis(1));
        let next = filling.take("k", &top, 2).expect("known");
        assert!(next.as_str() < shard.as_str(), "{next} !< {shard}");
    }

    #[test]
    fn a_full_table_of_keys_in_use_forgets_the_least_recently_used_half() {
        let top = SharePath::root("v");
        let filling = Filling::default();
        for k in 0..REMEMBERED {
            filling.remember(&format!("k{k}"), top.clone(), 1);
        }
        filling.remember("newest", top.clone(), 1);
        let keys = filling.keys.lock().unwrap();
        assert!(keys.len() <= REMEMBERED / 2 + 1, "{}", keys.len());
        assert!(keys.contains_key("newest") && !keys.contains_key("k0"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_folder_reads_as_its_versions_and_markers_and_its_shards_newest_first() {
        use crate::store::memory_share::{alone, MemoryShare};
        let s = MemoryShare::default();
        let dir = SharePath::root("k");
        let version = StoredName { stored_at: 200, version_id: "v2".into(), marker: false };
        let marker = StoredName { stored_at: 300, version_id: "m3".into(), marker: true };
        s.mkdir("k");
        s.put(&format!("k\\{}", version.name()), "e2");
        s.put(&format!("k\\{}", marker.name()), "");
        let (older, newer) = ("FFFFFFFFFFFFFFF0", "ffffffffffffff00");
        for d in [older, newer, "notes"] {
            s.mkdir(&format!("k\\{d}"));
        }
        s.put("k\\junk.txt", "");
        let (mut stored, shards) = alone(&s, read_folder(&s, &dir)).await.expect("read");
        stored.sort_by_key(|(_, n)| n.stored_at);
        let expected = vec![(dir.join(&version.name()), version), (dir.join(&marker.name()), marker)];
        assert_eq!(stored, expected);
        // Sorted without case, so newer (smaller) names first either way.
        assert_eq!(shards, vec![dir.join(newer), dir.join(older)]);
        let none = alone(&s, read_folder(&s, &SharePath::root("gone"))).await.expect("no folder");
        assert_eq!(none, Default::default());
    }

    #[test]
    fn shard_names_are_told_from_stored_names() {
        assert!(is_shard("fffffe3b1c2d3e4f"));
        assert!(!is_shard("fffffe3b1c2d3e4f.0123"));
        assert!(!is_shard("fffffe3b1c2d3e4"));
        assert!(!is_shard("fffffe3b1c2d3e4g"));
    }
}
