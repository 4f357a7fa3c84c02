//! Object Lock on versions: the rules (what a retention or legal hold
//! forbids, and how a retention may change), and the retention and legal
//! hold of a version read and changed in its record. Retention is judged by
//! the gateway's clock. A protected version's file is also held on the
//! share: marked read-only where the server keeps DOS attributes, and
//! given a DACL that denies changes to all but the gateway's account where
//! it keeps Windows ACLs (`share::LockAcl`), so that people on the share
//! can neither delete nor overwrite it, nor lift the mark.

use crate::store::conditions::Conditions;
use crate::store::meta::{LockMode, ObjectMeta, Retention};
use crate::store::share::{self, Handle};
use crate::store::share_ops::ShareOps;
use crate::store::types::Target;
use crate::store::{Root, StoreError, StoreResult, Writes};

use super::lock_config::now_ms;

/// AWS's answer to a change a lock forbids (403 AccessDenied).
pub fn locked() -> StoreError {
    StoreError::Refused("Access Denied because object protected by object lock.")
}

/// AWS's answer to a lock setting on a bucket without Object Lock.
pub fn bucket_not_locked() -> StoreError {
    StoreError::InvalidRequest("Bucket is missing Object Lock Configuration".into())
}

/// True if the version `meta` may be neither deleted nor overwritten at
/// `now_ms`: a legal hold, or a retention not yet past.
pub fn protected(meta: &ObjectMeta, now_ms: i64) -> bool {
    meta.legal_hold || meta.retention.is_some_and(|r| r.until_ms > now_ms)
}

/// True if a version written now with the record `meta` is to be marked
/// held on the share (see [`Writes::publish_sealed`]).
pub fn needs_seal(meta: &ObjectMeta) -> bool {
    (meta.legal_hold || meta.retention.is_some()) && protected(meta, now_ms())
}

/// Whether the version `meta` may be deleted at `now_ms`; `bypass`: the
/// request asked to bypass GOVERNANCE retention and its user may.
///
/// Errors: AccessDenied (403) under a legal hold, a COMPLIANCE retention,
/// or a GOVERNANCE one without `bypass`.
pub fn check_delete(meta: &ObjectMeta, now_ms: i64, bypass: bool) -> StoreResult<()> {
    if meta.legal_hold {
        return Err(locked());
    }
    match meta.retention {
        Some(r) if r.until_ms > now_ms && (r.mode == LockMode::Compliance || !bypass) => Err(locked()),
        _ => Ok(()),
    }
}

/// Whether a version's retention may go from `old` to `new` at `now_ms`:
/// a COMPLIANCE retention only ever lengthens and stays COMPLIANCE; a
/// GOVERNANCE one lengthens (or becomes COMPLIANCE) freely, and is
/// shortened or removed only with `bypass`. A retention already past
/// binds nothing.
///
/// Errors: AccessDenied (403).
pub fn check_retention_change(
    old: Option<Retention>,
    new: Option<Retention>,
    now_ms: i64,
    bypass: bool,
) -> StoreResult<()> {
    let Some(old) = old.filter(|r| r.until_ms > now_ms) else { return Ok(()) };
    let longer = new.is_some_and(|n| n.until_ms >= old.until_ms);
    match old.mode {
        LockMode::Compliance if longer && new.is_some_and(|n| n.mode == LockMode::Compliance) => Ok(()),
        LockMode::Compliance => Err(locked()),
        LockMode::Governance if longer || bypass => Ok(()),
        LockMode::Governance => Err(locked()),
    }
}

impl Root {
    /// Runs `work` (a change of `key`'s records) under the key's creation
    /// lock in `bucket`.
    ///
    /// Errors: `work`'s; InvalidKey; Busy if the lock stays taken.
    pub(crate) async fn under_key_lock<T>(
        &self,
        tree: &share::Tree,
        bucket: &str,
        key: &str,
        work: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let mapped = crate::store::keys::map_key(key)?;
        let creating = self.create_lock(tree, &self.object_path(bucket, &mapped)).await?;
        let done = work.await;
        creating.release().await;
        done
    }

    /// Applies `bucket`'s Object Lock to a new version's record `meta`:
    /// its own retention and legal hold (refused without Object Lock on
    /// the bucket); without a retention of its own, the bucket's default.
    ///
    /// Errors: InvalidRequest for lock settings on a bucket without
    /// Object Lock; SMB failures.
    pub(crate) async fn apply_lock(
        &self,
        tree: &share::Tree,
        target: &Target,
        meta: &mut ObjectMeta,
    ) -> StoreResult<()> {
        let Target::Object { bucket, .. } = target else { return Ok(()) };
        let asked = meta.retention.is_some() || meta.legal_hold;
        let lock = self.bucket_lock(tree, bucket).await?;
        match (lock.enabled, asked) {
            (false, true) => Err(bucket_not_locked()),
            (false, false) => Ok(()),
            // A legal hold alone still gets the default retention.
            (true, _) => {
                if meta.retention.is_none() {
                    meta.retention = lock.default.map(|d| d.from(now_ms()));
                }
                Ok(())
            }
        }
    }
}

impl Writes {
    /// Puts the lock's ACEs on the file at `path` (`on`), not yet
    /// published, or takes them off a version whose lock was lifted. A
    /// share that refuses or keeps no ACLs is logged: the read-only mark
    /// and the gateway's own rules still hold.
    pub(crate) async fn deny_changes(&self, tree: &share::Tree, path: &str, on: bool) {
        let probe = || self.root.temp_path().to_string();
        if let Err(e) = self.root.lock_acl().set(tree, path, on, probe).await {
            tracing::warn!(error = %e, on, "the ACEs of a locked version could not be changed on the share");
        }
    }

    /// Publishes `file` (at `source`) as [`Writes::publish_with`] does,
    /// held on the share if `sealed` (its record is protected, see
    /// [`needs_seal`]): the lock's ACEs before the publish, the read-only
    /// mark on the published file after it. A publish that fails takes the
    /// ACEs back off, since the file may stay (an upload's data file, for
    /// another Complete or the sweep under another SMB identity). A share
    /// that refuses either is logged: the gateway's own rules still hold.
    ///
    /// Errors: [`Writes::publish_with`]'s.
    pub(crate) async fn publish_sealed(
        &self,
        file: &Handle,
        publishing: impl Fn(),
        source: &str,
        target: &Target,
        conditions: &Conditions,
        sealed: bool,
    ) -> StoreResult<()> {
        if !sealed {
            return self.publish_with(file, publishing, source, target, conditions).await;
        }
        let tree = share::connection_of(file);
        self.deny_changes(&tree, source, true).await;
        let published = self.publish_with(file, publishing, source, target, conditions).await;
        match &published {
            Ok(()) => {
                if let Err(e) = self.root.live(&tree).set_read_only(file, true).await {
                    tracing::warn!(error = %e, "a locked version could not be marked read-only on the share");
                }
            }
            Err(_) => self.deny_changes(&tree, source, false).await,
        }
        published
    }

    /// PutObjectRetention: sets (or with `None` removes) the retention of
    /// `key` or of its version `version`, under the rules of
    /// [`check_retention_change`]. Returns the version's ID.
    ///
    /// Errors: InvalidRequest on a bucket without Object Lock;
    /// AccessDenied; NoSuchKey / NoSuchVersion.
    pub async fn put_retention(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        retention: Option<Retention>,
        bypass: bool,
    ) -> StoreResult<String> {
        self.change_lock(bucket, key, version, |meta| {
            check_retention_change(meta.retention, retention, now_ms(), bypass)?;
            meta.retention = retention;
            Ok(())
        })
        .await
    }

    /// PutObjectLegalHold: puts the legal hold of `key` (or of its
    /// version `version`) on or off. Returns the version's ID.
    ///
    /// Errors: as [`Writes::put_retention`], without AccessDenied.
    pub async fn put_legal_hold(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        on: bool,
    ) -> StoreResult<String> {
        self.change_lock(bucket, key, version, |meta| {
            meta.legal_hold = on;
            Ok(())
        })
        .await
    }

    /// Changes the lock settings in a version's record with `change`, and
    /// its read-only mark on the share to match.
    async fn change_lock(
        &self,
        bucket: &str,
        key: &str,
        version: Option<&str>,
        change: impl FnOnce(&mut ObjectMeta) -> StoreResult<()>,
    ) -> StoreResult<String> {
        let tree = self.root.tree().await?;
        self.root.check_bucket(&tree, bucket).await?;
        if !self.root.bucket_lock(&tree, bucket).await?.enabled {
            return Err(bucket_not_locked());
        }
        // Under the key's creation lock, which deletes of its versions and
        // tag changes take too: no change of the record is lost to another,
        // and none lands on a version being deleted.
        let changing = self.change_record(
            bucket,
            key,
            version,
            |record| {
                change(record)?;
                Ok(true)
            },
            true,
        );
        self.root.under_key_lock(&tree, bucket, key, changing).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(mode: LockMode, until_ms: i64) -> Option<Retention> {
        Some(Retention { mode, until_ms })
    }

    #[test]
    fn compliance_only_lengthens_and_governance_yields_to_a_bypass() {
        use LockMode::{Compliance as C, Governance as G};
        let now = 1_000;
        let check = |old, new, bypass| check_retention_change(old, new, now, bypass).is_ok();
        assert!(check(r(C, 2_000), r(C, 3_000), false));
        assert!(check(r(C, 2_000), r(C, 2_000), false));
        assert!(!check(r(C, 2_000), r(C, 1_500), true), "shorter, even with a bypass");
        assert!(!check(r(C, 2_000), r(G, 3_000), true), "another mode");
        assert!(!check(r(C, 2_000), None, true), "removed");
        assert!(check(r(C, 500), None, false), "a past retention binds nothing");
        assert!(check(r(G, 2_000), r(G, 3_000), false));
        assert!(check(r(G, 2_000), r(C, 3_000), false));
        assert!(!check(r(G, 2_000), r(G, 1_500), false));
        assert!(check(r(G, 2_000), r(G, 1_500), true));
        assert!(check(r(G, 2_000), None, true));
        assert!(!check(r(G, 2_000), None, false));
    }

    #[test]
    fn deletes_wait_for_the_retention_and_the_legal_hold() {
        let now = 1_000;
        let meta = |retention, legal_hold| ObjectMeta { retention, legal_hold, ..Default::default() };
        assert!(check_delete(&meta(None, false), now, false).is_ok());
        assert!(check_delete(&meta(None, true), now, true).is_err());
        assert!(check_delete(&meta(r(LockMode::Compliance, 2_000), false), now, true).is_err());
        assert!(check_delete(&meta(r(LockMode::Compliance, 900), false), now, false).is_ok());
        assert!(check_delete(&meta(r(LockMode::Governance, 2_000), false), now, false).is_err());
        assert!(check_delete(&meta(r(LockMode::Governance, 2_000), false), now, true).is_ok());
        assert!(protected(&meta(r(LockMode::Governance, 2_000), false), now));
        assert!(!protected(&meta(r(LockMode::Governance, 900), false), now));
    }
}
