//! Command line and environment configuration (clap), with secrets read
//! from files when asked. Secrets never appear in Debug output.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config_values::parse_cache_object_max;
pub use crate::config_values::{parse_bytes, parse_bytes_u32, parse_duration, parse_on_off, parse_ratio};

/// smbgate: an S3-compatible gateway in front of an SMB share.
#[derive(Debug, Parser)]
#[command(name = "smbgate", version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SMBGATE_GIT_COMMIT"), ")"), about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the S3 API for one share.
    #[command(after_help = "Logging: SMBGATE_LOG sets what the log on standard error shows: error, warn, \
                            info (the default) or debug, or a tracing filter such as `info,smbgate::store=debug`.")]
    Serve(Box<ServeArgs>),
    /// Work with the config file.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `smbgate config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validates a config file and prints the effective `serve` settings
    /// (file, environment and defaults; secrets redacted) and its users.
    Check {
        /// The TOML file.
        file: PathBuf,
        /// Check the syntax and settings without reading any secret file
        /// (`*_file` settings are named, not opened): for a file checked
        /// away from its secrets, as in a repository or a CI job.
        #[arg(long)]
        without_secrets: bool,
    },
}

/// `smbgate serve` settings; each flag falls back to an SMBGATE_* variable.
#[derive(Args, Clone)]
pub struct ServeArgs {
    /// TOML config file: any of these settings by name (`pool_size = 8`),
    /// and the S3 users as `[users.NAME]` tables, each with its own SMB
    /// identity, buckets and read-only flag. Flags and environment
    /// override the file. The users are read again on SIGHUP.
    #[arg(long, env = "SMBGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on (HTTPS when --tls-cert and --tls-key are
    /// given, else plain HTTP).
    #[arg(long, env = "SMBGATE_LISTEN", default_value = "127.0.0.1:9000", help_heading = "HTTP and TLS")]
    pub listen: SocketAddr,
    /// TLS certificate chain (PEM, the server's certificate first). Read
    /// again on SIGHUP.
    #[arg(long, env = "SMBGATE_TLS_CERT", requires = "tls_key", help_heading = "HTTP and TLS")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM: PKCS#8, PKCS#1 or SEC1). Read again on SIGHUP.
    #[arg(long, env = "SMBGATE_TLS_KEY", requires = "tls_cert", help_heading = "HTTP and TLS")]
    pub tls_key: Option<PathBuf>,
    /// A second address serving plain HTTP next to the TLS listener (for
    /// clients on a trusted network, or a local health checker).
    #[arg(long, env = "SMBGATE_LISTEN_PLAIN", requires = "tls_cert", help_heading = "HTTP and TLS")]
    pub listen_plain: Option<SocketAddr>,
    /// Address of the operations listener: `/metrics` (Prometheus),
    /// `/health/live`, `/health/ready`. Off unless given.
    #[arg(long, env = "SMBGATE_METRICS_LISTEN", help_heading = "Operations (metrics, health, access log)")]
    pub metrics_listen: Option<SocketAddr>,
    /// Bearer token `/metrics` requires.
    #[arg(
        long,
        env = "SMBGATE_METRICS_TOKEN",
        hide_env_values = true,
        requires = "metrics_listen",
        help_heading = "Operations (metrics, health, access log)"
    )]
    pub metrics_token: Option<String>,
    /// File holding the bearer token `/metrics` requires (first line).
    #[arg(
        long,
        env = "SMBGATE_METRICS_TOKEN_FILE",
        requires = "metrics_listen",
        help_heading = "Operations (metrics, health, access log)"
    )]
    pub metrics_token_file: Option<PathBuf>,
    /// Share root: smb://HOST[:PORT]/SHARE[/PATH]. Each top-level directory
    /// under it is a bucket.
    #[arg(long, env = "SMBGATE_SHARE", default_value = "", hide_default_value = true, help_heading = "SMB")]
    pub share: String,
    /// SMB user name.
    #[arg(long, env = "SMBGATE_SMB_USER", default_value = "", help_heading = "SMB")]
    pub smb_user: String,
    /// SMB password.
    #[arg(long, env = "SMBGATE_SMB_PASSWORD", hide_env_values = true, help_heading = "SMB")]
    pub smb_password: Option<String>,
    /// File holding the SMB password (first line).
    #[arg(long, env = "SMBGATE_SMB_PASSWORD_FILE", help_heading = "SMB")]
    pub smb_password_file: Option<PathBuf>,
    /// SMB (NTLM) domain.
    #[arg(long, env = "SMBGATE_SMB_DOMAIN", default_value = "", help_heading = "SMB")]
    pub smb_domain: String,
    /// How the SMB identities log on (NTLM, Kerberos): see kerberos.rs.
    #[command(flatten)]
    pub kerberos: crate::kerberos::KerberosArgs,
    /// S3 access key clients sign with.
    #[arg(long, env = "SMBGATE_ACCESS_KEY", help_heading = "S3")]
    pub access_key: Option<String>,
    /// S3 secret key.
    #[arg(long, env = "SMBGATE_SECRET_KEY", hide_env_values = true, help_heading = "S3")]
    pub secret_key: Option<String>,
    /// File holding the S3 secret key (first line).
    #[arg(long, env = "SMBGATE_SECRET_KEY_FILE", help_heading = "S3")]
    pub secret_key_file: Option<PathBuf>,
    /// Base domain for virtual-hosted-style requests
    /// (`bucket.s3.example.com`); path style keeps working with it and
    /// without it.
    #[arg(long, env = "SMBGATE_DOMAIN", help_heading = "S3")]
    pub domain: Option<String>,
    /// Region reported to clients and used in SigV4 scope.
    #[arg(long, env = "SMBGATE_REGION", default_value = "us-east-1", help_heading = "S3")]
    pub region: String,
    /// Accept AWS Signature Version 2 (header-signed within 15 minutes of
    /// the server's clock, or presigned), as aws-cli 1.x and boto3 still
    /// presign by default (`on`), or only SigV4 (`off`).
    #[arg(long, env = "SMBGATE_SIGV2", default_value = "on", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub sigv2: bool,
    /// Allow unsigned (anonymous) requests. Off unless given explicitly
    /// (`--anonymous`, `--anonymous on`, SMBGATE_ANONYMOUS=on).
    #[arg(long, env = "SMBGATE_ANONYMOUS", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub anonymous: bool,
    /// With S3 users configured, the buckets unsigned requests may use
    /// (repeat, or separate with commas; `*` for every bucket), as the
    /// gateway's own SMB account. Required with `--anonymous` next to
    /// users; without users, `--anonymous` serves every bucket.
    #[arg(long = "anonymous-bucket", env = "SMBGATE_ANONYMOUS_BUCKETS", value_delimiter = ',', help_heading = "S3")]
    pub anonymous_buckets: Vec<String>,
    /// Unsigned requests may also write (PUT, DELETE, CreateBucket, ...)
    /// in `--anonymous-bucket` buckets; off: they may only read.
    #[arg(long, env = "SMBGATE_ANONYMOUS_WRITE", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub anonymous_write: bool,
    /// An unsigned form upload (POST Object under `--anonymous-write`) may
    /// redirect its browser with `success_action_redirect` (`on`); off,
    /// such a form is refused, so that the gateway cannot be used by
    /// anyone as a redirector to any address.
    #[arg(long, env = "SMBGATE_ANONYMOUS_FORM_REDIRECT", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub anonymous_form_redirect: bool,
    /// The share's storage is encrypted at rest (BitLocker, ZFS or LUKS
    /// encryption on the NAS): PUTs asking for SSE-S3
    /// (`x-amz-server-side-encryption: AES256`) are accepted. Off: they
    /// are refused with 501, since the gateway itself encrypts nothing.
    #[arg(long, env = "SMBGATE_ENCRYPTED_AT_REST", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub encrypted_at_rest: bool,
    /// Accept SSE-C keys (`x-amz-server-side-encryption-customer-key`)
    /// over plain HTTP. Off: a request carrying one without TLS is refused
    /// with 400, as AWS refuses it, since the key crossed the network in
    /// clear. On only where TLS ends at a proxy in front of the gateway
    /// and the hop between them is private.
    #[arg(long, env = "SMBGATE_SSE_C_OVER_HTTP", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub sse_c_over_http: bool,
    /// Serve Veeam's Smart Object Storage API objects in every bucket
    /// (`.system-d26a9498-cb7c-4a87-a44a-8ae204f5ba6c/system.xml` and
    /// `capacity.xml`, the latter with the share's size and free space,
    /// asked of the SMB server at each read).
    #[arg(long, env = "SMBGATE_VEEAM_SOSAPI", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "S3")]
    pub veeam_sosapi: bool,
    /// SMB connections in the pool (and in each S3 user's own pool).
    #[arg(long, env = "SMBGATE_POOL_SIZE", default_value_t = 8, help_heading = "SMB")]
    pub pool_size: usize,
    /// Most pools of S3 users' own SMB identities open at once (the least
    /// recently used is closed to make room); with `--pool-size` this
    /// bounds the SMB connections: (pool_size + 1) x (1 + user_pools), the one
    /// more being a pool's spare, opened only when needed.
    #[arg(long, env = "SMBGATE_USER_POOLS", default_value_t = 16,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "SMB")]
    pub user_pools: usize,
    /// A user's SMB pool unused this long is closed (`10m`, `1h`).
    #[arg(long, env = "SMBGATE_USER_POOL_IDLE", default_value = "10m", value_parser = parse_duration, help_heading = "SMB")]
    pub user_pool_idle: std::time::Duration,
    /// Largest SMB READ/WRITE (clamped to what the server allows). Sizes
    /// take plain bytes or units: `8MiB`, `512 KiB`, `1GiB`, `4MB`.
    #[arg(long, env = "SMBGATE_IO_SIZE", default_value = "8MiB", value_parser = parse_bytes_u32, help_heading = "SMB")]
    pub io_size: u32,
    /// Sign every SMB message and require signed answers (`on`, the
    /// default), or sign only when the server requires it (`off`). SMB 3.0
    /// and 3.0.2 sessions always sign.
    #[arg(long, env = "SMBGATE_SMB_SIGN", default_value = "on", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "SMB")]
    pub smb_sign: bool,
    /// Encrypt every SMB message (`--smb-encrypt`, `--smb-encrypt on`,
    /// SMBGATE_SMB_ENCRYPT=on); a share or server may require it anyway.
    #[arg(long, env = "SMBGATE_SMB_ENCRYPT", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "SMB")]
    pub smb_encrypt: bool,
    /// Segment size in bytes for split streaming (large GETs) and for
    /// spreading large PUT and UploadPart bodies over connections.
    #[arg(long, env = "SMBGATE_SEGMENT_SIZE", default_value = "8MiB", value_parser = parse_bytes, help_heading = "Data path")]
    pub segment_size: u64,
    /// Segments of a large GET read at once, each on its own connection
    /// (the first included): a number from 1 to 64, or `auto`, which
    /// starts at 2 and grows while each added segment brings its own
    /// bandwidth (a NAS that caps each connection), shrinking when the
    /// segments slow each other down.
    #[arg(long, env = "SMBGATE_PREFETCH", default_value = "auto", help_heading = "Data path")]
    pub prefetch: crate::store::fan_out::FanOut,
    /// Connections one large PUT or UploadPart body is written over, a
    /// segment at a time: a number from 1 to 64 (1 = a single connection),
    /// or `auto`, which starts on half of what the last body kept (one at
    /// first) and doubles them (up to 8) while the body waits on its
    /// connections and the doubled count raises its rate by a fifth (a NAS
    /// that caps each connection).
    #[arg(long, env = "SMBGATE_PUT_PARALLEL", default_value = "auto", help_heading = "Data path")]
    pub put_parallel: crate::store::fan_out::FanOut,
    /// Bytes all GETs together may read ahead of their clients (READs in
    /// flight and segments fetched ahead). When it is spent, GETs read with
    /// at most one READ ahead and fetch no segments early.
    #[arg(long, env = "SMBGATE_READ_AHEAD_BUDGET", default_value = "512MiB", value_parser = parse_bytes, help_heading = "Data path")]
    pub read_ahead_budget: u64,
    /// Bytes all PUT and UploadPart bodies together may have in flight to
    /// the SMB server. When it is spent, a body is written over one
    /// connection with 1 MiB in flight.
    #[arg(long, env = "SMBGATE_WRITE_BEHIND_BUDGET", default_value = "512MiB", value_parser = parse_bytes, help_heading = "Data path")]
    pub write_behind_budget: u64,
    /// Bytes all XML request bodies together (DeleteObjects,
    /// CompleteMultipartUpload, tagging, CORS, ...) may hold in memory,
    /// across every connection and HTTP/2 stream. A request that cannot
    /// get its share within 5 s is answered 503 SlowDown. At least 4 MiB
    /// (one largest XML body).
    #[arg(long, env = "SMBGATE_XML_BODY_BUDGET", default_value = "64MiB", value_parser = parse_bytes, help_heading = "Data path")]
    pub xml_body_budget: u64,
    /// Age at which a multipart upload that was neither completed nor
    /// aborted is removed, by the server's clock (`7d`, `12h`, `30m`).
    #[arg(long, env = "SMBGATE_MULTIPART_EXPIRY", default_value = "7d", value_parser = parse_duration, help_heading = "Data path")]
    pub multipart_expiry: std::time::Duration,
    /// Time between sweeps for dead writers' temp files and expired
    /// multipart uploads (one also runs at startup). A temp file goes once
    /// no writer holds it open and nothing was written to it for this long.
    #[arg(long, env = "SMBGATE_SWEEP_INTERVAL", default_value = "5m", value_parser = parse_duration, help_heading = "Data path")]
    pub sweep_interval: std::time::Duration,
    /// HTTP connections served at once; further clients wait in the
    /// listen backlog until one closes.
    #[arg(long, env = "SMBGATE_MAX_CONNECTIONS", default_value_t = 1024,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Limits")]
    pub max_connections: usize,
    /// HTTP connections one client address may hold at once (default: a
    /// quarter of `--max-connections`); a connection past it is closed at
    /// once, so one address cannot take every slot.
    #[arg(long, env = "SMBGATE_MAX_CONNECTIONS_PER_CLIENT",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Limits")]
    pub max_connections_per_client: Option<usize>,
    /// Addresses with no per-client share, which may use every connection
    /// slot: the load balancer or proxy in front of the gateway (repeat, or
    /// separate with commas).
    #[arg(long = "trusted-proxy", env = "SMBGATE_TRUSTED_PROXIES", value_delimiter = ',', help_heading = "Limits")]
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Connections from the `--trusted-proxy` addresses start with a PROXY
    /// protocol header (HAProxy's `send-proxy` or `send-proxy-v2`), whose
    /// client address then stands for the connection: in logs, the access
    /// log and the per-client connection share. A trusted proxy's
    /// connection without one is closed; nobody else's is read for one.
    #[arg(long, env = "SMBGATE_PROXY_PROTOCOL", default_value = "off", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "Limits")]
    pub proxy_protocol: bool,
    /// How long a new connection may take to complete its first request's
    /// headers (TLS handshake included), and how long a connection, HTTP/1
    /// or HTTP/2, may stay open with no request in flight: `30s`, `2m`, or
    /// plain seconds.
    #[arg(long, env = "SMBGATE_HEADER_READ_TIMEOUT", default_value = "30s", value_parser = parse_duration, help_heading = "Limits")]
    pub header_read_timeout: std::time::Duration,
    /// Longest wait for the next bytes of a PUT or UploadPart body; a body
    /// that stalls longer fails with 400 RequestTimeout and leaves nothing.
    #[arg(long, env = "SMBGATE_BODY_READ_TIMEOUT", default_value = "60s", value_parser = parse_duration, help_heading = "Limits")]
    pub body_read_timeout: std::time::Duration,
    /// Once a PUT or UploadPart body has taken `--body-read-timeout`, the
    /// least average rate it must keep (`1KiB` a second; `0` for none); a
    /// slower one fails with 400 RequestTimeout and leaves nothing, so a
    /// trickle cannot hold a handle and a temp file for hours.
    #[arg(long, env = "SMBGATE_BODY_MIN_RATE", default_value = "1KiB", value_parser = parse_bytes, help_heading = "Limits")]
    pub body_min_rate: u64,
    /// Longest a client may hold up its responses (its socket full, or an
    /// HTTP/2 stream given no room) while taking them slower than
    /// `--send-min-rate`; such a client is cut off and the object's handle
    /// closed.
    #[arg(long, env = "SMBGATE_SEND_TIMEOUT", default_value = "60s", value_parser = parse_duration, help_heading = "Limits")]
    pub send_timeout: std::time::Duration,
    /// The least rate a client that holds up its responses must take them
    /// at, in bytes a second, over each `--send-timeout` (`1KiB`; `0`: any
    /// progress at all), so that a GET read a byte at a time cannot hold
    /// its SMB handle and read-ahead for hours.
    #[arg(long, env = "SMBGATE_SEND_MIN_RATE", default_value = "1KiB", value_parser = parse_bytes, help_heading = "Limits")]
    pub send_min_rate: u64,
    /// Most directories one ListObjects page reads on the share, beyond
    /// those it must pass through; a page that reaches it ends early with
    /// IsTruncated and a continuation token, so that one request (a deep
    /// tree of empty directories) cannot keep the share busy for minutes.
    #[arg(long, env = "SMBGATE_LIST_MAX_DIRS", default_value_t = 1000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Limits")]
    pub list_max_dirs: usize,
    /// Most entries of one directory a ListObjects request holds in memory
    /// at once (about 32 bytes each and their names), and never more bytes
    /// than `--listing-cache-size` keeps. A larger directory is listed in
    /// windows of this many entries in key order, each window one full
    /// read of the directory on the share, kept for the next pages like any
    /// listing; a page ends early, truncated, where a window ends.
    #[arg(long, env = "SMBGATE_LIST_WINDOW", default_value_t = 1_000_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..), help_heading = "Limits")]
    pub list_window: usize,
    /// Bytes of local disk, in the temporary directory (`TMPDIR`, else
    /// `/tmp`), that all listings together may fill with the names of
    /// directories larger than `--list-window`, sorted, so that such a
    /// directory is read once per listing rather than once per window.
    /// A listing that would pass it reads the directory again per window.
    /// 0: never.
    #[arg(long, env = "SMBGATE_LIST_SPILL_SIZE", default_value = "1GiB", value_parser = parse_bytes, help_heading = "Limits")]
    pub list_spill_size: u64,
    /// Most stored versions and delete markers of one key kept in one
    /// folder on the share. A case-insensitive share reads a whole folder
    /// before it makes a name in it, so a key's versions folder is split
    /// into shards of this many; fewer makes each new version cheaper,
    /// more makes reading all of a key's versions take fewer round trips.
    #[arg(long, env = "SMBGATE_VERSIONS_PER_FOLDER", default_value_t = 256,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..), help_heading = "Limits")]
    pub versions_per_folder: usize,
    /// Bytes all directory listings kept for the next pages of paginated
    /// ListObjects may hold together, over every bucket root and SMB
    /// identity; a listing that does not fit is not kept (its next pages
    /// read the share again). 0 keeps none.
    #[arg(long, env = "SMBGATE_LISTING_CACHE_SIZE", default_value = "64MiB", value_parser = parse_bytes, help_heading = "Limits")]
    pub listing_cache_size: u64,
    /// Answer HEAD, and GET of small objects, from memory while the SMB
    /// server's lease on the file says nobody changed it (`on`), or always
    /// from the share (`off`). With it on, every write also warns the
    /// holders on other instances first (one more round trip per PUT), so
    /// every instance serving a share must run with the same setting. A
    /// rename made by a plain SMB user, or a change made on the server
    /// itself, breaks no lease: such changes are seen within
    /// `--cache-max-age`. See docs/leases.md.
    #[arg(long, env = "SMBGATE_CACHE", default_value = "on", num_args = 0..=1,
          default_missing_value = "on", value_parser = parse_on_off, value_name = "on|off", help_heading = "Data path")]
    pub cache: bool,
    /// Most objects the cache holds per SMB identity and share root, each
    /// one open file on the server.
    #[arg(long, env = "SMBGATE_CACHE_ENTRIES", default_value_t = 4096, help_heading = "Data path")]
    pub cache_entries: usize,
    /// Bytes the cache may hold per SMB identity and share root (object
    /// bodies plus about 512 bytes per entry).
    #[arg(long, env = "SMBGATE_CACHE_SIZE", default_value = "64MiB", value_parser = parse_bytes, help_heading = "Data path")]
    pub cache_size: u64,
    /// Largest object whose bytes the cache keeps (larger ones keep only
    /// what a HEAD answers). At most 1MiB.
    #[arg(long, env = "SMBGATE_CACHE_OBJECT_MAX", default_value = "64KiB", value_parser = parse_cache_object_max, help_heading = "Data path")]
    pub cache_object_max: u64,
    /// Longest an entry is used, however its lease stands.
    #[arg(long, env = "SMBGATE_CACHE_MAX_AGE", default_value = "30s", value_parser = parse_duration, help_heading = "Data path")]
    pub cache_max_age: std::time::Duration,
    /// Writes one JSON line per request to this file (appended; `-` for
    /// standard output): request ID, identity, operation, bucket, key,
    /// status, bytes in and out, duration. Off unless given.
    #[arg(long, env = "SMBGATE_ACCESS_LOG", help_heading = "Operations (metrics, health, access log)")]
    pub access_log: Option<std::path::PathBuf>,
    /// Exports OpenTelemetry traces to this OTLP/HTTP receiver (protobuf
    /// bodies), e.g. `http://collector:4318`; `/v1/traces` is added to a
    /// URL without a path. One server span per S3 request, with the
    /// store's steps and SMB round trips under it. Off unless given.
    #[arg(long, env = "SMBGATE_OTLP_ENDPOINT", help_heading = "Operations (metrics, health, access log)")]
    pub otlp_endpoint: Option<String>,
    /// Share of the requests traced, 0 to 1, of those that arrive without
    /// a W3C `traceparent` (a parent's own decision is followed).
    #[arg(
        long,
        env = "SMBGATE_OTLP_SAMPLE_RATIO",
        default_value = "1",
        value_parser = parse_ratio,
        help_heading = "Operations (metrics, health, access log)"
    )]
    pub otlp_sample_ratio: f64,
}

impl std::fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeArgs")
            .field("config", &self.config)
            .field("listen", &self.listen)
            .field("tls_cert", &self.tls_cert)
            .field("listen_plain", &self.listen_plain)
            .field("metrics_listen", &self.metrics_listen)
            .field("share", &self.share)
            .field("smb_user", &self.smb_user)
            .field("access_key", &self.access_key)
            .field("region", &self.region)
            .field("anonymous", &self.anonymous)
            .field("anonymous_buckets", &self.anonymous_buckets)
            .field("anonymous_write", &self.anonymous_write)
            .field("pool_size", &self.pool_size)
            .finish_non_exhaustive()
    }
}

/// True if the SMB password was given as `--smb-password` on the command
/// line (`args`, the program's arguments), where any user on the machine
/// can read it in `ps`.
pub fn password_on_command_line(args: impl IntoIterator<Item = String>) -> bool {
    args.into_iter().any(|a| a == "--smb-password" || a.starts_with("--smb-password="))
}

/// A parsed `smb://HOST[:PORT]/SHARE[/PATH]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareUrl {
    /// Host name or address.
    pub host: String,
    /// TCP port (445 if absent).
    pub port: u16,
    /// Share name.
    pub share: String,
    /// Sub-path inside the share (`\`-separated, may be empty).
    pub path: String,
}

impl ShareUrl {
    /// The folder `folder` (`/`-separated, relative) under this URL's path.
    ///
    /// Errors: an empty folder, or an empty, `.` or `..` component.
    pub fn join(&self, folder: &str) -> Result<ShareUrl, String> {
        let parts: Vec<&str> = folder.split('/').collect();
        if folder.is_empty() || parts.iter().any(|p| matches!(*p, "" | "." | "..") || p.contains('\\')) {
            return Err(format!("path {folder:?} must be a folder under the share's root (no empty, . or .. part)"));
        }
        let mut path: Vec<&str> = self.path.split('\\').filter(|p| !p.is_empty()).collect();
        path.extend(parts);
        Ok(ShareUrl { path: path.join("\\"), ..self.clone() })
    }

    /// Parses the share URL.
    ///
    /// Errors: a one-line reason for a malformed URL.
    pub fn parse(s: &str) -> Result<ShareUrl, String> {
        // Not a required flag, so that a config file can give it.
        if s.is_empty() {
            return Err("no share: set --share smb://HOST/SHARE (SMBGATE_SHARE), or share in the config file".into());
        }
        let rest = s.strip_prefix("smb://").ok_or_else(|| format!("share {s:?} must start with smb://"))?;
        let (hostport, path) = rest.split_once('/').unwrap_or((rest, ""));
        if hostport.contains('@') {
            // Never echo it: the part before '@' may be a password.
            return Err("the share URL must not carry credentials (smb://user:password@host/...); \
                        use --smb-user and --smb-password-file"
                .into());
        }
        if path.is_empty() {
            return Err(format!("share {s:?} has no share name"));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h.to_string(), p.parse::<u16>().map_err(|_| format!("bad port in {s:?}"))?)
            }
            _ => (hostport.to_string(), 445),
        };
        if host.is_empty() {
            return Err(format!("share {s:?} has no host"));
        }
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let share = parts.next().ok_or_else(|| format!("share {s:?} has no share name"))?.to_string();
        let sub: Vec<&str> = parts.collect();
        if sub.iter().any(|p| *p == "." || *p == "..") {
            return Err(format!("share path in {s:?} may not contain . or .."));
        }
        Ok(ShareUrl { host, port, share, path: sub.join("\\") })
    }
}

use crate::secret_files::secret;

/// The bearer token `/metrics` requires: `--metrics-token`, or the first
/// line of `--metrics-token-file`; `None` when neither is set.
///
/// Errors: the file cannot be read; the token is blank, which would serve
/// `/metrics` to anyone while the setting says it is protected.
pub fn metrics_token(args: &ServeArgs) -> Result<Option<String>, String> {
    match secret("metrics-token-file", &args.metrics_token, &args.metrics_token_file)? {
        Some(t) if t.trim().is_empty() => {
            let setting = match &args.metrics_token_file {
                Some(f) => format!("--metrics-token-file {}", f.display()),
                None => "--metrics-token".to_string(),
            };
            Err(format!("{setting} is empty: /metrics would answer anyone; give it a token, or leave the setting out"))
        }
        t => Ok(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_urls() {
        let u = ShareUrl::parse("smb://nas.local/data/s3/root").unwrap();
        assert_eq!(u, ShareUrl { host: "nas.local".into(), port: 445, share: "data".into(), path: "s3\\root".into() });
        let u = ShareUrl::parse("smb://127.0.0.1:4455/share").unwrap();
        assert_eq!((u.port, u.share.as_str(), u.path.as_str()), (4455, "share", ""));
        assert!(ShareUrl::parse("http://x/y").is_err());
        assert!(ShareUrl::parse("smb://host").is_err());
        assert!(ShareUrl::parse("smb://host/share/../x").is_err());
        assert!(ShareUrl::parse("smb://host:99999/share").is_err());
        let e = ShareUrl::parse("smb://u:hunter2@host/share").unwrap_err();
        assert!(e.contains("must not carry credentials") && !e.contains("hunter2"), "{e}");
    }
}
