//! `smb-proto`: a sans-I/O codec for SMB 2/3 as specified in [MS-SMB2].
//!
//! Bytes in, typed messages out, and back. There are no sockets, no async
//! runtime and no clocks here. Decoders take a whole message as [`bytes::Bytes`]
//! and return views that slice it (a READ payload is never copied); encoders
//! append to a caller's [`bytes::BytesMut`] so a whole batch of requests is
//! built in one buffer. Every length and offset read from the wire is checked:
//! malformed input yields a [`DecodeError`], never a panic.
#![warn(missing_docs)]

pub mod compound;
pub mod create;
pub mod create_flags;
pub mod dfs;
pub mod error;
pub mod frame;
pub mod header;
pub mod info;
pub mod io;
pub mod ioctl;
pub mod lease;
pub mod lock;
pub mod message;
pub mod negotiate;
pub mod notify;
pub mod oplock;
pub mod query;
pub mod reader;
pub mod security;
pub mod session;
pub mod status;
pub mod transform;
pub mod tree;

pub use error::{DecodeError, DecodeResult};
pub use header::{Command, Header};
pub use message::Request;
pub use status::NtStatus;
