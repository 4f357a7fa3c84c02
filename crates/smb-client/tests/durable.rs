//! Durable handles against a real smbd (issue 9, point 4): a handle
//! reclaimed on a new connection after its own was lost writes on into the
//! same file; a handle whose oplock another open broke is reopened by name;
//! a file put at the name meanwhile is refused; and a break is acknowledged
//! at once, so the other open does not wait out Samba's break timeout.

mod common;

use std::time::Duration;

use common::Samba;
use smb_client::durable::Reopened;
use smb_client::{Error, Session};
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};

fn new_file(name: &str) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::Create,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

async fn tree(smb: &Samba) -> smb_client::Tree {
    let s = Session::connect(&smb.config()).await.expect("connect");
    s.tree_connect("share").await.expect("tree")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_whose_connection_was_lost_is_reclaimed_and_writes_on() {
    let smb = Samba::start(&[]);
    let a = tree(&smb).await;
    let h = a.open_durable(&new_file("reclaim.bin")).await.expect("open");
    assert_eq!(a.write(h.id(), 0, b"before ").await.expect("write"), 7);
    let info = h.reopen_info().expect("durable open");
    assert!(info.may_be_reclaimed(), "granted durability with a batch oplock: {info:?}");
    // The connection drops (the server sees it close) with the handle open.
    a.conn().poison(Error::ConnectionLost("test cut".into()));
    drop(h);
    let b = tree(&smb).await;
    let (h2, how) = b.reopen(&info).await.expect("reopen");
    assert_eq!(how, Reopened::Reclaimed);
    assert_eq!(b.write(h2.id(), 7, b"after").await.expect("write"), 5);
    h2.close().await.expect("close");
    assert_eq!(std::fs::read(smb.share_path().join("reclaim.bin")).unwrap(), b"before after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_oplock_is_acknowledged_and_its_handle_reopened_by_name() {
    let smb = Samba::start(&[]);
    let a = tree(&smb).await;
    let h = a.open_durable(&new_file("shared.bin")).await.expect("open");
    a.write(h.id(), 0, b"0123").await.expect("write");
    // Another client opens the file: Samba breaks our batch oplock and holds
    // that open until we acknowledge (else for its 35 s break timeout).
    let b = tree(&smb).await;
    let other = CreateRequest { disposition: Disposition::Open, ..new_file("shared.bin") };
    let o = tokio::time::timeout(Duration::from_secs(10), b.open(&other))
        .await
        .expect("the break was not acknowledged: the second open waited")
        .expect("second open");
    b.write(o.id(), 4, b"4567").await.expect("write");
    let info = h.reopen_info().expect("durable open");
    assert!(!info.may_be_reclaimed(), "the oplock was broken, so the server keeps nothing: {info:?}");
    a.conn().poison(Error::ConnectionLost("test cut".into()));
    drop(h);
    let c = tree(&smb).await;
    let (h2, how) = c.reopen(&info).await.expect("reopen");
    assert_eq!(how, Reopened::ByName);
    c.write(h2.id(), 8, b"89").await.expect("write");
    drop((h2, o));
    assert_eq!(std::fs::read(smb.share_path().join("shared.bin")).unwrap(), b"0123456789");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_put_at_the_name_meanwhile_is_not_reopened() {
    let smb = Samba::start(&[]);
    let a = tree(&smb).await;
    let h = a.open_durable(&new_file("swapped.bin")).await.expect("open");
    let info = h.reopen_info().expect("durable open");
    h.close().await.expect("close");
    // Another file takes the name: made before the old one goes, so it has
    // another inode (another on-disk id), and owned like the share.
    let path = smb.share_path().join("swapped.bin");
    let new = smb.share_path().join("swapped.new");
    std::fs::write(&new, b"someone else's").unwrap();
    let owner = std::fs::metadata(smb.share_path()).unwrap();
    use std::os::unix::fs::MetadataExt;
    std::os::unix::fs::chown(&new, Some(owner.uid()), Some(owner.gid())).unwrap();
    std::fs::rename(&new, &path).unwrap();
    let b = tree(&smb).await;
    match b.reopen(&info).await {
        Err(Error::NotSameFile(m)) => assert!(m.contains("swapped.bin"), "{m}"),
        other => panic!("expected NotSameFile, got {other:?}"),
    }
    assert_eq!(std::fs::read(&path).unwrap(), b"someone else's");
}
