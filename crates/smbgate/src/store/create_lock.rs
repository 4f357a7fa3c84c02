//! The creation lock of a key: what makes "create only if absent"
//! (`If-None-Match: *`) and the If-Match swap atomic on the share (failure
//! class 25).
//!
//! A rename without ReplaceIfExists is not atomic on Samba: each
//! connection is its own smbd process, which checks that the target is
//! absent and then renames over whatever is there by then. Two creators
//! can both pass the check, and the second silently replaces the first.
//! So each conditional publish of a key first takes the key's lock and
//! holds it across its check and rename: one exclusive byte of the root's
//! lock file, `.smbgate/key-locks`, at an offset hashed from the key's path
//! (`share::KeyLocks`). The server grants a byte to one open at a time and
//! frees it with the open: a gateway that dies, or loses its connection,
//! lets go of it. Every instance serving a share must take its locks this
//! way (instances before this lock file made a file per key instead, and
//! the two do not exclude each other).

use super::share::{KeyLock, Tree};

use super::path::SharePath;
use super::share_ops::{LiveShare, ShareOps};
use super::{backoff, Root, StoreError, StoreResult};

/// A held creation lock; released by [`CreateLock::release`] (or, if
/// dropped, in the background).
pub(crate) struct CreateLock(KeyLock);

impl CreateLock {
    /// Gives the lock back.
    pub(crate) async fn release(self) {
        self.0.release().await;
    }
}

impl Root {
    /// The share as the store's write and delete rules see it, on `tree`.
    pub(crate) fn live<'a>(&'a self, tree: &'a Tree) -> LiveShare<'a> {
        LiveShare { tree, records: self.records(), key_locks: &self.inner().key_locks, pool: self.pool() }
    }

    /// The name of the lock of the object at `object`: its path without
    /// case, so that keys a case-insensitive share stores as one name share
    /// one lock.
    pub(crate) fn lock_name(&self, object: &SharePath) -> String {
        object.as_str().to_lowercase()
    }

    /// Takes the creation lock of the object at `object`, waiting
    /// ([`backoff::CREATION_LOCK`], 10 s) while another publisher of that
    /// key holds it ([`take_lock`] on `tree`).
    ///
    /// Errors: Busy (503 SlowDown) after the wait; SMB failures.
    pub(crate) async fn create_lock(&self, tree: &Tree, object: &SharePath) -> StoreResult<CreateLock> {
        take_lock(&self.live(tree), &self.lock_name(object)).await.map(CreateLock)
    }
}

/// Takes the creation lock named `name` on `s`, or, while another
/// publisher holds it, waits ([`backoff::CREATION_LOCK`]).
///
/// Errors: Busy (503 SlowDown) after the wait; the share's failures.
pub(crate) async fn take_lock<S: ShareOps>(s: &S, name: &str) -> StoreResult<S::KeyLock> {
    take_lock_within(s, name, &backoff::CREATION_LOCK).await
}

/// [`take_lock`], waiting as `policy` says.
///
/// Errors: Busy (503 SlowDown) after the wait; the share's failures.
pub(crate) async fn take_lock_within<S: ShareOps>(
    s: &S,
    name: &str,
    policy: &'static backoff::Policy,
) -> StoreResult<S::KeyLock> {
    let mut backoff = policy.start();
    loop {
        if let Some(lock) = s.take_key_lock(name).await? {
            return Ok(lock);
        }
        if !backoff.wait().await {
            return Err(StoreError::Busy("another write of this key is in progress; retry the request".into()));
        }
    }
}
