//! The few GSS-API calls Kerberos logons need (RFC 2744 and MIT's
//! extensions), over the system's MIT krb5 library. Every foreign call and
//! every raw handle lives here; [`crate::kerberos`] sees owned types that
//! release what they hold when dropped.
//!
//! Calls that acquire credentials or start a context may talk to the KDC, so
//! they block: callers run them off the async executor.
#![allow(unsafe_code)]

use std::ffi::{c_void, CString};
use std::ptr;
use std::time::Duration;

use libgssapi_sys as sys;

/// What went wrong, in the words of the mechanism (`gss_display_status`):
/// "Preauthentication failed", "Clock skew too great", "Cannot find KDC for
/// realm ...".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GssError {
    /// The GSS major status (RFC 2744 3.9.1).
    pub major: u32,
    /// The mechanism's minor status (a krb5 error code for Kerberos).
    pub minor: u32,
    /// Both statuses as text, joined with ": ".
    pub message: String,
}

impl GssError {
    /// True for GSS_S_CREDENTIALS_EXPIRED (RFC 2744 3.9.1) or a krb5 "ticket
    /// expired" minor status: the credential must be acquired again.
    pub fn is_expired(&self) -> bool {
        const CREDENTIALS_EXPIRED: u32 = 11 << 16;
        // KRB5KRB_AP_ERR_TKT_EXPIRED (krb5.h: ERROR_TABLE_BASE_krb5 + 32).
        const TKT_EXPIRED: u32 = 0x96c7_3a20;
        self.major & 0x00ff_0000 == CREDENTIALS_EXPIRED || self.minor == TKT_EXPIRED
    }
}

/// DER content octets of the Kerberos V5 mechanism, 1.2.840.113554.1.2.2
/// (RFC 1964 1).
pub const KRB5_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// 1.2.840.113554.1.2.2.1, GSS_KRB5_NT_PRINCIPAL_NAME (RFC 1964 2.1.1).
const KRB5_PRINCIPAL_NAME_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x01];
/// 1.2.840.113554.1.2.2.5.5, MIT's GSS_C_INQ_SSPI_SESSION_KEY: the context's
/// session key, the acceptor's subkey when it sent one (what SMB keys on).
const INQ_SESSION_KEY_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x05, 0x05];

const GSS_C_INITIATE: i32 = 1;
const GSS_C_GSS_CODE: i32 = 1;
const GSS_C_MECH_CODE: i32 = 2;
const GSS_S_COMPLETE: u32 = 0;
const GSS_S_CONTINUE_NEEDED: u32 = 1;

fn oid(bytes: &'static [u8]) -> sys::gss_OID_desc {
    sys::gss_OID_desc { length: bytes.len() as u32, elements: bytes.as_ptr() as *mut c_void }
}

fn buffer(bytes: &[u8]) -> sys::gss_buffer_desc {
    sys::gss_buffer_desc { length: bytes.len(), value: bytes.as_ptr() as *mut c_void }
}

/// Copies a buffer the library allocated, then releases it.
fn take_buffer(mut buf: sys::gss_buffer_desc) -> Vec<u8> {
    let out = if buf.value.is_null() || buf.length == 0 {
        Vec::new()
    } else {
        // SAFETY: the library gave `length` readable bytes at `value`.
        unsafe { std::slice::from_raw_parts(buf.value as *const u8, buf.length) }.to_vec()
    };
    let mut minor = 0;
    // SAFETY: `buf` came from the library and is released once.
    unsafe { sys::gss_release_buffer(&mut minor, &mut buf) };
    out
}

fn status_text(code: u32, kind: i32) -> String {
    let mut words = Vec::new();
    let mut context: sys::OM_uint32 = 0;
    let mut mech = oid(KRB5_OID);
    for _ in 0..8 {
        let mut minor = 0;
        let mut out = sys::gss_buffer_desc { length: 0, value: ptr::null_mut() };
        // SAFETY: plain out-parameters; `out` is released by take_buffer.
        let major = unsafe { sys::gss_display_status(&mut minor, code, kind, &mut mech, &mut context, &mut out) };
        if major != GSS_S_COMPLETE {
            break;
        }
        words.push(String::from_utf8_lossy(&take_buffer(out)).into_owned());
        if context == 0 {
            break;
        }
    }
    words.join("; ")
}

fn error(major: u32, minor: u32) -> GssError {
    let mut message = status_text(major, GSS_C_GSS_CODE);
    if minor != 0 {
        let mech = status_text(minor, GSS_C_MECH_CODE);
        if !mech.is_empty() {
            message = format!("{message}: {mech}");
        }
    }
    GssError { major, minor, message }
}

/// An imported Kerberos principal name (`gss_name_t`).
struct Name(sys::gss_name_t);

impl Name {
    /// `principal` as a krb5 principal name: `user`, `user@REALM`,
    /// `cifs/host` or `cifs/host@REALM` (no realm: the default realm).
    fn krb5(principal: &str) -> Result<Name, GssError> {
        let mut minor = 0;
        let mut name: sys::gss_name_t = ptr::null_mut();
        let mut kind = oid(KRB5_PRINCIPAL_NAME_OID);
        let mut input = buffer(principal.as_bytes());
        // SAFETY: the input buffer and OID outlive the call; `name` is owned
        // by the returned value.
        let major = unsafe { sys::gss_import_name(&mut minor, &mut input, &mut kind, &mut name) };
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(Name(name))
    }
}

impl Drop for Name {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: the handle is ours and released once.
        unsafe { sys::gss_release_name(&mut minor, &mut self.0) };
    }
}

/// Where an initiator credential comes from.
pub enum Source<'a> {
    /// A password: MIT asks the KDC for a TGT and keeps it in memory.
    Password(&'a str),
    /// A client keytab: MIT gets (and later renews) the TGT from its key,
    /// into a private in-memory cache named `cache`.
    Keytab { keytab: &'a str, cache: &'a str },
    /// An existing credential cache (`None`: the default, KRB5CCNAME).
    Cache(Option<&'a str>),
}

/// An initiator credential (`gss_cred_id_t`). MIT locks a credential
/// internally, so one may start contexts on several threads at once.
pub struct Cred(sys::gss_cred_id_t);

// SAFETY: MIT's krb5 credentials carry their own mutex (see above).
unsafe impl Send for Cred {}
// SAFETY: as above.
unsafe impl Sync for Cred {}

impl Cred {
    /// Acquires a Kerberos initiator credential for `principal` (`None`:
    /// the cache's or keytab's default) from `source`. Blocks while it asks
    /// the KDC for a TGT (password, keytab).
    ///
    /// Errors: the library's status, e.g. a wrong password
    /// ("Preauthentication failed") or no KDC for the realm.
    pub fn acquire(principal: Option<&str>, source: Source<'_>) -> Result<Cred, GssError> {
        let name = principal.map(Name::krb5).transpose()?;
        let name_ptr = name.as_ref().map_or(ptr::null_mut(), |n| n.0);
        let mut mech = oid(KRB5_OID);
        let mut mechs = sys::gss_OID_set_desc { count: 1, elements: &mut mech };
        let mut minor = 0;
        let mut cred: sys::gss_cred_id_t = ptr::null_mut();
        let major = match source {
            Source::Password(password) => {
                let mut pw = buffer(password.as_bytes());
                // SAFETY: every input outlives the call; `cred` is owned by
                // the returned value.
                unsafe {
                    sys::gss_acquire_cred_with_password(
                        &mut minor,
                        name_ptr,
                        &mut pw,
                        0,
                        &mut mechs,
                        GSS_C_INITIATE,
                        &mut cred,
                        ptr::null_mut(),
                        ptr::null_mut(),
                    )
                }
            }
            Source::Keytab { keytab, cache } => {
                let pairs = [("client_keytab", keytab), ("ccache", cache)];
                acquire_from(&mut minor, name_ptr, &mut mechs, &pairs, &mut cred)?
            }
            Source::Cache(Some(cache)) => {
                acquire_from(&mut minor, name_ptr, &mut mechs, &[("ccache", cache)], &mut cred)?
            }
            // An empty store is the library's defaults (KRB5CCNAME).
            Source::Cache(None) => acquire_from(&mut minor, name_ptr, &mut mechs, &[], &mut cred)?,
        };
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(Cred(cred))
    }

    /// How long the credential's TGT still lasts (zero once expired). For a
    /// keytab credential MIT gets a new TGT when needed, so this may grow.
    pub fn lifetime(&self) -> Result<Duration, GssError> {
        let mut minor = 0;
        let mut left: sys::OM_uint32 = 0;
        // SAFETY: plain out-parameters on a live handle.
        let major = unsafe {
            sys::gss_inquire_cred(&mut minor, self.0, ptr::null_mut(), &mut left, ptr::null_mut(), ptr::null_mut())
        };
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(Duration::from_secs(u64::from(left)))
    }
}

fn acquire_from(
    minor: &mut sys::OM_uint32,
    name: sys::gss_name_t,
    mechs: &mut sys::gss_OID_set_desc,
    pairs: &[(&str, &str)],
    cred: &mut sys::gss_cred_id_t,
) -> Result<u32, GssError> {
    let owned: Vec<(CString, CString)> = pairs
        .iter()
        .map(|(k, v)| Ok((CString::new(*k).unwrap_or_default(), CString::new(*v).map_err(|_| nul_error())?)))
        .collect::<Result<_, GssError>>()?;
    let mut elements: Vec<sys::gss_key_value_element_desc> =
        owned.iter().map(|(k, v)| sys::gss_key_value_element_desc { key: k.as_ptr(), value: v.as_ptr() }).collect();
    let store = sys::gss_key_value_set_desc { count: elements.len() as u32, elements: elements.as_mut_ptr() };
    // SAFETY: the store's strings and every other input outlive the call.
    Ok(unsafe {
        sys::gss_acquire_cred_from(
            minor,
            name,
            0,
            mechs,
            GSS_C_INITIATE,
            &store,
            cred,
            ptr::null_mut(),
            ptr::null_mut(),
        )
    })
}

fn nul_error() -> GssError {
    GssError { major: 0, minor: 0, message: "a credential store path contains a NUL byte".into() }
}

impl Drop for Cred {
    fn drop(&mut self) {
        let mut minor = 0;
        // SAFETY: the handle is ours and released once.
        unsafe { sys::gss_release_cred(&mut minor, &mut self.0) };
    }
}

/// An initiator security context (`gss_ctx_id_t`) with the Kerberos
/// mechanism, mutual authentication, integrity and confidentiality.
pub struct Context {
    ctx: sys::gss_ctx_id_t,
    target: Name,
    complete: bool,
    time_rec: u32,
}

// SAFETY: a context is used by one thread at a time (`&mut self`); MIT
// contexts hold no thread-bound state.
unsafe impl Send for Context {}

/// GSS_C_MUTUAL_FLAG | GSS_C_REPLAY_FLAG | GSS_C_SEQUENCE_FLAG |
/// GSS_C_CONF_FLAG | GSS_C_INTEG_FLAG (RFC 2744 5.19), as Windows asks for
/// SMB: mutual authentication makes the server send the AP-REP whose subkey
/// becomes the SMB session key.
const REQ_FLAGS: u32 = 2 | 4 | 8 | 16 | 32;

impl Context {
    /// Starts a context with `cred` for `target` (e.g.
    /// `cifs/server.example.com`) and returns it with the first token, an
    /// AP-REQ in a GSS InitialContextToken (RFC 1964 1.1). Blocks while MIT
    /// asks the KDC for a service ticket (once per target per cache).
    ///
    /// Errors: the library's status, e.g. "Server not found in Kerberos
    /// database" for an unknown service principal.
    pub fn start(cred: &Cred, target: &str) -> Result<(Context, Vec<u8>), GssError> {
        let mut ctx = Context { ctx: ptr::null_mut(), target: Name::krb5(target)?, complete: false, time_rec: 0 };
        let token = ctx.step_raw(cred, None)?;
        Ok((ctx, token))
    }

    /// Feeds the acceptor's token (the AP-REP). Returns a token to send back
    /// if the mechanism made one (none for Kerberos).
    pub fn step(&mut self, cred: &Cred, input: &[u8]) -> Result<Vec<u8>, GssError> {
        self.step_raw(cred, Some(input))
    }

    fn step_raw(&mut self, cred: &Cred, input: Option<&[u8]>) -> Result<Vec<u8>, GssError> {
        let mut minor = 0;
        let mut mech = oid(KRB5_OID);
        let mut input = input.map(buffer);
        let input_ptr = input.as_mut().map_or(ptr::null_mut(), |b| b as *mut _);
        let mut out = sys::gss_buffer_desc { length: 0, value: ptr::null_mut() };
        let mut time_rec: sys::OM_uint32 = 0;
        // SAFETY: every input outlives the call; `self.ctx` is created or
        // updated in place and owned by `self`; `out` is released by
        // take_buffer.
        let major = unsafe {
            sys::gss_init_sec_context(
                &mut minor,
                cred.0,
                &mut self.ctx,
                self.target.0,
                &mut mech,
                REQ_FLAGS,
                0,
                ptr::null_mut(),
                input_ptr,
                ptr::null_mut(),
                &mut out,
                ptr::null_mut(),
                &mut time_rec,
            )
        };
        let token = take_buffer(out);
        if major == GSS_S_COMPLETE || major == GSS_S_CONTINUE_NEEDED {
            self.time_rec = time_rec;
        }
        match major {
            GSS_S_COMPLETE => {
                self.complete = true;
                Ok(token)
            }
            GSS_S_CONTINUE_NEEDED => Ok(token),
            _ => Err(error(major, minor)),
        }
    }

    /// How long the context's service ticket was still valid at the last
    /// step (the `time_rec` of RFC 2744 5.19, which MIT sets from the
    /// ticket's end time from the first step on).
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(u64::from(self.time_rec))
    }

    /// True once the acceptor's AP-REP has been checked.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The context's session key: the acceptor's subkey if it sent one,
    /// else the initiator's (RFC 4121 2). 16 or 32 bytes for AES.
    pub fn session_key(&self) -> Result<Vec<u8>, GssError> {
        let mut minor = 0;
        let mut which = oid(INQ_SESSION_KEY_OID);
        let mut set: sys::gss_buffer_set_t = ptr::null_mut();
        // SAFETY: a live context; `set` is released below.
        let major = unsafe { sys::gss_inquire_sec_context_by_oid(&mut minor, self.ctx, &mut which, &mut set) };
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        // SAFETY: on success `set` points to `count` buffers.
        let key = unsafe {
            if set.is_null() || (*set).count == 0 {
                Vec::new()
            } else {
                let b = &*(*set).elements;
                std::slice::from_raw_parts(b.value as *const u8, b.length).to_vec()
            }
        };
        // SAFETY: `set` came from the library and is released once.
        unsafe { sys::gss_release_buffer_set(&mut minor, &mut set) };
        if key.is_empty() {
            return Err(GssError { major: 0, minor: 0, message: "the context has no session key".into() });
        }
        Ok(key)
    }

    /// A MIC token over `msg` (RFC 2744 5.15), for SPNEGO's mechListMIC.
    pub fn get_mic(&self, msg: &[u8]) -> Result<Vec<u8>, GssError> {
        let mut minor = 0;
        let mut input = buffer(msg);
        let mut out = sys::gss_buffer_desc { length: 0, value: ptr::null_mut() };
        // SAFETY: a live context; `out` is released by take_buffer.
        let major = unsafe { sys::gss_get_mic(&mut minor, self.ctx, 0, &mut input, &mut out) };
        let token = take_buffer(out);
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(token)
    }

    /// Checks the acceptor's MIC token over `msg` (RFC 2744 5.32).
    pub fn verify_mic(&self, msg: &[u8], mic: &[u8]) -> Result<(), GssError> {
        let mut minor = 0;
        let mut input = buffer(msg);
        let mut token = buffer(mic);
        // SAFETY: a live context; all inputs outlive the call.
        let major = unsafe { sys::gss_verify_mic(&mut minor, self.ctx, &mut input, &mut token, ptr::null_mut()) };
        if major != GSS_S_COMPLETE {
            return Err(error(major, minor));
        }
        Ok(())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !self.ctx.is_null() {
            let mut minor = 0;
            // SAFETY: the handle is ours and deleted once.
            unsafe { sys::gss_delete_sec_context(&mut minor, &mut self.ctx, ptr::null_mut()) };
        }
    }
}
