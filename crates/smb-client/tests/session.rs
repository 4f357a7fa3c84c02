//! Negotiate and authenticate against a real smbd under each signing and
//! encryption mode and dialect, plus the failures users hit first.

mod common;

use common::Samba;
use smb_client::session::Session;
use smb_client::Error;
use smb_proto::negotiate::{Cipher, SigningAlgorithm};
use smb_proto::NtStatus;

/// Writes and reads back through the tree, then checks the bytes on disk.
/// 300,000 bytes, so the READ answer (a compound) is a frame over 128 KiB,
/// which the reader receives into a buffer of its own before verifying or
/// decrypting it in place.
async fn round_trip(smb: &Samba, s: &Session, name: &str) {
    let t = s.tree_connect("share").await.expect("tree connect");
    let body: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    t.write_small(name, &body, &[]).await.expect("write");
    let (cr, data) = t.read_small(name, 1 << 20).await.expect("read");
    assert_eq!(cr.times.end_of_file, body.len() as u64);
    assert_eq!(&data[..], &body[..]);
    assert_eq!(std::fs::read(smb.share_path().join(name)).unwrap(), body);
}

#[tokio::test]
async fn default_server_311_unsigned_data() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.dialect, 0x0311);
    assert_eq!(s.negotiated.signing, Some(SigningAlgorithm::AesGmac));
    assert!(!s.negotiated.sign_all);
    round_trip(&smb, &s, "a.bin").await;
}

#[tokio::test]
async fn client_requires_signing_on_auto_server() {
    let smb = Samba::start(&[]);
    let mut cfg = smb.config();
    cfg.require_signing = true;
    let s = Session::connect(&cfg).await.expect("connect");
    assert!(s.negotiated.sign_all, "every message signed and every response verified");
    round_trip(&smb, &s, "b.bin").await;
}

#[tokio::test]
async fn server_mandatory_signing_311_gmac() {
    let smb = Samba::start(&["--signing", "mandatory"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert!(s.negotiated.sign_all);
    assert_eq!(s.negotiated.signing, Some(SigningAlgorithm::AesGmac));
    round_trip(&smb, &s, "c.bin").await;
}

#[tokio::test]
async fn server_mandatory_signing_300_cmac() {
    let smb = Samba::start(&["--signing", "mandatory", "--max-protocol", "SMB3_00"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.dialect, 0x0300);
    assert_eq!(s.negotiated.signing, Some(SigningAlgorithm::AesCmac));
    assert!(s.negotiated.sign_all);
    round_trip(&smb, &s, "d.bin").await;
}

#[tokio::test]
async fn server_mandatory_signing_302_cmac() {
    let smb = Samba::start(&["--signing", "mandatory", "--max-protocol", "SMB3_02"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.dialect, 0x0302);
    round_trip(&smb, &s, "e.bin").await;
}

#[tokio::test]
async fn encryption_required_311_gcm() {
    let smb = Samba::start(&["--encrypt", "required"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.cipher, Some(Cipher::Aes128Gcm));
    let t = s.tree_connect("share").await.expect("tree");
    assert!(t.is_encrypted());
    round_trip(&smb, &s, "f.bin").await;
    // smbclient sees what we wrote.
    assert!(smb.smbclient("ls").contains("f.bin"));
}

#[tokio::test]
async fn encryption_required_300_ccm() {
    let smb = Samba::start(&["--encrypt", "required", "--max-protocol", "SMB3_00"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.dialect, 0x0300);
    assert_eq!(s.negotiated.cipher, Some(Cipher::Aes128Ccm));
    round_trip(&smb, &s, "g.bin").await;
}

#[tokio::test]
async fn client_requires_encryption() {
    let smb = Samba::start(&["--encrypt", "auto"]);
    let mut cfg = smb.config();
    cfg.require_encryption = true;
    let s = Session::connect(&cfg).await.expect("connect");
    assert!(s.negotiated.encrypt_all);
    round_trip(&smb, &s, "h.bin").await;
}

#[tokio::test]
async fn wrong_password_is_logon_failure() {
    let smb = Samba::start(&[]);
    let mut cfg = smb.config();
    cfg.password = "not-the-password".into();
    let err = Session::connect(&cfg).await.err().expect("must fail");
    assert_eq!(err.status(), Some(NtStatus::STATUS_LOGON_FAILURE), "{err}");
    assert!(err.to_string().contains("STATUS_LOGON_FAILURE"), "{err}");
}

#[tokio::test]
async fn missing_share_is_bad_network_name() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let err = s.tree_connect("nope").await.err().expect("must fail");
    assert_eq!(err.status(), Some(NtStatus::STATUS_BAD_NETWORK_NAME), "{err}");
}

#[tokio::test]
async fn unreachable_server_is_a_clean_error() {
    // A port bound but never listened on, held for the test: a connection
    // to it is refused, and no other test's server can take it meanwhile
    // (a port bound and released was, once, and reset the connection).
    let held = tokio::net::TcpSocket::new_v4().unwrap();
    held.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let port = held.local_addr().unwrap().port();
    let cfg = smb_client::ClientConfig::new(&format!("127.0.0.1:{port}"), "u", "p");
    let err = Session::connect(&cfg).await.err().expect("must fail");
    assert!(matches!(err, Error::Io(_)), "{err}");
}

#[tokio::test]
async fn guest_server_allows_anonymous() {
    let smb = Samba::start(&["--guest"]);
    let cfg = smb_client::ClientConfig::new(&smb.addr(), "", "");
    let s = Session::connect(&cfg).await.expect("anonymous connect");
    assert!(s.negotiated.is_anonymous || s.negotiated.is_guest);
    assert_eq!(s.negotiated.signing, None);
    let t = s.tree_connect("share").await.expect("tree");
    t.write_small("anon.txt", b"x", &[]).await.expect("write");
}

#[tokio::test]
async fn credentials_mapped_to_guest_are_a_logon_failure_not_a_silent_guest_session() {
    // "map to guest = Bad User": an unknown user gets a guest session, with
    // no key to sign with. A client that gave credentials must refuse it.
    let smb = Samba::start(&["--guest"]);
    let cfg = smb_client::ClientConfig::new(&smb.addr(), "nosuchuser", "whatever");
    let err = Session::connect(&cfg).await.err().expect("must fail");
    assert_eq!(err.status(), Some(NtStatus::STATUS_LOGON_FAILURE), "{err}");
}
