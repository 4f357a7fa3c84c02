//! `smbgate config check FILE`: a config file's effective `serve`
//! settings, checked as `serve` checks them before it connects
//! ([`crate::settings_check`]), each with where it came from, secrets
//! redacted, then the buckets, event targets and users. Above both the file's reading
//! (`crate::config_file`) and the checks.

use std::path::Path;

use crate::config_file::{clap_message, is_secret, resolve_secret_pairs, ConfigFile, ParseError};
use crate::users::SmbIdentity;

/// `smbgate config check FILE`: the effective `serve` settings (flags are
/// not read; the environment is), one per line with where each came from,
/// secrets redacted, then the users.
///
/// Errors: the file does not load, a setting or user is refused, or a
/// required setting is missing.
pub fn check(cmd: clap::Command, path: &Path) -> Result<String, String> {
    let file = ConfigFile::load(path)?;
    // In the order `serve --help` lists them (applying defaults reorders).
    let order: Vec<clap::Arg> =
        cmd.find_subcommand("serve").map(|s| s.get_arguments().cloned().collect()).unwrap_or_default();
    let from_file = file.setting_ids(&cmd)?;
    let matches = file.parse(&cmd, vec!["smbgate".into(), "serve".into()]).map_err(|e| match e {
        ParseError::File(line) => line,
        ParseError::Clap(e) => format!("config file {}: {}", path.display(), clap_message(&e)),
    })?;
    let (_, m) = matches.subcommand().ok_or("no serve settings")?;
    let mut args =
        <crate::config::ServeArgs as clap::FromArgMatches>::from_arg_matches(m).map_err(|e| clap_message(&e))?;
    args.config = Some(path.to_path_buf());
    let dropped = resolve_secret_pairs(m, &mut args)?;
    // What serve checks before it connects, secret files read as it would.
    let crate::settings_check::Settled { users, buckets, targets, .. } = crate::settings_check::settle(&args)?;
    let mut out = format!("# {}: valid. Effective settings of `smbgate serve` (flags aside):\n", path.display());
    if crate::secret_files::secret_files_unread() {
        out.push_str("# secret files were named, not read (--without-secrets)\n");
    }
    for arg in &order {
        let id = arg.get_id().as_str();
        if arg.get_long().is_none() || id == "help" || id == "config" {
            continue;
        }
        let Some(raw) = m.get_raw(id) else {
            out.push_str(&format!("# {id}: not set\n"));
            continue;
        };
        let value: Vec<String> = raw.map(|v| v.to_string_lossy().into_owned()).collect();
        let source = match m.value_source(id) {
            Some(clap::parser::ValueSource::EnvVariable) => "environment",
            Some(clap::parser::ValueSource::DefaultValue) if from_file.contains(id) => "file",
            _ => "default",
        };
        if dropped.contains(&id) {
            out.push_str(&format!("# {id}: overridden by a higher place\n"));
            continue;
        }
        let shown = if is_secret(id) { "\"(redacted)\"".to_string() } else { format!("{:?}", value.join(",")) };
        out.push_str(&format!("{id} = {shown}  # {source}\n"));
    }
    out.push_str(&format!("# buckets of their own: {}\n", buckets.len()));
    for b in &buckets {
        let smb = b.smb.as_ref().map_or("the gateway's own --smb-user".to_string(), SmbIdentity::describe);
        let path = if b.url.path.is_empty() { String::new() } else { format!("/{}", b.url.path.replace('\\', "/")) };
        out.push_str(&format!("#   {}: //{}:{}/{}{path}, as SMB {smb}\n", b.name, b.url.host, b.url.port, b.url.share));
    }
    out.push_str(&format!("# event targets: {}\n", targets.len()));
    for t in &targets {
        // Kind's Display leaves secrets out.
        out.push_str(&format!("#   {}: {}, queue_limit {}\n", t.name, t.kind, t.queue_limit));
    }
    out.push_str(&format!("# users: {}\n", users.len()));
    for line in users.describe() {
        out.push_str(&format!("#   {line}\n"));
    }
    Ok(out)
}
