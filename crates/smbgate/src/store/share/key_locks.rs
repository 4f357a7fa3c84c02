//! Creation locks of keys as byte ranges of one file (`.smbgate/key-locks`),
//! MS-SMB2 LOCK (2.2.26).
//!
//! A key's lock is one exclusive byte at an offset hashed from its name. The
//! server grants a range to one open at a time, across connections,
//! processes and gateway instances (and across a CTDB cluster, whose
//! byte-range lock database is clustered), and drops it with the open or
//! its connection: a gateway that dies leaves nothing held. Taking it costs
//! smbd one LOCK on a file already open, where a lock file per key cost a
//! CREATE (and, on a case-insensitive share, a scan of its folder) and an
//! unlink.
//!
//! Each pooled connection keeps one open of the file (never durable: a
//! lock must go with a lost connection), made the first time it takes a
//! lock and let go once the pool no longer holds that connection. The open
//! shares read and write but not delete, so nobody can remove or rename
//! the file while a gateway holds it.
//!
//! A LOCK sent by a request that then goes away (its client hung up) is
//! finished by a task of its own, which gives back a grant nobody took:
//! otherwise the byte would stay granted to an open that lives on, and its
//! key locked until the connection died.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use super::Pool;
use md5::{Digest, Md5};
use smb_proto::create::{access, share, CreateRequest, Disposition};
use smb_proto::lock::{decode_lock_response, flags, LockElement, LockRequest, FAIL_IMMEDIATELY};
use smb_proto::NtStatus;

use super::{Handle, Result, ShareError, Tree};

/// Offsets are kept below 2^40: far inside what every server's locking
/// takes (Samba maps ranges onto POSIX locks), and a trillion places
/// make two keys sharing one a matter of chance no writer meets.
const OFFSET_MASK: u64 = (1 << 40) - 1;

/// The lock file of one share root, and each connection's open of it.
pub struct KeyLocks {
    path: String,
    /// The pool whose connections the opens are on.
    pool: Pool,
    opens: Mutex<Vec<Arc<Handle>>>,
}

/// A key's lock, held until [`KeyLock::release`]; dropped unreleased (a
/// request that went away), it is released in the background.
pub struct KeyLock {
    file: Option<Arc<Handle>>,
    offset: u64,
}

/// What the server answered a LOCK.
enum Answer {
    Granted,
    Held,
    /// The open is gone (its connection or the server closed it).
    Closed(ShareError),
}

impl KeyLocks {
    /// The locks kept as ranges of the file at `path` (share-relative),
    /// through opens on `pool`'s connections.
    pub fn new(path: String, pool: Pool) -> KeyLocks {
        KeyLocks { path, pool, opens: Mutex::new(Vec::new()) }
    }

    /// The same lock file, for another pool's connections (another SMB
    /// identity's): each connection needs its own open.
    pub fn for_another_pool(&self, pool: Pool) -> KeyLocks {
        KeyLocks::new(self.path.clone(), pool)
    }

    /// Takes the lock named `name` on `tree`'s connection if nobody holds
    /// it: `None` if another open (of this gateway or another) holds it.
    ///
    /// Errors: the lock file could not be opened; the LOCK's NTSTATUS
    /// other than STATUS_LOCK_NOT_GRANTED (or STATUS_FILE_LOCK_CONFLICT,
    /// which some servers answer instead).
    pub async fn try_take(&self, tree: &Tree, name: &str) -> Result<Option<KeyLock>> {
        let file = self.open_on(tree).await?;
        let offset = offset_of(name);
        let held = file.clone();
        let taking = Taking(Some(Box::pin(async move {
            let answer = lock(&held, offset, flags::EXCLUSIVE | FAIL_IMMEDIATELY).await;
            (held, offset, answer)
        })));
        match taking.await {
            Ok(Answer::Granted) => Ok(Some(KeyLock { file: Some(file), offset })),
            Ok(Answer::Held) => Ok(None),
            Ok(Answer::Closed(e)) | Err(e) => {
                self.forget(&file);
                Err(e)
            }
        }
    }

    /// True unless the lock named `name` is seen free: an exclusive LOCK
    /// of its range is granted (and given back at once). Exclusive, since
    /// a shared lock would stack on this connection's own exclusive one.
    /// A failure counts as held: the caller then waits rather than answer
    /// too soon. Returns once the server has answered the LOCK, so that
    /// what the caller sends next is looked at after it.
    pub async fn is_held(&self, tree: &Tree, name: &str) -> bool {
        let Ok(file) = self.open_on(tree).await else { return true };
        let offset = offset_of(name);
        // In a task of its own, which gives the grant back after the
        // answer (and also if the reader goes away meanwhile).
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let granted = matches!(lock(&file, offset, flags::EXCLUSIVE | FAIL_IMMEDIATELY).await, Ok(Answer::Granted));
            let _ = tx.send(!granted);
            if granted {
                let _ = unlock(&file, offset).await;
            }
        });
        rx.await.unwrap_or(true)
    }

    /// This connection's open of the lock file, made (and the file created
    /// if missing) the first time.
    async fn open_on(&self, tree: &Tree) -> Result<Arc<Handle>> {
        if let Some(open) = self.find(tree) {
            return Ok(open);
        }
        let req = CreateRequest {
            desired_access: access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
            share_access: share::READ | share::WRITE,
            disposition: Disposition::OpenIf,
            ..CreateRequest::new_file(&self.path, 0)
        };
        let open = Arc::new(tree.open(&req).await?);
        let mut opens = self.opens.lock().unwrap_or_else(|p| p.into_inner());
        // Opens on connections the pool let go (lost, or renewed) go, so
        // that they do not keep those connections alive; two first takers
        // on one connection keep the first open, and the second closes
        // itself when dropped.
        opens.retain(|o| !o.smb().tree().conn().is_poisoned() && self.pool.smb().holds(o.smb().tree().conn()));
        if let Some(first) = opens.iter().find(|o| o.smb().tree().conn().same_as(tree.smb().conn())) {
            return Ok(first.clone());
        }
        opens.push(open.clone());
        Ok(open)
    }

    fn find(&self, tree: &Tree) -> Option<Arc<Handle>> {
        let opens = self.opens.lock().unwrap_or_else(|p| p.into_inner());
        opens
            .iter()
            .find(|o| o.smb().tree().conn().same_as(tree.smb().conn()) && !tree.smb().conn().is_poisoned())
            .cloned()
    }

    fn forget(&self, file: &Arc<Handle>) {
        self.opens.lock().unwrap_or_else(|p| p.into_inner()).retain(|o| !Arc::ptr_eq(o, file));
    }
}

impl KeyLock {
    /// Gives the lock back and waits for the server's answer (the UNLOCK
    /// is sent by a task of its own, so it is sent even if this future is
    /// dropped).
    pub async fn release(mut self) {
        if let Some(file) = self.file.take() {
            let offset = self.offset;
            let _ = tokio::spawn(async move { unlock(&file, offset).await }).await;
        }
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        let Some(file) = self.file.take() else { return };
        let offset = self.offset;
        // Outside a runtime the process is ending, and its connections
        // with it, which frees the range.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = unlock(&file, offset).await;
            });
        }
    }
}

/// A LOCK in flight, polled by its taker. Dropped before its answer (the
/// request went away), it is finished by a task of its own, which gives a
/// grant back: the taker's path pays no task hop, and no byte stays
/// granted to an open that lives on.
struct Taking(Option<Pin<Box<dyn Future<Output = Taken> + Send>>>);

/// A LOCK's open, byte and answer.
type Taken = (Arc<Handle>, u64, Result<Answer>);

impl Future for Taking {
    type Output = Result<Answer>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Answer>> {
        let Some(fut) = self.0.as_mut() else { return Poll::Pending };
        let (_, _, answer) = std::task::ready!(fut.as_mut().poll(cx));
        self.0 = None;
        Poll::Ready(answer)
    }
}

impl Drop for Taking {
    fn drop(&mut self) {
        let Some(fut) = self.0.take() else { return };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let (file, offset, Ok(Answer::Granted)) = fut.await {
                    let _ = unlock(&file, offset).await;
                }
            });
        }
    }
}

/// LOCK `flags` on the byte at `offset` of `file`.
///
/// Errors: a lost connection; the LOCK's NTSTATUS other than the three
/// [`Answer`] names.
async fn lock(file: &Handle, offset: u64, flags: u32) -> Result<Answer> {
    let req = LockRequest { file_id: file.smb().id(), lock: LockElement { offset, length: 1, flags } };
    let answer = file.smb().tree().call(&req).await?;
    match answer.status() {
        NtStatus::STATUS_LOCK_NOT_GRANTED | NtStatus::STATUS_FILE_LOCK_CONFLICT => Ok(Answer::Held),
        NtStatus::STATUS_FILE_CLOSED | NtStatus::STATUS_NETWORK_NAME_DELETED => {
            Ok(Answer::Closed(answer.ok_or_status(&[]).err().map_or_else(super::not_found, Into::into)))
        }
        _ => {
            answer.ok_or_status(&[])?.body(decode_lock_response)?;
            Ok(Answer::Granted)
        }
    }
}

/// Unlocks the byte at `offset` of `file`.
async fn unlock(file: &Handle, offset: u64) -> Result<()> {
    let req = LockRequest { file_id: file.smb().id(), lock: LockElement { offset, length: 1, flags: flags::UNLOCK } };
    file.smb().tree().call(&req).await?.ok_or_status(&[])?;
    Ok(())
}

/// Where the lock named `name` lies: hashed from the name without case, so
/// that keys a case-insensitive share stores as one name share one lock.
fn offset_of(name: &str) -> u64 {
    let digest = Md5::digest(name.to_lowercase().as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first) & OFFSET_MASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differing_only_in_case_share_a_lock_and_offsets_stay_below_the_mask() {
        assert_eq!(offset_of("Bucket\\Key"), offset_of("bucket\\KEY"));
        assert_ne!(offset_of("bucket\\a"), offset_of("bucket\\b"));
        for n in ["", "a", "bucket\\x\\y", "\u{17f}"] {
            assert!(offset_of(n) <= OFFSET_MASK);
        }
    }
}
