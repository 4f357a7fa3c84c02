//! Connection setup: NEGOTIATE (with SMB 3.1.1 contexts and the preauth
//! integrity hash), SESSION_SETUP with NTLMv2 or Kerberos in SPNEGO (see
//! `logon.rs`) and key derivation (MS-SMB2 3.2.4.2, 3.2.5.2, 3.2.5.3);
//! TREE_CONNECT on a session is `tree_connect.rs`.

use std::time::Duration;

use smb_proto::message::Empty;
use smb_proto::negotiate::{
    capabilities, dialect, security_mode, Cipher, NegotiateRequest, NegotiateResponse, SigningAlgorithm,
};
use smb_proto::session::{session_flags, SessionSetupRequest, SessionSetupResponse};
use smb_proto::{Command, NtStatus};

use smb_proto::create::FileId;
use smb_proto::ioctl::{IoctlRequest, IoctlResponse, FSCTL_VALIDATE_NEGOTIATE_INFO};

pub use crate::client_config::{ClientConfig, MAX_IO_SIZE};
use crate::connection::{Connection, Op};
use crate::crypto::{derive_keys, Cipherer, PreauthHash, Signer};
use crate::error::{Error, Result};
use crate::logon::Logon;

/// What NEGOTIATE and SESSION_SETUP settled on.
#[derive(Debug, Clone)]
pub struct Negotiated {
    /// Dialect revision (0x0300, 0x0302 or 0x0311).
    pub dialect: u16,
    /// Largest READ in bytes.
    pub max_read_size: u32,
    /// Largest WRITE in bytes.
    pub max_write_size: u32,
    /// Largest QUERY/IOCTL buffer in bytes.
    pub max_transact_size: u32,
    /// Signing algorithm in use, if the session is signed.
    pub signing: Option<SigningAlgorithm>,
    /// Whether every message is signed.
    pub sign_all: bool,
    /// Cipher available for encryption.
    pub cipher: Option<Cipher>,
    /// The whole session is encrypted.
    pub encrypt_all: bool,
    /// The server made this a guest session.
    pub is_guest: bool,
    /// Anonymous (null) session.
    pub is_anonymous: bool,
}

/// An authenticated session on one connection.
#[derive(Clone)]
pub struct Session {
    /// The connection carrying the session.
    pub conn: Connection,
    /// Negotiated parameters.
    pub negotiated: Negotiated,
    config: std::sync::Arc<ClientConfig>,
    /// When a pool should replace this session: three quarters into the
    /// life its Kerberos ticket had left at logon, since the server may end
    /// the session when the ticket ends. `None` for NTLM.
    renew_at: Option<std::time::Instant>,
    /// What NEGOTIATE said both ways, for FSCTL_VALIDATE_NEGOTIATE_INFO on
    /// 3.0 and 3.0.2 (`None` on 3.1.1, whose preauth hash covers it).
    validate: Option<std::sync::Arc<ValidateNegotiate>>,
}

/// Both sides of a NEGOTIATE, as FSCTL_VALIDATE_NEGOTIATE_INFO compares
/// them (MS-SMB2 2.2.31.4, 2.2.32.6).
struct ValidateNegotiate {
    /// What we sent: Capabilities, ClientGuid, SecurityMode, Dialects.
    capabilities: u32,
    guid: [u8; 16],
    security_mode: u16,
    dialects: Vec<u16>,
    /// What the server answered: Capabilities, ServerGuid, SecurityMode,
    /// DialectRevision.
    server: (u32, [u8; 16], u16, u16),
}

impl Session {
    /// Connects, negotiates, authenticates and derives keys.
    ///
    /// Errors: [`Error::Status`] with STATUS_LOGON_FAILURE for a bad
    /// password; [`Error::Protocol`] when the server offers nothing we
    /// support; transport errors.
    pub async fn connect(config: &ClientConfig) -> Result<Session> {
        let conn = Connection::open(&config.addr, config.connection.clone()).await?;
        match Self::setup(conn.clone(), config).await {
            Ok(s) => Ok(s),
            Err(e) => {
                conn.close();
                Err(e)
            }
        }
    }

    async fn setup(conn: Connection, config: &ClientConfig) -> Result<Session> {
        let mut preauth = PreauthHash::new();
        let mut sec_mode = security_mode::SIGNING_ENABLED;
        if config.require_signing {
            sec_mode |= security_mode::SIGNING_REQUIRED;
        }
        let client_caps = capabilities::LARGE_MTU | capabilities::ENCRYPTION;
        let client_guid: [u8; 16] = rand::random();
        let req = NegotiateRequest {
            dialects: config.dialects.clone(),
            security_mode: sec_mode,
            capabilities: client_caps,
            client_guid,
            salt: rand::random(),
            ciphers: vec![Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Aes128Ccm, Cipher::Aes256Ccm],
            signing: vec![SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac, SigningAlgorithm::HmacSha256],
        };
        let (resp, sent) = conn.call_captured(Op { body: &req, tree_id: 0 }).await?;
        let resp = resp.ok_or_status(&[])?;
        let neg = resp.body(NegotiateResponse::decode)?;
        if !config.dialects.contains(&neg.dialect) {
            return Err(Error::Protocol(format!("server chose dialect {:#06x}, which we did not offer", neg.dialect)));
        }
        let is_311 = neg.dialect == dialect::SMB311;
        if is_311 {
            if !neg.preauth_sha512 {
                return Err(Error::Protocol("server did not select SHA-512 preauth integrity".into()));
            }
            preauth.update(&sent);
            preauth.update(&resp.msg);
        }
        if neg.max_read_size < 4096 || neg.max_write_size < 4096 || neg.max_transact_size < 4096 {
            return Err(Error::Protocol(format!(
                "server limits too small: read {} write {} transact {}",
                neg.max_read_size, neg.max_write_size, neg.max_transact_size
            )));
        }
        let signing_alg =
            if is_311 { neg.signing.unwrap_or(SigningAlgorithm::AesCmac) } else { SigningAlgorithm::AesCmac };
        let cipher = if is_311 {
            neg.cipher
        } else if neg.capabilities & capabilities::ENCRYPTION != 0 {
            Some(Cipher::Aes128Ccm)
        } else {
            None
        };
        // 3.0 and 3.0.2 have no preauth hash: their NEGOTIATE is checked
        // afterwards with a signed FSCTL_VALIDATE_NEGOTIATE_INFO, so they
        // always sign (MS-SMB2 3.2.5.14.12).
        let sign_required = config.require_signing || neg.security_mode & security_mode::SIGNING_REQUIRED != 0;
        let sign_all = sign_required || !is_311;

        // SESSION_SETUP rounds.
        let (mut logon, mut token) = Logon::start(config, &neg.security_buffer).await?;
        let mut session_id = 0u64;
        let mut round = 0;
        let (final_resp, final_flags) = loop {
            round += 1;
            if round > 4 {
                return Err(Error::Protocol("SESSION_SETUP did not converge".into()));
            }
            let req = SessionSetupRequest { security_mode: sec_mode as u8, capabilities: 0, token: &token };
            {
                conn.inner.security.write().unwrap().session_id = session_id;
            }
            let (resp, sent) = conn.call_captured(Op { body: &req, tree_id: 0 }).await?;
            if is_311 {
                preauth.update(&sent);
            }
            let status = resp.status();
            if status == NtStatus::STATUS_MORE_PROCESSING_REQUIRED {
                if is_311 {
                    preauth.update(&resp.msg);
                }
                session_id = resp.header.session_id;
                let ss = resp.body(SessionSetupResponse::decode)?;
                token = logon.step(&ss.token)?;
                continue;
            }
            let resp = resp.ok_or_status(&[])?;
            let ss = resp.body(SessionSetupResponse::decode)?;
            logon.finish(&ss.token)?;
            break (resp, ss.session_flags);
        };
        session_id = final_resp.header.session_id;
        let is_guest = final_flags & session_flags::IS_GUEST != 0;
        let is_anonymous = final_flags & session_flags::IS_NULL != 0 || logon.is_anonymous();
        let has_credentials = logon.is_kerberos() || !(config.user.is_empty() && config.password.is_empty());
        if has_credentials && (is_guest || is_anonymous) {
            // A server that maps a bad password to guest, or an answer whose
            // flags were flipped on the way: either way there is no key to
            // sign with, and not the identity asked for.
            tracing::warn!(
                user = %config.user,
                "the SMB server answered with a guest or anonymous session although credentials were given; refusing it"
            );
            return Err(Error::Status { command: Command::SessionSetup, status: NtStatus::STATUS_LOGON_FAILURE });
        }
        let encrypt_all = final_flags & session_flags::ENCRYPT_DATA != 0 || config.require_encryption;

        let mut sec = crate::connection::Security { session_id, ..Default::default() };
        let mut signing = None;
        match logon.session_key() {
            Some(key) if !is_guest && !is_anonymous => {
                let keys = derive_keys(&key, neg.dialect, &preauth, cipher);
                let signer = Signer::new(signing_alg, &keys.signing);
                // The final SESSION_SETUP response is signed with the new key
                // (3.1.1 always; 3.0.x when either side requires signing). An
                // unsigned one is then refused, not skipped; otherwise on 3.0.x
                // the signed VALIDATE_NEGOTIATE_INFO checks the key.
                let mut msg = final_resp.msg.to_vec();
                let signed = final_resp.header.flags & smb_proto::header::flags::SIGNED != 0;
                if !signed && (is_311 || sign_required) {
                    return Err(Error::Integrity("final SESSION_SETUP response is not signed"));
                }
                if signed && !signer.verify(&mut msg) {
                    return Err(Error::Integrity("SESSION_SETUP response signature (key derivation mismatch?)"));
                }
                sec.signer = Some(signer);
                signing = Some(signing_alg);
                sec.cipher = cipher.map(|c| Cipherer::new(c, &keys));
            }
            _ => {
                if sign_all {
                    return Err(Error::SigningNeedsAccount);
                }
            }
        }
        if encrypt_all && sec.cipher.is_none() {
            return Err(Error::Protocol(
                "encryption is required (require_encryption, or the server's session flag) but the server \
                 offers no SMB encryption cipher (or gave no session key)"
                    .into(),
            ));
        }
        sec.sign_all = sign_all && sec.signer.is_some();
        sec.encrypt_all = encrypt_all;
        let negotiated = Negotiated {
            dialect: neg.dialect,
            max_read_size: neg.max_read_size.min(config.max_io_size),
            max_write_size: neg.max_write_size.min(config.max_io_size),
            max_transact_size: neg.max_transact_size.min(config.max_io_size),
            signing,
            sign_all: sec.sign_all,
            cipher: if sec.cipher.is_some() { cipher } else { None },
            encrypt_all,
            is_guest,
            is_anonymous,
        };
        *conn.inner.security.write().unwrap() = sec;
        tracing::debug!(?negotiated, "SMB session established");
        let validate = (!is_311 && signing.is_some()).then(|| {
            std::sync::Arc::new(ValidateNegotiate {
                capabilities: client_caps,
                guid: client_guid,
                security_mode: sec_mode,
                dialects: config.dialects.clone(),
                server: (neg.capabilities, neg.server_guid, neg.security_mode, neg.dialect),
            })
        });
        let renew_at = logon.ticket_lifetime().map(|left| std::time::Instant::now() + left - left / 4);
        Ok(Session { conn, negotiated, config: std::sync::Arc::new(config.clone()), renew_at, validate })
    }

    /// FSCTL_VALIDATE_NEGOTIATE_INFO on `tree_id` (MS-SMB2 3.2.5.14.12):
    /// the server repeats what it negotiated, in a signed answer, so a
    /// NEGOTIATE altered on the way (a downgrade) is found. With `encrypt`
    /// the request and so its answer are encrypted, which authenticates the
    /// answer instead of a signature. Fails closed: any error, an
    /// unauthenticated answer or a difference poisons the connection.
    async fn validate_negotiate(&self, tree_id: u32, encrypt: bool, v: &ValidateNegotiate) -> Result<()> {
        let mut input = Vec::with_capacity(24 + 2 * v.dialects.len());
        input.extend_from_slice(&v.capabilities.to_le_bytes());
        input.extend_from_slice(&v.guid);
        input.extend_from_slice(&v.security_mode.to_le_bytes());
        input.extend_from_slice(&(v.dialects.len() as u16).to_le_bytes());
        for d in &v.dialects {
            input.extend_from_slice(&d.to_le_bytes());
        }
        let req = IoctlRequest {
            ctl_code: FSCTL_VALIDATE_NEGOTIATE_INFO,
            file_id: FileId { persistent: u64::MAX, volatile: u64::MAX },
            input: &input,
            max_output: 24,
        };
        let fail = |why: &'static str| {
            let e = Error::Integrity(why);
            self.conn.poison(e.clone());
            e
        };
        let r = self.conn.call(Op { body: &req, tree_id }, encrypt).await?;
        if !encrypt && r.header.flags & smb_proto::header::flags::SIGNED == 0 {
            return Err(fail("VALIDATE_NEGOTIATE_INFO answer is not signed"));
        }
        if r.status() != NtStatus::STATUS_SUCCESS {
            return Err(fail("VALIDATE_NEGOTIATE_INFO failed"));
        }
        let out = r.body(IoctlResponse::decode)?.output;
        if out.len() < 24 {
            return Err(fail("VALIDATE_NEGOTIATE_INFO answer is short"));
        }
        let caps = u32::from_le_bytes(out[0..4].try_into().expect("4 bytes"));
        let guid: [u8; 16] = out[4..20].try_into().expect("16 bytes");
        let mode = u16::from_le_bytes([out[20], out[21]]);
        let dialect = u16::from_le_bytes([out[22], out[23]]);
        if (caps, guid, mode, dialect) != v.server {
            return Err(fail("VALIDATE_NEGOTIATE_INFO does not match the NEGOTIATE answer (downgrade?)"));
        }
        Ok(())
    }

    /// Checks a new tree's connection with FSCTL_VALIDATE_NEGOTIATE_INFO
    /// on 3.0 and 3.0.2 (3.1.1's preauth hash already covers it).
    ///
    /// Errors: the server's answer does not match the NEGOTIATE (a
    /// downgrade), or the IOCTL fails.
    pub(crate) async fn validate_tree(&self, tree_id: u32, encrypt: bool) -> Result<()> {
        match &self.validate {
            Some(v) => self.validate_negotiate(tree_id, encrypt, v).await,
            None => Ok(()),
        }
    }

    /// ECHO round trip (MS-SMB2 2.2.28): a liveness probe.
    pub async fn echo(&self) -> Result<()> {
        self.conn.call(Op { body: &Empty(Command::Echo), tree_id: 0 }, false).await?.ok_or_status(&[])?;
        Ok(())
    }

    /// LOGOFF (MS-SMB2 2.2.7); the connection is unusable afterwards.
    pub async fn logoff(&self) -> Result<()> {
        let r = self.conn.call(Op { body: &Empty(Command::Logoff), tree_id: 0 }, false).await;
        self.conn.close();
        r?.ok_or_status(&[])?;
        Ok(())
    }

    /// When this session should be replaced by a new logon (a Kerberos
    /// session, three quarters into its ticket's remaining life); `None`
    /// when it need never be.
    pub fn renew_at(&self) -> Option<std::time::Instant> {
        self.renew_at
    }

    /// The config this session was made from.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Default response deadline.
    pub fn request_timeout(&self) -> Duration {
        self.config.connection.request_timeout
    }
}
