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
    /// The config file's `[targets.NAME]`: where bucket notifications go.
    pub targets: Vec<crate::events::targets::TargetConfig>,
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
/// setting, a blank metrics token, a refused `[buckets.NAME]` (one inside
/// another bucket's folder among them), a refused `[targets.NAME]`, a too small
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
    let (buckets, targets) = match &args.config {
        Some(path) => {
            let file = crate::config_file::ConfigFile::load(path)?;
            let buckets = file.buckets(&url)?;
            no_bucket_inside_another(&url, &buckets).map_err(|e| format!("config file {}: {e}", path.display()))?;
            (buckets, file.targets()?)
        }
        None => (Vec::new(), Vec::new()),
    };
    let bodies = crate::body_budget::BodyBudget::new(args.xml_body_budget)?;
    let domain = args.domain.as_deref().map(crate::vhost::Domain::new).transpose()?;
    Ok(Settled { url, smb_password, users, anonymous, tls, metrics_token, buckets, targets, bodies, domain })
}

/// The components of `url`'s folder under `main`'s, if both name one share
/// (host, port and share compared as SMB does, case aside).
fn folder_under<'a>(main: &ShareUrl, url: &'a ShareUrl) -> Option<Vec<&'a str>> {
    let same = main.host.eq_ignore_ascii_case(&url.host)
        && main.port == url.port
        && main.share.eq_ignore_ascii_case(&url.share);
    let base: Vec<&str> = main.path.split('\\').filter(|p| !p.is_empty()).collect();
    let path: Vec<&str> = url.path.split('\\').filter(|p| !p.is_empty()).collect();
    let under = path.len() >= base.len() && base.iter().zip(&path).all(|(a, b)| a.to_lowercase() == b.to_lowercase());
    (same && under).then(|| path[base.len()..].to_vec())
}

/// Refuses a configured bucket whose folder lies inside a folder served as
/// a bucket too: one at the top of `--share` that a bucket name reaches
/// (case aside), or another configured bucket's. Its objects, and the
/// gateway state it keeps in its own `.smbgate`, would be keys of the outer
/// bucket, readable and writable through it.
///
/// Errors: one line naming the bucket and the folder it lies in.
fn no_bucket_inside_another(main: &ShareUrl, buckets: &[BucketSource]) -> Result<(), String> {
    for b in buckets {
        let folder = folder_under(main, &b.url).unwrap_or_default();
        if let [top, _, ..] = folder.as_slice() {
            if s3s::path::check_bucket_name(&top.to_lowercase()) {
                return Err(format!(
                    "[buckets.{}]: its folder {:?} lies inside {top:?}, which is served as the bucket {:?}: its objects \
                     and state would be keys of that bucket too; give a folder at the top of the share",
                    b.name,
                    folder.join("/"),
                    top.to_lowercase()
                ));
            }
        }
        for outer in buckets.iter().filter(|o| o.name != b.name) {
            let Some(o) = folder_under(&outer.url, &b.url) else { continue };
            if !o.is_empty() {
                return Err(format!(
                    "[buckets.{}]: its folder lies inside [buckets.{}]'s: its objects and state would be keys of \
                     that bucket too",
                    b.name, outer.name
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(name: &str, url: &str) -> BucketSource {
        BucketSource { name: name.into(), url: ShareUrl::parse(url).unwrap(), smb: None, on_main_share: false }
    }

    #[test]
    fn a_bucket_inside_a_folder_served_as_a_bucket_is_refused() {
        let main = ShareUrl::parse("smb://nas/share").unwrap();
        let refused = |b: &[BucketSource]| no_bucket_inside_another(&main, b).unwrap_err();
        let e = refused(&[bucket("alpha", "smb://nas/share/projects/alpha")]);
        assert!(e.starts_with("[buckets.alpha]: its folder \"projects/alpha\" lies inside \"projects\""), "{e}");
        assert!(refused(&[bucket("alpha", "smb://NAS/Share/Projects/alpha")]).contains("the bucket \"projects\""));
        let e = refused(&[bucket("outer", "smb://other/s/x"), bucket("inner", "smb://other/s/x/y")]);
        assert_eq!(e, "[buckets.inner]: its folder lies inside [buckets.outer]'s: its objects and state would be keys of that bucket too");
        // A folder at the top, one whose top folder no bucket name reaches,
        // another share, and side by side: served.
        for ok in [
            vec![bucket("alpha", "smb://nas/share/projects")],
            vec![bucket("team", "smb://nas/share/Team Photos/2024")],
            vec![bucket("far", "smb://nas/other/projects/alpha")],
            vec![bucket("a", "smb://far/s/x"), bucket("b", "smb://far/s/xy"), bucket("c", "smb://far/s/x")],
        ] {
            assert_eq!(no_bucket_inside_another(&main, &ok), Ok(()));
        }
        // Under a --share that names a folder, relative to it.
        let sub = ShareUrl::parse("smb://nas/share/data").unwrap();
        assert!(no_bucket_inside_another(&sub, &[bucket("a", "smb://nas/share/data/projects/a")]).is_err());
        assert_eq!(no_bucket_inside_another(&sub, &[bucket("a", "smb://nas/share/projects/a")]), Ok(()));
    }
}
