//! The client side of NTLMSSP-in-SPNEGO as a state machine: NegTokenInit
//! carrying NEGOTIATE, then NegTokenResp carrying AUTHENTICATE, then the
//! server's final NegTokenResp. It only turns bytes into bytes; the SMB
//! layer moves them in SESSION_SETUP requests and responses.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::crypto::{mac, seal_key, sign_key, Direction, Rc4};
use crate::flags;
use crate::ntlm::{authenticate, negotiate_message, AuthInputs};
use crate::spnego::{NegState, NegTokenInit, NegTokenResp, NTLMSSP_OID};
use crate::AuthError;

/// Who to authenticate as. An empty `user` and `password` means anonymous
/// (MS-NLMP 3.3.2): no NT response, an LM response of one zero byte,
/// NTLMSSP_NEGOTIATE_ANONYMOUS, and no session key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct NtlmCredentials {
    /// Account name; upper-cased for NTOWFv2 (MS-NLMP 3.3.2).
    pub user: String,
    /// Account domain, used as given; may be empty.
    pub domain: String,
    /// Plain-text password.
    pub password: String,
    /// This machine's NetBIOS name, sent as Workstation; may be empty.
    pub workstation: String,
}

impl NtlmCredentials {
    /// Credentials for `user` in `domain` with `password` and no workstation.
    pub fn new(user: &str, domain: &str, password: &str) -> Self {
        Self { user: user.into(), domain: domain.into(), password: password.into(), workstation: String::new() }
    }

    /// Anonymous (null session) credentials: every field empty.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// True when user and password are both empty (MS-NLMP 3.3.2).
    pub fn is_anonymous(&self) -> bool {
        self.user.is_empty() && self.password.is_empty()
    }
}

impl std::fmt::Debug for NtlmCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NtlmCredentials")
            .field("user", &self.user)
            .field("domain", &self.domain)
            .field("password", &"<redacted>")
            .field("workstation", &self.workstation)
            .finish()
    }
}

/// Knobs for an exchange. `Default` is right for production; tests inject
/// the random and time inputs to make the output reproducible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NtlmOptions {
    /// Request NTLMSSP_NEGOTIATE_SEAL (MS-NLMP 2.2.2.5). Default true, as
    /// Windows clients do; SMB itself never uses NTLM sealing.
    pub seal: bool,
    /// The 8-byte ClientChallenge; `None` draws it from `rand`.
    pub client_challenge: Option<[u8; 8]>,
    /// FILETIME (100 ns ticks since 1601) for the NTLMv2 blob when the server
    /// sends no MsvAvTimestamp; `None` reads the system clock.
    pub timestamp: Option<u64>,
    /// The ExportedSessionKey sent under key exchange; `None` draws it from
    /// `rand`.
    pub exported_session_key: Option<[u8; 16]>,
    /// The VERSION structure sent in NEGOTIATE and AUTHENTICATE
    /// (MS-NLMP 2.2.2.10). Default: 10.0 build 20348, NTLM revision 15.
    pub version: [u8; 8],
    /// Service principal name (e.g. `cifs/server.example`) sent as
    /// MsvAvTargetName (MS-NLMP 2.2.2.1), for servers that validate it.
    pub target_spn: Option<String>,
}

impl Default for NtlmOptions {
    fn default() -> Self {
        Self {
            seal: true,
            client_challenge: None,
            timestamp: None,
            exported_session_key: None,
            version: [10, 0, 0x7c, 0x4f, 0, 0, 0, 0x0f],
            target_spn: None,
        }
    }
}

/// The flags this client offers in NEGOTIATE (MS-NLMP 3.1.5.1.1), SEAL aside.
const CLIENT_FLAGS: u32 = flags::UNICODE
    | flags::REQUEST_TARGET
    | flags::SIGN
    | flags::NTLM
    | flags::ALWAYS_SIGN
    | flags::EXTENDED_SESSIONSECURITY
    | flags::TARGET_INFO
    | flags::VERSION
    | flags::NEGOTIATE_128
    | flags::KEY_EXCH
    | flags::NEGOTIATE_56;

#[derive(Debug)]
enum State {
    Initial,
    NegotiateSent { negotiate: Vec<u8> },
    AuthenticateSent,
    Done,
    Failed,
}

/// An NTLMv2 client authenticator wrapped in SPNEGO, for SMB2 SESSION_SETUP
/// (MS-SMB2 3.2.5.3, MS-SPNG, MS-NLMP). Holds no I/O; see the crate docs for
/// the call order.
#[derive(Debug)]
pub struct NtlmClient {
    creds: NtlmCredentials,
    options: NtlmOptions,
    state: State,
    /// NegotiateFlags of the AUTHENTICATE message, once sent.
    flags: u32,
    session_key: Option<[u8; 16]>,
}

impl NtlmClient {
    /// A client for `creds`; nothing is computed until [`Self::initial_token`].
    pub fn new(creds: NtlmCredentials, options: NtlmOptions) -> Self {
        Self { creds, options, state: State::Initial, flags: 0, session_key: None }
    }

    fn client_flags(&self) -> u32 {
        CLIENT_FLAGS | if self.options.seal { flags::SEAL } else { 0 }
    }

    /// The first SESSION_SETUP security buffer: a GSS-API InitialContextToken
    /// holding a NegTokenInit that offers only NTLMSSP, with an NTLM
    /// NEGOTIATE_MESSAGE as the optimistic mechToken (RFC 4178 4.2.1,
    /// MS-NLMP 3.1.5.1.1). Calling it again restarts the exchange.
    pub fn initial_token(&mut self) -> Vec<u8> {
        let negotiate = negotiate_message(self.client_flags(), &self.options.version);
        let token =
            NegTokenInit { mech_types: vec![NTLMSSP_OID.to_vec()], mech_token: Some(negotiate.clone()) }.encode();
        self.state = State::NegotiateSent { negotiate };
        self.session_key = None;
        token
    }

    /// Answers the server's NegTokenResp carrying a CHALLENGE_MESSAGE
    /// (RFC 4178 4.2.2, MS-NLMP 3.1.5.1.2) with a NegTokenResp carrying the
    /// NTLMv2 AUTHENTICATE_MESSAGE. When the server sent MsvAvTimestamp the
    /// message carries a MIC, and the reply then also carries a mechListMIC
    /// (RFC 4178 5), which Samba requires in that case.
    ///
    /// Errors: [`AuthError::OutOfOrder`] unless called once after
    /// `initial_token`; [`AuthError::Rejected`] for negState reject;
    /// [`AuthError::UnexpectedState`] for accept-completed or request-mic;
    /// [`AuthError::NotNtlm`] if another mechanism was selected;
    /// [`AuthError::Missing`] without a responseToken;
    /// [`AuthError::Unsupported`] if the server refused UNICODE; and the
    /// decoding errors for a malformed token or CHALLENGE_MESSAGE. After an
    /// error the client is spent.
    pub fn step(&mut self, server_token: &[u8]) -> Result<Vec<u8>, AuthError> {
        let negotiate = match std::mem::replace(&mut self.state, State::Failed) {
            State::NegotiateSent { negotiate } => negotiate,
            _ => return Err(AuthError::OutOfOrder("step() must follow initial_token() once")),
        };
        let resp = NegTokenResp::decode(server_token)?;
        match resp.neg_state {
            Some(NegState::AcceptIncomplete) | None => {}
            Some(NegState::Reject) => return Err(AuthError::Rejected),
            Some(other) => return Err(AuthError::UnexpectedState(other as u8)),
        }
        if resp.supported_mech.as_deref().is_some_and(|m| m != NTLMSSP_OID) {
            return Err(AuthError::NotNtlm);
        }
        let challenge = resp.response_token.ok_or(AuthError::Missing("responseToken"))?;

        let o = &self.options;
        let auth = authenticate(
            &AuthInputs {
                user: &self.creds.user,
                domain: &self.creds.domain,
                password: &self.creds.password,
                workstation: &self.creds.workstation,
                anonymous: self.creds.is_anonymous(),
                client_flags: self.client_flags(),
                version: o.version,
                client_challenge: o.client_challenge.unwrap_or_else(rand::random),
                timestamp: o.timestamp.unwrap_or_else(filetime_now),
                random_session_key: o.exported_session_key.unwrap_or_else(rand::random),
                target_spn: o.target_spn.as_deref(),
            },
            &negotiate,
            &challenge,
        )?;
        self.flags = auth.flags;
        self.session_key = auth.session_key;
        let mech_list_mic = if auth.has_mic { self.mech_list_mic(Direction::ClientToServer) } else { None };
        self.state = State::AuthenticateSent;
        Ok(NegTokenResp {
            response_token: Some(auth.message),
            mech_list_mic: mech_list_mic.map(|m| m.to_vec()),
            ..NegTokenResp::default()
        }
        .encode())
    }

    /// Checks the server's last NegTokenResp, sent with STATUS_SUCCESS: its
    /// negState must be accept-completed (or absent), and a mechListMIC, if
    /// present, must verify (RFC 4178 5). An empty token is accepted, since
    /// SMB servers may send no security buffer on success.
    ///
    /// Errors: [`AuthError::OutOfOrder`] unless called once after `step`;
    /// [`AuthError::Rejected`]; [`AuthError::UnexpectedState`];
    /// [`AuthError::MicMismatch`]; and the decoding errors.
    pub fn finish(&mut self, server_token: &[u8]) -> Result<(), AuthError> {
        if !matches!(std::mem::replace(&mut self.state, State::Failed), State::AuthenticateSent) {
            return Err(AuthError::OutOfOrder("finish() must follow step() once"));
        }
        if !server_token.is_empty() {
            let resp = Self::parse_final(server_token)?;
            if let (Some(got), Some(want)) = (&resp.mech_list_mic, self.mech_list_mic(Direction::ServerToClient)) {
                if got[..] != want[..] {
                    return Err(AuthError::MicMismatch);
                }
            }
        }
        self.state = State::Done;
        Ok(())
    }

    /// Decodes a final NegTokenResp and checks only its negState:
    /// accept-completed (0) or absent is success, reject (2) is
    /// [`AuthError::Rejected`], anything else [`AuthError::UnexpectedState`]
    /// (RFC 4178 4.2.2). Returns the token for any further inspection.
    pub fn parse_final(server_token: &[u8]) -> Result<NegTokenResp, AuthError> {
        NegTokenResp::decode_final(server_token)
    }

    /// The ExportedSessionKey (MS-NLMP 3.1.5.1.2) once `step` succeeded: the
    /// SMB Session.SessionKey from which signing and encryption keys are
    /// derived (MS-SMB2 3.2.5.3.1). `None` before that and for anonymous.
    pub fn session_key(&self) -> Option<[u8; 16]> {
        self.session_key
    }

    /// True when authenticating as anonymous (see [`NtlmCredentials`]).
    pub fn is_anonymous(&self) -> bool {
        self.creds.is_anonymous()
    }

    /// The NegotiateFlags both sides agreed to, as sent in AUTHENTICATE
    /// (MS-NLMP 2.2.2.5); 0 before `step`.
    pub fn negotiated_flags(&self) -> u32 {
        self.flags
    }

    /// The NTLM signature over the MechTypeList this client offered, with the
    /// keys of direction `dir` and sequence number 0 (RFC 4178 5,
    /// MS-NLMP 3.4.4.2). `None` without a session key or extended session
    /// security.
    fn mech_list_mic(&self, dir: Direction) -> Option<[u8; 16]> {
        let key = self.session_key?;
        if self.flags & flags::EXTENDED_SESSIONSECURITY == 0 {
            return None;
        }
        let mut seal = (self.flags & flags::KEY_EXCH != 0).then(|| Rc4::new(&seal_key(&key, self.flags, dir)));
        let list = NegTokenInit { mech_types: vec![NTLMSSP_OID.to_vec()], mech_token: None }.mech_type_list();
        Some(mac(&sign_key(&key, dir), seal.as_mut(), 0, &list))
    }
}

/// The system time as a Windows FILETIME (MS-DTYP 2.3.3).
fn filetime_now() -> u64 {
    let since_unix = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (since_unix.as_secs() + 11_644_473_600) * 10_000_000 + u64::from(since_unix.subsec_nanos() / 100)
}

#[cfg(test)]
#[path = "client_test.rs"]
mod tests;
