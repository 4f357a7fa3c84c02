//! Where events go: the operator's `[targets.NAME]` tables of the config
//! file (S3 users only name them), and the [`Target`] every kind of
//! destination implements: a webhook (`webhook.rs`) or NATS (`nats.rs`),
//! which import this file, never the reverse (`Events::start` builds
//! them). Another kind (Kafka, AMQP) is one more implementation of the
//! trait and one more `type` here.
//!
//! ```toml
//! [targets.hooks]
//! type = "webhook"
//! url = "https://hooks.example.com/s3"
//! secret_file = "webhook.secret"   # HMAC-SHA256 key of the signature header
//! ca_file = "ca.pem"               # trust this CA (PEM) for the URL's TLS
//!
//! [targets.bus]
//! type = "nats"
//! url = "nats://127.0.0.1:4222"
//! subject = "s3.events"
//! jetstream = true                 # wait for JetStream's acknowledgment
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Queued events a target's queue holds by default before the oldest is
/// dropped.
pub const DEFAULT_QUEUE_LIMIT: usize = 10_000;

/// A destination of events.
#[async_trait::async_trait]
pub trait Target: Send + Sync {
    /// Sends one event message (`body`, JSON) whose ID is `id` (the same
    /// each time it is sent, for a receiver to drop repeats). Returns once
    /// the destination has taken it (what that means is the kind's: a 2xx
    /// answer, a JetStream acknowledgment, a flushed publish).
    ///
    /// Errors: why not, and whether sending it again could help.
    async fn send(&self, id: &str, body: &[u8]) -> Result<(), SendError>;
}

/// Why a target did not take an event.
#[derive(Debug)]
pub struct SendError {
    /// One line.
    pub reason: String,
    /// The target refuses this event for good (a webhook's 4xx other than
    /// 408 and 429): it is dropped. Else it stays queued and is sent again.
    pub permanent: bool,
}

impl SendError {
    /// A failure that may pass: the event is sent again.
    pub fn passing(reason: impl Into<String>) -> SendError {
        SendError { reason: reason.into(), permanent: false }
    }
}

/// One `[targets.NAME]` table, checked.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Its name: the last field of the ARN a bucket's configuration names.
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Most events its queue holds (`queue_limit`).
    pub queue_limit: usize,
}

/// The kinds of target, with their settings.
#[derive(Clone)]
pub enum Kind {
    /// An HTTP(S) POST of each message.
    Webhook {
        /// The URL.
        url: reqwest::Url,
        /// The HMAC-SHA256 key of `x-smbgate-signature-256`, if any.
        secret: Option<String>,
        /// A CA certificate (PEM) to trust beside the system's.
        ca_file: Option<PathBuf>,
    },
    /// A NATS publish of each message on `subject`.
    Nats {
        /// `nats://HOST:PORT` (or `tls://`).
        url: String,
        /// The subject.
        subject: String,
        /// Wait for JetStream's acknowledgment (the subject must belong to
        /// a stream) rather than a flush.
        jetstream: bool,
        /// User and password, if the server wants them.
        user: Option<(String, String)>,
        /// A CA certificate (PEM) for `tls://`.
        ca_file: Option<PathBuf>,
    },
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// One line for logs and `config check`: what and where, whether it is
/// signed or logs on, the CA trusted; never a secret.
impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ca = |c: &Option<PathBuf>| c.as_ref().map(|p| format!(", trusting {}", p.display())).unwrap_or_default();
        match self {
            Kind::Webhook { url, secret, ca_file } => {
                let signed = if secret.is_some() { "signed" } else { "unsigned" };
                write!(f, "webhook {url}, {signed}{}", ca(ca_file))
            }
            Kind::Nats { url, subject, jetstream, user, ca_file } => {
                let acks = if *jetstream { "JetStream acknowledgments" } else { "core NATS" };
                let user = user.as_ref().map(|(u, _)| format!(", as {u}")).unwrap_or_default();
                write!(f, "nats {url} subject {subject}, {acks}{user}{}", ca(ca_file))
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    #[serde(rename = "type")]
    kind: String,
    url: String,
    subject: Option<String>,
    #[serde(default)]
    jetstream: bool,
    secret: Option<String>,
    secret_file: Option<PathBuf>,
    user: Option<String>,
    password: Option<String>,
    password_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    queue_limit: Option<usize>,
}

/// The `[targets]` table of a config file in `dir`.
///
/// Errors: one line naming the target: a name that is not letters,
/// digits, `-` and `_`; an unknown `type` or field; a URL that does not
/// parse or has the wrong scheme; a webhook URL with credentials in it; a
/// NATS target without `subject`; a secret given twice or unreadable; a
/// `ca_file` that is not there.
pub fn from_toml(table: &toml::Table, dir: &Path) -> Result<Vec<TargetConfig>, String> {
    let mut out = Vec::new();
    for (name, value) in table {
        let fail = |m: String| format!("[targets.{name}]: {m}");
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(fail("a target's name is letters, digits, '-' and '_'".into()));
        }
        let e = Entry::deserialize(value.clone()).map_err(|e| fail(e.message().to_string()))?;
        let ca_file = e.ca_file.map(|f| dir.join(f));
        if let Some(f) = &ca_file {
            std::fs::metadata(f).map_err(|err| fail(format!("ca_file {}: {err}", f.display())))?;
        }
        let kind = match e.kind.as_str() {
            "webhook" => {
                let url = reqwest::Url::parse(&e.url).map_err(|err| fail(format!("url: {err}")))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(fail("a webhook's url is http:// or https://".into()));
                }
                if !url.username().is_empty() || url.password().is_some() {
                    return Err(fail("credentials in a webhook's url would be logged; sign with secret_file".into()));
                }
                if e.subject.is_some() || e.jetstream || e.user.is_some() {
                    return Err(fail("subject, jetstream and user are NATS settings".into()));
                }
                let secret = crate::users::one_secret("secret", e.secret, e.secret_file, dir).map_err(fail)?;
                if secret.as_deref() == Some("") {
                    return Err(fail("secret is empty: give a key to sign with, or none".into()));
                }
                Kind::Webhook { url, secret, ca_file }
            }
            "nats" => {
                if !["nats://", "tls://"].iter().any(|s| e.url.starts_with(s)) {
                    return Err(fail("a NATS url is nats://HOST:PORT or tls://HOST:PORT".into()));
                }
                let subject = e.subject.filter(|s| !s.is_empty()).ok_or_else(|| fail("subject is missing".into()))?;
                if subject.split('.').any(|t| t.is_empty() || t == "*" || t == ">")
                    || subject.contains(char::is_whitespace)
                {
                    return Err(fail(format!("subject {subject:?} is no subject one can publish to (no wildcards)")));
                }
                let password = crate::users::one_secret("password", e.password, e.password_file, dir).map_err(fail)?;
                let user = match (e.user, password) {
                    (Some(u), Some(p)) => Some((u, p)),
                    (None, None) => None,
                    _ => return Err(fail("give user and password together".into())),
                };
                if e.secret.is_some() || e.secret_file.is_some() {
                    return Err(fail("secret is a webhook setting".into()));
                }
                Kind::Nats { url: e.url, subject, jetstream: e.jetstream, user, ca_file }
            }
            other => return Err(fail(format!("unknown type {other:?} (webhook or nats)"))),
        };
        let queue_limit = e.queue_limit.unwrap_or(DEFAULT_QUEUE_LIMIT);
        if queue_limit == 0 {
            return Err(fail("queue_limit is at least 1".into()));
        }
        out.push(TargetConfig { name: name.clone(), kind, queue_limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<TargetConfig>, String> {
        from_toml(&text.parse::<toml::Table>().unwrap(), Path::new("/"))
    }

    #[test]
    fn targets_are_checked() {
        let t = parse("[w]\ntype = \"webhook\"\nurl = \"http://127.0.0.1:9/x\"\nsecret = \"k\"\n").unwrap();
        assert_eq!(t[0].name, "w");
        assert_eq!(t[0].queue_limit, DEFAULT_QUEUE_LIMIT);
        let e = parse("[w]\ntype = \"webhook\"\nurl = \"http://u:p@h/\"\n").unwrap_err();
        assert!(e.contains("credentials"), "{e}");
        let e = parse("[n]\ntype = \"nats\"\nurl = \"nats://h:4222\"\n").unwrap_err();
        assert_eq!(e, "[targets.n]: subject is missing");
        let e = parse("[\"a b\"]\ntype = \"nats\"\nurl = \"nats://h\"\nsubject = \"s\"\n").unwrap_err();
        assert!(e.contains("letters, digits"), "{e}");
        let e = parse("[k]\ntype = \"kafka\"\nurl = \"x\"\n").unwrap_err();
        assert!(e.contains("unknown type"), "{e}");
        let e = parse("[n]\ntype = \"nats\"\nurl = \"nats://h\"\nsubject = \"s.*\"\n").unwrap_err();
        assert!(e.contains("no wildcards"), "{e}");
        let e = parse("[w]\ntype = \"webhook\"\nurl = \"http://h/\"\nsecret = \"\"\n").unwrap_err();
        assert!(e.contains("secret is empty"), "{e}");
    }
}
