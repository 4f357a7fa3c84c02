//! Case-insensitive shares (Windows, Samba's default): keys that differ
//! only in case would silently merge into one file, so they are refused
//! (failure class 17), and reads of another spelling answer as for a
//! missing key.

use super::share::Tree;

use super::keys::{self, MappedKey};
use super::path::SharePath;
use super::{share, Store, StoreError, StoreResult};

/// Creates `CaseProbe-*` in `dir` and opens it as lower case: true if the
/// share matches names case-insensitively.
///
/// Errors: the probe file cannot be written.
pub(crate) async fn probe_case_insensitive(tree: &Tree, dir: &SharePath) -> StoreResult<bool> {
    let name = format!("CaseProbe-{:016x}", rand::random::<u64>());
    let path = dir.join(&name);
    share::write_small(tree, &path, b"").await?;
    let insensitive = share::stat(tree, &dir.join(&name.to_lowercase())).await.is_ok();
    let _ = share::delete(tree, &path, false).await;
    Ok(insensitive)
}

impl Store {
    /// Refuses a key whose path differs only in case from names already on
    /// a case-insensitive share (they would silently merge).
    ///
    /// Errors: Conflict naming both spellings.
    pub async fn check_case(&self, tree: &Tree, bucket: &str, key: &MappedKey) -> StoreResult<()> {
        if !self.case_insensitive() {
            return Ok(());
        }
        match self.case_mismatch(tree, bucket, key).await? {
            None => Ok(()),
            Some((want, other)) => Err(StoreError::Conflict(format!(
                "the share is case-insensitive and {:?} already exists as {:?}; keys differing only in case cannot both be stored",
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
        if key.components.is_empty() {
            return Ok(None);
        }
        let paths: Vec<String> =
            self.bucket_path(bucket).ancestors_of(key).into_iter().map(|p| p.to_string()).collect();
        let names = share::normalized_names(tree, &paths).await?;
        // The deepest prefix that exists tells everything above it too.
        for (on_disk, path) in names.iter().zip(&paths).rev() {
            let Some(on_disk) = on_disk else { continue };
            if on_disk == path {
                return Ok(None);
            }
            for (a, b) in path.split('\\').zip(on_disk.split('\\')) {
                if a != b {
                    return Ok(Some((a.to_string(), b.to_string())));
                }
            }
            return Ok(None);
        }
        Ok(None)
    }
}
