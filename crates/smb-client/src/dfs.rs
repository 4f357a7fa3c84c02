//! DFS namespaces (MS-DFSC): asking a server where a DFS path really lives,
//! so that a share root given as `\\domain\namespace\folder` is served from
//! the folder's target share.

use std::time::Duration;

use bytes::BytesMut;
use smb_proto::create::FileId;
use smb_proto::dfs::{encode_referral_request, ReferralResponse, FSCTL_DFS_GET_REFERRALS};
use smb_proto::ioctl::{IoctlRequest, IoctlResponse};

use crate::error::{Error, Result};
use crate::session::Session;

/// Where a DFS path lives: a share on a server, and a path in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DfsTarget {
    /// The target server, as the referral names it (a host name or address).
    pub server: String,
    /// The share on it.
    pub share: String,
    /// The path in that share (backslashes, no leading one; empty for its
    /// root), with what the referral did not cover appended.
    pub path: String,
    /// How long the referral may be kept (its TimeToLive).
    pub ttl: Duration,
}

/// The largest referral answer read (bytes); Windows and Samba send a few
/// hundred per target.
const MAX_REFERRAL_OUTPUT: u32 = 16 << 10;

/// Asks `session`'s server for a referral for `\<server>\<share>\<path>`
/// (FSCTL_DFS_GET_REFERRALS on its IPC$, MS-SMB2 3.2.4.20.3, MS-DFSC
/// 3.1.4.2). `path` uses backslashes, no leading one.
///
/// Returns `None` when the server has none: the share is no DFS namespace,
/// or the path is a plain folder in one. Errors: the session's own
/// (connection, signing), or a referral that does not decode or whose
/// target is not `\server\share[\path]`.
pub async fn get_referral(session: &Session, share: &str, path: &str) -> Result<Option<DfsTarget>> {
    let mut request = format!("\\{}\\{}", session.config().server_name, share);
    if !path.is_empty() {
        request.push('\\');
        request.push_str(path);
    }
    let mut input = BytesMut::new();
    encode_referral_request(&mut input, &request);
    let ipc = match session.tree_connect("IPC$").await {
        Ok(t) => t,
        // A server that keeps IPC$ from this account serves no referrals to it.
        Err(Error::Status { status, .. }) => {
            tracing::debug!(%status, "no IPC$ tree for a DFS referral");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let any = FileId { persistent: u64::MAX, volatile: u64::MAX };
    let req = IoctlRequest {
        ctl_code: FSCTL_DFS_GET_REFERRALS,
        file_id: any,
        input: &input,
        max_output: MAX_REFERRAL_OUTPUT,
    };
    let answer = ipc.call(&req).await;
    let _ = ipc.disconnect().await;
    let resp = match answer?.ok_or_status(&[]) {
        Ok(r) => r,
        // No referral: not a DFS path (NOT_FOUND, FS_DRIVER_REQUIRED, ...).
        Err(Error::Status { status, .. }) => {
            tracing::debug!(%request, %status, "no DFS referral");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let out = resp.body(IoctlResponse::decode)?.output;
    let referral = ReferralResponse::decode(&out)?;
    let Some(first) = referral.referrals.first() else { return Ok(None) };
    let units: Vec<u16> = request.encode_utf16().collect();
    let rest = String::from_utf16(units.get(referral.path_consumed..).unwrap_or_default())
        .map_err(|_| Error::Protocol("DFS referral: PathConsumed splits a character".into()))?;
    let mut parts = first.target.trim_start_matches('\\').splitn(3, '\\');
    let (Some(server), Some(target_share)) =
        (parts.next().filter(|s| !s.is_empty()), parts.next().filter(|s| !s.is_empty()))
    else {
        return Err(Error::Protocol(format!("DFS referral target {:?} is not \\server\\share", first.target)));
    };
    let joined: Vec<&str> =
        [parts.next().unwrap_or(""), rest.trim_start_matches('\\')].into_iter().filter(|p| !p.is_empty()).collect();
    Ok(Some(DfsTarget {
        server: server.to_string(),
        share: target_share.to_string(),
        path: joined.join("\\").trim_end_matches('\\').to_string(),
        ttl: Duration::from_secs(u64::from(first.ttl)),
    }))
}
