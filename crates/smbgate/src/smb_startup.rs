//! Opening the SMB share at startup: the client's settings from the
//! command line, the pool connected (through the share layer's
//! `connect.rs`) with a refusal explained in one line, and what the
//! session negotiated, logged in words. With `identities.rs` (the pools of
//! other SMB identities) and `kerberos.rs` (the logon), the only code
//! outside the store's share layer that names the SMB client: its
//! settings, errors and the DFS link the pools keep.

use std::sync::Arc;

use smb_client::dfs::DfsLink;
use smb_client::{ClientConfig, PoolConfig};
use smb_proto::NtStatus;

use crate::config::{ServeArgs, ShareUrl};
use crate::store::share::{self, Pool};
use crate::users::SmbIdentity;

/// The SMB client's settings for the server of `url`, logged on as `id`
/// (NTLM, or Kerberos as `--smb-auth` and the Kerberos settings say);
/// signing, encryption and the I/O size (at least 64 KiB) come from `args`.
pub fn client_config(args: &ServeArgs, url: &ShareUrl, id: &SmbIdentity) -> ClientConfig {
    let addr = format!("{}:{}", url.host, url.port);
    let mut client = ClientConfig::new(&addr, &id.user, &id.password);
    client.domain = id.domain.clone();
    client.auth = args.kerberos.smb_auth(&id.user, &id.password, id.keytab.as_deref());
    client.spn = args.kerberos.smb_spn.clone();
    client.require_signing = args.smb_sign;
    client.require_encryption = args.smb_encrypt;
    client.max_io_size = args.io_size.max(64 << 10);
    client
}

/// The servers a pool of users' identities may connect to when the share
/// root `asked` was found through a DFS link at `target` (`dfs`): the
/// link's own server and its target's, the ones startup named. `None`
/// without a link.
pub fn dfs_servers(asked: &ShareUrl, target: &ShareUrl, dfs: &Option<Arc<DfsLink>>) -> Option<Vec<String>> {
    dfs.as_ref().map(|_| vec![asked.host.clone(), target.host.clone()])
}

/// The share root `url` itself, or, when it is a DFS link (the share is a
/// DFS namespace and its path a link in it), the link's target: the server,
/// share and path the referral names, on the same port, with the link, which
/// the pools keep asking about when its time to live has passed. Asked over
/// a connection of its own logged on with `client`.
///
/// Errors: one line, as [`connect`]'s, when the server cannot be used.
pub async fn follow_dfs(
    client: &ClientConfig,
    url: &ShareUrl,
    user: &str,
) -> Result<(ShareUrl, Option<Arc<DfsLink>>), String> {
    match share::dfs_referral(client, &url.share, &url.path).await.map_err(|e| explain(url, user, e))? {
        None => Ok((url.clone(), None)),
        Some(t) => {
            let target =
                ShareUrl { host: t.server.clone(), port: url.port, share: t.share.clone(), path: t.path.clone() };
            tracing::info!(
                link = %format!("\\\\{}\\{}\\{}", url.host, url.share, url.path),
                target = %format!("\\\\{}\\{}\\{}", target.host, target.share, target.path),
                ttl_s = t.ttl.as_secs(),
                "the share root is a DFS link; serving its target"
            );
            Ok((target, Some(Arc::new(DfsLink::new(client.clone(), &url.share, &url.path, t)))))
        }
    }
}

/// A pool of `size` connections to the share of `url`, logged on with
/// `client` (as `user`, named in a refusal).
///
/// Errors: one line saying why the server could not be used (unreachable,
/// wrong password, no such share, access denied, signing without an
/// account).
pub async fn connect(
    client: ClientConfig,
    url: &ShareUrl,
    user: &str,
    size: usize,
    dfs: Option<Arc<DfsLink>>,
) -> Result<Pool, String> {
    let mut cfg = PoolConfig::new(client, &url.share, size);
    cfg.dfs = dfs;
    share::connect_pool(cfg).await.map_err(|e| explain(url, user, e))
}

/// Explains an SMB connection failure in one line.
fn explain(url: &ShareUrl, user: &str, e: smb_client::Error) -> String {
    use crate::store::share::Failure;
    match (Failure::of_error(&e), e.status()) {
        (Failure::LogonRefused, Some(s))
            if s == NtStatus::STATUS_LOGON_FAILURE || s == NtStatus::STATUS_WRONG_PASSWORD =>
        {
            format!("SMB login to {}:{} as {user:?} failed: wrong user name or password", url.host, url.port)
        }
        // The password was right; the account may not log on now.
        (Failure::LogonRefused, Some(s)) => format!(
            "SMB login to {}:{} as {user:?} failed: the server refuses this account's logon ({})",
            url.host,
            url.port,
            s.name().unwrap_or("refused")
        ),
        (_, Some(NtStatus::STATUS_NTLM_BLOCKED)) => format!(
            "SMB server {}:{} refuses NTLM logons: log on with Kerberos (--smb-auth kerberos, with \
             --smb-realm, or --smb-keytab, or a credential cache)",
            url.host, url.port
        ),
        (Failure::NoSuchShare, _) => format!("share {:?} does not exist on {}:{}", url.share, url.host, url.port),
        (Failure::AccessDenied | Failure::NetworkAccessDenied, _) => {
            format!("access to share {:?} denied for {user:?}", url.share)
        }
        _ => match e {
            smb_client::Error::Auth(a @ smb_auth::AuthError::Kerberos { .. }) => {
                format!("SMB Kerberos logon to {}:{} as {user:?} failed: {a}", url.host, url.port)
            }
            smb_client::Error::Io(m) => format!("cannot reach SMB server {}:{}: {m}", url.host, url.port),
            smb_client::Error::Timeout(m) => format!("SMB server {}:{} did not answer ({m})", url.host, url.port),
            smb_client::Error::SigningNeedsAccount if user.is_empty() => format!(
                "SMB server {}:{} requires signing, which needs an account: set --smb-user and \
                 --smb-password-file (SMBGATE_SMB_USER, SMBGATE_SMB_PASSWORD_FILE)",
                url.host, url.port
            ),
            other => format!("SMB server {}:{}: {other}", url.host, url.port),
        },
    }
}

/// Logs what the SMB session negotiated (dialect, signing, encryption), in
/// words, once startup has succeeded.
pub async fn log_session(pool: &Pool) {
    if let Some((n, tree_encrypted)) = share::session_terms(pool).await {
        // Words, not Rust values: `signing=AES-128-GMAC encryption=off`.
        let encrypted = n.encrypt_all || tree_encrypted;
        tracing::info!(
            dialect = %smb_proto::negotiate::dialect::name(n.dialect),
            signing = %n.signing.map_or("off", |a| a.name()),
            every_message_signed = n.sign_all,
            encryption = %match (n.cipher, encrypted) {
                (Some(c), true) => c.name(),
                (Some(_), false) => "available",
                (None, _) => "off",
            },
            "SMB session"
        );
    }
}
