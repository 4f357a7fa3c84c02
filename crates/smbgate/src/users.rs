//! S3 users: the access keys that may sign requests, the SMB identity each
//! acts as on the share, the buckets each may use, and whether it may
//! write. The table comes from the `[users.NAME]` tables of the config file
//! (`--config`) and from `--access-key`, and is replaced whole on SIGHUP.
//!
//! The share's own ACLs stay the last word: a user acting as SMB account
//! `alice` sees what `alice` may see, because every request it signs runs
//! on a pool logged in as `alice` (see [`crate::identities`]).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Error, S3ErrorCode, S3Result};
use serde::Deserialize;

/// The SMB account a user's requests run as: user, NTLM domain, password,
/// and for Kerberos a keytab of its own.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct SmbIdentity {
    /// SMB user name (`user@REALM` names its Kerberos realm).
    pub user: String,
    /// NTLM domain (may be empty).
    pub domain: String,
    /// Password (empty with a keytab or a credential cache).
    pub password: String,
    /// The account's Kerberos keytab (`smb_keytab`), if it has one.
    pub keytab: Option<PathBuf>,
}

impl std::fmt::Debug for SmbIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl SmbIdentity {
    /// The account as `config check` shows it: the name, and its keytab if
    /// it has one; never the password.
    pub fn describe(&self) -> String {
        match &self.keytab {
            Some(k) => format!("{self} (Kerberos keytab {})", k.display()),
            None => self.to_string(),
        }
    }
}

impl std::fmt::Display for SmbIdentity {
    /// `DOMAIN\user`, or `user` without a domain; never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.domain.is_empty() {
            true => write!(f, "{}", self.user),
            false => write!(f, "{}\\{}", self.domain, self.user),
        }
    }
}

/// The buckets a user may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Buckets {
    /// Every bucket on the share (`buckets = ["*"]`).
    All,
    /// These buckets only.
    Only(BTreeSet<String>),
}

impl Buckets {
    /// Bucket names as a user table or `--anonymous-bucket` lists them:
    /// `*` alone for every bucket.
    ///
    /// Errors: empty, `*` among names, or a name that is no valid bucket
    /// name; the text follows the setting's name (`buckets: ...`).
    fn parse(names: Vec<String>) -> Result<Buckets, String> {
        if names.iter().any(|b| b == "*") {
            if names.len() > 1 {
                return Err(": \"*\" (every bucket) cannot be listed with other names".into());
            }
            return Ok(Buckets::All);
        }
        if names.is_empty() {
            return Err(" is empty (name the buckets, or [\"*\"] for all)".into());
        }
        if let Some(b) = names.iter().find(|b| !s3s::path::check_bucket_name(b)) {
            return Err(format!(": {b:?} is not a valid bucket name"));
        }
        Ok(Buckets::Only(names.into_iter().collect()))
    }
}

/// What unsigned requests may do (`--anonymous`, `--anonymous-bucket`,
/// `--anonymous-write`).
#[derive(Clone)]
pub enum Anonymous {
    /// Refused: a signature is required.
    Refused,
    /// No S3 users are configured: every bucket, read and write, as the
    /// gateway's own SMB account.
    Everything,
    /// Next to S3 users: what this grant allows, a user named `anonymous`
    /// that acts as the gateway's own SMB account and is never found by an
    /// access key.
    Granted(Arc<User>),
}

impl Anonymous {
    /// From the settings; `users` says whether S3 users are configured.
    ///
    /// Errors: `--anonymous` next to users without `--anonymous-bucket`
    /// (unsigned requests would reach every bucket unasked), or a grant
    /// without `--anonymous` or without users; a bad bucket name.
    pub fn from_settings(anonymous: bool, buckets: &[String], write: bool, users: bool) -> Result<Anonymous, String> {
        let grant = !buckets.is_empty() || write;
        match (anonymous, users) {
            (false, _) if grant => Err("--anonymous-bucket and --anonymous-write need --anonymous".into()),
            (false, _) => Ok(Anonymous::Refused),
            (true, false) if grant => Err("--anonymous-bucket and --anonymous-write grant unsigned requests part of \
                                           what S3 users may do; with no users, --anonymous serves every bucket"
                .into()),
            (true, false) => Ok(Anonymous::Everything),
            (true, true) if buckets.is_empty() => Err("--anonymous next to S3 users: name the buckets unsigned \
                                                       requests may use with --anonymous-bucket (\"*\" for every one); \
                                                       they only read unless --anonymous-write"
                .into()),
            (true, true) => Ok(Anonymous::Granted(Arc::new(User {
                name: "anonymous".into(),
                access_key: String::new(),
                secret_key: SecretKey::from(String::new()),
                smb: None,
                buckets: Buckets::parse(buckets.to_vec()).map_err(|e| format!("--anonymous-bucket{e}"))?,
                read_only: !write,
                bypass_governance: false,
            }))),
        }
    }

    /// Whether unsigned requests are served at all.
    pub fn allowed(&self) -> bool {
        !matches!(self, Anonymous::Refused)
    }

    /// The grant an unsigned request acts under, if one limits it.
    pub fn user(&self) -> Option<Arc<User>> {
        match self {
            Anonymous::Granted(u) => Some(u.clone()),
            _ => None,
        }
    }
}

/// One S3 user.
pub struct User {
    /// The name of its `[users.NAME]` table (the access key for the
    /// `--access-key` user); logged as the request's identity.
    pub name: String,
    /// The access key it signs with.
    pub access_key: String,
    secret_key: SecretKey,
    /// The SMB account it acts as; `None`: the gateway's own
    /// (`--smb-user`).
    pub smb: Option<SmbIdentity>,
    /// The buckets it may use.
    pub buckets: Buckets,
    /// Only reading operations are allowed ([`is_read_operation`]).
    pub read_only: bool,
    /// May shorten or remove GOVERNANCE retention, and delete versions
    /// under it, with `x-amz-bypass-governance-retention: true`
    /// (`bypass_governance` in its table; off by default).
    pub bypass_governance: bool,
}

impl User {
    /// The secret key the user signs with, for checking a signature the
    /// front verifies itself (a POST Object form); never to be logged.
    pub(crate) fn secret_key(&self) -> &str {
        self.secret_key.expose()
    }

    /// True if the user may use `bucket` at all.
    pub fn may_use(&self, bucket: &str) -> bool {
        match &self.buckets {
            Buckets::All => true,
            Buckets::Only(set) => set.contains(bucket),
        }
    }

    /// True if the user may act on `bucket` as its own SMB account where
    /// that bucket lives on a server other than `--share`'s: only if its
    /// `buckets` name it (`*` is not enough), so that its credentials go
    /// only to servers its table names. A user acting as the gateway's own
    /// account always may.
    pub fn may_log_on_for(&self, bucket: &str) -> bool {
        match (&self.smb, &self.buckets) {
            (None, _) => true,
            (Some(_), Buckets::Only(set)) => set.contains(bucket),
            (Some(_), Buckets::All) => false,
        }
    }

    /// Whether the user may run `operation` (an s3s operation name such as
    /// `PutObject`) on `buckets` (the request's bucket and a copy source's).
    ///
    /// Errors: S3's AccessDenied, as AWS answers a request its policy does
    /// not allow.
    pub fn authorize<'a>(&self, operation: &str, buckets: impl IntoIterator<Item = &'a str>) -> S3Result<()> {
        let denied = || S3Error::with_message(S3ErrorCode::AccessDenied, "Access Denied");
        if self.read_only && !is_read_operation(operation) {
            return Err(denied());
        }
        for b in buckets {
            if !self.may_use(b) {
                return Err(denied());
            }
        }
        Ok(())
    }
}

/// True for the operations that change nothing on the share, the only ones
/// a `read_only` user may run. Anything not listed counts as a write, so an
/// operation added later is refused until it is listed.
pub fn is_read_operation(operation: &str) -> bool {
    matches!(
        operation,
        "ListBuckets"
            | "HeadBucket"
            | "GetBucketLocation"
            | "GetBucketVersioning"
            | "ListObjectVersions"
            | "GetObjectLockConfiguration"
            | "GetObjectRetention"
            | "GetObjectLegalHold"
            | "GetBucketAcl"
            | "GetBucketCors"
            | "ListObjects"
            | "ListObjectsV2"
            | "ListMultipartUploads"
            | "ListParts"
            | "GetObject"
            | "HeadObject"
            | "GetObjectAcl"
            | "GetObjectTagging"
            | "GetObjectAttributes"
            | "GetBucketTagging"
    )
}

/// A `[users.NAME]` table as written in the config file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    access_key: String,
    secret_key: Option<String>,
    secret_key_file: Option<PathBuf>,
    smb_user: Option<String>,
    #[serde(default)]
    smb_domain: String,
    smb_password: Option<String>,
    smb_password_file: Option<PathBuf>,
    smb_keytab: Option<PathBuf>,
    buckets: Vec<String>,
    #[serde(default)]
    read_only: bool,
    #[serde(default)]
    bypass_governance: bool,
}

/// Every user, by access key.
#[derive(Default)]
pub struct UserTable {
    by_key: HashMap<String, Arc<User>>,
}

impl UserTable {
    /// The users of a config file's `[users]` table; relative secret-file
    /// paths are taken from `dir`, the config file's directory.
    ///
    /// Errors: a one-line reason naming the user: an unknown or missing
    /// field, a secret given both inline and as a file (or neither), an
    /// unreadable file, no buckets, a bucket name S3 cannot address, or an
    /// access key used twice.
    pub fn from_toml(users: &toml::Table, dir: &Path) -> Result<UserTable, String> {
        let mut table = UserTable::default();
        for (name, value) in users {
            let entry = Entry::deserialize(value.clone()).map_err(|e| format!("[users.{name}]: {}", e.message()))?;
            let user = build(name, entry, dir).map_err(|e| format!("[users.{name}]: {e}"))?;
            table.insert(user)?;
        }
        Ok(table)
    }

    /// Adds the `--access-key` user: the gateway's own SMB identity, every
    /// bucket, read and write.
    ///
    /// Errors: the access key is already a file user's.
    pub fn add_flag_user(&mut self, access_key: &str, secret_key: &str) -> Result<(), String> {
        self.insert(User {
            name: access_key.to_string(),
            access_key: access_key.to_string(),
            secret_key: SecretKey::from(secret_key.to_string()),
            smb: None,
            buckets: Buckets::All,
            read_only: false,
            bypass_governance: false,
        })
    }

    fn insert(&mut self, user: User) -> Result<(), String> {
        if let Some(other) = self.by_key.get(&user.access_key) {
            return Err(format!("users {:?} and {:?} have the same access key", other.name, user.name));
        }
        self.by_key.insert(user.access_key.clone(), Arc::new(user));
        Ok(())
    }

    /// The user signing with `access_key`, if any.
    pub fn get(&self, access_key: &str) -> Option<Arc<User>> {
        self.by_key.get(access_key).cloned()
    }

    /// One line per user, by name: its access key, SMB identity, buckets
    /// and read-only flag; never a secret.
    pub fn describe(&self) -> Vec<String> {
        let mut users: Vec<&Arc<User>> = self.by_key.values().collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        users
            .into_iter()
            .map(|u| {
                let smb = u.smb.as_ref().map_or("the gateway's own --smb-user".to_string(), SmbIdentity::describe);
                let buckets = match &u.buckets {
                    Buckets::All => "all buckets".to_string(),
                    Buckets::Only(b) => format!("buckets {}", b.iter().cloned().collect::<Vec<_>>().join(", ")),
                };
                let ro = if u.read_only { ", read-only" } else { "" };
                let bypass = if u.bypass_governance { ", may bypass GOVERNANCE retention" } else { "" };
                format!("{}: access key {}, as SMB {smb}, {buckets}{ro}{bypass}", u.name, u.access_key)
            })
            .collect()
    }

    /// Number of users.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True with no users.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

fn build(name: &str, e: Entry, dir: &Path) -> Result<User, String> {
    if e.access_key.is_empty() {
        return Err("access_key is empty".into());
    }
    let secret_key =
        one_secret("secret_key", e.secret_key, e.secret_key_file, dir)?.ok_or("needs secret_key or secret_key_file")?;
    if secret_key.is_empty() {
        return Err("the secret key is empty".into());
    }
    let password = one_secret("smb_password", e.smb_password, e.smb_password_file, dir)?;
    let keytab = e.smb_keytab.map(|k| dir.join(k));
    if let Some(k) = &keytab {
        crate::secret_files::check_secret_file("smb_keytab", k)?;
    }
    let smb = match e.smb_user {
        Some(user) if !user.is_empty() => {
            Some(SmbIdentity { user, domain: e.smb_domain, password: password.unwrap_or_default(), keytab })
        }
        Some(_) => return Err("smb_user is empty (leave it out to act as the gateway's own --smb-user)".into()),
        None if password.is_some() || !e.smb_domain.is_empty() || keytab.is_some() => {
            return Err("smb_password, smb_keytab or smb_domain given without smb_user".into())
        }
        None => None,
    };
    let buckets = Buckets::parse(e.buckets).map_err(|e| format!("buckets{e}"))?;
    Ok(User {
        name: name.to_string(),
        access_key: e.access_key,
        secret_key: SecretKey::from(secret_key),
        smb,
        buckets,
        read_only: e.read_only,
        bypass_governance: e.bypass_governance,
    })
}

/// A secret given inline or as a file (first line; relative to `dir`), as
/// the config file's tables give them.
///
/// Errors: both given; the file cannot be read.
pub(crate) fn one_secret(
    field: &str,
    inline: Option<String>,
    file: Option<PathBuf>,
    dir: &Path,
) -> Result<Option<String>, String> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(format!("{field} and {field}_file are both given")),
        (Some(s), None) => Ok(Some(s)),
        (None, Some(f)) => {
            let f = dir.join(f);
            let s =
                crate::secret_files::read_secret_file(&f).map_err(|e| format!("{field}_file {}: {e}", f.display()))?;
            Ok(Some(s))
        }
        (None, None) => Ok(None),
    }
}

/// The user table in force, shared by SigV4 verification and the access
/// check; [`Directory::replace`] swaps it whole (SIGHUP), so a request
/// checked against one table keeps that table's answer.
#[derive(Clone, Default)]
pub struct Directory {
    table: Arc<RwLock<Arc<UserTable>>>,
}

impl Directory {
    /// A directory serving `table`.
    pub fn new(table: UserTable) -> Directory {
        Directory { table: Arc::new(RwLock::new(Arc::new(table))) }
    }

    /// The user signing with `access_key`, in the table in force.
    pub fn get(&self, access_key: &str) -> Option<Arc<User>> {
        self.table.read().unwrap().get(access_key)
    }

    /// Puts `table` in force; requests already past their access check
    /// keep the user they were checked as.
    pub fn replace(&self, table: UserTable) {
        *self.table.write().unwrap() = Arc::new(table);
    }

    /// Number of users in force.
    pub fn len(&self) -> usize {
        self.table.read().unwrap().len()
    }

    /// True with no users in force.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait::async_trait]
impl S3Auth for Directory {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.get(access_key) {
            Some(u) => Ok(u.secret_key.clone()),
            None => Err(S3Error::with_message(
                S3ErrorCode::InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records.",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<UserTable, String> {
        let t: toml::Table = text.parse().unwrap();
        UserTable::from_toml(t["users"].as_table().unwrap(), Path::new("/nonexistent"))
    }

    #[test]
    fn users_parse() {
        let t = table(
            r#"
            [users.alice]
            access_key = "AK1"
            secret_key = "s1"
            smb_user = "alice"
            smb_password = "pw"
            buckets = ["team", "alice"]
            [users.reader]
            access_key = "AK2"
            secret_key = "s2"
            buckets = ["*"]
            read_only = true
            "#,
        )
        .unwrap();
        let a = t.get("AK1").unwrap();
        assert_eq!(a.name, "alice");
        assert_eq!(a.smb.as_ref().unwrap().to_string(), "alice");
        assert!(a.may_use("team") && !a.may_use("other"));
        assert!(a.authorize("PutObject", ["team"]).is_ok());
        assert!(a.authorize("CopyObject", ["team", "other"]).is_err());
        let r = t.get("AK2").unwrap();
        assert!(r.smb.is_none() && r.may_use("anything"));
        assert!(r.authorize("GetObject", ["x"]).is_ok());
        assert!(r.authorize("PutObject", ["x"]).is_err());
        assert!(r.authorize("DeleteObjects", ["x"]).is_err());
        assert!(format!("{:?}", a.smb).find("pw").is_none());
    }

    #[test]
    fn bad_users_are_refused_with_their_name() {
        let base = "access_key = \"AK\"\nsecret_key = \"s\"\n";
        for (extra, want) in [
            ("buckets = []", "buckets is empty"),
            ("buckets = [\"*\", \"a\"]", "cannot be listed"),
            ("buckets = [\"Bad_Name\"]", "not a valid bucket name"),
            ("buckets = [\"*\"]\nsecret_key_file = \"x\"", "both given"),
            ("buckets = [\"*\"]\nsmb_password = \"p\"", "without smb_user"),
            ("buckets = [\"*\"]\nwho = 1", "unknown field"),
        ] {
            let e = table(&format!("[users.bob]\n{base}{extra}")).err().unwrap_or_default();
            assert!(e.starts_with("[users.bob]") && e.contains(want), "{extra}: {e}");
        }
        let e = table("[users.bob]\naccess_key = \"AK\"\nbuckets = [\"*\"]").err().unwrap();
        assert!(e.contains("needs secret_key"), "{e}");
        let twice = "[users.a]\naccess_key = \"AK\"\nsecret_key = \"s\"\nbuckets = [\"*\"]\n\
                     [users.b]\naccess_key = \"AK\"\nsecret_key = \"t\"\nbuckets = [\"*\"]";
        assert!(table(twice).err().unwrap().contains("same access key"));
        let mut t = table("[users.a]\naccess_key = \"AK\"\nsecret_key = \"s\"\nbuckets = [\"*\"]").unwrap();
        assert!(t.add_flag_user("AK", "x").is_err());
        assert!(t.add_flag_user("OTHER", "x").is_ok());
        assert_eq!(t.len(), 2);
    }
}
