//! An SMB session on one connection: set up by NEGOTIATE (with SMB 3.1.1
//! contexts and the preauth integrity hash), SESSION_SETUP with NTLMv2 or
//! Kerberos in SPNEGO (see `logon.rs`) and key derivation (MS-SMB2
//! 3.2.4.2, 3.2.5.2, 3.2.5.3), whose states are `handshake.rs`; the
//! negotiate validation of 3.0.x trees, ECHO and LOGOFF. TREE_CONNECT on
//! a session is `tree_connect.rs`.

use std::time::Duration;

use smb_proto::message::Empty;
use smb_proto::negotiate::NegotiateResponse;
use smb_proto::{Command, NtStatus};

use smb_proto::create::FileId;
use smb_proto::ioctl::{IoctlRequest, IoctlResponse, FSCTL_VALIDATE_NEGOTIATE_INFO};

pub use crate::client_config::{ClientConfig, MAX_IO_SIZE};
use crate::connection::{Connection, Op};
use crate::error::{Error, Result};
pub use crate::handshake::Negotiated;
use crate::handshake::{AfterSetup, Established, ExpectNegotiate, SetupAnswer, ValidateNegotiate};
use crate::logon::Logon;

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

    /// Drives the setup's states (`handshake`) over `conn`: NEGOTIATE,
    /// the logon's SESSION_SETUP rounds, and the keys installed on the
    /// connection.
    async fn setup(conn: Connection, config: &ClientConfig) -> Result<Session> {
        let negotiate = ExpectNegotiate::new(config);
        let (resp, sent) = conn.call_captured(Op { body: negotiate.request(), tree_id: 0 }).await?;
        let resp = resp.ok_or_status(&[])?;
        let neg = resp.body(NegotiateResponse::decode)?;
        let logon_start = negotiate.answer(&sent, &resp.msg, neg)?;
        let (logon, token) = Logon::start(config, logon_start.security_buffer()).await?;
        let mut setup = logon_start.started(logon, token);
        let done = loop {
            let (resp, sent) = {
                let (req, session_id) = setup.request();
                conn.set_session_id(session_id);
                conn.call_captured(Op { body: &req, tree_id: 0 }).await?
            };
            let answer = SetupAnswer { status: resp.status(), session_id: resp.header.session_id, msg: &resp.msg };
            match setup.answer(&sent, answer, config)? {
                AfterSetup::More(next) => setup = *next,
                AfterSetup::Done(done) => break *done,
            }
        };
        let Established { security, negotiated, validate, ticket_lifetime } = done;
        conn.install_security(security);
        tracing::debug!(?negotiated, "SMB session established");
        let renew_at = ticket_lifetime.map(|left| std::time::Instant::now() + left - left / 4);
        let validate = validate.map(std::sync::Arc::new);
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
