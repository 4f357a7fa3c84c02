//! NegotiateFlags bits (MS-NLMP 2.2.2.5), shared by the messages (`ntlm`)
//! and the key derivation (`crypto`, whose SEALKEY depends on them).

pub const UNICODE: u32 = 0x0000_0001;
pub const REQUEST_TARGET: u32 = 0x0000_0004;
pub const SIGN: u32 = 0x0000_0010;
pub const SEAL: u32 = 0x0000_0020;
pub const NTLM: u32 = 0x0000_0200;
pub const ANONYMOUS: u32 = 0x0000_0800;
pub const ALWAYS_SIGN: u32 = 0x0000_8000;
pub const EXTENDED_SESSIONSECURITY: u32 = 0x0008_0000;
pub const TARGET_INFO: u32 = 0x0080_0000;
pub const VERSION: u32 = 0x0200_0000;
pub const NEGOTIATE_128: u32 = 0x2000_0000;
pub const KEY_EXCH: u32 = 0x4000_0000;
pub const NEGOTIATE_56: u32 = 0x8000_0000;
