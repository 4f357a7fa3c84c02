//! Taking connections from the pool: one to run share operations on, an
//! idle one if there is any, or others than those a caller already holds
//! (to spread one object's I/O over several smbd processes).

use super::{Handle, Pool, Tree};

use super::Result;

/// A pooled connection, the least loaded.
///
/// Errors: no connection could be had (every one is lost and none could be
/// made again).
pub async fn connection(pool: &Pool) -> Result<Tree> {
    pool.smb().get().await.map(Tree::new).map_err(Into::into)
}

/// An idle pooled connection, if any (never waits, never connects).
pub fn idle_connection(pool: &Pool) -> Option<Tree> {
    pool.smb().try_get().map(Tree::new)
}

/// Up to `n` pooled connections that are not the connection of any tree
/// in `holding`.
pub fn other_connections(pool: &Pool, n: usize, holding: &[&Tree]) -> Vec<Tree> {
    pool.smb().spread(n).into_iter().map(Tree::new).filter(|t| !holding.iter().any(|h| h.same_connection(t))).collect()
}

/// The pool's spare connection (`smb_client::Pool::spare`), on which the store never
/// keeps a handle open: a rename over an object that every pooled
/// connection's smbd process holds open (readers streaming it) still
/// succeeds there.
///
/// Errors: no connection could be made.
pub async fn spare_connection(pool: &Pool) -> Result<Tree> {
    pool.smb().spare().await.map(Tree::new).map_err(Into::into)
}

/// The connection `handle` is open on (a handle's file id means nothing on
/// another connection), as a tree of its own.
pub fn connection_of(handle: &Handle) -> Tree {
    handle.tree()
}
