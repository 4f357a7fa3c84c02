//! Negotiate, authenticate and basic file operations against a real smbd.

mod common;

use common::Samba;
use smb_client::session::Session;

#[tokio::test]
async fn smoke_default_server() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    assert_eq!(s.negotiated.dialect, 0x0311);
    let t = s.tree_connect("share").await.expect("tree");
    t.write_small("hello.txt", b"hello world", &[])
        .await
        .expect("write");
    let (cr, data) = t.read_small("hello.txt", 1 << 20).await.expect("read");
    assert_eq!(&data[..], b"hello world");
    assert_eq!(cr.times.end_of_file, 11);
    assert_eq!(
        std::fs::read(smb.share_path().join("hello.txt")).unwrap(),
        b"hello world"
    );
}
