//! smbgate: an S3-compatible HTTP gateway that serves SMB2/3 shares as
//! buckets.
//!
//! - [`s3`]: the s3s adapter (HTTP, SigV4, XML, S3 errors) over the store.
//! - [`store`]: S3 semantics on the share (keys, metadata, atomic publish,
//!   multipart, listing, split streaming of large GETs).
//! - [`front`]: health probes and request clean-up before s3s;
//!   [`auth_log`]: failed authentications logged (rate-limited) and counted.
//! - [`access_log`]: the `--access-log` file, reopened on SIGHUP;
//!   [`body_end`]: response bodies that say when they end.
//! - [`metrics`]: Prometheus metrics; [`admin`]: the listener serving them
//!   and the health endpoints; [`traces`]: OpenTelemetry traces over OTLP.
//! - [`promises`]: requests that ask for a guarantee the gateway does not
//!   give (Object Lock, SSE-C, SSE-KMS, ...), refused rather than ignored.
//! - [`precheck`]: requests refused before s3s reads them, and signature
//!   rules s3s leaves to us; [`routes`]: requests s3s hands us once their
//!   signature holds: [`s3s_patches::ignored_range`] (GET and HEAD with a Range that
//!   does not parse, answered whole) and [`s3s_patches::delete_objects`] (a key list
//!   checked against its digest); [`paced_body`]: bodies read whole must
//!   keep coming; [`s3s_patches::chunk_bounds`]: aws-chunked chunks held to a size.
//! - [`server`]: listeners, the connection cap, drain and reload signals;
//!   [`conn_limits`]: what one connection may hold (first-request deadline,
//!   idle timeout, the least rate it must take its answers at);
//!   [`conn_slots`]: the connection slots, a share per client address, and
//!   the connection making no progress that makes way when all are taken;
//!   [`smb_startup`]: the SMB share opened at startup, a refusal in one
//!   line.
//! - [`tls`]: certificates for the HTTPS listener.
//! - [`cors_rules`]: bucket CORS rules, preflights and response headers.
//! - [`vhost`]: virtual-hosted-style bucket addressing (`--domain`).
//! - [`users`]: S3 users, their buckets, read-only flag and SMB identity;
//!   [`identities`]: one SMB pool and store per identity.
//! - [`config`]: flags and environment; [`config_file`]: the TOML file
//!   under them; [`settings_check`]: the settings' checks `serve` and
//!   `config check` share.
#![warn(missing_docs)]

pub mod access_check;
pub mod access_line;
pub mod access_log;
pub mod admin;
pub mod auth_log;
pub mod body_budget;
pub mod body_end;
pub mod config;
pub mod config_check;
pub mod config_file;
pub mod config_values;
pub mod conn_limits;
pub mod conn_slots;
mod connection;
pub mod cors_rules;
pub mod events;
pub mod front;
pub mod identities;
pub mod kerberos;
pub mod metrics;
pub mod paced_body;
pub mod precheck;
pub mod promises;
pub mod proxy_protocol;
pub mod request_ids;
pub mod routes;
pub mod s3;
pub mod s3s_patches;
pub mod secret_files;
pub mod server;
pub mod settings_check;
pub mod smb_startup;
pub mod store;
pub mod tls;
pub mod traces;
pub mod unread_body;
pub mod users;
pub mod vhost;
