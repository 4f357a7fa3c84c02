//! CHANGE_NOTIFY against a real smbd: changes a program makes on the
//! server's own disk are reported (Samba watches its disk with inotify),
//! a watch outlives the request timeout, too many changes are an overflow,
//! and closing the directory ends the watch.

mod common;

use std::time::Duration;

use common::Samba;
use smb_client::notify::Notified;
use smb_client::{Session, Tree};
use smb_proto::create::{access, options, CreateRequest};
use smb_proto::notify::{filter, Action, Change};

const CHANGES: u32 = filter::FILE_NAME | filter::DIR_NAME | filter::ATTRIBUTES | filter::SIZE | filter::LAST_WRITE;

async fn watched_dir(t: &Tree, name: &str) -> smb_client::Handle {
    t.mkdir(name).await.expect("mkdir");
    let open =
        CreateRequest::open(name, access::FILE_LIST_DIRECTORY | access::SYNCHRONIZE).options(options::DIRECTORY_FILE);
    t.open(&open).await.expect("open the directory")
}

async fn within(secs: u64, n: impl std::future::Future<Output = smb_client::Result<Notified>>) -> Notified {
    tokio::time::timeout(Duration::from_secs(secs), n).await.expect("an answer in time").expect("notified")
}

/// Waits for `pending` to answer while `sentinel` is written on the
/// server's disk every 100 ms: smbd hands a watch to its notifyd process,
/// which starts watching the disk a moment later (longer under load), so
/// only a reported change shows that changes on the disk are being seen.
async fn live(t: &Tree, pending: smb_client::notify::PendingNotify, sentinel: &std::path::Path) -> Notified {
    let answer = t.notified(pending);
    tokio::pin!(answer);
    for _ in 0..100 {
        std::fs::write(sentinel, b"s").unwrap();
        if let Ok(got) = tokio::time::timeout(Duration::from_millis(100), &mut answer).await {
            return got.expect("notified");
        }
    }
    panic!("no change on the disk was reported in 10 s");
}

/// The changes reported on `dir` until one passes `found` (10 s at most).
async fn until(t: &Tree, dir: &smb_client::Handle, found: impl Fn(&Change) -> bool) -> Vec<Change> {
    let mut seen = Vec::new();
    while !seen.iter().any(&found) {
        match within(10, t.change_notify(dir.id(), CHANGES, false)).await {
            Notified::Changes(c) => seen.extend(c),
            other => panic!("{other:?}"),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_on_the_servers_own_disk_are_reported() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let dir = watched_dir(&t, "watched").await;
    let pending = t.start_change_notify(dir.id(), CHANGES, false).await.expect("send");
    let on_disk = smb.share_path().join("watched");
    let got = live(&t, pending, &on_disk.join("sentinel")).await;
    let Notified::Changes(changes) = &got else { panic!("{got:?}") };
    assert!(changes.iter().all(|c| c.name == "sentinel"), "{changes:?}");
    // Changes between two requests are kept for the next.
    std::fs::write(on_disk.join("new.txt"), b"one").unwrap();
    until(&t, &dir, |c| *c == Change { action: Action::Added, name: "new.txt".into() }).await;
    std::fs::write(on_disk.join("new.txt"), b"two, longer").unwrap();
    until(&t, &dir, |c| *c == Change { action: Action::Modified, name: "new.txt".into() }).await;

    // A rename is reported as one (Samba pairs inotify's two events when
    // it reads them together), or as the old name removed and the new one
    // added (when it reads them apart, as under load).
    std::fs::rename(on_disk.join("new.txt"), on_disk.join("renamed.txt")).unwrap();
    let new_name = |c: &Change| c.name == "renamed.txt" && matches!(c.action, Action::RenamedNewName | Action::Added);
    let seen = until(&t, &dir, new_name).await;
    let old_name = |c: &Change| c.name == "new.txt" && matches!(c.action, Action::RenamedOldName | Action::Removed);
    assert!(seen.iter().any(old_name), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_outlives_the_request_timeout() {
    let smb = Samba::start(&[]);
    let mut config = smb.config();
    config.connection.request_timeout = Duration::from_secs(2);
    let s = Session::connect(&config).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let dir = watched_dir(&t, "quiet").await;
    let pending = t.start_change_notify(dir.id(), CHANGES, false).await.expect("send");
    let on_disk = smb.share_path().join("quiet");
    live(&t, pending, &on_disk.join("sentinel")).await;
    // The sentinel's last writes may still come first; then a request waits.
    let late = Change { action: Action::Added, name: "late.txt".into() };
    let waiting = tokio::spawn({
        let (t, late) = (t.clone(), late.clone());
        async move { until(&t, &dir, |c| *c == late).await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!t.conn().is_poisoned(), "a pending watch is not a lost answer");
    assert_eq!(t.conn().in_flight(), 0, "a pending watch is not load");
    std::fs::write(on_disk.join("late.txt"), b"x").unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), waiting).await.expect("in time").unwrap();
    assert!(seen.contains(&late), "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_changes_are_all_reported_or_an_overflow() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let dir = watched_dir(&t, "busy").await;
    let on_disk = smb.share_path().join("busy");
    // Armed by the first request; the rest are kept until the next one.
    let pending = t.start_change_notify(dir.id(), CHANGES, false).await.expect("send");
    live(&t, pending, &on_disk.join("sentinel")).await;
    // 64 KiB of answer holds about 1,200 of these names: kept between two
    // requests, they overflow; taken up by Samba while a request waits,
    // they come in several answers (as on a loaded machine). Either way
    // none is lost unsaid.
    let names: Vec<String> = (0..3000).map(|i| format!("a-rather-long-file-name-{i:05}.bin")).collect();
    for n in &names {
        std::fs::write(on_disk.join(n), b"x").unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut seen = std::collections::HashSet::new();
    let overflowed = loop {
        match within(10, t.change_notify(dir.id(), CHANGES, false)).await {
            Notified::Overflow => break true,
            Notified::Changes(c) => seen.extend(c.into_iter().filter(|c| c.action == Action::Added).map(|c| c.name)),
            Notified::Closed => panic!("closed"),
        }
        if names.iter().all(|n| seen.contains(n)) {
            break false;
        }
    };
    assert!(overflowed || seen.len() >= names.len(), "{} of {} reported, no overflow", seen.len(), names.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_directory_ends_its_watch() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let dir = watched_dir(&t, "closing").await;
    let pending = t.start_change_notify(dir.id(), CHANGES, false).await.expect("send");
    s.echo().await.expect("echo");
    dir.close().await.expect("close");
    assert_eq!(within(10, t.notified(pending)).await, Notified::Closed);
    assert!(!t.conn().is_poisoned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_cannot_be_watched() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    t.write_small("plain.txt", b"x", &[]).await.expect("write");
    let file = t.open(&CreateRequest::open("plain.txt", access::GENERIC_READ)).await.expect("open");
    let err = t.change_notify(file.id(), CHANGES, false).await.expect_err("a file is not a directory");
    assert!(err.to_string().contains("STATUS_INVALID_PARAMETER"), "{err}");
    // The refusal is there once a request sent after it is answered.
    let mut pending = t.start_change_notify(file.id(), CHANGES, false).await.expect("send");
    s.echo().await.expect("echo");
    let err = t.try_notified(&mut pending).expect("answered").expect_err("refused");
    assert!(err.to_string().contains("STATUS_INVALID_PARAMETER"), "{err}");
    // A watch the server holds has no answer yet.
    let dir = watched_dir(&t, "held").await;
    let mut pending = t.start_change_notify(dir.id(), CHANGES, false).await.expect("send");
    s.echo().await.expect("echo");
    assert!(t.try_notified(&mut pending).is_none());
}
