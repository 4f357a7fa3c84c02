//! DFS namespaces (MS-DFSC): asking a server where a DFS path really lives,
//! so that a share root given as `\\domain\namespace\folder` is served from
//! the folder's target share.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use smb_proto::create::FileId;
use smb_proto::dfs::{encode_referral_request, ReferralResponse, FSCTL_DFS_GET_REFERRALS};
use smb_proto::ioctl::{IoctlRequest, IoctlResponse};

use crate::error::{Error, Result};
use crate::session::{ClientConfig, Session};

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

/// A DFS link a pool serves: the target it names is kept for the
/// referral's time to live, then asked for again when the pool next opens a
/// connection, so that a link moved to another server or share (a replica,
/// a migration) is followed. The path in the target share is the store's
/// root, so a target whose path changed is not followed: that is logged and
/// the last target kept.
pub struct DfsLink {
    namespace: ClientConfig,
    share: String,
    path: String,
    state: Mutex<(DfsTarget, Instant)>,
    /// The (server, user) pairs whose refusal was logged at WARN.
    warned: Mutex<std::collections::HashSet<(String, String)>>,
}

impl std::fmt::Debug for DfsLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DfsLink").field("share", &self.share).field("path", &self.path).finish_non_exhaustive()
    }
}

impl DfsLink {
    /// The link `\\<namespace server>\<share>\<path>`, whose target was
    /// found to be `first` just now; `namespace` logs on to the namespace
    /// server to ask again.
    pub fn new(namespace: ClientConfig, share: &str, path: &str, first: DfsTarget) -> DfsLink {
        let due = Instant::now() + first.ttl;
        DfsLink {
            namespace,
            share: share.to_string(),
            path: path.to_string(),
            state: Mutex::new((first, due)),
            warned: Mutex::default(),
        }
    }

    /// Logs that a pool logged on as `user` did not follow this link to
    /// `server`, a server it may not connect to: at WARN the first time
    /// for that server and user, at DEBUG after (a pool tries again every
    /// few seconds).
    pub fn warn_refused(&self, server: &str, user: &str) {
        let link = format!("{}\\{}", self.share, self.path);
        if self.warned.lock().unwrap().insert((server.to_ascii_lowercase(), user.to_string())) {
            tracing::warn!(
                %link, %server, %user,
                "the DFS link points at a server not named at startup; this pool does not follow it there"
            );
        } else {
            tracing::debug!(%link, %server, %user, "DFS target refused");
        }
    }

    /// The target to connect to now, asking the namespace server first if
    /// the time to live has passed. If it cannot be asked, or names a
    /// different path, the last target stays (and is asked about again
    /// after another time to live).
    pub async fn target(&self) -> DfsTarget {
        let (current, due) = self.state.lock().unwrap().clone();
        if Instant::now() < due {
            return current;
        }
        let asked = match Session::connect(&self.namespace).await {
            Ok(s) => {
                let r = get_referral(&s, &self.share, &self.path).await;
                s.conn.close();
                r
            }
            Err(e) => Err(e),
        };
        let next = match asked {
            Ok(Some(t)) if t.path == current.path => {
                if (&t.server, &t.share) != (&current.server, &current.share) {
                    tracing::info!(
                        link = %format!("{}\\{}", self.share, self.path),
                        from = %format!("\\\\{}\\{}", current.server, current.share),
                        to = %format!("\\\\{}\\{}", t.server, t.share),
                        "the DFS link now points elsewhere; new connections follow it"
                    );
                }
                t
            }
            Ok(Some(t)) => {
                tracing::warn!(
                    link = %format!("{}\\{}", self.share, self.path),
                    path = %t.path,
                    kept = %current.path,
                    "the DFS link now names another path in its share; keeping the old target until restart"
                );
                DfsTarget { ttl: t.ttl, ..current }
            }
            Ok(None) | Err(_) => current,
        };
        let ttl = next.ttl.max(Duration::from_secs(1));
        *self.state.lock().unwrap() = (next.clone(), Instant::now() + ttl);
        next
    }

    /// Asks again at the next [`Self::target`], whatever the time to live
    /// says: after the target could not be reached, say.
    pub fn expire(&self) {
        self.state.lock().unwrap().1 = Instant::now();
    }

    /// `template` pointed at `target` (same port): its address, server name
    /// (for UNC paths and the default Kerberos principal) and nothing else.
    pub fn client_for(template: &ClientConfig, target: &DfsTarget) -> ClientConfig {
        template.on_server(&target.server)
    }
}
