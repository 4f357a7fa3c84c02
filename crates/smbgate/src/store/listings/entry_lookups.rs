//! What a directory read asks the live share about its entries, beyond
//! the entries themselves: which directories are marker objects where
//! records are not EAs. The listing reaches it through `ShareOps`
//! (`LiveShare`), so that its rules run on the in-memory share too; which
//! names are only 8.3 aliases is `short_aliases.rs`.

use std::collections::HashSet;

use futures::stream::{self, StreamExt};

use crate::store::path::SharePath;
use crate::store::records::{FileKey, Records};
use crate::store::share::{DirEntry, Result, ShareError, Tree};

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
