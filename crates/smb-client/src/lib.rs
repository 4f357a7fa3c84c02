//! tmp
pub mod connection;
pub mod credits;
pub mod crypto;
pub mod error;
pub mod session;
pub mod tree;
pub use error::{Error, Result};
