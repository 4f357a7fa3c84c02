//! Connecting to the share: the pool logged on, the referral of a share
//! root that is a DFS link, and what a pooled session negotiated. Startup
//! and the pools of users' SMB identities come here, so that no code above
//! the layer opens a connection of its own.

use smb_client::dfs::DfsTarget;
use smb_client::session::Negotiated;
use smb_client::{ClientConfig, PoolConfig};

use super::Pool;

/// A pool connected as `cfg` says (its size, identity, DFS link).
///
/// Errors: smb-client's, unchanged, so that startup can explain a refusal
/// in one line (unreachable, logon refused, no such share, access denied).
pub async fn connect_pool(cfg: PoolConfig) -> smb_client::Result<Pool> {
    smb_client::Pool::connect(cfg).await.map(Pool::new)
}

/// Where `share` and `path` on the server of `client` lead when they are a
/// DFS link (a referral, [MS-DFSC] 2.2.2), or `None` when they are not,
/// asked over a session of its own that is closed afterwards.
///
/// Errors: the session could not be made, or the referral was refused.
pub async fn dfs_referral(client: &ClientConfig, share: &str, path: &str) -> smb_client::Result<Option<DfsTarget>> {
    let session = smb_client::Session::connect(client).await?;
    let referral = smb_client::dfs::get_referral(&session, share, path).await;
    session.conn.close();
    referral
}

/// What a pooled session settled on (dialect, signing, cipher), and
/// whether its tree is encrypted; `None` when no connection can be had.
pub async fn session_terms(pool: &Pool) -> Option<(Negotiated, bool)> {
    let tree = pool.smb().get().await.ok()?;
    Some((tree.session().negotiated.clone(), tree.is_encrypted()))
}
