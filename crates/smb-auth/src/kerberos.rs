//! Kerberos inside SPNEGO for SMB2 SESSION_SETUP (MS-SMB2 3.2.5.3, MS-SPNG,
//! RFC 4178, RFC 4121). The Kerberos protocol itself (AS and TGS exchanges,
//! AP-REQ, AP-REP, keys) is MIT krb5's, through [`crate::gss`]; this file is
//! the SPNEGO glue and the credential an SMB identity keeps.
//!
//! Call order, as for NTLM: [`KerberosIdentity::start`] (blocking: it may ask
//! the KDC for a TGT and a service ticket) gives a [`KerberosClient`] whose
//! [`KerberosClient::initial_token`] goes in the first SESSION_SETUP. A
//! STATUS_MORE_PROCESSING_REQUIRED answer goes to [`KerberosClient::step`];
//! the STATUS_SUCCESS answer to [`KerberosClient::finish`], which checks the
//! server's AP-REP (mutual authentication). Then
//! [`KerberosClient::session_key`] is the key SMB signs and seals with.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::gss::{self, Context, Cred, GssError};
use crate::spnego::{NegState, NegTokenInit, NegTokenResp, NTLMSSP_OID};
use crate::AuthError;

pub use crate::gss::KRB5_OID;

/// DER content octets of 1.2.840.48018.1.2.2, the Kerberos OID Windows
/// offers first (MS-SPNG 3.1.5.1); servers treat it as [`KRB5_OID`].
pub const MS_KRB5_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];

/// A credential is acquired again when less than this is left of its TGT,
/// so that no logon starts with a ticket about to expire.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Where an identity's Kerberos credential comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum KerberosSource {
    /// A password: a TGT is asked for with it, and again when it expires.
    Password(String),
    /// A client keytab file: the TGT is made from its key, and renewed.
    Keytab(PathBuf),
    /// A credential cache someone else fills (`kinit`, a sidecar):
    /// `None` is the default cache (KRB5CCNAME, else MIT's default).
    Cache(Option<String>),
}

impl std::fmt::Debug for KerberosSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Password(_) => f.write_str("Password(<redacted>)"),
            Self::Keytab(path) => f.debug_tuple("Keytab").field(path).finish(),
            Self::Cache(name) => f.debug_tuple("Cache").field(name).finish(),
        }
    }
}

/// Who to log on as with Kerberos.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KerberosCredentials {
    /// The client principal, `user` or `user@REALM` (no realm: the default
    /// realm). `None` takes the keytab's first or the cache's principal.
    pub principal: Option<String>,
    /// Where the credential comes from.
    pub source: KerberosSource,
}

/// One SMB identity's Kerberos credential, shared by every connection of its
/// pool: acquired on first use and again once its TGT nears its end or the
/// library reports it expired.
pub struct KerberosIdentity {
    creds: KerberosCredentials,
    cred: Mutex<Option<Held>>,
    /// Set once a logon of this identity fell back to NTLM.
    fell_back: std::sync::atomic::AtomicBool,
}

/// The credential in use, and the lifetime of the first service ticket it
/// gave: the ticket a new logon would reuse is judged against it.
struct Held {
    cred: Arc<Cred>,
    full: Option<Duration>,
}

impl std::fmt::Debug for KerberosIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KerberosIdentity").field("creds", &self.creds).finish_non_exhaustive()
    }
}

impl KerberosIdentity {
    /// An identity for `creds`; nothing is asked of the KDC until
    /// [`Self::start`].
    pub fn new(creds: KerberosCredentials) -> Self {
        Self { creds, cred: Mutex::new(None), fell_back: Default::default() }
    }

    /// True the first time it is called: the first NTLM fallback of this
    /// identity is worth a warning, the pool's other connections' are not.
    pub fn first_fallback(&self) -> bool {
        !self.fell_back.swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// The credential and the lifetime its first service ticket had
    /// (`None`: acquired just now), acquiring it now if there is none, if
    /// `renew`, or if its TGT has less than a minute left. A new credential
    /// starts from a new in-memory cache, so its tickets are new too.
    fn cred(&self, renew: bool) -> Result<(Arc<Cred>, Option<Duration>), AuthError> {
        let mut slot = self.cred.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = slot.as_ref().filter(|_| !renew) {
            if held.cred.lifetime().is_ok_and(|left| left >= REFRESH_MARGIN) {
                return Ok((held.cred.clone(), held.full));
            }
        }
        let principal = self.creds.principal.as_deref();
        let cache = format!("MEMORY:smbgate-{:016x}", rand::random::<u64>());
        let source = match &self.creds.source {
            KerberosSource::Password(pw) => gss::Source::Password(pw),
            KerberosSource::Keytab(path) => gss::Source::Keytab {
                keytab: path.to_str().ok_or_else(|| kerberos("keytab path", "is not UTF-8".into()))?,
                cache: &cache,
            },
            KerberosSource::Cache(name) => gss::Source::Cache(name.as_deref()),
        };
        let cred = Arc::new(Cred::acquire(principal, source).map_err(|e| gss_error("acquiring a credential", e))?);
        *slot = Some(Held { cred: cred.clone(), full: None });
        Ok((cred, None))
    }

    /// Notes the lifetime of the first service ticket `cred` gave.
    fn note_full_lifetime(&self, cred: &Arc<Cred>, full: Duration) {
        let mut slot = self.cred.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = slot.as_mut().filter(|h| Arc::ptr_eq(&h.cred, cred)) {
            held.full.get_or_insert(full);
        }
    }

    /// Starts a logon to the service principal `target` (`cifs/host`, or
    /// `cifs/host@REALM`), offering Kerberos and, with `offer_ntlm`, NTLM
    /// after it. Blocks while MIT talks to the KDC.
    ///
    /// Errors: [`AuthError::Kerberos`] with the library's words: no KDC, a
    /// wrong password ("Preauthentication failed"), clock skew, an unknown
    /// service principal, an expired or revoked account.
    ///
    /// A service ticket with less than half of its first lifetime left is
    /// not reused: the credential is acquired again, so that a logon made
    /// to replace a session before its ticket ends gets a new one.
    pub fn start(&self, target: &str, offer_ntlm: bool) -> Result<KerberosClient, AuthError> {
        let (mut cred, mut full) = self.cred(false)?;
        let mut started = Context::start(&cred, target);
        let worn = |ctx: &Context, full: Option<Duration>| full.is_some_and(|full| ctx.lifetime() < full / 2);
        let stale = match &started {
            Err(e) => e.is_expired(),
            Ok((ctx, _)) => worn(ctx, full),
        };
        if stale {
            (cred, full) = self.cred(true)?;
            started = Context::start(&cred, target);
        }
        let (ctx, ap_req) = started.map_err(|e| gss_error("getting a ticket", e))?;
        let lifetime = Some(ctx.lifetime()).filter(|l| !l.is_zero());
        if let (None, Some(l)) = (full, lifetime) {
            self.note_full_lifetime(&cred, l);
        }
        let mut mech_types = vec![MS_KRB5_OID.to_vec(), KRB5_OID.to_vec()];
        if offer_ntlm {
            mech_types.push(NTLMSSP_OID.to_vec());
        }
        Ok(KerberosClient { ctx, cred, mech_types, ap_req, key: None, lifetime })
    }
}

/// True when a server's NegTokenInit2 (the NEGOTIATE response's security
/// buffer, MS-SPNG 3.2.5.2) offers Kerberos. An empty or undecodable buffer
/// offers nothing.
pub fn server_offers_kerberos(negotiate_token: &[u8]) -> bool {
    NegTokenInit::decode(negotiate_token)
        .is_ok_and(|init| init.mech_types.iter().any(|m| m == KRB5_OID || m == MS_KRB5_OID))
}

/// One Kerberos logon in SPNEGO, from the AP-REQ to the checked AP-REP.
pub struct KerberosClient {
    ctx: Context,
    cred: Arc<Cred>,
    mech_types: Vec<Vec<u8>>,
    ap_req: Vec<u8>,
    key: Option<Vec<u8>>,
    lifetime: Option<Duration>,
}

impl std::fmt::Debug for KerberosClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KerberosClient").field("complete", &self.ctx.is_complete()).finish_non_exhaustive()
    }
}

impl KerberosClient {
    /// The first SESSION_SETUP security buffer: a NegTokenInit offering
    /// Kerberos (Microsoft's OID, then the standard one, then NTLMSSP if
    /// asked) with the AP-REQ as the optimistic mechToken (RFC 4178 4.2.1).
    pub fn initial_token(&self) -> Vec<u8> {
        NegTokenInit { mech_types: self.mech_types.clone(), mech_token: Some(self.ap_req.clone()) }.encode()
    }

    /// Answers a NegTokenResp sent with STATUS_MORE_PROCESSING_REQUIRED:
    /// checks the AP-REP it may carry and returns a NegTokenResp holding this
    /// side's mechListMIC (RFC 4178 5), which is what a server asks for when
    /// it wants another leg.
    ///
    /// Errors: [`AuthError::Rejected`]; [`AuthError::NotKerberos`] if the
    /// server chose another mechanism; [`AuthError::Missing`] if no AP-REP
    /// came; [`AuthError::MicMismatch`]; [`AuthError::Kerberos`] for an AP-REP
    /// that does not verify (or a KRB-ERROR in its place).
    pub fn step(&mut self, server_token: &[u8]) -> Result<Vec<u8>, AuthError> {
        let resp = NegTokenResp::decode(server_token)?;
        self.absorb(&resp)?;
        let mic = self.ctx.get_mic(&self.mech_type_list()).map_err(|e| gss_error("signing the mechListMIC", e))?;
        Ok(NegTokenResp { mech_list_mic: Some(mic), ..NegTokenResp::default() }.encode())
    }

    /// Checks the server's last NegTokenResp (sent with STATUS_SUCCESS): the
    /// AP-REP must have been checked by now (mutual authentication), and a
    /// mechListMIC, if sent, must verify. Then the session key is known.
    ///
    /// Errors: as [`Self::step`]; [`AuthError::Missing`] ("AP-REP") when the
    /// server never proved it holds the service key.
    pub fn finish(&mut self, server_token: &[u8]) -> Result<(), AuthError> {
        if !server_token.is_empty() {
            self.absorb(&NegTokenResp::decode_final(server_token)?)?;
        }
        if !self.ctx.is_complete() {
            return Err(AuthError::Missing("AP-REP"));
        }
        let key = self.ctx.session_key().map_err(|e| gss_error("reading the session key", e))?;
        self.key = Some(key);
        Ok(())
    }

    fn absorb(&mut self, resp: &NegTokenResp) -> Result<(), AuthError> {
        if resp.neg_state == Some(NegState::Reject) {
            return Err(AuthError::Rejected);
        }
        if resp.supported_mech.as_deref().is_some_and(|m| m != KRB5_OID && m != MS_KRB5_OID) {
            return Err(AuthError::NotKerberos);
        }
        if let Some(token) = resp.response_token.as_deref().filter(|_| !self.ctx.is_complete()) {
            self.ctx.step(&self.cred, token).map_err(|e| gss_error("checking the server's AP-REP", e))?;
        }
        if let Some(mic) = &resp.mech_list_mic {
            if !self.ctx.is_complete() {
                return Err(AuthError::Missing("AP-REP"));
            }
            self.ctx.verify_mic(&self.mech_type_list(), mic).map_err(|_| AuthError::MicMismatch)?;
        }
        Ok(())
    }

    fn mech_type_list(&self) -> Vec<u8> {
        NegTokenInit { mech_types: self.mech_types.clone(), mech_token: None }.mech_type_list()
    }

    /// How long the service ticket this logon used was still valid when
    /// the logon began; a server may end the SMB session then (Samba
    /// does), so a long-lived connection is replaced before.
    pub fn ticket_lifetime(&self) -> Option<Duration> {
        self.lifetime
    }

    /// The GSS session key (the acceptor's subkey; 16 bytes for AES-128,
    /// 32 for AES-256) once [`Self::finish`] succeeded. MS-SMB2 3.2.5.3.1
    /// takes its first 16 bytes as Session.SessionKey and the whole as
    /// Session.FullSessionKey.
    pub fn session_key(&self) -> Option<&[u8]> {
        self.key.as_deref()
    }
}

fn gss_error(what: &'static str, e: GssError) -> AuthError {
    kerberos(what, e.message)
}

fn kerberos(what: &'static str, message: String) -> AuthError {
    AuthError::Kerberos { what, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(mechs: &[&[u8]]) -> Vec<u8> {
        NegTokenInit { mech_types: mechs.iter().map(|m| m.to_vec()).collect(), mech_token: None }.encode()
    }

    #[test]
    fn a_server_offers_kerberos_under_either_oid() {
        assert!(server_offers_kerberos(&offer(&[MS_KRB5_OID, KRB5_OID, NTLMSSP_OID])));
        assert!(server_offers_kerberos(&offer(&[NTLMSSP_OID, KRB5_OID])));
        assert!(server_offers_kerberos(&offer(&[MS_KRB5_OID])));
    }

    #[test]
    fn nothing_or_ntlm_alone_or_garbage_offers_no_kerberos() {
        assert!(!server_offers_kerberos(&offer(&[NTLMSSP_OID])));
        assert!(!server_offers_kerberos(&[]));
        assert!(!server_offers_kerberos(&[0x60, 0x03, 0x06, 0x01]));
    }

    #[test]
    fn a_password_never_shows_in_debug_output() {
        let creds =
            KerberosCredentials { principal: Some("alice".into()), source: KerberosSource::Password("hunter2".into()) };
        let shown = format!("{:?}", KerberosIdentity::new(creds));
        assert!(shown.contains("alice") && !shown.contains("hunter2"), "{shown}");
    }
}
