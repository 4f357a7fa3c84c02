//! `smb-client`: an async SMB 3.1.1 client on tokio, built on the sans-I/O
//! `smb-proto` codec.
//!
//! - [`session::Session`] negotiates (3.1.1 with preauth integrity, falling
//!   back to 3.0.2 and 3.0), authenticates with NTLMv2 or Kerberos in SPNEGO ([`logon`]) and derives
//!   signing and encryption keys.
//! - [`connection::Connection`] keeps many requests in flight within the
//!   credit window, coalesces queued frames into one write, matches replies
//!   by MessageId and poisons itself on any framing, integrity or timeout
//!   failure.
//! - [`tree::Tree`] offers file operations and compounds; [`pipeline`] adds
//!   pipelined READ/WRITE streams; [`pool::Pool`] spreads work over N
//!   connections and heals broken ones.
//! - [`durable`] opens files as durable handles (with a batch oplock, whose
//!   breaks the connection acknowledges) and reopens them on another
//!   connection after their own is lost.
//! - [`notify`] watches a directory for changes (CHANGE_NOTIFY).
#![warn(missing_docs)]

pub mod aimd;
pub mod client_config;
pub mod connection;
pub mod credits;
pub mod crypto;
pub mod dfs;
pub mod dir_reader;
pub mod durable;
pub mod error;
pub mod file;
mod handshake;
pub mod lease;
pub mod logon;
pub mod notify;
mod oplock;
pub mod pipeline;
pub mod pool;
mod recvbuf;
mod reopen;
pub mod session;
pub mod tree;
mod tree_connect;
pub mod waits;

pub use error::{Error, Result};
pub use file::Handle;
pub use lease::Lease;
pub use logon::SmbAuth;
pub use pool::{Pool, PoolConfig, PoolStats};
pub use session::{ClientConfig, Session};
pub use tree::Tree;
