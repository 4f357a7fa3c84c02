//! Case-insensitive shares (Windows, Samba's default): keys that differ
//! only in case would silently merge into one file, so they are refused
//! (failure class 17), and reads of another spelling answer as for a
//! missing key.

use super::share::Tree;

use super::keys::{self, MappedKey};
use super::path::SharePath;
use super::share_lookups::ShareLookups;
use super::share_ops::ShareOps;
use super::{Root, StoreError, StoreResult};

/// Creates `CaseProbe-*` in `dir` on `s` and looks at it as lower case:
/// true if the share matches names case-insensitively. The probe file is
/// removed again (best effort; a leftover is a temp file the sweep takes).
///
/// Errors: the probe file cannot be written.
pub(crate) async fn probe_case_insensitive(s: &impl ShareOps, dir: &SharePath) -> StoreResult<bool> {
    let name = format!("CaseProbe-{:016x}", rand::random::<u64>());
    let path = dir.join(&name);
    s.write_small(path.as_str(), b"").await?;
    let insensitive = s.times(dir.join(&name.to_lowercase()).as_str()).await.is_ok();
    let _ = s.delete_file(path.as_str()).await;
    Ok(insensitive)
}

/// Whether an open of `key` must compare the on-disk name with the key's:
/// on a case-insensitive share, where another spelling opens the same
/// file, and for a key with a component shaped like an 8.3 short name
/// (`PROGRA~1`), which a server that makes such aliases may resolve to a
/// long-named file whatever its case rule (Windows with 8.3 names on;
/// Samba resolves them only on case-insensitive shares).
pub fn needs_exact_names(case_insensitive: bool, key: &MappedKey) -> bool {
    case_insensitive || key.components.iter().any(|c| keys::looks_like_short_name(c))
}

/// Ours and theirs of the first component that differs, if any.
pub(in crate::store) type Mismatch = Option<(String, String)>;

/// What [`Root::check_case_seen`] found at the key's own path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Nothing was looked up (names need no exact match on this share).
    Unchecked,
    /// Nothing was there.
    Absent,
    /// A file or directory was there.
    Present,
}

impl Root {
    /// [`needs_exact_names`] on this store's share.
    pub fn exact_names_for(&self, key: &MappedKey) -> bool {
        needs_exact_names(self.case_insensitive(), key)
    }

    /// Refuses a key whose path names, under another spelling, a file
    /// already on the share: a case variant on a case-insensitive share
    /// (the two would silently merge), or an 8.3 alias of a long name.
    ///
    /// Errors: Conflict naming both spellings.
    pub async fn check_case(&self, tree: &Tree, bucket: &str, key: &MappedKey) -> StoreResult<()> {
        self.check_case_seen(tree, bucket, key).await.map(|_| ())
    }

    /// [`Root::check_case`], and whether its lookup found the key's own
    /// path (a writer of a key seen absent need not warn cache holders).
    ///
    /// Errors: as [`Root::check_case`].
    pub(crate) async fn check_case_seen(&self, tree: &Tree, bucket: &str, key: &MappedKey) -> StoreResult<Seen> {
        if !self.exact_names_for(key) || key.components.is_empty() {
            return Ok(Seen::Unchecked);
        }
        match self.case_lookup(tree, bucket, key).await? {
            (None, own) => Ok(if own { Seen::Present } else { Seen::Absent }),
            (Some((want, other)), _) => Err(StoreError::Conflict(format!(
                "{:?} already exists on the share as {:?} (the server matches names case-insensitively or by 8.3 alias); such keys cannot both be stored",
                keys::decode_component(&want),
                keys::decode_component(&other)
            ))),
        }
    }

    /// The first of the (encoded) path components of `key` under `bucket`
    /// that exists on the share with a different case, as `(ours,
    /// theirs)`. One batch of lookups, one per component.
    ///
    /// Errors: SMB failures.
    pub async fn case_mismatch(
        &self,
        tree: &Tree,
        bucket: &str,
        key: &MappedKey,
    ) -> StoreResult<Option<(String, String)>> {
        Ok(self.case_lookup(tree, bucket, key).await?.0)
    }

    /// [`mismatch_on`] of `key` in `bucket` on the live share.
    ///
    /// Errors: SMB failures.
    async fn case_lookup(&self, tree: &Tree, bucket: &str, key: &MappedKey) -> StoreResult<(Mismatch, bool)> {
        mismatch_on(&self.live(tree), &self.bucket_path(bucket), key).await
    }
}

/// The first of the (encoded) path components of `key` under the
/// directory `bucket` that exists on `s` with a different case or as an
/// alias, as `(ours, theirs)`, and whether its own path opened (under any
/// spelling). One batch of lookups, one per component; none, and nothing
/// found, for a key without components.
///
/// Errors: SMB failures.
pub(in crate::store) async fn mismatch_on(
    s: &impl ShareLookups,
    bucket: &SharePath,
    key: &MappedKey,
) -> StoreResult<(Mismatch, bool)> {
    if key.components.is_empty() {
        return Ok((None, false));
    }
    let paths: Vec<String> = bucket.ancestors_of(key).into_iter().map(|p| p.to_string()).collect();
    let names = s.normalized_names(&paths).await?;
    let own = names.last().is_some_and(Option::is_some);
    // The deepest prefix that exists tells everything above it too.
    for (on_disk, path) in names.iter().zip(&paths).rev() {
        let Some(on_disk) = on_disk else { continue };
        if on_disk == path {
            return Ok((None, own));
        }
        for (a, b) in path.split('\\').zip(on_disk.split('\\')) {
            if a != b {
                return Ok((Some((a.to_string(), b.to_string())), own));
            }
        }
        return Ok((None, own));
    }
    Ok((None, own))
}

#[cfg(test)]
#[path = "case_test.rs"]
mod tests;
