//! The creation lock of a key: what makes "create only if absent"
//! (`If-None-Match: *`) and the If-Match swap atomic on the share (failure
//! class 25).
//!
//! A rename without ReplaceIfExists is not atomic on Samba: each
//! connection is its own smbd process, which checks that the target is
//! absent and then renames over whatever is there by then. Two creators
//! can both pass the check, and the second silently replaces the first.
//! The server's create-if-absent is atomic, so each conditional publish of
//! a key first creates `.smbgate/tmp/lock-<md5 of the key's path>`, sharing
//! nothing and delete-on-close, and holds it across its check and rename.
//! The lock exists exactly while its holder's handle is open: a gateway
//! that dies, or loses its connection, lets go of it with the handle. A
//! lock left by a server crash is found to be held by nobody (an open
//! sharing nothing succeeds) and removed, and the sweep removes it too.
//! That removal may meet a lock still being made (Samba creates the file
//! before it records the open); `share::create_lock` then finds its name
//! gone and reports the lock as held, so two never hold it.

use super::share::{Handle, Tree};
use md5::{Digest, Md5};

use super::path::SharePath;
use super::share_ops::{LiveShare, ShareOps};
use super::{backoff, Root, StoreError, StoreResult};

/// A held creation lock; released by [`CreateLock::release`] (or, if
/// dropped, by its handle's close).
pub(crate) struct CreateLock(Handle);

impl CreateLock {
    /// Closes the lock's handle, which deletes it.
    pub(crate) async fn release(self) {
        let _ = self.0.close().await;
    }
}

impl Root {
    /// The lock path of the object at `object` (names compared without
    /// case, so that keys a case-insensitive share stores as one name share
    /// one lock).
    pub(crate) fn create_lock_path(&self, object: &SharePath) -> SharePath {
        let digest = Md5::digest(object.as_str().to_lowercase().as_bytes());
        self.internal("tmp").join(&format!("lock-{}", hex::encode(digest)))
    }

    /// True unless the creation lock of the object at `object` is known to
    /// be absent (a stat of it answers not-found): while it is held, the
    /// key may be between the two renames of an If-Match swap.
    pub(crate) async fn is_locked(&self, tree: &Tree, object: &SharePath) -> bool {
        let live = LiveShare { tree, records: self.records() };
        live.is_locked(self.create_lock_path(object).as_str()).await
    }

    /// Takes the creation lock of the object at `object`, waiting
    /// ([`backoff::CREATION_LOCK`], 10 s) while another publisher of that
    /// key holds it ([`take_lock`] on `tree`).
    ///
    /// Errors: Busy (503 SlowDown) after the wait; SMB failures.
    pub(crate) async fn create_lock(&self, tree: &Tree, object: &SharePath) -> StoreResult<CreateLock> {
        let live = LiveShare { tree, records: self.records() };
        take_lock(&live, &self.create_lock_path(object)).await.map(CreateLock)
    }
}

/// Takes the creation lock at `path` on `s`: creates it, or, while another
/// publisher holds it, waits ([`backoff::CREATION_LOCK`]); a lock nobody
/// holds (left by a crash) is removed and taken.
///
/// Errors: Busy (503 SlowDown) after the wait; the share's failures.
pub(crate) async fn take_lock<S: ShareOps>(s: &S, path: &str) -> StoreResult<S::Handle> {
    let mut backoff = backoff::CREATION_LOCK.start();
    loop {
        if let Some(h) = s.create_lock(path).await? {
            return Ok(h);
        }
        // Held, or left behind by a crash: an open sharing nothing
        // succeeds only on a lock nobody holds, which is removed.
        if let Ok(h) = s.open_for_delete(path, true).await {
            tracing::debug!(lock = path, "removing a creation lock nobody holds");
            let _ = s.close_and_delete(h).await;
            continue;
        }
        if !backoff.wait().await {
            return Err(StoreError::Busy("another write of this key is in progress; retry the request".into()));
        }
    }
}
