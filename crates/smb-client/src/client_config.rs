//! How to reach and log on to a server: the address, the account, the
//! dialects and protections to ask for, and the logon mechanism
//! ([`SmbAuth`]). Read by `session` (NEGOTIATE, SESSION_SETUP) and
//! `logon` (which mechanism), so it depends on neither.

use std::sync::Arc;

use smb_auth::KerberosIdentity;
use smb_proto::negotiate::dialect;

use crate::connection::ConnectionOptions;

/// Largest READ/WRITE we issue, whatever the server allows (bytes).
pub const MAX_IO_SIZE: u32 = 8 << 20;

/// How SESSION_SETUP authenticates.
#[derive(Debug, Clone, Default)]
pub enum SmbAuth {
    /// NTLMv2 with the config's user, domain and password (empty user and
    /// password: anonymous).
    #[default]
    Ntlm,
    /// Kerberos only: a failure is an error, never a logon with NTLM.
    Kerberos(Arc<KerberosIdentity>),
    /// Kerberos when the server offers it and a ticket can be had, as
    /// Windows does; otherwise NTLM with the config's user and password.
    Negotiate(Arc<KerberosIdentity>),
}

/// How to reach and authenticate to a server.
#[derive(Clone)]
pub struct ClientConfig {
    /// `host:port` to connect to.
    pub addr: String,
    /// Server name for UNC paths (`\\server\share`).
    pub server_name: String,
    /// User name; empty with an empty password means anonymous.
    pub user: String,
    /// Password.
    pub password: String,
    /// NTLM domain (may be empty).
    pub domain: String,
    /// Dialects offered, lowest to highest. SMB1 is never offered.
    pub dialects: Vec<u16>,
    /// Sign every request even if the server does not require it.
    pub require_signing: bool,
    /// Encrypt every request (SMB 3.x) even if the server does not require it.
    pub require_encryption: bool,
    /// Largest READ/WRITE in bytes (clamped to the server's limits).
    pub max_io_size: u32,
    /// Socket and request deadlines.
    pub connection: ConnectionOptions,
    /// How SESSION_SETUP authenticates (default: NTLM with `user`).
    pub auth: SmbAuth,
    /// The server's Kerberos service principal; `None`: `cifs/` and
    /// `server_name`, as Windows asks for it.
    pub spn: Option<String>,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("addr", &self.addr)
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("dialects", &self.dialects)
            .field("require_signing", &self.require_signing)
            .field("require_encryption", &self.require_encryption)
            .field("auth", &self.auth)
            .field("spn", &self.spn)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// A config for `addr` with user and password, offering 3.0, 3.0.2
    /// and 3.1.1.
    pub fn new(addr: &str, user: &str, password: &str) -> ClientConfig {
        let server_name = addr.rsplit_once(':').map(|(h, _)| h).unwrap_or(addr).trim_matches(['[', ']']).to_string();
        ClientConfig {
            addr: addr.to_string(),
            server_name,
            user: user.to_string(),
            password: password.to_string(),
            domain: String::new(),
            dialects: vec![dialect::SMB300, dialect::SMB302, dialect::SMB311],
            require_signing: false,
            require_encryption: false,
            max_io_size: MAX_IO_SIZE,
            connection: ConnectionOptions::default(),
            auth: SmbAuth::Ntlm,
            spn: None,
        }
    }

    /// This config pointed at `host` on the same port: its address and
    /// server name (for UNC paths and the default Kerberos principal); the
    /// logon, and so a shared Kerberos credential, stays.
    pub fn on_server(&self, host: &str) -> ClientConfig {
        let port = self.addr.rsplit_once(':').map_or("445", |(_, p)| p);
        ClientConfig { addr: format!("{host}:{port}"), server_name: host.to_string(), ..self.clone() }
    }

    /// The Kerberos service principal to ask a ticket for: [`Self::spn`],
    /// else `cifs/<server_name>`.
    pub fn spn(&self) -> String {
        self.spn.clone().unwrap_or_else(|| format!("cifs/{}", self.server_name))
    }
}
