//! Watching a directory on the share for changes (CHANGE_NOTIFY, MS-SMB2
//! 2.2.35): the object cache keeps one on each directory that holds its
//! entries, to hear of changes that break no lease (a program on the
//! server writing its own disk, NFS on a multiprotocol share); the events
//! of a bucket's notifications keep one on the bucket's tree, to hear of
//! what people change on the share.
//!
//! Samba watches its own disk with inotify, which covers one directory and
//! not the tree under it: the cache's watches are on one directory each. A
//! tree watch hears every change made through the server (its clients'),
//! and those on its disk only in the top directory.

pub use smb_client::notify::Notified;
use smb_client::notify::PendingNotify;
use smb_proto::create::{access, options, CreateRequest};
use smb_proto::notify::filter;
pub use smb_proto::notify::{Action, Change};

use super::{Handle, Result, Tree};

/// What a watch reports: names coming and going, and any change of a
/// file's data, size, times, attributes, EAs or streams (a record rewritten
/// in place).
const CHANGES: u32 = filter::FILE_NAME
    | filter::DIR_NAME
    | filter::ATTRIBUTES
    | filter::SIZE
    | filter::LAST_WRITE
    | filter::CREATION
    | filter::EA
    | filter::STREAM_NAME
    | filter::STREAM_SIZE
    | filter::STREAM_WRITE;

/// What a tree watch reports: names coming and going, and a file's data
/// changing (not its times alone, attributes or EAs: a record rewritten in
/// place is no new object).
const TREE_CHANGES: u32 = filter::FILE_NAME | filter::DIR_NAME | filter::SIZE | filter::LAST_WRITE;

/// A directory held open and watched. Dropping it closes the directory,
/// which ends the server's watch.
pub struct DirWatch {
    dir: Handle,
    /// The CompletionFilter and WATCH_TREE asked for, again at each re-arm.
    filter: u32,
    subtree: bool,
    pending: Option<PendingNotify>,
    /// An answer that came with the watch's start.
    first: Option<Notified>,
}

/// Opens the directory `path` on `tree` and asks for its changes. Returns
/// once the server holds the watch: an ECHO sent after the CHANGE_NOTIFY on
/// the same connection has been answered (the server takes one
/// connection's requests up in order, and registers a watch before it
/// answers that it is pending), so every change after this returns is
/// reported. A refusal is answered at once, so it is known by then too.
///
/// Errors: [`WatchError::Unsupported`] where the server keeps no watches
/// (STATUS_NOT_SUPPORTED, STATUS_NOT_IMPLEMENTED,
/// STATUS_INVALID_DEVICE_REQUEST); [`WatchError::Failed`] for the rest (the
/// directory not found or not open to us, a lost connection).
pub async fn watch_dir(tree: &Tree, path: &str) -> std::result::Result<DirWatch, WatchError> {
    watch(tree, path, CHANGES, false).await
}

/// As [`watch_dir`], for the whole tree under `path`: names coming and
/// going anywhere under it, and files' data changing (`\`-separated names
/// relative to `path`).
///
/// Errors: as [`watch_dir`].
pub async fn watch_tree(tree: &Tree, path: &str) -> std::result::Result<DirWatch, WatchError> {
    watch(tree, path, TREE_CHANGES, true).await
}

async fn watch(tree: &Tree, path: &str, filter: u32, subtree: bool) -> std::result::Result<DirWatch, WatchError> {
    let open =
        CreateRequest::open(path, access::FILE_LIST_DIRECTORY | access::SYNCHRONIZE).options(options::DIRECTORY_FILE);
    let dir = tree.open(&open).await.map_err(WatchError::of)?;
    let mut pending = tree.smb().start_change_notify(dir.smb().id(), filter, subtree).await.map_err(WatchError::of)?;
    tree.smb().session().echo().await.map_err(WatchError::of)?;
    match tree.smb().try_notified(&mut pending) {
        None => Ok(DirWatch { dir, filter, subtree, pending: Some(pending), first: None }),
        Some(Ok(first)) => Ok(DirWatch { dir, filter, subtree, pending: None, first: Some(first) }),
        Some(Err(e)) => Err(WatchError::of(e)),
    }
}

/// Why [`watch_dir`] or [`watch_tree`] failed.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The server keeps no watches.
    #[error("{0}")]
    Unsupported(super::ShareError),
    /// Anything else.
    #[error("{0}")]
    Failed(super::ShareError),
}

impl WatchError {
    fn of(e: smb_client::Error) -> WatchError {
        use smb_proto::NtStatus;
        match e.status() {
            Some(
                NtStatus::STATUS_NOT_SUPPORTED
                | NtStatus::STATUS_NOT_IMPLEMENTED
                | NtStatus::STATUS_INVALID_DEVICE_REQUEST,
            ) => WatchError::Unsupported(e.into()),
            _ => WatchError::Failed(e.into()),
        }
    }
}

impl DirWatch {
    /// The next changes; the server keeps those that happen between two
    /// calls (MS-SMB2 3.3.5.19). Not cancel-safe: an answer that comes to
    /// a dropped call is lost, so keep the call's future until it ends.
    ///
    /// Errors: the watch refused (STATUS_NOT_SUPPORTED), the directory
    /// deleted (STATUS_DELETE_PENDING), a lost connection.
    pub async fn next(&mut self) -> Result<Notified> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        let tree = self.dir.smb().tree().clone();
        let pending = match self.pending.take() {
            Some(p) => p,
            None => tree.start_change_notify(self.dir.smb().id(), self.filter, self.subtree).await?,
        };
        Ok(tree.notified(pending).await?)
    }

    /// Closes the directory (the server then ends its watch) and waits for
    /// the answer, so that a delete of the directory that follows is not
    /// left pending on this open.
    ///
    /// Errors: the CLOSE's NTSTATUS, a lost connection.
    pub async fn close(self) -> Result<()> {
        self.dir.close().await?;
        Ok(())
    }
}
