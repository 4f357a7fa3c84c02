//! tmp
pub mod crypto;
