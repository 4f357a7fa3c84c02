//! Bucket CORS as AWS S3 applies it: the rules PutBucketCors stores (kept
//! on the share, see `Buckets::put_bucket_cors`), the answer to a browser's
//! preflight `OPTIONS`, and the `Access-Control-*` headers added to an
//! actual request that carries `Origin`.
//!
//! A rule matches when the request's Origin matches one of its
//! AllowedOrigins (case-sensitive, at most one `*` wildcard), the method
//! (`Access-Control-Request-Method` if sent, else the request's) is one of
//! its AllowedMethods, and every header in `Access-Control-Request-Headers`
//! matches one of its AllowedHeaders (case-insensitive, one `*`). The first
//! matching rule wins.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreResult};

/// Most rules one configuration may hold (as AWS).
pub const MAX_RULES: usize = 100;

/// Methods a rule may allow.
const METHODS: [&str; 5] = ["GET", "PUT", "HEAD", "POST", "DELETE"];

/// One CORS rule (the CORSRule of PutBucketCors).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// ID, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// AllowedOrigin patterns.
    pub allowed_origins: Vec<String>,
    /// AllowedMethod values.
    pub allowed_methods: Vec<String>,
    /// AllowedHeader patterns.
    #[serde(default)]
    pub allowed_headers: Vec<String>,
    /// ExposeHeader names.
    #[serde(default)]
    pub expose_headers: Vec<String>,
    /// MaxAgeSeconds, if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<i32>,
}

/// A bucket's CORS configuration: its rules in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// The rules, first match wins.
    pub rules: Vec<Rule>,
}

impl Config {
    /// The configuration of a PutBucketCors request.
    ///
    /// Errors: AWS's InvalidRequest message for no rules or too many, a
    /// method S3 does not allow, or a pattern with two wildcards; the
    /// caller answers 400 with it.
    pub fn from_dto(c: s3s::dto::CORSConfiguration) -> Result<Config, String> {
        let rules: Vec<Rule> = c
            .cors_rules
            .into_iter()
            .map(|r| Rule {
                id: r.id,
                allowed_origins: r.allowed_origins,
                allowed_methods: r.allowed_methods,
                allowed_headers: r.allowed_headers.unwrap_or_default(),
                expose_headers: r.expose_headers.unwrap_or_default(),
                max_age_seconds: r.max_age_seconds,
            })
            .collect();
        if rules.is_empty() || rules.len() > MAX_RULES {
            return Err(format!("A CORS configuration holds 1 to {MAX_RULES} CORSRules."));
        }
        for r in &rules {
            if r.allowed_origins.is_empty() || r.allowed_methods.is_empty() {
                return Err("Each CORSRule must have at least one AllowedOrigin and one AllowedMethod.".into());
            }
            if let Some(m) = r.allowed_methods.iter().find(|m| !METHODS.contains(&m.as_str())) {
                return Err(format!("Found unsupported HTTP method in CORS config. Unsupported method is {m}"));
            }
            for (what, list) in [("AllowedOrigin", &r.allowed_origins), ("AllowedHeader", &r.allowed_headers)] {
                if let Some(p) = list.iter().find(|p| p.matches('*').count() > 1) {
                    return Err(format!("{what} \"{p}\" can not have more than one wildcard."));
                }
            }
        }
        Ok(Config { rules })
    }

    /// The rules as GetBucketCors returns them.
    pub fn to_dto(&self) -> Vec<s3s::dto::CORSRule> {
        self.rules
            .iter()
            .map(|r| s3s::dto::CORSRule {
                id: r.id.clone(),
                allowed_origins: r.allowed_origins.clone(),
                allowed_methods: r.allowed_methods.clone(),
                allowed_headers: (!r.allowed_headers.is_empty()).then(|| r.allowed_headers.clone()),
                expose_headers: (!r.expose_headers.is_empty()).then(|| r.expose_headers.clone()),
                max_age_seconds: r.max_age_seconds,
            })
            .collect()
    }

    /// The first rule allowing `origin` to use `method` with `headers`
    /// (the names of `Access-Control-Request-Headers`).
    pub fn find(&self, origin: &str, method: &str, headers: &[&str]) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.allowed_origins.iter().any(|p| wildcard(p, origin, false))
                && r.allowed_methods.iter().any(|m| m == method)
                && headers.iter().all(|h| r.allowed_headers.iter().any(|p| wildcard(p, h, true)))
        })
    }
}

/// True if `pattern` (at most one `*`, standing for any run of characters)
/// matches all of `s`.
fn wildcard(pattern: &str, s: &str, ignore_case: bool) -> bool {
    let eq = |a: &str, b: &str| if ignore_case { a.eq_ignore_ascii_case(b) } else { a == b };
    match pattern.split_once('*') {
        None => eq(pattern, s),
        Some((pre, post)) => {
            s.len() >= pre.len() + post.len()
                && s.get(..pre.len()).is_some_and(|p| eq(p, pre))
                && s.get(s.len() - post.len()..).is_some_and(|p| eq(p, post))
        }
    }
}

/// The `Access-Control-*` headers for a request `rule` allows from
/// `origin`: Allow-Origin (`*` for a rule whose origin is `*`, else the
/// origin, with Allow-Credentials), Allow-Methods, Expose-Headers and, for
/// a preflight, Allow-Headers (`request_headers` echoed) and Max-Age.
fn allow_headers(h: &mut http::HeaderMap, rule: &Rule, origin: &str, preflight: Option<&str>) {
    let mut set = |name: &'static str, v: &str| {
        if let Ok(v) = http::HeaderValue::from_str(v) {
            h.insert(name, v);
        }
    };
    if rule.allowed_origins.iter().any(|o| o == "*") {
        set("access-control-allow-origin", "*");
    } else {
        set("access-control-allow-origin", origin);
        set("access-control-allow-credentials", "true");
    }
    set("access-control-allow-methods", &rule.allowed_methods.join(", "));
    if !rule.expose_headers.is_empty() {
        set("access-control-expose-headers", &rule.expose_headers.join(", "));
    }
    if let Some(req_headers) = preflight {
        if !req_headers.is_empty() {
            set("access-control-allow-headers", req_headers);
        }
        if let Some(age) = rule.max_age_seconds {
            set("access-control-max-age", &age.to_string());
        }
    }
    h.append(http::header::VARY, http::HeaderValue::from_static("Origin"));
}

/// What a preflight request asks: its Origin, `Access-Control-Request-
/// Method` and `Access-Control-Request-Headers`.
pub struct Preflight {
    origin: Option<String>,
    method: Option<String>,
    headers: String,
}

impl Preflight {
    /// Reads the three headers of an `OPTIONS` request.
    pub fn of(h: &http::HeaderMap) -> Preflight {
        let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::trim).map(str::to_string);
        Preflight {
            origin: get("origin").filter(|o| !o.is_empty()),
            method: get("access-control-request-method").filter(|m| !m.is_empty()),
            headers: get("access-control-request-headers").unwrap_or_default(),
        }
    }

    /// The answer to this preflight under `config` (the bucket's, `None`
    /// without one): 200 with the rule's headers; 400 without Origin or
    /// method; 403 when CORS is off for the bucket or no rule matches. The
    /// body of an error is S3's XML, without its request IDs (the front
    /// adds them).
    pub fn answer(&self, config: Option<&Config>) -> (http::StatusCode, http::HeaderMap, String) {
        use http::StatusCode as S;
        let mut h = http::HeaderMap::new();
        let (Some(origin), Some(method)) = (&self.origin, &self.method) else {
            let msg = match &self.origin {
                None => "Insufficient information. Origin request header needed.",
                Some(_) => "Invalid Access-Control-Request-Method: null",
            };
            return (S::BAD_REQUEST, h, error_xml("BadRequest", msg));
        };
        let Some(config) = config else {
            return (
                S::FORBIDDEN,
                h,
                error_xml("AccessForbidden", "CORSResponse: CORS is not enabled for this bucket."),
            );
        };
        let names: Vec<&str> = self.headers.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        match config.find(origin, method, &names) {
            Some(rule) => {
                allow_headers(&mut h, rule, origin, Some(&names.join(", ")));
                (S::OK, h, String::new())
            }
            None => (
                S::FORBIDDEN,
                h,
                error_xml(
                    "AccessForbidden",
                    "CORSResponse: This CORS request is not allowed. This is usually because the evalution of \
                     Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers \
                     are not whitelisted by the resource's CORS spec.",
                ),
            ),
        }
    }
}

/// Adds the `Access-Control-*` headers to the answer of an actual request
/// with `Origin` (`origin`), whatever its status, when a rule of `config`
/// allows the method (`Access-Control-Request-Method` if the request sent
/// one, else its own).
pub fn decorate(h: &mut http::HeaderMap, config: &Config, origin: &str, method: &str) {
    if let Some(rule) = config.find(origin, method, &[]) {
        allow_headers(h, rule, origin, None);
    }
}

fn error_xml(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    )
}

/// How long an instance uses a bucket's CORS configuration before reading
/// it from the share again (a change through another instance takes
/// effect within this).
pub const CACHE_TTL: Duration = Duration::from_secs(5);

/// Buckets' CORS configurations as recently read from the share through
/// the gateway's own store. Clone to share.
#[derive(Clone)]
pub struct Cache {
    store: Store,
    entries: Arc<Mutex<HashMap<String, Cached>>>,
}

/// When a bucket's configuration was read, and what it was.
type Cached = (Instant, Option<Arc<Config>>);

impl Cache {
    /// A cache reading through `store`.
    pub fn new(store: Store) -> Cache {
        Cache { store, entries: Default::default() }
    }

    /// `bucket`'s configuration (`None`: none, or no such bucket), read
    /// from the share at most every [`CACHE_TTL`].
    ///
    /// Errors: the share could not be read (a stored configuration that
    /// does not parse counts as none, and is logged).
    pub async fn get(&self, bucket: &str) -> StoreResult<Option<Arc<Config>>> {
        if let Some((at, c)) = self.entries.lock().unwrap().get(bucket) {
            if at.elapsed() < CACHE_TTL {
                return Ok(c.clone());
            }
        }
        let config = match self.store.buckets().bucket_cors(bucket).await? {
            None => None,
            Some(bytes) => match serde_json::from_slice::<Config>(&bytes) {
                Ok(c) => Some(Arc::new(c)),
                Err(e) => {
                    tracing::warn!(bucket, error = %e, "stored CORS configuration does not parse; treated as none");
                    None
                }
            },
        };
        let mut entries = self.entries.lock().unwrap();
        if entries.len() > 10_000 {
            entries.clear();
        }
        entries.insert(bucket.to_string(), (Instant::now(), config.clone()));
        Ok(config)
    }

    /// Forgets `bucket`'s entry (after this instance changed it).
    pub fn forget(&self, bucket: &str) {
        self.entries.lock().unwrap().remove(bucket);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> Rule {
        Rule {
            id: None,
            allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
            allowed_methods: methods.iter().map(|s| s.to_string()).collect(),
            allowed_headers: headers.iter().map(|s| s.to_string()).collect(),
            expose_headers: vec!["ETag".into()],
            max_age_seconds: Some(600),
        }
    }

    #[test]
    fn origins_match_with_one_wildcard_as_s3_does() {
        let c = Config {
            rules: vec![
                rule(&["*suffix"], &["GET"], &[]),
                rule(&["start*end"], &["GET"], &[]),
                rule(&["prefix*"], &["GET"], &[]),
                rule(&["*.put"], &["PUT"], &[]),
            ],
        };
        for (origin, method, allowed) in [
            ("foo.suffix", "GET", true),
            ("foo.bar", "GET", false),
            ("foo.suffix.get", "GET", false),
            ("startend", "GET", true),
            ("start12end", "GET", true),
            ("0start12end", "GET", false),
            ("prefix.suffix", "GET", true),
            ("bla.prefix", "GET", false),
            ("foo.put", "GET", false),
            ("foo.put", "PUT", true),
            ("foo.suffix", "PUT", false),
        ] {
            assert_eq!(c.find(origin, method, &[]).is_some(), allowed, "{origin} {method}");
        }
    }

    #[test]
    fn preflights_answer_as_s3() {
        let c = Config { rules: vec![rule(&["http://app.example"], &["PUT", "GET"], &["content-type", "x-amz-*"])] };
        let ask = |origin: Option<&str>, method: Option<&str>, headers: &str| Preflight {
            origin: origin.map(String::from),
            method: method.map(String::from),
            headers: headers.into(),
        };
        let (s, h, _) = ask(Some("http://app.example"), Some("PUT"), "Content-Type, X-Amz-Meta-A").answer(Some(&c));
        assert_eq!(s, 200);
        assert_eq!(h["access-control-allow-origin"], "http://app.example");
        assert_eq!(h["access-control-allow-methods"], "PUT, GET");
        assert_eq!(h["access-control-allow-headers"], "Content-Type, X-Amz-Meta-A");
        assert_eq!(h["access-control-expose-headers"], "ETag");
        assert_eq!(h["access-control-max-age"], "600");
        assert_eq!(ask(Some("http://app.example"), Some("PUT"), "authorization").answer(Some(&c)).0, 403);
        assert_eq!(ask(Some("http://evil.example"), Some("PUT"), "").answer(Some(&c)).0, 403);
        assert_eq!(ask(Some("http://app.example"), Some("DELETE"), "").answer(Some(&c)).0, 403);
        assert_eq!(ask(None, Some("PUT"), "").answer(Some(&c)).0, 400);
        assert_eq!(ask(Some("http://app.example"), None, "").answer(Some(&c)).0, 400);
        let (s, _, body) = ask(Some("http://app.example"), Some("PUT"), "").answer(None);
        assert_eq!(s, 403);
        assert!(body.contains("CORS is not enabled for this bucket"));
        let star = Config { rules: vec![rule(&["*"], &["GET"], &[])] };
        let mut h = http::HeaderMap::new();
        decorate(&mut h, &star, "http://any", "GET");
        assert_eq!(h["access-control-allow-origin"], "*");
        assert!(!h.contains_key("access-control-allow-credentials"));
    }

    #[test]
    fn bad_configurations_get_aws_messages() {
        let dto = |methods: Vec<&str>, origins: Vec<&str>| s3s::dto::CORSConfiguration {
            cors_rules: vec![s3s::dto::CORSRule {
                allowed_methods: methods.into_iter().map(String::from).collect(),
                allowed_origins: origins.into_iter().map(String::from).collect(),
                allowed_headers: None,
                expose_headers: None,
                id: None,
                max_age_seconds: None,
            }],
        };
        assert!(Config::from_dto(dto(vec!["PATCH"], vec!["*"])).unwrap_err().contains("Unsupported method is PATCH"));
        assert!(Config::from_dto(dto(vec!["GET"], vec!["*a*"])).unwrap_err().contains("more than one wildcard"));
        let ok = Config::from_dto(dto(vec!["GET"], vec!["*"])).unwrap();
        assert_eq!(ok.to_dto()[0].allowed_methods, vec!["GET".to_string()]);
    }
}
