//! The TOML config file (`--config FILE`, `SMBGATE_CONFIG`): any `serve`
//! setting under its flag's name (`pool_size = 8` or `pool-size = 8`), and
//! the S3 users as `[users.NAME]` tables ([`crate::users`]).
//!
//! Precedence is flags, then environment, then the file, then the built-in
//! defaults: the file's values become the flags' defaults, so clap's own
//! rules order the rest.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::config::ShareUrl;
use crate::users::{SmbIdentity, UserTable};

/// A bucket of its own directory on some share (`[buckets.NAME]`), beside
/// the buckets of `--share`: `share = "smb://HOST/SHARE/PATH"`, or
/// `path = "FOLDER"`, a folder under `--share`'s root (one whose name no
/// bucket name can reach, such as `Team Photos`).
#[derive(Debug, Clone)]
pub struct BucketSource {
    /// The bucket's name.
    pub name: String,
    /// The bucket's directory: `smb://HOST[:PORT]/SHARE[/PATH]`; its
    /// contents are the bucket's objects.
    pub url: ShareUrl,
    /// The gateway's own account on that server, if not `--smb-user`'s.
    pub smb: Option<SmbIdentity>,
    /// Given as `path`: a folder of `--share`, reached through the
    /// gateway's own connections to it.
    pub on_main_share: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BucketEntry {
    share: Option<String>,
    path: Option<String>,
    smb_user: Option<String>,
    #[serde(default)]
    smb_domain: String,
    smb_password: Option<String>,
    smb_password_file: Option<PathBuf>,
    smb_keytab: Option<PathBuf>,
}

/// The environment variable naming the config file.
pub const ENV: &str = "SMBGATE_CONFIG";

/// Setting names that hold secrets: `config check` never prints their
/// values (the files that hold them are paths, and are printed).
pub(crate) fn is_secret(id: &str) -> bool {
    !id.ends_with("_file") && (id.contains("password") || id.contains("secret") || id.ends_with("token"))
}

/// Settings that name files: a relative path in the config file is taken
/// from the file's directory, as in its tables.
const PATH_SETTINGS: [&str; 6] =
    ["smb_password_file", "secret_key_file", "metrics_token_file", "tls_cert", "tls_key", "access_log"];

/// Pairs of a secret and the file that may hold it instead.
const SECRET_PAIRS: [(&str, &str); 3] =
    [("smb_password", "smb_password_file"), ("secret_key", "secret_key_file"), ("metrics_token", "metrics_token_file")];

/// Of a secret given both as a value and as a file, keeps the one from
/// the higher place (flags over environment over the config file) and
/// drops the other from `args`. Returns the settings dropped.
///
/// Errors: both from the same place (the flags, say).
pub fn resolve_secret_pairs(
    m: &clap::ArgMatches,
    args: &mut crate::config::ServeArgs,
) -> Result<Vec<&'static str>, String> {
    let mut dropped = Vec::new();
    use clap::parser::ValueSource as V;
    let rank = |id: &str| match m.value_source(id) {
        Some(V::CommandLine) => 3,
        Some(V::EnvVariable) => 2,
        Some(V::DefaultValue) => 1,
        _ => 0,
    };
    for (value, file) in SECRET_PAIRS {
        let (rv, rf) = (rank(value), rank(file));
        if rv == 0 || rf == 0 {
            continue;
        }
        if rv == rf {
            let place = ["", "the config file", "the environment", "the command line"][rv];
            return Err(format!(
                "--{} and --{} are both given in {place}; give one",
                value.replace('_', "-"),
                file.replace('_', "-")
            ));
        }
        let drop_value = rf > rv;
        dropped.push(if drop_value { value } else { file });
        match (value, drop_value) {
            ("smb_password", true) => args.smb_password = None,
            ("smb_password", false) => args.smb_password_file = None,
            ("secret_key", true) => args.secret_key = None,
            ("secret_key", false) => args.secret_key_file = None,
            (_, true) => args.metrics_token = None,
            (_, false) => args.metrics_token_file = None,
        }
    }
    Ok(dropped)
}

/// The first lines of a clap error, without its "error: " and usage.
pub(crate) fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    lines.join(" ").trim_start_matches("error: ").to_string()
}

/// A parsed config file.
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    table: toml::Table,
}

impl ConfigFile {
    /// Reads and parses `path`.
    ///
    /// Errors: a one-line reason naming the file (unreadable, not TOML).
    pub fn load(path: &Path) -> Result<ConfigFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("config file {}: {e}", path.display()))?;
        let table = text.parse::<toml::Table>().map_err(|e| {
            let msg = e.message().to_string();
            let line = e.span().map(|s| text[..s.start].lines().count().max(1));
            match line {
                Some(l) => format!("config file {}, line {l}: {msg}", path.display()),
                None => format!("config file {}: {msg}", path.display()),
            }
        })?;
        Ok(ConfigFile { path: path.to_path_buf(), table })
    }

    /// Logs at WARN if the file holds a secret itself (a password, secret
    /// key or token, not a path to one) and every user of the machine may
    /// read it.
    fn warn_if_secrets_exposed(&self) {
        fn holds_secret(t: &toml::Table) -> bool {
            t.iter().any(|(k, v)| match v {
                toml::Value::Table(inner) => holds_secret(inner),
                toml::Value::String(_) => is_secret(&k.replace('-', "_")),
                _ => false,
            })
        }
        let Some(mode) = crate::secret_files::open_to_everyone(&self.path) else { return };
        if holds_secret(&self.table) {
            tracing::warn!(
                file = %self.path.display(),
                mode = format!("{mode:03o}"),
                "the config file holds secrets and every user may read it; chmod o-rwx it, or move the secrets to *_file settings"
            );
        }
    }

    /// The file's `[users.NAME]` tables (empty without any).
    ///
    /// Errors: as [`UserTable::from_toml`], prefixed with the file's name.
    pub fn users(&self) -> Result<UserTable, String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        match self.table.get("users") {
            None => Ok(UserTable::default()),
            Some(toml::Value::Table(t)) => {
                UserTable::from_toml(t, dir).map_err(|e| format!("config file {}: {e}", self.path.display()))
            }
            Some(_) => Err(format!("config file {}: users must be a table of [users.NAME]", self.path.display())),
        }
    }

    /// The file's `[targets.NAME]` tables: where bucket notifications may
    /// be sent (empty without any).
    ///
    /// Errors: as [`crate::events::targets::from_toml`], prefixed with the
    /// file's name.
    pub fn targets(&self) -> Result<Vec<crate::events::targets::TargetConfig>, String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        match self.table.get("targets") {
            None => Ok(Vec::new()),
            Some(toml::Value::Table(t)) => crate::events::targets::from_toml(t, dir)
                .map_err(|e| format!("config file {}: {e}", self.path.display())),
            Some(_) => Err(format!("config file {}: targets must be a table of [targets.NAME]", self.path.display())),
        }
    }

    /// The file's `[buckets.NAME]` tables, by name; a `path` is taken
    /// under `main` (`--share`).
    ///
    /// Errors: a one-line reason naming the file and the bucket: an
    /// unknown or missing field, both or neither of `share` and `path`, a
    /// name S3 cannot address, a URL that does not parse, a path with an
    /// empty, `.` or `..` component, a password given twice or unreadable,
    /// an SMB account for a `path` (it is reached as `--smb-user`).
    pub fn buckets(&self, main: &ShareUrl) -> Result<Vec<BucketSource>, String> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let file = self.path.display();
        let table = match self.table.get("buckets") {
            None => return Ok(Vec::new()),
            Some(toml::Value::Table(t)) => t,
            Some(_) => return Err(format!("config file {file}: buckets must be a table of [buckets.NAME]")),
        };
        let mut out = Vec::new();
        for (name, value) in table {
            let fail = |m: String| format!("config file {file}: [buckets.{name}]: {m}");
            let e = BucketEntry::deserialize(value.clone()).map_err(|e| fail(e.message().to_string()))?;
            if !s3s::path::check_bucket_name(name) {
                return Err(fail("not a valid bucket name".into()));
            }
            let (url, on_main_share) = match (&e.share, &e.path) {
                (Some(share), None) => (ShareUrl::parse(share).map_err(fail)?, false),
                (None, Some(folder)) => {
                    if e.smb_user.is_some()
                        || e.smb_password.is_some()
                        || e.smb_password_file.is_some()
                        || e.smb_keytab.is_some()
                    {
                        return Err(fail(
                            "a path is a folder of --share, reached as --smb-user: give no smb_user or smb_password"
                                .into(),
                        ));
                    }
                    (main.join(folder).map_err(fail)?, true)
                }
                _ => {
                    return Err(fail(
                        "give either share = \"smb://HOST/SHARE/PATH\" or path = \"FOLDER\" (a folder of --share)"
                            .into(),
                    ))
                }
            };
            let password =
                crate::users::one_secret("smb_password", e.smb_password, e.smb_password_file, dir).map_err(fail)?;
            let keytab = e.smb_keytab.map(|k| dir.join(k));
            if let Some(k) = &keytab {
                crate::secret_files::check_secret_file("smb_keytab", k).map_err(fail)?;
            }
            let smb = match e.smb_user {
                Some(user) if !user.is_empty() => {
                    Some(SmbIdentity { user, domain: e.smb_domain, password: password.unwrap_or_default(), keytab })
                }
                _ if password.is_some() || keytab.is_some() => {
                    return Err(fail("smb_password or smb_keytab given without smb_user".into()))
                }
                _ => None,
            };
            out.push(BucketSource { name: name.clone(), url, smb, on_main_share });
        }
        Ok(out)
    }

    /// The ids of the `serve` settings the file sets.
    ///
    /// Errors: as `settings`: one line naming the file and the setting it refuses.
    pub(crate) fn setting_ids(&self, cmd: &clap::Command) -> Result<std::collections::HashSet<String>, String> {
        Ok(self.settings(cmd)?.into_iter().map(|s| s.id).collect())
    }

    /// The file's settings, each matched to the `serve` flag it sets (a
    /// subcommand of `cmd`) by the flag's id or its long name, `-` and `_`
    /// alike (`trusted_proxy` or `trusted_proxies`); values as a flag takes
    /// them: booleans as `on`/`off`, paths from the file's directory, and a
    /// TOML array, for a flag that may be repeated, element by element.
    ///
    /// Errors: one line naming the file: a name that is no flag (or is
    /// `config`), two names of one setting, a table other than the users'
    /// and buckets', an array for a flag given once, or a value of another
    /// kind.
    fn settings(&self, cmd: &clap::Command) -> Result<Vec<FileSetting>, String> {
        let serve = cmd.find_subcommand("serve").ok_or("no serve subcommand")?;
        let file = self.path.display();
        let mut out: Vec<FileSetting> = Vec::new();
        for (k, v) in &self.table {
            if k == "users" || k == "buckets" || k == "targets" {
                continue;
            }
            if let toml::Value::Table(_) = v {
                return Err(format!(
                    "config file {file}: unknown table [{k}] (the file's tables are [users.NAME], [buckets.NAME] \
                     and [targets.NAME])"
                ));
            }
            let name = k.replace('-', "_");
            let arg = serve
                .get_arguments()
                .filter(|a| !matches!(a.get_id().as_str(), "config" | "help"))
                .find(|a| a.get_long().is_some_and(|l| a.get_id() == name.as_str() || l.replace('-', "_") == name));
            let Some(arg) = arg else {
                return Err(format!(
                    "config file {file}: unknown setting {name:?} (settings are the flags of `smbgate serve --help`, \
                     e.g. pool_size = 8)"
                ));
            };
            let id = arg.get_id().to_string();
            if let Some(first) = out.iter().find(|s| s.id == id) {
                return Err(format!("config file {file}: {} and {k} are the same setting; give one", first.key));
            }
            let values = match v {
                toml::Value::Array(items) if matches!(arg.get_action(), clap::ArgAction::Append) => items
                    .iter()
                    .map(scalar)
                    .collect::<Option<Vec<String>>>()
                    .ok_or_else(|| format!("config file {file}: {k} must be a string or an array of strings"))?,
                toml::Value::String(s) if PATH_SETTINGS.contains(&id.as_str()) && s != "-" => {
                    let dir = self.path.parent().unwrap_or(Path::new("."));
                    vec![dir.join(s).to_string_lossy().into_owned()]
                }
                other => vec![scalar(other)
                    .ok_or_else(|| format!("config file {file}: {k} must be a string, number or boolean"))?],
            };
            out.push(FileSetting { key: k.clone(), id, values });
        }
        Ok(out)
    }

    /// `cmd` with the file's settings as its `serve` flags' defaults.
    ///
    /// Errors: as [`ConfigFile::settings`].
    pub fn apply(&self, cmd: clap::Command) -> Result<clap::Command, String> {
        let settings = self.settings(&cmd)?;
        Ok(cmd.mut_subcommand("serve", |mut sc| {
            for s in settings {
                sc = sc.mut_arg(s.id, |a| a.default_values(s.values).required(false));
            }
            sc
        }))
    }

    /// The command line `argv` parsed by `plain` (the command as it is
    /// without the file) with this file's settings under its flags and
    /// environment, held to the rules clap holds flags to: a setting that
    /// needs another (`tls_cert` without `tls_key`, or the reverse, which
    /// would serve plain HTTP; `listen_plain` without TLS), or two that
    /// conflict. The file's values are defaults to clap, which applies
    /// these rules to flags and the environment alone (and so refused a
    /// flag whose partner was in the file, and let a file's half of TLS
    /// through): every value in force is given to `plain` again, as a flag,
    /// and what it says goes.
    ///
    /// Errors: [`ParseError::File`], one line naming the file and the
    /// setting at fault, when the file's settings break a rule;
    /// [`ParseError::Clap`] for anything else clap refuses.
    pub fn parse(&self, plain: &clap::Command, argv: Vec<OsString>) -> Result<clap::ArgMatches, ParseError> {
        use clap::error::{ContextKind, ContextValue, ErrorKind};
        let applied = self.apply(plain.clone()).map_err(ParseError::File)?;
        let (matches, first) = match applied.clone().try_get_matches_from(&argv) {
            Ok(m) => (m, None),
            // Required arguments are checked last, so all else parsed: the
            // file may hold what is missing, which the check below sees.
            Err(e) if e.kind() == ErrorKind::MissingRequiredArgument => {
                (applied.ignore_errors(true).try_get_matches_from(&argv).map_err(ParseError::Clap)?, Some(e))
            }
            Err(e) => return Err(ParseError::Clap(e)),
        };
        let Some(m) = matches.subcommand_matches("serve") else {
            return first.map_or(Ok(matches), |e| Err(ParseError::Clap(e)));
        };
        let from_file = self.settings(plain).map_err(ParseError::File)?;
        let as_flags = |skip: Option<&str>| flags_in_force(plain, m, &from_file, skip);
        let Err(e) = plain.clone().try_get_matches_from(as_flags(None)) else { return Ok(matches) };
        let culprit = from_file.iter().find(|s| plain.clone().try_get_matches_from(as_flags(Some(&s.id))).is_ok());
        let Some(culprit) = culprit else { return Err(ParseError::Clap(first.unwrap_or(e))) };
        let file = self.path.display();
        let missing: Vec<String> = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::Strings(v)) if e.kind() == ErrorKind::MissingRequiredArgument => {
                v.iter().map(|f| f.split(' ').next().unwrap_or(f).trim_start_matches('-').replace('-', "_")).collect()
            }
            _ => Vec::new(),
        };
        Err(ParseError::File(match missing.is_empty() {
            false => format!(
                "config file {file}: {} needs {} (give it in the file, the environment or as a flag)",
                culprit.key,
                missing.join(" and ")
            ),
            true => format!("config file {file}: {}: {}", culprit.key, clap_message(&e)),
        }))
    }
}

/// Why [`ConfigFile::parse`] refused a command line.
#[derive(Debug)]
pub enum ParseError {
    /// The file's settings: one line naming the file.
    File(String),
    /// The command line or environment, as clap says it (to print with
    /// its usage, or [`clap::Error::exit`]).
    Clap(clap::Error),
}

/// Every `serve` value in force in `m` (from the command line, the
/// environment, or the file's settings `from_file` but `skip`) as flags
/// of `cmd`: `smbgate serve --listen=... --tls-cert=...`.
fn flags_in_force(
    cmd: &clap::Command,
    m: &clap::ArgMatches,
    from_file: &[FileSetting],
    skip: Option<&str>,
) -> Vec<OsString> {
    use clap::parser::ValueSource as V;
    let mut argv: Vec<OsString> = vec!["smbgate".into(), "serve".into()];
    let Some(serve) = cmd.find_subcommand("serve") else { return argv };
    for a in serve.get_arguments() {
        let (id, Some(long)) = (a.get_id().as_str(), a.get_long()) else { continue };
        let given = match m.value_source(id) {
            Some(V::CommandLine | V::EnvVariable) => true,
            Some(V::DefaultValue) => skip != Some(id) && from_file.iter().any(|s| s.id == id),
            _ => false,
        };
        for v in m.get_raw(id).into_iter().flatten().filter(|_| given) {
            let mut flag = OsString::from(format!("--{long}="));
            flag.push(v);
            argv.push(flag);
        }
    }
    argv
}

/// One setting of a config file: the key as written, the id of the
/// `serve` flag it sets, and its values (more than one only from an array).
struct FileSetting {
    key: String,
    id: String,
    values: Vec<String>,
}

/// A TOML value that is no array or table, as a flag would take it.
fn scalar(v: &toml::Value) -> Option<String> {
    Some(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => if *b { "on" } else { "off" }.to_string(),
        _ => return None,
    })
}

/// [`ConfigFile::warn_if_secrets_exposed`] for the file `args` name, if
/// any. Called once the settings are known to be good (at startup and on
/// each reload), so that a refused start stays one line.
pub fn warn_if_secrets_exposed(args: &crate::config::ServeArgs) {
    if let Some(file) = args.config.as_deref().and_then(|p| ConfigFile::load(p).ok()) {
        file.warn_if_secrets_exposed();
    }
}

/// The S3 users of `args`: its config file's `[users.NAME]` tables, plus
/// the `--access-key` user (the gateway's own SMB identity, every bucket).
///
/// Errors: the file does not load or a user is refused (one line naming
/// the file and the user); an unreadable secret file.
pub fn users_of(args: &crate::config::ServeArgs) -> Result<UserTable, String> {
    let mut users = match &args.config {
        Some(path) => ConfigFile::load(path)?.users()?,
        None => UserTable::default(),
    };
    let secret_key = crate::secret_files::secret("secret-key-file", &args.secret_key, &args.secret_key_file)?;
    if let (Some(a), Some(s)) = (&args.access_key, &secret_key) {
        if !a.is_empty() && !s.is_empty() {
            users.add_flag_user(a, s)?;
        }
    }
    Ok(users)
}

/// The config file named by `--config FILE` or `--config=FILE` in `args`
/// (the program's arguments), else by `SMBGATE_CONFIG`.
pub fn path_from(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            break;
        }
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = a.to_str().and_then(|s| s.strip_prefix("--config=")) {
            return Some(PathBuf::from(v));
        }
    }
    std::env::var_os(ENV).filter(|v| !v.is_empty()).map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_path_comes_from_the_flag() {
        let args: Vec<OsString> = ["smbgate", "serve", "--config", "/a.toml"].iter().map(OsString::from).collect();
        assert_eq!(path_from(&args), Some(PathBuf::from("/a.toml")));
        let args: Vec<OsString> = ["smbgate", "serve", "--config=/b.toml"].iter().map(OsString::from).collect();
        assert_eq!(path_from(&args), Some(PathBuf::from("/b.toml")));
    }
}
