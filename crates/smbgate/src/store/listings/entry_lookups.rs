//! What a directory read asks the live share about its entries, beyond
//! the entries themselves: which directories are marker objects where
//! records are not EAs, and which names are only 8.3 aliases. The listing
//! reaches them through `ShareOps` (`LiveShare`) and, for the aliases,
//! over any `ShareLookups`, so that its rules run on the in-memory share
//! too.

use std::collections::HashSet;

use futures::stream::{self, StreamExt};

use crate::store::keys;
use crate::store::path::SharePath;
use crate::store::records::{FileKey, Records};
use crate::store::share::{DirEntry, Result, ShareError, Tree};
use crate::store::share_lookups::ShareLookups;

/// Record reads and ETag lookups in flight at once per listing page.
pub(crate) const LOOKUPS_IN_FLIGHT: usize = 64;

/// On a share without EAs: the ids of the directories among `entries`
/// (in `dir`) whose record (stream or sidecar) says they are marker
/// objects, read when the directory is, so that a page never loses places
/// to candidates that are not. Empty where records are EAs (an entry's
/// EaSize tells).
///
/// Errors: a record read failed.
pub(crate) async fn marker_dirs(
    tree: &Tree,
    records: &Records,
    dir: &str,
    entries: &[DirEntry],
) -> Result<HashSet<u64>> {
    if records.shown_in_listings() {
        return Ok(HashSet::new());
    }
    let parent = SharePath::root(dir);
    let dirs: Vec<(FileKey, SharePath)> = entries
        .iter()
        .filter(|e| e.times.is_directory() && e.name != "." && e.name != "..")
        .map(|e| (FileKey { id: e.file_id, created: e.times.creation }, parent.join(&e.name)))
        .collect();
    let found: Vec<Result<Option<u64>>> = stream::iter(dirs)
        .map(|(key, path)| async move {
            let meta = records.read_of(tree, path.as_str(), key).await?;
            Ok::<_, ShareError>(meta.filter(|m| m.marker).map(|_| key.id))
        })
        .buffer_unordered(LOOKUPS_IN_FLIGHT)
        .collect()
        .await;
    let mut out = HashSet::new();
    for f in found {
        out.extend(f?);
    }
    Ok(out)
}

/// The names among `entries` (in `dir`) that are only the server's 8.3
/// aliases of files whose real names SMB cannot carry (Samba without
/// `catia` lists `de:tail.txt` as `DN129I~K.TXT`): such a name opens the
/// file, but the exact-name check of every read refuses it, so listing it
/// would show a key that answers 404. Only names shaped like short names
/// are asked, all in one batch: each is opened and its on-disk name
/// compared with the listed one.
///
/// Errors: the batch failed (a transport error).
pub(crate) async fn short_aliases(s: &impl ShareLookups, dir: &str, entries: &[DirEntry]) -> Result<HashSet<String>> {
    let shaped: Vec<&str> =
        entries.iter().map(|e| e.name.as_str()).filter(|n| keys::looks_like_short_name(n)).collect();
    if shaped.is_empty() {
        return Ok(HashSet::new());
    }
    let parent = SharePath::root(dir);
    let paths: Vec<String> = shaped.iter().map(|n| parent.join(n).as_str().to_string()).collect();
    let real = s.normalized_names(&paths).await?;
    let aliases = shaped
        .into_iter()
        .zip(real)
        .filter(|(listed, real)| real.as_deref().and_then(|r| r.rsplit('\\').next()) != Some(*listed));
    Ok(aliases.map(|(listed, _)| listed.to_string()).collect())
}
