//! Data-path tests against a real smbd: pipelined large transfers checked
//! against smbclient, concurrency across the pool, compounds, rename over an
//! open file, server-side copy, and healing after smbd restarts.

mod common;

use std::time::Duration;

use common::Samba;
use sha2::{Digest, Sha256};
use smb_client::pipeline::DEFAULT_IN_FLIGHT_BYTES;
use smb_client::{Pool, PoolConfig, Session};
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};
use smb_proto::NtStatus;

fn create_rw(name: &str) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::OverwriteIf,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_256mib_round_trip_matches_smbclient() {
    let smb = Samba::start(&["--signing", "mandatory"]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    let data = pattern(256 << 20, 42);
    let want = Sha256::digest(&data);

    let f = t.create(&create_rw("big.bin")).await.expect("create");
    let n = t.write_pipelined(f.file_id, 0, &data, DEFAULT_IN_FLIGHT_BYTES).await.expect("write");
    assert_eq!(n, data.len() as u64);
    let closed = t.close(f.file_id).await.expect("close");
    assert_eq!(closed.times.end_of_file, data.len() as u64);
    drop(data);

    let f = t.open_read("big.bin").await.expect("open");
    let mut h = Sha256::new();
    let mut total = 0u64;
    let got = t
        .read_pipelined(f.file_id, 0, u64::MAX / 2, DEFAULT_IN_FLIGHT_BYTES, |b| {
            total += b.len() as u64;
            h.update(&b);
            Ok(())
        })
        .await
        .expect("read");
    t.close(f.file_id).await.expect("close");
    assert_eq!(got, 256 << 20);
    assert_eq!(total, 256 << 20);
    assert_eq!(h.finalize(), want, "our read-back");

    let local = smb.share_path().join("../smbclient-get.bin");
    smb.smbclient(&format!("get big.bin {}", local.display()));
    let theirs = Sha256::digest(std::fs::read(&local).unwrap());
    assert_eq!(theirs, want, "smbclient get of the same file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_small_ops_across_the_pool() {
    let smb = Samba::start(&[]);
    let pool = Pool::connect(PoolConfig::new(smb.config(), "share", 4)).await.expect("pool");
    assert_eq!(pool.healthy(), 4);
    let mut tasks = Vec::new();
    for i in 0..64u64 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let t = pool.get().await.unwrap();
            let name = format!("small-{i}.txt");
            let body = pattern(1000 + i as usize * 37, i);
            t.write_small(&name, &body, &[]).await.unwrap();
            let st = t.stat(&name).await.unwrap();
            assert_eq!(st.end_of_file, body.len() as u64);
            let (_, got) = pool.get().await.unwrap().read_small(&name, 1 << 20).await.unwrap();
            assert_eq!(&got[..], &body[..]);
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let t = pool.get().await.unwrap();
    let mut names: Vec<String> = t.list_dir("").await.unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    assert_eq!(names.len(), 64);
    assert!(names.contains(&"small-63.txt".to_string()));
}

#[tokio::test]
async fn compounds_and_their_error_semantics() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    // CREATE+QUERY_INFO+CLOSE on a missing file: the CREATE's status.
    let err = t.stat("missing.txt").await.expect_err("missing");
    assert_eq!(err.status(), Some(NtStatus::STATUS_OBJECT_NAME_NOT_FOUND));
    // CREATE+READ+CLOSE of an empty file gives no bytes, not an error.
    t.write_small("empty", b"", &[]).await.unwrap();
    let (cr, data) = t.read_small("empty", 4096).await.unwrap();
    assert_eq!((cr.times.end_of_file, data.len()), (0, 0));
    // Directory + CREATE+QUERY_DIRECTORY+CLOSE with more entries than one page.
    t.mkdir("d").await.unwrap();
    for i in 0..3000 {
        std::fs::write(smb.share_path().join(format!("d/entry-with-a-long-name-{i:05}")), b"").unwrap();
    }
    let entries = t.list_dir("d").await.unwrap();
    assert_eq!(entries.len(), 3000);
    assert_eq!(t.mkdir("d").await.err().unwrap().status(), Some(NtStatus::STATUS_OBJECT_NAME_COLLISION));
    // EAs set in the CREATE come back through QUERY_INFO.
    let ea = smb_proto::info::FullEa { name: "user.smbgate".into(), value: b"{\"a\":1}".to_vec() };
    t.write_small("with-ea", b"x", std::slice::from_ref(&ea)).await.unwrap();
    let f = t.open_read("with-ea").await.unwrap();
    let eas = t.query_eas(f.file_id, &["user.smbgate"]).await.unwrap();
    t.close(f.file_id).await.unwrap();
    assert_eq!(eas.len(), 1);
    assert_eq!(eas[0].value, ea.value);
    t.delete("with-ea", false).await.unwrap();
    assert!(!smb.share_path().join("with-ea").exists());
}

#[tokio::test]
async fn rename_over_a_file_a_reader_holds_open() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let reader_tree = s.tree_connect("share").await.unwrap();
    let writer = Session::connect(&smb.config()).await.unwrap().tree_connect("share").await.unwrap();
    writer.write_small("obj", b"old version", &[]).await.unwrap();
    let held = reader_tree.open_read("obj").await.unwrap();

    let tmp = writer.create(&create_rw("tmp-1")).await.unwrap();
    writer.write(tmp.file_id, 0, b"new version!").await.unwrap();
    writer.rename(tmp.file_id, "obj", true).await.expect("rename over the open file");
    writer.close(tmp.file_id).await.unwrap();

    // The old handle still reads the old bytes; a new open sees the new ones.
    let old = reader_tree.read(held.file_id, 0, 100).await.unwrap();
    assert_eq!(&old[..], b"old version");
    reader_tree.close(held.file_id).await.unwrap();
    let (_, new) = reader_tree.read_small("obj", 100).await.unwrap();
    assert_eq!(&new[..], b"new version!");
    // Without ReplaceIfExists the rename must fail.
    let tmp = writer.create(&create_rw("tmp-2")).await.unwrap();
    let err = writer.rename(tmp.file_id, "obj", false).await.err().unwrap();
    assert_eq!(err.status(), Some(NtStatus::STATUS_OBJECT_NAME_COLLISION));
    writer.close(tmp.file_id).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_copy() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.unwrap();
    let data = pattern(40 << 20 | 12345, 7);
    let f = t.create(&create_rw("src.bin")).await.unwrap();
    t.write_pipelined(f.file_id, 0, &data, DEFAULT_IN_FLIGHT_BYTES).await.unwrap();
    let dst = t.create(&create_rw("dst.bin")).await.unwrap();
    let n = t.copy_chunks(f.file_id, 0, dst.file_id, 0, data.len() as u64).await.expect("copychunk");
    assert_eq!(n, data.len() as u64);
    // A second copy appends a slice at an offset.
    t.copy_chunks(f.file_id, 100, dst.file_id, data.len() as u64, 1000).await.unwrap();
    t.close(dst.file_id).await.unwrap();
    t.close(f.file_id).await.unwrap();
    let got = std::fs::read(smb.share_path().join("dst.bin")).unwrap();
    assert_eq!(got.len(), data.len() + 1000);
    assert!(got[..data.len()] == data[..], "copied bytes differ");
    assert!(got[data.len()..] == data[100..1100]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_heals_after_smbd_restart() {
    let smb = Samba::start(&[]);
    let mut cfg = PoolConfig::new(smb.config(), "share", 3);
    cfg.acquire_timeout = Duration::from_secs(20);
    let pool = Pool::connect(cfg).await.expect("pool");
    pool.run(|t| async move { t.write_small("before", b"1", &[]).await }).await.unwrap();

    smb.kill();
    // In-flight and new work on the dead connections fails cleanly.
    let err = pool.get().await.unwrap().read_small("before", 10).await.expect_err("server is down");
    assert!(err.is_connection_error(), "{err}");
    smb.restart();

    // The pool replaces the poisoned connections in the background.
    let (_, data) = pool.run(|t| async move { t.read_small("before", 10).await }).await.expect("healed");
    assert_eq!(&data[..], b"1");
    for _ in 0..100 {
        if pool.healthy() == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(pool.healthy(), 3);
}

/// Polls `f` every 10 ms for up to 10 s.
async fn wait_until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("gave up waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_halves_its_in_flight_budget_when_smbd_dies_under_load() {
    // failure class 7: a server that resets connections carrying megabytes of
    // READs gets half the bytes in flight per stream; one that drops idle
    // connections (failure class 10) does not.
    let smb = Samba::start(&[]);
    let mut cfg = PoolConfig::new(smb.config(), "share", 2);
    cfg.acquire_timeout = Duration::from_secs(20);
    let pool = Pool::connect(cfg).await.expect("pool");
    assert_eq!(pool.in_flight_budget(), DEFAULT_IN_FLIGHT_BYTES);
    let len = 32 << 20;
    let t = pool.get().await.unwrap();
    let f = t.create(&create_rw("big")).await.unwrap();
    t.write_pipelined(f.file_id, 0, &pattern(len, 9), DEFAULT_IN_FLIGHT_BYTES).await.unwrap();
    t.close(f.file_id).await.unwrap();

    smb.kill();
    wait_until("both connections see the idle drop", || pool.healthy() == 0).await;
    assert_eq!(pool.in_flight_budget(), DEFAULT_IN_FLIGHT_BYTES, "an idle drop is not a loss under load");
    smb.restart();
    wait_until("the pool heals", || pool.healthy() == 2).await;

    // smbd stops answering while a pipelined READ has its window out, then
    // dies: the connection is reset with those READs outstanding.
    let t = pool.get().await.unwrap();
    let f = t.open_read("big").await.unwrap();
    smb.freeze();
    let reader = tokio::spawn({
        let t = t.clone();
        async move { t.read_pipelined(f.file_id, 0, len as u64, DEFAULT_IN_FLIGHT_BYTES, |_| Ok(())).await }
    });
    wait_until("READs are outstanding", || t.conn().in_flight() >= 2).await;
    smb.kill();
    let e = reader.await.unwrap().expect_err("smbd died mid-read");
    assert!(e.is_connection_error(), "{e}");
    assert_eq!(pool.in_flight_budget(), DEFAULT_IN_FLIGHT_BYTES / 2);
    // Not regained while connections are down (retries may be in flight).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(pool.in_flight_budget(), DEFAULT_IN_FLIGHT_BYTES / 2);
    smb.restart();
    wait_until("the pool heals", || pool.healthy() == 2).await;
    let (_, head) = pool.get().await.unwrap().read_small("big", 16).await.unwrap();
    assert_eq!(&head[..], &pattern(len, 9)[..16]);

    // One 1 MiB READ outstanding (a small GET's first READ) is not load.
    let t = pool.get().await.unwrap();
    let f = t.open_read("big").await.unwrap();
    smb.freeze();
    let one = tokio::spawn({
        let t = t.clone();
        async move { t.read(f.file_id, 0, 1 << 20).await }
    });
    wait_until("the READ is outstanding", || t.conn().in_flight() >= 1).await;
    smb.kill();
    assert!(one.await.unwrap().is_err());
    wait_until("the connection sees the reset", || t.conn().is_poisoned()).await;
    // (It has been growing back since the pool healed; halving would take
    // it well below where it was.)
    let b = pool.in_flight_budget();
    assert!(b >= DEFAULT_IN_FLIGHT_BYTES / 2, "one small READ lowered the budget to {b}");
    smb.restart();
}

#[tokio::test]
async fn normalized_name_reports_the_on_disk_case() {
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.unwrap();
    t.mkdir("Dir").await.unwrap();
    t.write_small("Dir\\File.txt", b"x", &[]).await.unwrap();
    let f = t.open_read("dir\\file.TXT").await.expect("case-insensitive open");
    let name = t.normalized_name(f.file_id).await.expect("FileNormalizedNameInformation");
    t.close(f.file_id).await.unwrap();
    assert_eq!(name, "Dir\\File.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_compounds_larger_than_the_credit_window_is_sent_in_parts() {
    // Issue 10 (failure class 2): 3,000 CREATE+CLOSE chains need 6,000
    // credits, more than the window holds (the client asks for 2,048). One
    // batch would wait for credits that never come; in parts, every chain
    // is answered.
    let smb = Samba::start(&[]);
    let s = Session::connect(&smb.config()).await.expect("connect");
    let t = s.tree_connect("share").await.expect("tree");
    assert!(t.conn().credit_window() < 6000, "window {}", t.conn().credit_window());
    let names: Vec<String> = (0..3000).map(|i| format!("missing-{i}")).collect();
    let opens: Vec<CreateRequest<'_>> =
        names.iter().map(|n| CreateRequest { disposition: Disposition::Open, ..create_rw(n) }).collect();
    let close = smb_proto::create::CloseRequest { file_id: smb_proto::create::FileId::RELATED, post_query: false };
    let chains: Vec<[&dyn smb_proto::Request; 2]> =
        opens.iter().map(|o| [o as &dyn smb_proto::Request, &close]).collect();
    let refs: Vec<&[&dyn smb_proto::Request]> = chains.iter().map(|c| &c[..]).collect();
    let answers = tokio::time::timeout(Duration::from_secs(50), t.compounds(&refs))
        .await
        .expect("the batch waited for credits it could not get")
        .expect("compounds");
    assert_eq!(answers.len(), 3000);
    assert!(answers.iter().all(|a| a[0].status() == NtStatus::STATUS_OBJECT_NAME_NOT_FOUND));
    assert!(!t.conn().is_poisoned());
}
