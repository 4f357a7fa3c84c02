//! Which mechanism a SESSION_SETUP logs on with (MS-SMB2 3.2.5.3): NTLM
//! with the config's user and password, or Kerberos with an identity's
//! credential, chosen as [`SmbAuth`] says and as the server offers.

use smb_auth::kerberos::server_offers_kerberos;
use smb_auth::{KerberosClient, NtlmClient, NtlmCredentials, NtlmOptions};

use crate::client_config::ClientConfig;
pub use crate::client_config::SmbAuth;
use crate::error::{Error, Result};

/// One logon's mechanism.
pub(crate) enum Logon {
    Ntlm(NtlmClient),
    Kerberos(KerberosClient),
}

impl Logon {
    /// Picks and starts the mechanism for `config`. `server_token` is the
    /// NEGOTIATE response's security buffer (the server's NegTokenInit2).
    /// Starting Kerberos may wait on the KDC, so it runs on a blocking
    /// thread.
    ///
    /// Errors: [`Error::Auth`] when Kerberos is required and cannot start
    /// (the library's reason), or the server offers no Kerberos.
    pub(crate) async fn start(config: &ClientConfig, server_token: &[u8]) -> Result<(Logon, Vec<u8>)> {
        let (identity, required) = match &config.auth {
            SmbAuth::Ntlm => return Ok(Self::ntlm(config)),
            SmbAuth::Kerberos(identity) => (identity.clone(), true),
            SmbAuth::Negotiate(identity) => (identity.clone(), false),
        };
        // A server that sends no NegTokenInit2 leaves the choice to us
        // (MS-SPNG 3.2.5.2); one that lists mechanisms without Kerberos
        // cannot take a ticket.
        if !server_token.is_empty() && !server_offers_kerberos(server_token) {
            if required {
                return Err(Error::Auth(smb_auth::AuthError::Unsupported(
                    "Kerberos (the server offers only other mechanisms)",
                )));
            }
            tracing::debug!(server = %config.server_name, "the SMB server offers no Kerberos; logging on with NTLM");
            return Ok(Self::ntlm(config));
        }
        let target = config.spn();
        let offer_ntlm = !required;
        let id = identity.clone();
        let started = tokio::task::spawn_blocking(move || id.start(&target, offer_ntlm))
            .await
            .map_err(|e| Error::Protocol(format!("the Kerberos logon task failed: {e}")))?;
        match started {
            Ok(client) => {
                let token = client.initial_token();
                Ok((Logon::Kerberos(client), token))
            }
            Err(e) if !required => {
                // Once per identity at WARN: every connection of a pool
                // would say the same.
                if identity.first_fallback() {
                    tracing::warn!(server = %config.server_name, error = %e, "no Kerberos ticket; logging on with NTLM");
                } else {
                    tracing::debug!(server = %config.server_name, error = %e, "no Kerberos ticket; logging on with NTLM");
                }
                Ok(Self::ntlm(config))
            }
            Err(e) => Err(Error::Auth(e)),
        }
    }

    fn ntlm(config: &ClientConfig) -> (Logon, Vec<u8>) {
        let creds = if config.user.is_empty() && config.password.is_empty() {
            NtlmCredentials::anonymous()
        } else {
            NtlmCredentials::new(&config.user, &config.domain, &config.password)
        };
        let mut ntlm = NtlmClient::new(creds, NtlmOptions::default());
        let token = ntlm.initial_token();
        (Logon::Ntlm(ntlm), token)
    }

    /// The answer to a STATUS_MORE_PROCESSING_REQUIRED security buffer.
    pub(crate) fn step(&mut self, server_token: &[u8]) -> Result<Vec<u8>> {
        Ok(match self {
            Logon::Ntlm(c) => c.step(server_token)?,
            Logon::Kerberos(c) => c.step(server_token)?,
        })
    }

    /// Checks the STATUS_SUCCESS security buffer.
    pub(crate) fn finish(&mut self, server_token: &[u8]) -> Result<()> {
        match self {
            Logon::Ntlm(c) => c.finish(server_token)?,
            Logon::Kerberos(c) => c.finish(server_token)?,
        }
        Ok(())
    }

    /// The key signing and sealing derive from, once finished; `None` for
    /// an anonymous NTLM logon.
    pub(crate) fn session_key(&self) -> Option<Vec<u8>> {
        match self {
            Logon::Ntlm(c) => c.session_key().map(|k| k.to_vec()),
            Logon::Kerberos(c) => c.session_key().map(<[u8]>::to_vec),
        }
    }

    /// True for an anonymous NTLM logon.
    pub(crate) fn is_anonymous(&self) -> bool {
        matches!(self, Logon::Ntlm(c) if c.is_anonymous())
    }

    /// For a Kerberos logon, how long its service ticket was still valid.
    pub(crate) fn ticket_lifetime(&self) -> Option<std::time::Duration> {
        match self {
            Logon::Ntlm(_) => None,
            Logon::Kerberos(c) => c.ticket_lifetime(),
        }
    }

    /// What the session setup's last checks need of a finished logon.
    pub(crate) fn facts(&self) -> LogonFacts {
        LogonFacts {
            kerberos: self.is_kerberos(),
            anonymous: self.is_anonymous(),
            ticket_lifetime: self.ticket_lifetime(),
        }
    }

    /// True for a Kerberos logon.
    pub(crate) fn is_kerberos(&self) -> bool {
        matches!(self, Logon::Kerberos(_))
    }
}

/// What the logon says of itself once finished.
pub(crate) struct LogonFacts {
    pub(crate) kerberos: bool,
    pub(crate) anonymous: bool,
    pub(crate) ticket_lifetime: Option<std::time::Duration>,
}
