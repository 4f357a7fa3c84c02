//! Which names a directory read lists are only the server's 8.3 aliases
//! of other names, asked of any share ([`ShareLookups`]) in one batch of
//! name lookups.

use std::collections::HashSet;

use crate::store::keys;
use crate::store::path::SharePath;
use crate::store::share::{DirEntry, Result};
use crate::store::share_lookups::ShareLookups;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory_share::{alone, MemoryShare};
    use crate::store::share_ops::ShareOps;

    #[tokio::test(start_paused = true)]
    async fn a_listed_short_name_that_opens_another_name_is_an_alias() {
        let s = MemoryShare::default();
        s.mkdir("b");
        s.put_sized("b\\de_tail.txt", "", 1, &[]);
        // Samba lists a name SMB cannot carry by its alias, which opens a
        // file the server names otherwise.
        s.put_sized("b\\DN129I~K.TXT", "", 1, &[]);
        s.alias("b\\DN129I~K.TXT", "b\\de_tail.txt");
        // Shaped like a short name, but its own.
        s.put_sized("b\\KEEP~1.TXT", "", 1, &[]);
        let entries = alone(&s, s.list_dir("b")).await.unwrap();
        assert_eq!(entries.len(), 3);
        let aliases = alone(&s, short_aliases(&s, "b", &entries)).await.unwrap();
        assert_eq!(aliases, HashSet::from(["DN129I~K.TXT".to_string()]));
    }
}
