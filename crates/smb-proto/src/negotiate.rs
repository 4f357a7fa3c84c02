//! NEGOTIATE request and response with SMB 3.1.1 negotiate contexts
//! (MS-SMB2 2.2.3, 2.2.4).

use bytes::{Bytes, BytesMut};

use crate::error::{DecodeError, DecodeResult};
use crate::header::{Command, HEADER_LEN};
use crate::message::{patch_u16, patch_u32, put_u16, put_u32, Request};
use crate::reader::{pad_to, range_at, Reader};

/// Dialect revision numbers (MS-SMB2 2.2.3).
pub mod dialect {
    /// SMB 3.0.
    pub const SMB300: u16 = 0x0300;
    /// SMB 3.0.2.
    pub const SMB302: u16 = 0x0302;
    /// SMB 3.1.1.
    pub const SMB311: u16 = 0x0311;

    /// The dialect's version as people write it (`3.1.1`), or `unknown`.
    pub fn name(d: u16) -> &'static str {
        match d {
            0x0202 => "2.0.2",
            0x0210 => "2.1",
            SMB300 => "3.0",
            SMB302 => "3.0.2",
            SMB311 => "3.1.1",
            _ => "unknown",
        }
    }
}

/// SecurityMode bits.
pub mod security_mode {
    /// Signing is supported.
    pub const SIGNING_ENABLED: u16 = 0x0001;
    /// Signing is required.
    pub const SIGNING_REQUIRED: u16 = 0x0002;
}

/// Global capability bits (MS-SMB2 2.2.3).
pub mod capabilities {
    /// DFS.
    pub const DFS: u32 = 0x0000_0001;
    /// Leasing.
    pub const LEASING: u32 = 0x0000_0002;
    /// Multi-credit operations (CreditCharge > 1).
    pub const LARGE_MTU: u32 = 0x0000_0004;
    /// Multichannel.
    pub const MULTI_CHANNEL: u32 = 0x0000_0008;
    /// Persistent handles.
    pub const PERSISTENT_HANDLES: u32 = 0x0000_0010;
    /// Directory leasing.
    pub const DIRECTORY_LEASING: u32 = 0x0000_0020;
    /// Encryption (3.0/3.0.2 only; 3.1.1 uses a context).
    pub const ENCRYPTION: u32 = 0x0000_0040;
}

/// Cipher ids of SMB2_ENCRYPTION_CAPABILITIES (MS-SMB2 2.2.3.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Cipher {
    /// AES-128-CCM.
    Aes128Ccm = 1,
    /// AES-128-GCM.
    Aes128Gcm = 2,
    /// AES-256-CCM.
    Aes256Ccm = 3,
    /// AES-256-GCM.
    Aes256Gcm = 4,
}

impl Cipher {
    /// The cipher's name as MS-SMB2 writes it (`AES-128-GCM`).
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Ccm => "AES-128-CCM",
            Cipher::Aes128Gcm => "AES-128-GCM",
            Cipher::Aes256Ccm => "AES-256-CCM",
            Cipher::Aes256Gcm => "AES-256-GCM",
        }
    }
}

impl Cipher {
    /// Maps a wire id.
    pub fn from_u16(v: u16) -> Option<Cipher> {
        Some(match v {
            1 => Cipher::Aes128Ccm,
            2 => Cipher::Aes128Gcm,
            3 => Cipher::Aes256Ccm,
            4 => Cipher::Aes256Gcm,
            _ => return None,
        })
    }
    /// Key length in bytes.
    pub fn key_len(self) -> usize {
        match self {
            Cipher::Aes128Ccm | Cipher::Aes128Gcm => 16,
            Cipher::Aes256Ccm | Cipher::Aes256Gcm => 32,
        }
    }
}

/// Signing algorithm ids of SMB2_SIGNING_CAPABILITIES (MS-SMB2 2.2.3.1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 (SMB 2.x).
    HmacSha256 = 0,
    /// AES-128-CMAC (SMB 3.x default).
    AesCmac = 1,
    /// AES-128-GMAC (3.1.1 with the signing context).
    AesGmac = 2,
}

impl SigningAlgorithm {
    /// The algorithm's name as MS-SMB2 writes it (`AES-128-GMAC`).
    pub fn name(self) -> &'static str {
        match self {
            SigningAlgorithm::HmacSha256 => "HMAC-SHA256",
            SigningAlgorithm::AesCmac => "AES-128-CMAC",
            SigningAlgorithm::AesGmac => "AES-128-GMAC",
        }
    }
}

impl SigningAlgorithm {
    /// Maps a wire id.
    pub fn from_u16(v: u16) -> Option<SigningAlgorithm> {
        Some(match v {
            0 => SigningAlgorithm::HmacSha256,
            1 => SigningAlgorithm::AesCmac,
            2 => SigningAlgorithm::AesGmac,
            _ => return None,
        })
    }
}

const CTX_PREAUTH: u16 = 0x0001;
const CTX_ENCRYPTION: u16 = 0x0002;
const CTX_SIGNING: u16 = 0x0008;
const HASH_SHA512: u16 = 0x0001;

/// NEGOTIATE request (MS-SMB2 2.2.3). Contexts are sent when `dialects`
/// contains 3.1.1.
#[derive(Debug, Clone)]
pub struct NegotiateRequest {
    /// Dialects offered, e.g. `[SMB300, SMB302, SMB311]`.
    pub dialects: Vec<u16>,
    /// SecurityMode bits.
    pub security_mode: u16,
    /// Capability bits.
    pub capabilities: u32,
    /// ClientGuid.
    pub client_guid: [u8; 16],
    /// 32-byte salt for the preauth integrity context.
    pub salt: [u8; 32],
    /// Ciphers in preference order.
    pub ciphers: Vec<Cipher>,
    /// Signing algorithms in preference order.
    pub signing: Vec<SigningAlgorithm>,
}

impl Request for NegotiateRequest {
    fn command(&self) -> Command {
        Command::Negotiate
    }

    fn encode_body(&self, out: &mut BytesMut, hdr: usize) {
        let with_ctx = self.dialects.contains(&dialect::SMB311);
        put_u16(out, 36);
        put_u16(out, self.dialects.len() as u16);
        put_u16(out, self.security_mode);
        put_u16(out, 0);
        put_u32(out, self.capabilities);
        out.extend_from_slice(&self.client_guid);
        let ctx_off_at = out.len();
        put_u32(out, 0);
        put_u16(out, if with_ctx { 3 } else { 0 });
        put_u16(out, 0);
        for d in &self.dialects {
            put_u16(out, *d);
        }
        if !with_ctx {
            return;
        }
        pad_to(out, hdr, 8);
        patch_u32(out, ctx_off_at, (out.len() - hdr) as u32);

        let ctx = |out: &mut BytesMut, ty: u16, data: &dyn Fn(&mut BytesMut)| {
            pad_to(out, hdr, 8);
            put_u16(out, ty);
            let len_at = out.len();
            put_u16(out, 0);
            put_u32(out, 0);
            let start = out.len();
            data(out);
            let len = (out.len() - start) as u16;
            patch_u16(out, len_at, len);
        };
        ctx(out, CTX_PREAUTH, &|o| {
            put_u16(o, 1);
            put_u16(o, 32);
            put_u16(o, HASH_SHA512);
            o.extend_from_slice(&self.salt);
        });
        ctx(out, CTX_ENCRYPTION, &|o| {
            put_u16(o, self.ciphers.len() as u16);
            for c in &self.ciphers {
                put_u16(o, *c as u16);
            }
        });
        ctx(out, CTX_SIGNING, &|o| {
            put_u16(o, self.signing.len() as u16);
            for s in &self.signing {
                put_u16(o, *s as u16);
            }
        });
    }
}

/// NEGOTIATE response (MS-SMB2 2.2.4) with the contexts we understand.
#[derive(Debug, Clone)]
pub struct NegotiateResponse {
    /// Server SecurityMode bits.
    pub security_mode: u16,
    /// Selected dialect.
    pub dialect: u16,
    /// ServerGuid.
    pub server_guid: [u8; 16],
    /// Server capabilities.
    pub capabilities: u32,
    /// MaxTransactSize in bytes.
    pub max_transact_size: u32,
    /// MaxReadSize in bytes.
    pub max_read_size: u32,
    /// MaxWriteSize in bytes.
    pub max_write_size: u32,
    /// The SPNEGO hint token (may be empty).
    pub security_buffer: Bytes,
    /// Cipher selected by the server (3.1.1 context), if any.
    pub cipher: Option<Cipher>,
    /// Signing algorithm selected (3.1.1 context), if any.
    pub signing: Option<SigningAlgorithm>,
    /// True if the preauth integrity context selected SHA-512.
    pub preauth_sha512: bool,
}

impl NegotiateResponse {
    /// Decodes a whole NEGOTIATE response message (header included).
    ///
    /// Errors: truncation or offsets outside the message.
    pub fn decode(msg: &Bytes) -> DecodeResult<NegotiateResponse> {
        let mut r = Reader::new(&msg[HEADER_LEN.min(msg.len())..]);
        r.expect_u16(65, "NEGOTIATE StructureSize")?;
        let security_mode = r.u16("SecurityMode")?;
        let dialect = r.u16("DialectRevision")?;
        let ctx_count = r.u16("NegotiateContextCount")?;
        let server_guid = r.array::<16>("ServerGuid")?;
        let capabilities = r.u32("Capabilities")?;
        let max_transact_size = r.u32("MaxTransactSize")?;
        let max_read_size = r.u32("MaxReadSize")?;
        let max_write_size = r.u32("MaxWriteSize")?;
        r.skip(16, "SystemTime/ServerStartTime")?;
        let sb_off = r.u16("SecurityBufferOffset")? as usize;
        let sb_len = r.u16("SecurityBufferLength")? as usize;
        let ctx_off = r.u32("NegotiateContextOffset")? as usize;
        let security_buffer =
            if sb_len == 0 { Bytes::new() } else { msg.slice(range_at(msg.len(), sb_off, sb_len, "SecurityBuffer")?) };
        let mut resp = NegotiateResponse {
            security_mode,
            dialect,
            server_guid,
            capabilities,
            max_transact_size,
            max_read_size,
            max_write_size,
            security_buffer,
            cipher: None,
            signing: None,
            preauth_sha512: false,
        };
        if dialect == dialect::SMB311 && ctx_count > 0 {
            let mut off = ctx_off;
            for _ in 0..ctx_count {
                off = off.next_multiple_of(8);
                let body = msg.get(off..).ok_or(DecodeError::OutOfBounds("NegotiateContext"))?;
                let mut c = Reader::new(body);
                let ty = c.u16("ContextType")?;
                let len = c.u16("DataLength")? as usize;
                c.skip(4, "Reserved")?;
                let data = c.take(len, "context Data")?;
                let mut d = Reader::new(data);
                match ty {
                    CTX_PREAUTH => {
                        let n = d.u16("HashAlgorithmCount")?;
                        let _salt = d.u16("SaltLength")?;
                        resp.preauth_sha512 = n >= 1 && d.u16("HashAlgorithm")? == HASH_SHA512;
                    }
                    CTX_ENCRYPTION => {
                        let n = d.u16("CipherCount")?;
                        if n >= 1 {
                            resp.cipher = Cipher::from_u16(d.u16("Cipher")?);
                        }
                    }
                    CTX_SIGNING => {
                        let n = d.u16("SigningAlgorithmCount")?;
                        if n >= 1 {
                            resp.signing = SigningAlgorithm::from_u16(d.u16("SigningAlgorithm")?);
                        }
                    }
                    _ => {}
                }
                off += 8 + len;
            }
        }
        Ok(resp)
    }
}
