//! Forged responses from a man in the middle, against a real smbd (failure
//! class 24). A proxy answers a pending READ itself with an unsigned frame
//! before smbd's real answer arrives. The client must refuse it and poison
//! the connection; never may a forged byte come back as data.

mod common;

use common::forge::{self, Forge};
use common::Samba;
use smb_client::{Error, Session};

const LEN: u32 = 64 << 10;

async fn read_through(smb: &Samba, forge: Forge) -> (Result<bytes::Bytes, Error>, usize, bool) {
    std::fs::write(smb.share_path().join("real.bin"), vec![b'r'; LEN as usize]).unwrap();
    let (proxy, forged) = forge::start(smb.addr(), forge, LEN).await;
    let mut cfg = smb.config();
    cfg.addr = proxy;
    let s = Session::connect(&cfg).await.expect("connect through the proxy");
    let t = s.tree_connect(smb.get("SMB_SHARE")).await.expect("tree");
    let f = t.open_read("real.bin").await.expect("open");
    let r = t.read(f.file_id, 0, LEN).await;
    (r, forged.load(std::sync::atomic::Ordering::SeqCst), t.conn().is_poisoned())
}

fn assert_refused(r: Result<bytes::Bytes, Error>, forged: usize, poisoned: bool, why: &str) {
    assert_eq!(forged, 1, "the proxy forged one answer");
    match r {
        Ok(data) => panic!("accepted a forged answer: {} bytes, first {:?}", data.len(), data.first()),
        Err(e) => {
            assert!(matches!(e, Error::Integrity(_)), "{e}");
            assert_eq!(e.to_string(), format!("response failed its integrity check: {why}"));
        }
    }
    assert!(poisoned, "the connection is poisoned");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_session_setup_answer_to_a_read_is_refused_on_a_signed_session() {
    let smb = Samba::start(&["--signing", "mandatory"]);
    let (r, forged, poisoned) = read_through(&smb, Forge::FirstReadAsSessionSetup).await;
    // No command is exempt from the signature check once the session has a
    // key: the forgery fails there, before its command is even compared.
    assert_refused(r, forged, poisoned, "unsigned response on a signed session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plaintext_read_answer_on_an_encrypted_share_is_refused() {
    // The share alone requires encryption and signing is not required: the
    // READ goes out encrypted, and a plaintext answer with the real command
    // and MessageId (NEGOTIATE 0, SESSION_SETUP 1 and 2, TREE_CONNECT 3,
    // CREATE 4, READ 5) must not count as its answer.
    let smb = Samba::start(&["--share-encrypt"]);
    let sid = 0; // not known to the proxy; refused before it matters
    let (r, forged, poisoned) =
        read_through(&smb, Forge::FrameAsRead { frame: 5, message_id: 5, session_id: sid }).await;
    assert_refused(r, forged, poisoned, "unencrypted response to an encrypted request");
}
