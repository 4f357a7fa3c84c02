//! Handles that close themselves, against a real smbd (failure class 26):
//! a dropped [`Handle`], a CREATE whose caller went away before the answer,
//! and a directory listing abandoned between pages leave nothing open on
//! the server (`smbstatus -L`).

mod common;

use std::task::Poll;

use common::Samba;
use smb_client::Session;
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};

fn create_new(name: &str) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::OverwriteIf,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_handle_is_closed_on_its_connection() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let h = t.open(&create_new("dropped.bin")).await.expect("open");
    assert_eq!(smb.open_files("dropped.bin").len(), 1, "open while the handle lives");
    drop(h);
    assert_eq!(smb.wait_closed("dropped.bin").await, Vec::<String>::new());
    assert_eq!(t.conn().handles_reaped(), 1);

    // An explicit close is not closed twice.
    let h = t.open(&create_new("closed.bin")).await.expect("open");
    h.close().await.expect("close");
    assert!(smb.open_files("closed.bin").is_empty());
    assert_eq!(t.conn().handles_reaped(), 1);
}

// One thread: the reader task cannot deliver an answer while the test polls
// a request once, so the first poll always finds it pending.
#[tokio::test(flavor = "current_thread")]
async fn a_create_whose_caller_went_away_is_closed_when_its_answer_arrives() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    for i in 0..8 {
        let name = format!("orphan-{i}.bin");
        let req = create_new(&name);
        // One poll sends the CREATE; dropping the future before its answer
        // is what a client hanging up mid-request does.
        let mut fut = Box::pin(t.create(&req));
        let first = futures::poll!(fut.as_mut());
        assert!(matches!(first, Poll::Pending), "the answer cannot be here before one poll: {first:?}");
        drop(fut);
    }
    // A compound whose caller stops between the answers (CREATE +
    // QUERY_DIRECTORY, as a directory listing sends them).
    smb.smbclient("mkdir listed");
    for i in 0..4 {
        let mut fut = Box::pin(t.list_dir("listed"));
        let _ = futures::poll!(fut.as_mut());
        drop(fut);
        let _ = i;
    }
    // Yield until the answers have come and the reaper has closed them (on
    // this one thread nothing is sent until the test waits).
    for _ in 0..100 {
        if t.conn().handles_reaped() >= 12 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(t.conn().handles_reaped(), 12, "8 CREATEs and 4 directory listings");
    assert_eq!(smb.wait_closed("orphan-").await, Vec::<String>::new());
    assert_eq!(smb.wait_closed("listed").await, Vec::<String>::new());
    assert!(smb.share_path().join("orphan-7.bin").exists(), "the CREATEs did reach the server");
    // The connection is still good.
    t.stat("orphan-0.bin").await.expect("stat after reaping");
}

// A CREATE that made a new file (FILE_CREATE, DELETE access) and whose
// caller went away is undone: the file is deleted, not only closed. The
// same CREATE without DELETE access, and a file that existed before, are
// only closed.
#[tokio::test(flavor = "current_thread")]
async fn a_new_file_whose_creator_went_away_is_deleted() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let scratch = |name| CreateRequest {
        disposition: Disposition::Create,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        ..create_new(name)
    };
    let kept = CreateRequest { disposition: Disposition::Create, ..create_new("kept.bin") };
    smb.smbclient("put /etc/hostname existing.bin");
    let reopened = CreateRequest {
        desired_access: access::GENERIC_READ | access::DELETE,
        disposition: Disposition::OpenIf,
        ..create_new("existing.bin")
    };
    let names: Vec<String> = (0..4).map(|i| format!("scratch-{i}.bin")).collect();
    let mut reqs: Vec<CreateRequest<'_>> = names.iter().map(|n| scratch(n)).collect();
    reqs.push(kept);
    reqs.push(reopened);
    for req in &reqs {
        let mut fut = Box::pin(t.create(req));
        let first = futures::poll!(fut.as_mut());
        assert!(matches!(first, Poll::Pending), "the answer cannot be here before one poll: {first:?}");
        drop(fut);
    }
    for _ in 0..100 {
        if t.conn().handles_reaped() >= 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(t.conn().handles_reaped(), 6);
    assert_eq!(smb.wait_closed(".bin").await, Vec::<String>::new());
    for n in &names {
        assert!(!smb.share_path().join(n).exists(), "{n} was made by an abandoned CREATE and is deleted");
    }
    assert!(smb.share_path().join("kept.bin").exists(), "no DELETE access: only closed");
    assert!(smb.share_path().join("existing.bin").exists(), "not made by the CREATE: only closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_too_long_for_its_length_field_is_refused_not_truncated() {
    // Issue 10: NameLength is 16 bits. A name of 65,538 bytes used to go
    // out with a length of 2, so the server opened the file "a" instead.
    let smb = Samba::start(&[]);
    std::fs::write(smb.share_path().join("a"), b"not this one").unwrap();
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let name = format!("a{}", "b".repeat(32768));
    let e = t.open(&create_new(&name)).await.expect_err("the name does not fit");
    assert_eq!(e.to_string(), "invalid argument: CREATE name of 65538 bytes does not fit its 16-bit length");
    assert!(!t.conn().is_poisoned(), "refused before sending: the connection is fine");
    assert_eq!(std::fs::read(smb.share_path().join("a")).unwrap(), b"not this one");
    t.open(&create_new("ok.bin")).await.expect("the connection still works");
}
