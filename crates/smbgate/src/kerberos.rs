//! How the gateway's SMB identities log on: the `--smb-auth` mode and the
//! Kerberos settings (keytab, credential cache, realm, KDC, service
//! principal), turned into the SMB client's [`SmbAuth`] for each identity.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use smb_auth::{KerberosCredentials, KerberosIdentity, KerberosSource};
use smb_client::SmbAuth;

/// `--smb-auth`: which mechanisms SESSION_SETUP may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AuthMode {
    /// Kerberos when a Kerberos setting is given (keytab, credential cache,
    /// realm, KDC, or a user written `user@REALM`), never NTLM then unless
    /// `--smb-auth-fallback ntlm`; otherwise NTLM, as before.
    #[default]
    Negotiate,
    /// Only Kerberos: a logon that cannot get a ticket fails, naming why.
    Kerberos,
    /// Only NTLM.
    Ntlm,
}

/// `--smb-auth-fallback`: what `negotiate` may fall back to when a
/// Kerberos setting is given and no ticket can be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Fallback {
    /// Nothing: the logon fails, naming why, as with `kerberos`.
    #[default]
    None,
    /// NTLM, with a warning once per identity.
    Ntlm,
}

/// The Kerberos settings of `serve` (flags, `SMBGATE_*` variables, or the
/// config file's keys of the same names).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KerberosArgs {
    /// How the gateway logs on to the SMB server: `negotiate` (Kerberos when
    /// a Kerberos setting below is given, else NTLM), `kerberos` (never
    /// NTLM), or `ntlm`.
    #[arg(long, env = "SMBGATE_SMB_AUTH", value_enum, default_value = "negotiate", help_heading = "SMB")]
    pub smb_auth: AuthMode,
    /// With `--smb-auth negotiate` and a Kerberos setting given, what a
    /// logon that cannot get a ticket (or a server that offers no
    /// Kerberos) falls back to: `none` (it fails, naming why) or `ntlm`.
    #[arg(long, env = "SMBGATE_SMB_AUTH_FALLBACK", value_enum, default_value = "none", help_heading = "SMB")]
    pub smb_auth_fallback: Fallback,
    /// Keytab with --smb-user's Kerberos key: tickets come from it, and are
    /// renewed, without a password.
    #[arg(long, env = "SMBGATE_SMB_KEYTAB", help_heading = "SMB")]
    pub smb_keytab: Option<PathBuf>,
    /// Kerberos credential cache someone else keeps filled (kinit, a
    /// sidecar), e.g. `FILE:/run/smbgate/krb5cc`; used when no password or
    /// keytab is given. Without it that is the default cache (KRB5CCNAME).
    #[arg(long, env = "SMBGATE_SMB_CREDENTIAL_CACHE", help_heading = "SMB")]
    pub smb_credential_cache: Option<String>,
    /// Kerberos realm of --smb-user, e.g. `CORP.EXAMPLE.COM` (default: the
    /// user's own `@REALM`, else the system krb5.conf's default realm).
    #[arg(long, env = "SMBGATE_SMB_REALM", help_heading = "SMB")]
    pub smb_realm: Option<String>,
    /// KDC of --smb-realm, HOST or HOST:PORT; repeat for more (default: the
    /// system krb5.conf, or DNS). Needs --smb-realm.
    #[arg(long = "smb-kdc", env = "SMBGATE_SMB_KDC", value_delimiter = ',', help_heading = "SMB")]
    pub smb_kdc: Vec<String>,
    /// The SMB server's Kerberos service principal (default: `cifs/` and
    /// --share's host, which must then be the name the server is known by
    /// in the realm, not an address).
    #[arg(long, env = "SMBGATE_SMB_SPN", help_heading = "SMB")]
    pub smb_spn: Option<String>,
}

impl KerberosArgs {
    /// True when any Kerberos setting is given, so `negotiate` tries it.
    fn any_setting(&self, user: &str, keytab: Option<&Path>) -> bool {
        keytab.is_some()
            || self.smb_keytab.is_some()
            || self.smb_credential_cache.is_some()
            || self.smb_realm.is_some()
            || !self.smb_kdc.is_empty()
            || user.contains('@')
    }

    /// The logon of one SMB identity: `user` with `password` (either may be
    /// empty) and its own `keytab`, if it has one (else --smb-keytab).
    /// Credentials, in order: a keytab, the credential cache, the password,
    /// the default cache. Kerberos with NTLM beside it only for `negotiate`
    /// with `--smb-auth-fallback ntlm`.
    pub fn smb_auth(&self, user: &str, password: &str, keytab: Option<&Path>) -> SmbAuth {
        let kerberos = match self.smb_auth {
            AuthMode::Ntlm => return SmbAuth::Ntlm,
            AuthMode::Negotiate if !self.any_setting(user, keytab) => return SmbAuth::Ntlm,
            _ => {
                let source = match (keytab.or(self.smb_keytab.as_deref()), &self.smb_credential_cache) {
                    (Some(path), _) => KerberosSource::Keytab(path.to_path_buf()),
                    (None, Some(cache)) => KerberosSource::Cache(Some(cache.clone())),
                    (None, None) if !password.is_empty() => KerberosSource::Password(password.to_string()),
                    (None, None) => KerberosSource::Cache(None),
                };
                Arc::new(KerberosIdentity::new(KerberosCredentials { principal: self.principal(user), source }))
            }
        };
        // Kerberos set up and not to be had: NTLM only when asked for, or a
        // wrong principal (or a KDC kept out of reach) would send NTLM
        // logons where the operator set up Kerberos.
        match (self.smb_auth, self.smb_auth_fallback) {
            (AuthMode::Negotiate, Fallback::Ntlm) => SmbAuth::Negotiate(kerberos),
            _ => SmbAuth::Kerberos(kerberos),
        }
    }

    /// `user@REALM` for `user` (as given when it names a realm); `None`
    /// for no user (the keytab's or cache's own principal).
    fn principal(&self, user: &str) -> Option<String> {
        match (user, &self.smb_realm) {
            ("", _) => None,
            (u, _) if u.contains('@') => Some(u.to_string()),
            (u, Some(realm)) => Some(format!("{u}@{realm}")),
            (u, None) => Some(u.to_string()),
        }
    }

    /// Checks the settings without acting on them (`serve` and `config
    /// check` alike).
    ///
    /// Errors: one line: --smb-auth-fallback ntlm with another mode than
    /// negotiate, --smb-kdc without --smb-realm, a KDC that is not a host
    /// name, or a keytab that cannot be read or that every user may read
    /// (as root).
    pub fn validate(&self) -> Result<(), String> {
        if self.smb_auth_fallback == Fallback::Ntlm && self.smb_auth != AuthMode::Negotiate {
            return Err("--smb-auth-fallback ntlm needs --smb-auth negotiate (kerberos never falls back, \
                        ntlm needs no fallback)"
                .into());
        }
        if let Some(keytab) = &self.smb_keytab {
            crate::secret_files::check_secret_file("--smb-keytab", keytab)?;
        }
        if self.smb_kdc.is_empty() {
            return Ok(());
        }
        self.smb_realm.as_deref().ok_or("--smb-kdc needs --smb-realm (the realm those KDCs serve)")?;
        match self
            .smb_kdc
            .iter()
            .find(|k| k.is_empty() || k.contains(|c: char| c.is_whitespace() || c == '}' || c == '{'))
        {
            Some(kdc) => Err(format!("--smb-kdc {kdc:?} is not HOST or HOST:PORT")),
            None => Ok(()),
        }
    }

    /// With --smb-kdc, points the Kerberos library at a configuration
    /// naming those KDCs for --smb-realm. The file is an anonymous
    /// in-memory one (memfd), so nothing is left on disk; the process keeps
    /// it open. Call once, after [`KerberosArgs::validate`], before any
    /// logon.
    ///
    /// Errors: one line: no in-memory file.
    pub fn prepare(&self) -> Result<(), String> {
        let Some(realm) = self.smb_realm.as_deref().filter(|_| !self.smb_kdc.is_empty()) else { return Ok(()) };
        let mut conf = format!(
            "[libdefaults]\n\tdefault_realm = {realm}\n\tdns_lookup_kdc = false\n\trdns = false\n[realms]\n\t{realm} = {{\n"
        );
        for kdc in &self.smb_kdc {
            conf.push_str(&format!("\t\tkdc = {kdc}\n"));
        }
        conf.push_str("\t}\n");
        let fd = rustix::fs::memfd_create("smbgate-krb5.conf", rustix::fs::MemfdFlags::empty())
            .map_err(|e| format!("--smb-kdc: cannot make the Kerberos configuration: {e}"))?;
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, conf.as_bytes())
            .map_err(|e| format!("--smb-kdc: cannot write the Kerberos configuration: {e}"))?;
        let fd: OwnedFd = file.into();
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        // Kept open for the process's life: the library reads the file
        // again whenever it reloads its configuration.
        static KRB5_CONF: OnceLock<OwnedFd> = OnceLock::new();
        if KRB5_CONF.set(fd).is_err() {
            return Ok(());
        }
        std::env::set_var("KRB5_CONFIG", path);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(mode: AuthMode, fallback: Fallback) -> KerberosArgs {
        KerberosArgs { smb_auth: mode, smb_auth_fallback: fallback, ..Default::default() }
    }

    #[test]
    fn negotiate_falls_back_to_ntlm_only_when_told_to() {
        let with_realm = |mut a: KerberosArgs| {
            a.smb_realm = Some("CORP.EXAMPLE".into());
            a
        };
        // No Kerberos setting: NTLM, as before.
        assert!(matches!(args(AuthMode::Negotiate, Fallback::None).smb_auth("u", "p", None), SmbAuth::Ntlm));
        // Any Kerberos setting: Kerberos alone, unless the fallback is asked for.
        let a = with_realm(args(AuthMode::Negotiate, Fallback::None));
        assert!(matches!(a.smb_auth("u", "p", None), SmbAuth::Kerberos(_)));
        let keytab = args(AuthMode::Negotiate, Fallback::None);
        assert!(matches!(keytab.smb_auth("u", "", Some(Path::new("/k"))), SmbAuth::Kerberos(_)));
        assert!(matches!(keytab.smb_auth("u@CORP.EXAMPLE", "p", None), SmbAuth::Kerberos(_)));
        let a = with_realm(args(AuthMode::Negotiate, Fallback::Ntlm));
        assert!(matches!(a.smb_auth("u", "p", None), SmbAuth::Negotiate(_)));
        assert!(matches!(
            with_realm(args(AuthMode::Kerberos, Fallback::None)).smb_auth("u", "p", None),
            SmbAuth::Kerberos(_)
        ));
        assert!(matches!(with_realm(args(AuthMode::Ntlm, Fallback::None)).smb_auth("u", "p", None), SmbAuth::Ntlm));
    }

    #[test]
    fn the_fallback_belongs_to_negotiate() {
        assert!(args(AuthMode::Negotiate, Fallback::Ntlm).validate().is_ok());
        for mode in [AuthMode::Kerberos, AuthMode::Ntlm] {
            let e = args(mode, Fallback::Ntlm).validate().unwrap_err();
            assert!(e.contains("--smb-auth-fallback ntlm needs --smb-auth negotiate"), "{e}");
        }
    }
}
