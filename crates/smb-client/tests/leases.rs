//! Leases against a real smbd: what Samba breaks, and when. A lease cache
//! can only serve what the server promises to break; these tests pin down
//! which changes by another client break a Read+Handle lease, that the
//! break is acknowledged at once (the other client does not wait out
//! Samba's 35 s break timeout), and which changes break nothing: a rename
//! over the file and a delete (each the way another gateway instance
//! publishes and deletes), an open for writing that has not written, and
//! a change made on the server's own file system. `docs/leases.md` says
//! what a cache can build on that.

mod common;

use std::time::{Duration, Instant};

use common::Samba;
use smb_client::lease::OnBreak;
use smb_client::{Lease, Session, Tree};
use smb_proto::create::{access, attributes, options, share, CreateRequest, Disposition};
use smb_proto::lease::state;
use smb_proto::NtStatus;

/// Longest any test waits for a break; Samba's own timeout is 35 s.
const BREAK_WAIT: Duration = Duration::from_secs(10);

fn req(name: &str, desired_access: u32, disposition: Disposition) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

async fn tree(smb: &Samba) -> Tree {
    let s = Session::connect(&smb.config()).await.expect("connect");
    s.tree_connect("share").await.expect("tree")
}

/// Puts `body` at `name` through `t`.
async fn put(t: &Tree, name: &str, body: &[u8]) {
    let h = t.open(&req(name, access::GENERIC_READ | access::GENERIC_WRITE, Disposition::OverwriteIf)).await.unwrap();
    t.write(h.id(), 0, body).await.unwrap();
    h.close().await.unwrap();
}

/// Opens `name` for reading with a Read+Handle lease, as a cache would.
async fn leased(t: &Tree, name: &str) -> (smb_client::Handle, Lease) {
    let read = access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA | access::SYNCHRONIZE;
    let (h, lease) = t
        .open_leased(&req(name, read, Disposition::Open), state::READ | state::HANDLE, OnBreak::Acknowledge)
        .await
        .unwrap();
    assert_eq!(lease.state(), state::READ | state::HANDLE, "Samba grants Read+Handle to a reader");
    (h, lease)
}

/// Waits for `lease`'s next break; returns the new state and how long it
/// took from `since`.
async fn next_break(lease: &mut Lease, since: Instant) -> Option<(u32, Duration)> {
    let s = tokio::time::timeout(BREAK_WAIT, lease.changed()).await.ok()?;
    Some((s, since.elapsed()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_another_connection_breaks_read_caching_and_does_not_wait() {
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "w.bin", b"first").await;
    let (_h, mut lease) = leased(&a, "w.bin").await;
    let t0 = Instant::now();
    let w = tokio::time::timeout(BREAK_WAIT, b.open(&req("w.bin", access::GENERIC_WRITE, Disposition::Open)))
        .await
        .expect("the other open waited for an acknowledgment")
        .unwrap();
    b.write(w.id(), 0, b"SECOND").await.unwrap();
    let (s, took) = next_break(&mut lease, t0).await.expect("no break after a write by another client");
    assert_eq!(s & state::READ, 0, "read caching survived a write: {s:#x}");
    eprintln!("write: lease broken to {s:#x} after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwriting_open_from_another_connection_breaks_the_lease() {
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "o.bin", b"first").await;
    let (_h, mut lease) = leased(&a, "o.bin").await;
    let t0 = Instant::now();
    put(&b, "o.bin", b"second").await;
    let (s, took) = next_break(&mut lease, t0).await.expect("no break after an overwrite");
    assert_eq!(s & state::READ, 0, "{s:#x}");
    eprintln!("overwrite: lease broken to {s:#x} after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_over_the_file_from_another_connection_breaks_no_lease() {
    // How smbgate publishes, and how another instance's PUT looks to this
    // one: Samba renames over a file another process holds open, leased,
    // without a break. The holder keeps reading the old version, and a
    // cache that trusted the lease would keep serving it.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "r.bin", b"first").await;
    let (h, mut lease) = leased(&a, "r.bin").await;
    put(&b, "r.tmp", b"second").await;
    let tmp = b.open(&req("r.tmp", access::DELETE | access::FILE_READ_ATTRIBUTES, Disposition::Open)).await.unwrap();
    tokio::time::timeout(BREAK_WAIT, b.rename(tmp.id(), "r.bin", true)).await.expect("the rename waited").unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(2), lease.changed()).await;
    assert!(quiet.is_err(), "Samba broke the lease on a rename over the file: {quiet:?}");
    assert_eq!(lease.state(), state::READ | state::HANDLE);
    assert_eq!(&a.read(h.id(), 0, 64).await.unwrap()[..], b"first", "the holder reads the old version");
    assert_eq!(std::fs::read(smb.share_path().join("r.bin")).unwrap(), b"second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_from_another_connection_breaks_no_lease() {
    // The name goes at once; the file lives on for the holder, unbroken.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "d.bin", b"first").await;
    let (_h, mut lease) = leased(&a, "d.bin").await;
    tokio::time::timeout(BREAK_WAIT, b.delete("d.bin", false)).await.expect("the delete waited").unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(2), lease.changed()).await;
    assert!(quiet.is_err(), "Samba broke the lease on a delete: {quiet:?}");
    assert_eq!(lease.state(), state::READ | state::HANDLE);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_for_writing_breaks_nothing_until_it_writes() {
    // So a publisher cannot warn lease holders by opening the old version
    // for writing: only a write (or a truncate) breaks read caching.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "p.bin", b"first").await;
    let (_h, mut lease) = leased(&a, "p.bin").await;
    let w = b.open(&req("p.bin", access::FILE_WRITE_DATA | access::SYNCHRONIZE, Disposition::Open)).await.unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(1), lease.changed()).await;
    assert!(quiet.is_err(), "an open for writing broke the lease: {quiet:?}");
    let t0 = Instant::now();
    b.write(w.id(), 0, b"F").await.unwrap();
    let (s, took) = next_break(&mut lease, t0).await.expect("no break after the write");
    assert_eq!(s & state::READ, 0, "{s:#x}");
    eprintln!("first write: lease broken to {s:#x} after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_open_breaks_the_handle_lease_and_waits_only_for_the_acknowledgment() {
    // A holder that shares no writing: a writer's open conflicts, so Samba
    // first breaks the Handle lease and waits for the holder to answer
    // (up to 35 s). The acknowledgment goes out at once, the holder keeps
    // its handle, and the writer hears a sharing violation in far less.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "c.bin", b"first").await;
    let read = access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE;
    let holder = CreateRequest { share_access: share::READ | share::DELETE, ..req("c.bin", read, Disposition::Open) };
    let (_h, mut lease) = a.open_leased(&holder, state::READ | state::HANDLE, OnBreak::Acknowledge).await.unwrap();
    assert_eq!(lease.state(), state::READ | state::HANDLE);
    let t0 = Instant::now();
    let opened = tokio::time::timeout(BREAK_WAIT, b.open(&req("c.bin", access::GENERIC_WRITE, Disposition::Open)))
        .await
        .expect("the writer waited out the break: no acknowledgment");
    let took = t0.elapsed();
    assert_eq!(opened.expect_err("the holder kept its handle").status(), Some(NtStatus::STATUS_SHARING_VIOLATION));
    assert_eq!(lease.changed().await & state::HANDLE, 0);
    eprintln!("conflicting open answered after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_made_on_the_server_itself_breaks_nothing() {
    // Samba runs with kernel oplocks off (its default): a program on the
    // server's own file system changes the file behind every lease.
    let smb = Samba::start(&[]);
    let a = tree(&smb).await;
    put(&a, "l.bin", b"first").await;
    let (_h, mut lease) = leased(&a, "l.bin").await;
    std::fs::write(smb.share_path().join("l.bin"), b"changed locally").unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(2), lease.changed()).await;
    assert!(quiet.is_err(), "a local write broke the lease: {quiet:?}");
    assert_eq!(lease.state(), state::READ | state::HANDLE);
}

/// Opens `name` for reading with a Read+Handle lease, sharing only reading:
/// an open with DELETE access then conflicts with it.
async fn leased_sharing_no_delete(t: &Tree, name: &str, on_break: OnBreak) -> (smb_client::Handle, Lease) {
    let read = access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE;
    let holder = CreateRequest { share_access: share::READ, ..req(name, read, Disposition::Open) };
    let (h, lease) = t.open_leased(&holder, state::READ | state::HANDLE, on_break).await.unwrap();
    assert_eq!(lease.state(), state::READ | state::HANDLE);
    (h, lease)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rename_over_a_holder_that_shares_no_delete_breaks_nothing_either() {
    // Samba checks no sharing mode of a rename's target in another process.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "x.bin", b"first").await;
    let (_h, mut lease) = leased_sharing_no_delete(&a, "x.bin", OnBreak::Acknowledge).await;
    put(&b, "x.tmp", b"second").await;
    let tmp = b.open(&req("x.tmp", access::DELETE | access::FILE_READ_ATTRIBUTES, Disposition::Open)).await.unwrap();
    tokio::time::timeout(BREAK_WAIT, b.rename(tmp.id(), "x.bin", true)).await.expect("the rename waited").unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(1), lease.changed()).await;
    assert!(quiet.is_err(), "the rename broke the lease: {quiet:?}");
    assert_eq!(std::fs::read(smb.share_path().join("x.bin")).unwrap(), b"second");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_for_delete_breaks_the_handle_lease_of_a_holder_that_shares_no_delete() {
    // What a writer can do before it renames over or deletes a key: open
    // the current file with DELETE access. Every holder that shares no
    // DELETE loses its Handle lease first; the open goes on once the
    // holder has closed, and hears a sharing violation if it kept it.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "y.bin", b"first").await;
    let (h, mut lease) = leased_sharing_no_delete(&a, "y.bin", OnBreak::Acknowledge).await;
    let for_delete = req("y.bin", access::DELETE | access::FILE_READ_ATTRIBUTES, Disposition::Open);
    let t0 = Instant::now();
    let kept = tokio::time::timeout(BREAK_WAIT, b.open(&for_delete)).await.expect("the open waited out the break");
    assert_eq!(kept.expect_err("the holder kept its handle").status(), Some(NtStatus::STATUS_SHARING_VIOLATION));
    assert_eq!(lease.changed().await & state::HANDLE, 0);
    eprintln!("open for delete beside a holder: answered after {:?}", t0.elapsed());
    h.close().await.unwrap();
    b.open(&for_delete).await.expect("once the holder closed, the open for delete goes on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_that_closes_first_lets_the_open_for_delete_go_on() {
    // What a cache needs: on a Handle break the connection closes the
    // handle before it acknowledges, so the writer's open succeeds.
    let smb = Samba::start(&[]);
    let (a, b) = (tree(&smb).await, tree(&smb).await);
    put(&a, "z.bin", b"first").await;
    let (h, mut lease) = leased_sharing_no_delete(&a, "z.bin", OnBreak::CloseFirst).await;
    let for_delete = req("z.bin", access::DELETE | access::FILE_READ_ATTRIBUTES, Disposition::Open);
    let t0 = Instant::now();
    let opened = tokio::time::timeout(BREAK_WAIT, b.open(&for_delete)).await.expect("the open waited out the break");
    let took = t0.elapsed();
    opened.expect("the holder closed before it acknowledged, so the open for delete goes on");
    assert_eq!(lease.changed().await & state::HANDLE, 0);
    assert!(!h.is_open(), "the holder's handle knows it was closed");
    let again = h.close().await.expect_err("closed already");
    assert_eq!(again.status(), Some(NtStatus::STATUS_FILE_CLOSED));
    eprintln!("open for delete beside a closing holder: answered after {took:?}");
}

/// A TCP proxy to `upstream` that drops every OPLOCK_BREAK message the
/// client sends (lease and oplock break acknowledgments) and passes the
/// rest: a server that never hears, or never answers, an acknowledgment,
/// which Samba itself cannot be made to be. Returns its address and the
/// number of messages dropped so far.
async fn proxy_dropping_acks(upstream: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const OPLOCK_BREAK: u16 = 0x12;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let dropped = std::sync::Arc::new(AtomicUsize::new(0));
    let count = dropped.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut sr, &mut cw).await });
            let count = count.clone();
            tokio::spawn(async move {
                // One transport frame (MS-SMB2 2.1) at a time: a 4-byte
                // length, then the message, its Command at byte 12.
                let mut head = [0u8; 4];
                while cr.read_exact(&mut head).await.is_ok() {
                    let len = u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize;
                    let mut msg = vec![0u8; len];
                    if cr.read_exact(&mut msg).await.is_err() {
                        break;
                    }
                    if len >= 14 && msg[..4] == *b"\xfeSMB" && u16::from_le_bytes([msg[12], msg[13]]) == OPLOCK_BREAK {
                        count.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                    msg.splice(0..0, head);
                    if sw.write_all(&msg).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, dropped)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_break_acknowledgment_does_not_wedge_the_connection() {
    // The holder closes first, so the writer does not wait for the lost
    // acknowledgment; and the holder's connection, which never hears an
    // answer to it, keeps serving past its request timeout.
    use std::sync::atomic::Ordering;
    let smb = Samba::start(&[]);
    let (via, dropped) = proxy_dropping_acks(smb.addr()).await;
    let mut cfg = smb.config();
    cfg.addr = via;
    cfg.connection.request_timeout = Duration::from_secs(2);
    let a = Session::connect(&cfg).await.expect("connect via the proxy").tree_connect("share").await.unwrap();
    let b = tree(&smb).await;
    put(&a, "lost.bin", b"first").await;
    let (h, mut lease) = leased_sharing_no_delete(&a, "lost.bin", OnBreak::CloseFirst).await;
    let for_delete = req("lost.bin", access::DELETE | access::FILE_READ_ATTRIBUTES, Disposition::Open);
    let t0 = Instant::now();
    let opened = tokio::time::timeout(BREAK_WAIT, b.open(&for_delete)).await.expect("the writer waited out the break");
    opened.expect("the holder closed, so the open for delete goes on");
    eprintln!("open for delete beside a holder whose acknowledgment is lost: answered after {:?}", t0.elapsed());
    assert_eq!(lease.changed().await & state::HANDLE, 0);
    assert!(!h.is_open());
    for _ in 0..50 {
        if dropped.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the acknowledgment went out and was lost");
    // Past the request timeout of the acknowledgment nobody answers.
    tokio::time::sleep(Duration::from_secs(3)).await;
    put(&a, "after.bin", b"still serving").await;
    let again =
        a.open(&req("after.bin", access::GENERIC_READ, Disposition::Open)).await.expect("the connection serves");
    assert_eq!(a.read(again.id(), 0, 64).await.unwrap().as_ref(), b"still serving");
    again.close().await.unwrap();
}
