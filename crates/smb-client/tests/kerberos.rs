//! Kerberos logons against a real Samba AD domain controller (started by
//! `scripts/samba-test-server start --ad`, in a network namespace of its
//! own): password, keytab and credential-cache credentials, signing and
//! sealing keyed from the Kerberos session key, and the failures that must
//! stay failures. The DC takes about 7 s to provision and start, so one test
//! walks every case against one DC; KRB5_CONFIG is process-wide, which also
//! rules out DCs in parallel.

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::Samba;
use smb_auth::{AuthError, KerberosCredentials, KerberosIdentity, KerberosSource};
use smb_client::session::{ClientConfig, Session};
use smb_client::{Error, SmbAuth};
use smb_proto::negotiate::{Cipher, SigningAlgorithm};

fn kerberos(dc: &Samba, principal: Option<&str>, source: KerberosSource) -> ClientConfig {
    let mut cfg = ClientConfig::new(&dc.addr(), "", "");
    cfg.auth = SmbAuth::Kerberos(Arc::new(KerberosIdentity::new(KerberosCredentials {
        principal: principal.map(str::to_string),
        source,
    })));
    cfg.spn = Some(dc.get("SMB_SPN").to_string());
    cfg
}

/// Writes a file through the session and reads it back, and checks the
/// bytes the DC's share holds.
async fn round_trip(dc: &Samba, s: &Session, name: &str) {
    let t = s.tree_connect("share").await.expect("tree connect");
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 13) as u8).collect();
    t.write_small(name, &body, &[]).await.expect("write");
    let (_, data) = t.read_small(name, 1 << 20).await.expect("read");
    assert_eq!(&data[..], &body[..]);
    assert_eq!(std::fs::read(dc.share_path().join(name)).unwrap(), body);
}

/// The error a logon that must fail gave.
async fn refused(cfg: &ClientConfig) -> Error {
    match Session::connect(cfg).await {
        Ok(_) => panic!("the logon succeeded"),
        Err(e) => e,
    }
}

fn kerberos_error(e: Error) -> String {
    match e {
        Error::Auth(AuthError::Kerberos { what, message }) => format!("{what}: {message}"),
        other => panic!("expected a Kerberos error, got {other:?}"),
    }
}

#[tokio::test]
async fn kerberos_logons_against_an_ad_dc() {
    // AES-256 only: a sealed session then derives its cipher keys from
    // the whole 32-byte Kerberos key (MS-SMB2 3.2.5.3.1, FullSessionKey).
    let dc = Samba::start(&[
        "--ad",
        "--user",
        "bob:Bob-Secret-2",
        "--global-option",
        "ntlm auth = disabled",
        "--global-option",
        "server smb3 encryption algorithms = AES-256-GCM",
    ]);
    std::env::set_var("KRB5_CONFIG", dc.get("SMB_KRB5_CONFIG"));
    let password = dc.get("SMB_PASSWORD").to_string();

    // A password: signed (the DC requires it) with a key from the AP-REP.
    let cfg = kerberos(&dc, Some("alice"), KerberosSource::Password(password.clone()));
    let s = Session::connect(&cfg).await.expect("password logon");
    assert_eq!(s.negotiated.dialect, 0x0311);
    assert!(s.negotiated.sign_all, "a DC signs every message");
    assert_eq!(s.negotiated.signing, Some(SigningAlgorithm::AesGmac));
    round_trip(&dc, &s, "password.bin").await;
    // The DC's tickets last 10 hours: a pool replaces the session three
    // quarters of the way (the server ends it with the ticket).
    let renew_in = s.renew_at().expect("a Kerberos session has a renewal time") - std::time::Instant::now();
    assert!(renew_in > Duration::from_secs(7 * 3600) && renew_in <= Duration::from_secs(27_000), "{renew_in:?}");

    // Sealed: every message encrypted with keys derived from the same key.
    let mut sealed = cfg.clone();
    sealed.require_encryption = true;
    let s = Session::connect(&sealed).await.expect("sealed logon");
    assert!(s.negotiated.encrypt_all);
    assert_eq!(s.negotiated.cipher, Some(Cipher::Aes256Gcm));
    round_trip(&dc, &s, "sealed.bin").await;

    // A keytab, principal named and not.
    let keytab = KerberosSource::Keytab(dc.get("SMB_KEYTAB").into());
    let s = Session::connect(&kerberos(&dc, Some("alice@SMBGATE.TEST"), keytab.clone())).await.expect("keytab");
    round_trip(&dc, &s, "keytab.bin").await;
    let s = Session::connect(&kerberos(&dc, None, keytab)).await.expect("keytab's own principal");
    round_trip(&dc, &s, "keytab2.bin").await;

    // A credential cache filled by kinit.
    let cache = format!("FILE:{}/ccache", dc.get("SMB_DIR"));
    let kinit = Command::new("kinit")
        .args(["-k", "-t", dc.get("SMB_KEYTAB"), "-c", &cache, "alice"])
        .status()
        .expect("run kinit");
    assert!(kinit.success());
    let s = Session::connect(&kerberos(&dc, None, KerberosSource::Cache(Some(cache.clone())))).await.expect("ccache");
    round_trip(&dc, &s, "ccache.bin").await;

    // A wrong password is the KDC's answer, not an NTLM attempt.
    let bad = kerberos(&dc, Some("alice"), KerberosSource::Password("wrong-Password-1".into()));
    let e = kerberos_error(refused(&bad).await);
    assert!(e.contains("Preauthentication failed"), "{e}");

    // An empty cache and an unknown service principal say so.
    let empty = format!("FILE:{}/empty-ccache", dc.get("SMB_DIR"));
    let e = kerberos_error(refused(&kerberos(&dc, None, KerberosSource::Cache(Some(empty)))).await);
    assert!(e.starts_with("acquiring a credential"), "{e}");
    let mut unknown = kerberos(&dc, Some("alice"), KerberosSource::Password(password.clone()));
    unknown.spn = Some("cifs/nosuchhost.smbgate.test".into());
    let e = kerberos_error(refused(&unknown).await);
    assert!(e.contains("not found in Kerberos database"), "{e}");

    // A disabled (revoked) account is the KDC's answer too.
    let disable = Command::new("ip")
        .args(["netns", "exec", dc.get("SMB_NETNS"), "samba-tool", "user", "disable", "bob", "-s"])
        .arg(format!("{}/etc/smb.conf", dc.get("SMB_DIR")))
        .output()
        .expect("run samba-tool");
    assert!(disable.status.success(), "{}", String::from_utf8_lossy(&disable.stderr));
    let bob = kerberos(&dc, Some("bob"), KerberosSource::Password("Bob-Secret-2".into()));
    let e = kerberos_error(refused(&bob).await);
    assert!(e.contains("revoked"), "{e}");

    // Negotiate falls back to NTLM only where Kerberos cannot start; this
    // DC refuses NTLM, so the fallback's logon fails as NTLM's would.
    let mut negotiate = kerberos(&dc, Some("alice"), KerberosSource::Password(password.clone()));
    negotiate.auth = match negotiate.auth {
        SmbAuth::Kerberos(id) => SmbAuth::Negotiate(id),
        other => other,
    };
    let s = Session::connect(&negotiate).await.expect("negotiate picks Kerberos");
    round_trip(&dc, &s, "negotiate.bin").await;
    negotiate.spn = Some("cifs/nosuchhost.smbgate.test".into());
    negotiate.user = "alice".into();
    negotiate.password = password;
    negotiate.domain = "SMBGATE".into();
    let e = refused(&negotiate).await;
    assert!(matches!(e, Error::Status { .. }), "{e:?}");
}
