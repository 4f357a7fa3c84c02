//! The checks of `serve`'s settings that need no SMB server, in one place
//! and one order: `serve` runs them before it connects, and `smbgate config
//! check` runs the same, so that a file one refuses the other refuses with
//! the same line.

use std::sync::Arc;

use crate::config::{ServeArgs, ShareUrl};
use crate::config_file::BucketSource;
use crate::secret_files::{secret, secret_files_unread};
use crate::tls::Certificates;
use crate::users::{Anonymous, UserTable};

/// What the settings resolve to, once checked.
pub struct Settled {
    /// `--share`, as written (before any DFS referral).
    pub url: ShareUrl,
    /// The gateway's own SMB password (empty without one).
    pub smb_password: String,
    /// The S3 users: the config file's and the `--access-key` one.
    pub users: UserTable,
    /// What unsigned requests may do.
    pub anonymous: Anonymous,
    /// The TLS certificate and key, loaded; `None` without TLS, or when
    /// secret files are left unread (`config check --without-secrets`).
    pub tls: Option<Arc<Certificates>>,
    /// The bearer token `/metrics` requires, if any.
    pub metrics_token: Option<String>,
    /// The config file's `[buckets.NAME]`, a `path` taken under `url`.
    pub buckets: Vec<BucketSource>,
    /// The shared budget of XML request bodies.
    pub bodies: crate::body_budget::BodyBudget,
    /// `--domain`, for virtual-hosted-style requests.
    pub domain: Option<crate::vhost::Domain>,
}

/// Checks every setting of `args` that needs no SMB server, reading every
/// secret file (unless they are left unread), and resolves them.
///
/// Errors: the first refusal, in one line: a bad share URL, an unreadable
/// or loose secret file, a refused user, no S3 credentials without
/// `--anonymous`, an anonymous grant that does not fit, `--proxy-protocol`
/// without `--trusted-proxy`, TLS files that do not load, a Kerberos
/// setting, a blank metrics token, a refused `[buckets.NAME]`, a too small
/// `--xml-body-budget`, a `--domain` that is no DNS name.
pub fn settle(args: &ServeArgs) -> Result<Settled, String> {
    let url = ShareUrl::parse(&args.share)?;
    let smb_password = secret("smb-password-file", &args.smb_password, &args.smb_password_file)?.unwrap_or_default();
    let users = crate::config_file::users_of(args)?;
    if users.is_empty() && !args.anonymous {
        return Err("no S3 credentials: set --access-key and --secret-key (or --secret-key-file), \
                    list users in a --config file, or pass --anonymous to allow unsigned requests"
            .into());
    }
    let anonymous =
        Anonymous::from_settings(args.anonymous, &args.anonymous_buckets, args.anonymous_write, !users.is_empty())?;
    if args.proxy_protocol && args.trusted_proxies.is_empty() {
        return Err("--proxy-protocol: name the proxies whose PROXY headers to believe with --trusted-proxy".into());
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) if !secret_files_unread() => Some(Certificates::load(cert, key)?),
        _ => None,
    };
    args.kerberos.validate()?;
    let metrics_token = crate::config::metrics_token(args)?;
    let buckets = match &args.config {
        Some(path) => crate::config_file::ConfigFile::load(path)?.buckets(&url)?,
        None => Vec::new(),
    };
    let bodies = crate::body_budget::BodyBudget::new(args.xml_body_budget)?;
    let domain = args.domain.as_deref().map(crate::vhost::Domain::new).transpose()?;
    Ok(Settled { url, smb_password, users, anonymous, tls, metrics_token, buckets, bodies, domain })
}
