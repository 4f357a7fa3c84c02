//! Fault injection against a scripted fake SMB2 server (tests/fake): the
//! wire and connection faults of docs/failure-classes.md that a real Samba cannot be
//! made to produce. Every test is bounded by a timeout and checks exact
//! values: data, errors, MessageIds, credit windows.

mod fake;

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fake::{
    build, error_body, output_body, read_body, read_body_raw, write_body, Auth, FakeConn, GrantFn, Msg, Opts, FILE_ID,
};
use smb_client::pipeline::DEFAULT_IN_FLIGHT_BYTES;
use smb_client::{Error, Session, Tree};
use smb_proto::header::flags;
use smb_proto::io::ReadRequest;
use smb_proto::negotiate::{dialect, SigningAlgorithm};
use smb_proto::transform::TransformHeader;
use smb_proto::{Command, Header, NtStatus, Request};

const OK: NtStatus = NtStatus::STATUS_SUCCESS;
const TIMEOUT: Duration = Duration::from_secs(2);

/// Runs a test body with a hard deadline, so that no test can hang.
async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("test did not finish within 30 s")
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

async fn connect(addr: &str, request_timeout: Duration) -> (Session, Tree) {
    connect_with(fake::config(addr, request_timeout)).await
}

/// As the fake's user, for its signed (`Auth::User`) sessions.
async fn connect_user(addr: &str, request_timeout: Duration) -> (Session, Tree) {
    connect_with(fake::user_config(addr, request_timeout)).await
}

async fn connect_with(cfg: smb_client::ClientConfig) -> (Session, Tree) {
    let s = Session::connect(&cfg).await.expect("session setup with the fake");
    let t = s.tree_connect("share").await.expect("tree connect");
    assert_eq!(t.tree_id(), fake::TREE_ID);
    (s, t)
}

/// Asserts `t` is poisoned and that a new call fails at once with the
/// error that poisoned it.
async fn assert_dead(t: &Tree, want: &str) {
    assert!(t.conn().is_poisoned(), "connection not poisoned");
    let t0 = Instant::now();
    let e = t.read(FILE_ID, 0, 10).await.expect_err("call on a poisoned connection");
    assert!(t0.elapsed() < Duration::from_millis(200), "call on a poisoned connection took {:?}", t0.elapsed());
    assert_eq!(e.to_string(), want);
}

// 1. Out-of-order replies -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_order_read_replies_are_delivered_in_file_order() {
    bounded(async {
        const LEN: usize = 15 * 65536 + 12345;
        let file = pattern(LEN, 1);
        let served = file.clone();
        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            fc.answer_create(LEN as u64).await;
            let mut reads = Vec::new();
            while reads.len() < 16 {
                reads.push(fc.expect(Command::Read).await);
            }
            let asked: Vec<(u64, u32)> = reads.iter().map(Msg::read_args).collect();
            let ids: Vec<u64> = reads.iter().map(|m| m.hdr.message_id).collect();
            // All sixteen answers in one TCP write, last chunk first.
            let mut out = Vec::new();
            for r in reads.iter().rev() {
                let m = fc.answer_read(r, &served);
                out.extend(fc.frame(vec![m]));
            }
            fc.write_raw(&out).await;
            fc.answer_close(LEN as u64).await;
            fc.expect_eof().await;
            (asked, ids)
        })
        .await;

        let (s, t) = connect(&addr, TIMEOUT).await;
        let f = t.open_read("f.bin").await.unwrap();
        assert_eq!(f.file_id, FILE_ID);
        assert_eq!(f.times.end_of_file, LEN as u64);
        let mut pieces: Vec<Bytes> = Vec::new();
        let n = t
            .read_pipelined(f.file_id, 0, LEN as u64, DEFAULT_IN_FLIGHT_BYTES, |b| {
                pieces.push(b);
                Ok(())
            })
            .await
            .unwrap();
        t.close(f.file_id).await.unwrap();
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        let (asked, ids) = fake::join(fake).await;

        let want: Vec<(u64, u32)> = (0..16u64).map(|i| (i * 65536, if i < 15 { 65536 } else { 12345 })).collect();
        assert_eq!(asked, want, "one READ per 64 KiB chunk, in file order");
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "consecutive MessageIds: {ids:?}");
        assert_eq!(n, LEN as u64);
        let lens: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
        assert_eq!(lens, want.iter().map(|&(_, l)| l as usize).collect::<Vec<_>>());
        assert!(pieces.concat() == file, "delivered bytes differ from the file");
    })
    .await;
}

// 2. STATUS_PENDING ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_pending_response_is_not_the_answer() {
    bounded(async {
        let data = pattern(100, 2);
        let served = data.clone();
        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            assert_eq!(r.read_args(), (0, 100));
            let interim = fc.interim(&r, 0x77, 5);
            fc.send_one(interim).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            let mut h = fc.header(&r, OK);
            h.async_id = Some(0x77);
            h.credits = 1;
            fc.send_one(build(&h, &read_body(&served))).await;
            fc.expect_eof().await;
        })
        .await;

        let (s, t) = connect(&addr, TIMEOUT).await;
        let before = t.conn().credits_available();
        let t0 = Instant::now();
        let (got, during) = tokio::join!(t.read(FILE_ID, 0, 100), async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            t.conn().credits_available()
        });
        let got = got.expect("final response");
        assert!(t0.elapsed() >= Duration::from_millis(300), "returned before the final response");
        assert_eq!(&got[..], &data[..]);
        // The interim's (unsigned) grant counts only once the final came.
        assert_eq!(during, before - 1, "credits between the interim and the final answer");
        // Charge 1; the interim granted 5 and the final 1.
        assert_eq!(t.conn().credits_available(), before - 1 + 5 + 1);
        assert_eq!(t.conn().in_flight(), 0);
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_pending_inside_a_compound() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let msgs = fc.recv().await.expect("compound");
            let cmds: Vec<Command> = msgs.iter().map(|m| m.hdr.command).collect();
            assert_eq!(cmds, [Command::Create, Command::Read, Command::Close]);
            assert_eq!(msgs[0].hdr.flags & flags::RELATED_OPERATIONS, 0);
            assert_ne!(msgs[1].hdr.flags & flags::RELATED_OPERATIONS, 0);
            assert_ne!(msgs[2].hdr.flags & flags::RELATED_OPERATIONS, 0);
            // First frame: the CREATE's answer and an interim for the READ.
            let create = fc.reply(&msgs[0], OK, &fake::create_body(11));
            let interim = fc.interim(&msgs[1], 0x99, 0);
            fc.send(vec![create, interim]).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            // Second frame: the READ's final answer and the CLOSE.
            let mut h = fc.header(&msgs[1], OK);
            h.async_id = Some(0x99);
            let read = build(&h, &read_body(b"hello world"));
            let close = fc.reply(&msgs[2], OK, &fake::close_body(11));
            fc.send(vec![read, close]).await;
            fc.expect_eof().await;
        })
        .await;

        let (s, t) = connect(&addr, TIMEOUT).await;
        let (cr, data) = t.read_small("dir/small.txt", 4096).await.expect("read_small");
        assert_eq!(cr.file_id, FILE_ID);
        assert_eq!(cr.times.end_of_file, 11);
        assert_eq!(&data[..], b"hello world");
        assert_eq!(t.conn().in_flight(), 0);
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

// 3. Credit window ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_read_stays_inside_a_one_credit_per_reply_window() {
    bounded(async {
        const LEN: usize = 16 * 65536;
        let file = pattern(LEN, 3);
        let served = file.clone();
        // Every response grants 1 credit, except the CREATE's, which grants
        // 4: the client holds a window of exactly 4 from then on.
        let grant: GrantFn = Box::new(|h: &Header| if h.command == Command::Create { 4 } else { 1 });
        let opts = Opts { grant, ..Opts::default() };
        let (addr, fake) = fake::start(opts, move |mut fc: FakeConn| async move {
            fc.answer_create(LEN as u64).await;
            let mut pending = Vec::new();
            let (mut total, mut rounds) = (0, 0);
            while total < 16 {
                // The fake checks every request against the window it granted.
                pending.push(fc.expect(Command::Read).await);
                total += 1;
                // Answer once the client has spent its whole window.
                if fc.highest_end == fc.window_end() || total == 16 {
                    rounds += 1;
                    for r in pending.drain(..) {
                        let m = fc.answer_read(&r, &served);
                        fc.send_one(m).await;
                    }
                }
            }
            fc.answer_close(LEN as u64).await;
            fc.expect_eof().await;
            (rounds, fc.max_outstanding)
        })
        .await;

        let (s, t) = connect(&addr, TIMEOUT).await;
        let f = t.open_read("f.bin").await.unwrap();
        assert_eq!(t.conn().credits_available(), 4);
        let mut got = Vec::with_capacity(LEN);
        let n = t
            .read_pipelined(f.file_id, 0, LEN as u64, DEFAULT_IN_FLIGHT_BYTES, |b| {
                got.extend_from_slice(&b);
                Ok(())
            })
            .await
            .unwrap();
        t.close(f.file_id).await.unwrap();
        assert_eq!(t.conn().credits_available(), 4);
        drop((t, s));
        let (rounds, max_outstanding) = fake::join(fake).await;
        assert_eq!(n, LEN as u64);
        assert!(got == file, "delivered bytes differ from the file");
        assert_eq!(max_outstanding, 4, "the client keeps exactly its window in flight");
        assert_eq!(rounds, 4);
    })
    .await;
}

/// failure class 2, "split oversized I/O": the server's whole window (8
/// credits = 512 KiB) is smaller than one MaxReadSize READ (1 MiB = 16
/// credits). The client must split the READ to fit the window instead of
/// waiting for credits that can never come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_larger_than_the_credit_window_is_split() {
    bounded(async {
        const LEN: usize = 1 << 20;
        let file = pattern(LEN, 4);
        let served = file.clone();
        // A window of 8: NEGOTIATE grants 8, every later response gives
        // back just its charge.
        let grant: GrantFn =
            Box::new(|h: &Header| if h.command == Command::Negotiate { 8 } else { h.credit_charge.max(1) });
        let opts = Opts { grant, max_read: 1 << 20, ..Opts::default() };
        let (addr, fake) = fake::start(opts, move |mut fc: FakeConn| async move {
            while let Some(msgs) = fc.recv().await {
                for r in msgs {
                    let m = fc.answer_read(&r, &served);
                    fc.send_one(m).await;
                }
            }
        })
        .await;
        let (s, t) = connect(&addr, Duration::from_secs(1)).await;
        assert_eq!(t.conn().credits_available(), 8);
        let mut got = Vec::new();
        let r = t
            .read_pipelined(FILE_ID, 0, LEN as u64, DEFAULT_IN_FLIGHT_BYTES, |b| {
                got.extend_from_slice(&b);
                Ok(())
            })
            .await;
        drop((t, s));
        fake::join(fake).await;
        assert_eq!(r.expect("read within an 8-credit window"), LEN as u64);
        assert!(got == file);
    })
    .await;
}

// 4. Desynchronised stream ----------------------------------------------------

/// One way of corrupting the answer to a READ: gets the valid frame
/// (transport header included) and returns the bytes to send instead.
type Mangle = fn(Vec<u8>) -> Vec<u8>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_server_poisons_the_connection() {
    let cases: Vec<(&str, Mangle, &str)> = vec![
        (
            "bad ProtocolId",
            |mut f| {
                f[4] = 0xFF;
                f
            },
            "malformed response: bad ProtocolId: got 0x424d53ff",
        ),
        (
            "NetBIOS length, then garbage",
            |_| {
                let mut f = vec![0, 0, 0, 100];
                f.extend_from_slice(&[0xAB; 100]);
                f
            },
            "malformed response: bad ProtocolId: got 0xabababab",
        ),
        (
            "not a direct-TCP transport header",
            |_| b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(),
            "malformed response: bad transport header: got 0x48",
        ),
        (
            "frame shorter than any header",
            |_| vec![0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            "connection lost: protocol violation: frame length 10",
        ),
        (
            "header cut short",
            |f| {
                let mut g = vec![0, 0, 0, 60];
                g.extend_from_slice(&f[4..64]);
                g
            },
            "malformed response: truncated while reading Signature",
        ),
        (
            "NextCommand past the frame",
            |mut f| {
                f[4 + 20..4 + 24].copy_from_slice(&4096u32.to_le_bytes());
                f
            },
            "malformed response: NextCommand offset/length outside the message",
        ),
        (
            "unknown command",
            |mut f| {
                f[4 + 12..4 + 14].copy_from_slice(&0x99u16.to_le_bytes());
                f
            },
            "malformed response: bad Command: got 0x99",
        ),
        (
            "a request instead of a response",
            |mut f| {
                f[4 + 16] &= !(flags::SERVER_TO_REDIR as u8);
                f
            },
            "connection lost: protocol violation: server sent a request",
        ),
        (
            "encrypted message on a session without a cipher",
            |f| {
                let th = TransformHeader {
                    signature: [0; 16],
                    nonce: [0; 16],
                    original_message_size: (f.len() - 4) as u32,
                    flags: 1,
                    session_id: fake::SESSION_ID,
                };
                let mut b = bytes::BytesMut::new();
                th.encode(&mut b);
                b.extend_from_slice(&f[4..]);
                let mut g = (b.len() as u32).to_be_bytes().to_vec();
                g.extend_from_slice(&b);
                g
            },
            "response failed its integrity check: encrypted message without a cipher",
        ),
    ];
    bounded(async {
        for (name, mangle, want) in cases {
            let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
                let r = fc.expect(Command::Read).await;
                let m = fc.answer_read(&r, &[1u8; 100]);
                let f = fc.frame(vec![m]);
                fc.write_raw(&mangle(f)).await;
                // Nothing more may be sent on the poisoned connection.
                fc.expect_eof().await;
            })
            .await;
            let (s, t) = connect(&addr, TIMEOUT).await;
            let e = t.read(FILE_ID, 0, 100).await.expect_err(name);
            assert_eq!(e.to_string(), want, "{name}");
            assert!(e.is_connection_error(), "{name}: {e:?} is not a connection error");
            assert_dead(&t, want).await;
            drop((t, s));
            fake::join(fake).await;
        }
    })
    .await;
}

// 5. Close mid-frame ----------------------------------------------------------

/// Three pipelined READs of `len` bytes; the server answers the first, sends
/// part of the second (`cut(frame_len)` bytes of its frame) and then closes
/// with FIN or RST. Frames over 128 KiB take the reader's own-buffer path.
async fn close_mid_frame(rst: bool, len: u32, cut: fn(usize) -> usize) -> Error {
    let file = pattern(3 * len as usize, 5);
    let served = file.clone();
    let opts = Opts { max_read: len.max(65536), ..Opts::default() };
    let (addr, fake) = fake::start(opts, move |mut fc: FakeConn| async move {
        let reads = [fc.expect(Command::Read).await, fc.expect(Command::Read).await, fc.expect(Command::Read).await];
        let a = fc.answer_read(&reads[0], &served);
        fc.send_one(a).await;
        // Part of the second answer...
        let b = fc.answer_read(&reads[1], &served);
        let f = fc.frame(vec![b]);
        fc.write_raw(&f[..cut(f.len())]).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        // ... then FIN, or RST.
        if rst {
            socket2::SockRef::from(&fc.stream).set_linger(Some(Duration::ZERO)).unwrap();
        }
        drop(fc);
    })
    .await;
    let (s, t) = connect(&addr, TIMEOUT).await;
    let reqs: Vec<ReadRequest> = (0..3)
        .map(|i| ReadRequest { file_id: FILE_ID, length: len, offset: i * len as u64, minimum_count: 0 })
        .collect();
    let bodies: Vec<&dyn Request> = reqs.iter().map(|r| r as &dyn Request).collect();
    let rxs = t.send_many(&bodies).await.unwrap();
    let mut results = Vec::new();
    for rx in rxs {
        results.push(t.conn().wait(rx).await);
    }
    fake::join(fake).await;
    let first = results.remove(0).expect("the complete answer is delivered");
    assert_eq!(first.header.command, Command::Read);
    assert_eq!(&smb_proto::io::ReadResponse::decode(&first.msg).unwrap().data[..], &file[..len as usize]);
    let e1 = results.remove(0).expect_err("the half-sent answer");
    let e2 = results.remove(0).expect_err("the unanswered request");
    assert_eq!(e1.to_string(), e2.to_string());
    assert!(matches!(e1, Error::ConnectionLost(_)), "{e1:?}");
    assert!(e1.is_connection_error());
    assert_dead(&t, &e1.to_string()).await;
    // The pool backs off on losses with requests outstanding (failure class
    // 7): two READs were, whatever their charge.
    let charge = smb_proto::header::credit_charge(len as u64) as usize;
    assert_eq!(t.conn().take_lost_in_flight(), 2 * charge * 65536, "READ of {len}");
    assert_eq!(t.conn().take_lost_in_flight(), 0, "taken once");
    // poison() fails the waiters before it zeroes the load counter, so the
    // counter may lag a moment behind the errors.
    let t0 = Instant::now();
    while t.conn().in_flight() != 0 {
        assert!(t0.elapsed() < Duration::from_secs(1), "in_flight stuck at {}", t.conn().in_flight());
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop((t, s));
    e1
}

/// Inside the SMB2 header of a small frame.
fn in_header(_: usize) -> usize {
    40
}

/// In the middle of a large frame's payload.
fn mid_payload(frame_len: usize) -> usize {
    frame_len / 2
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fin_inside_a_frame_fails_pending_calls_cleanly() {
    for (len, cut) in [(1000, in_header as fn(usize) -> usize), (300_000, mid_payload)] {
        let e = bounded(close_mid_frame(false, len, cut)).await;
        assert_eq!(e.to_string(), "connection lost: server closed the connection", "READ of {len}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rst_inside_a_frame_fails_pending_calls_cleanly() {
    for (len, cut) in [(1000, in_header as fn(usize) -> usize), (300_000, mid_payload)] {
        let e = bounded(close_mid_frame(true, len, cut)).await;
        let msg = e.to_string();
        assert!(msg.starts_with("connection lost: read: ") && msg.contains("reset"), "READ of {len}: {msg}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_lost_idle_or_closed_in_order_report_nothing_in_flight() {
    bounded(async {
        // The server drops an idle connection (failure class 10, not 7).
        let (addr, fake) = fake::start(Opts::default(), |fc: FakeConn| async move { drop(fc) }).await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        fake::join(fake).await;
        let t0 = Instant::now();
        while !t.conn().is_poisoned() {
            assert!(t0.elapsed() < Duration::from_secs(2), "EOF not noticed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(t.conn().take_lost_in_flight(), 0);
        drop((t, s));

        // The client closes a connection with a request outstanding.
        let (got_tx, got_rx) = tokio::sync::oneshot::channel::<()>();
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let _r = fc.expect(Command::Read).await;
            let _ = got_tx.send(());
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let req = ReadRequest { file_id: FILE_ID, length: 1 << 20, offset: 0, minimum_count: 0 };
        let rx = t.send_many(&[&req as &dyn Request]).await.unwrap();
        got_rx.await.unwrap();
        t.conn().close();
        for rx in rx {
            assert!(t.conn().wait(rx).await.is_err());
        }
        assert_eq!(t.conn().take_lost_in_flight(), 0);
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

// 6. Stalls -------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_server_times_out_and_poisons() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let _r = fc.expect(Command::Read).await;
            // Never answer; the client must give up and close.
            fc.expect_eof().await;
        })
        .await;
        let timeout = Duration::from_secs(1);
        let (s, t) = connect(&addr, timeout).await;
        let t0 = Instant::now();
        let e = t.read(FILE_ID, 0, 100).await.expect_err("no answer");
        let took = t0.elapsed();
        assert_eq!(e.to_string(), "timed out: no response from server");
        assert!(matches!(e, Error::Timeout(_)));
        assert!(took >= timeout && took < timeout + Duration::from_millis(500), "took {took:?}");
        assert_dead(&t, "timed out: no response from server").await;
        assert_eq!(t.conn().in_flight(), 0);
        assert_eq!(t.conn().take_lost_in_flight(), 65536, "one READ of one credit was outstanding");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_that_stops_reading_stalls_the_writer_into_a_timeout() {
    bounded(async {
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let opts = Opts { max_write: 1 << 20, ..Opts::default() };
        let (addr, fake) = fake::start(opts, move |fc: FakeConn| async move {
            // Stop reading: the client's socket buffers fill up.
            let _ = done_rx.await;
            drop(fc);
        })
        .await;
        let timeout = Duration::from_secs(1);
        let (s, t) = connect(&addr, timeout).await;
        let data = vec![0x5au8; 48 << 20];
        let t0 = Instant::now();
        let e = t.write_pipelined(FILE_ID, 0, &data, DEFAULT_IN_FLIGHT_BYTES).await.expect_err("stalled");
        let took = t0.elapsed();
        assert!(matches!(e, Error::Timeout(_)), "{e:?}");
        assert!(took >= timeout && took < 3 * timeout, "took {took:?}");
        assert!(t.conn().is_poisoned());
        let _ = done_tx.send(());
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

// 7. Zero and odd WRITE counts ---------------------------------------------------

/// Serves WRITEs into a file, answering each with `count(i, len)` for the
/// i-th WRITE; returns the `(offset, len)` of every WRITE and the file.
async fn write_fake(count: fn(usize, u32) -> u32) -> (String, tokio::task::JoinHandle<(Vec<(u64, u32)>, Vec<u8>)>) {
    fake::start(Opts::default(), move |mut fc: FakeConn| async move {
        let mut log = Vec::new();
        let mut file = Vec::new();
        while let Some(msgs) = fc.recv().await {
            for w in msgs {
                let (off, data) = w.write_args();
                let n = count(log.len(), data.len() as u32);
                log.push((off, data.len() as u32));
                let keep = (n as usize).min(data.len());
                let end = off as usize + keep;
                if file.len() < end {
                    file.resize(end, 0);
                }
                file[off as usize..end].copy_from_slice(&data[..keep]);
                let m = fc.reply(&w, OK, &write_body(n));
                fc.send_one(m).await;
            }
        }
        (log, file)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_progress_write_is_an_error_not_a_loop() {
    bounded(async {
        let (addr, fake) = write_fake(|_, _| 0).await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let data = pattern(100_000, 7);
        let e = t.write_pipelined(FILE_ID, 0, &data, DEFAULT_IN_FLIGHT_BYTES).await.expect_err("zero progress");
        assert_eq!(e.to_string(), "protocol: WRITE made no progress");
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        let (log, _) = fake::join(fake).await;
        // Two pipelined WRITEs, then one retry of the first one's tail.
        assert_eq!(log, [(0, 65536), (65536, 100_000 - 65536), (0, 65536)]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_write_is_completed() {
    bounded(async {
        let (addr, fake) = write_fake(|i, len| if i == 0 { 1000 } else { len }).await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let data = pattern(100_000, 8);
        let n = t.write_pipelined(FILE_ID, 0, &data, DEFAULT_IN_FLIGHT_BYTES).await.expect("write");
        assert_eq!(n, 100_000);
        drop((t, s));
        let (log, file) = fake::join(fake).await;
        assert_eq!(log, [(0, 65536), (65536, 100_000 - 65536), (1000, 65536 - 1000)]);
        assert!(file == data, "file content differs");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_reporting_more_than_sent_is_an_error() {
    bounded(async {
        let (addr, fake) = write_fake(|_, len| len + 1).await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.write_pipelined(FILE_ID, 0, &[9u8; 1000], DEFAULT_IN_FLIGHT_BYTES).await.expect_err("over-count");
        assert_eq!(e.to_string(), "protocol: WRITE reported 1001 bytes for 1000 sent");
        drop((t, s));
        let (log, _) = fake::join(fake).await;
        assert_eq!(log, [(0, 1000)]);
    })
    .await;
}

// 8. Responses nobody asked for ---------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_for_an_unknown_message_id_poisons() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let mut h = fc.header(&r, OK);
            h.message_id += 1000;
            fc.send_one(build(&h, &read_body(b"stray"))).await;
            fc.expect_eof().await;
            r.hdr.message_id + 1000
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("stray response");
        let want = e.to_string();
        assert!(e.is_connection_error(), "{e:?}");
        assert_dead(&t, &want).await;
        drop((t, s));
        let stray = fake::join(fake).await;
        assert_eq!(want, format!("connection lost: protocol violation: response for unknown MessageId {stray}"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_response_poisons_after_delivering_the_first() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let m = fc.reply(&r, OK, &read_body(b"once"));
            let mut out = fc.frame(vec![m.clone()]);
            out.extend(fc.frame(vec![m]));
            fc.write_raw(&out).await;
            fc.expect_eof().await;
            r.hdr.message_id
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let got = t.read(FILE_ID, 0, 100).await.expect("first copy");
        assert_eq!(&got[..], b"once");
        let t0 = Instant::now();
        while !t.conn().is_poisoned() {
            assert!(t0.elapsed() < Duration::from_secs(2), "duplicate did not poison the connection");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let e = t.read(FILE_ID, 0, 10).await.expect_err("poisoned");
        drop((t, s));
        let id = fake::join(fake).await;
        assert_eq!(e.to_string(), format!("connection lost: protocol violation: response for unknown MessageId {id}"));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interim_for_an_unknown_message_id_poisons() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let mut h = fc.header(&r, NtStatus::STATUS_PENDING);
            h.message_id += 7;
            h.async_id = Some(1);
            fc.send_one(build(&h, &error_body())).await;
            fc.expect_eof().await;
            r.hdr.message_id + 7
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("stray interim");
        assert!(e.is_connection_error(), "{e:?}");
        assert_dead(&t, &e.to_string()).await;
        drop((t, s));
        let id = fake::join(fake).await;
        assert_eq!(
            e.to_string(),
            format!("connection lost: protocol violation: interim response for unknown MessageId {id}")
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsolicited_oplock_break_is_ignored() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            for data in [&b"one"[..], b"two"] {
                let r = fc.expect(Command::Read).await;
                let mut h = Header::request(Command::OplockBreak);
                h.flags = flags::SERVER_TO_REDIR;
                h.message_id = u64::MAX;
                h.credits = 0;
                let mut body = 24u16.to_le_bytes().to_vec();
                body.extend_from_slice(&[0; 22]);
                let brk = build(&h, &body);
                let m = fc.reply(&r, OK, &read_body(data));
                let mut out = fc.frame(vec![brk]);
                out.extend(fc.frame(vec![m]));
                fc.write_raw(&out).await;
            }
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        assert_eq!(&t.read(FILE_ID, 0, 100).await.unwrap()[..], b"one");
        assert_eq!(&t.read(FILE_ID, 0, 100).await.unwrap()[..], b"two");
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

// 9. Lying READ responses --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_response_with_bad_offsets_is_a_decode_error() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "DataLength past the end",
            read_body_raw(80, 1000, &[7; 10]),
            "malformed response: READ Data offset/length outside the message",
        ),
        (
            "DataOffset past the end",
            read_body_raw(255, 1, &[7; 10]),
            "malformed response: READ Data offset/length outside the message",
        ),
        (
            "DataOffset pointing into the SMB2 header",
            read_body_raw(0, 16, &[7; 16]),
            "malformed response: READ Data offset/length outside the message",
        ),
        (
            "DataOffset pointing into the READ fixed part",
            read_body_raw(72, 16, &[7; 16]),
            "malformed response: READ Data offset/length outside the message",
        ),
        ("body cut after StructureSize", vec![17, 0], "malformed response: truncated while reading DataOffset"),
        ("ERROR body on success", error_body(), "malformed response: bad READ StructureSize: got 0x9"),
    ];
    bounded(async {
        for (name, body, want) in cases {
            let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
                let r = fc.expect(Command::Read).await;
                let m = fc.reply(&r, OK, &body);
                fc.send_one(m).await;
                fc.expect_eof().await;
            })
            .await;
            let (s, t) = connect(&addr, TIMEOUT).await;
            let r = t.read(FILE_ID, 0, 100).await;
            let e = r.expect_err(name);
            assert_eq!(e.to_string(), want, "{name}");
            assert!(matches!(e, Error::Decode(_)), "{name}");
            drop((t, s));
            fake::join(fake).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_read_rejects_more_bytes_than_asked() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            assert_eq!(r.read_args(), (0, 100));
            let m = fc.reply(&r, OK, &read_body(&[3; 200]));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let mut delivered = 0;
        let e = t
            .read_pipelined(FILE_ID, 0, 100, DEFAULT_IN_FLIGHT_BYTES, |b| {
                delivered += b.len();
                Ok(())
            })
            .await
            .expect_err("over-long READ");
        assert_eq!(e.to_string(), "protocol: READ returned 200 bytes for 100 asked");
        assert_eq!(delivered, 0, "nothing of the bad answer reaches the sink");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_read_mid_stream_is_filled_in_order() {
    bounded(async {
        const LEN: usize = 4 * 65536;
        let file = pattern(LEN, 9);
        let served = file.clone();
        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            let mut log = Vec::new();
            while let Some(msgs) = fc.recv().await {
                for r in msgs {
                    let (off, len) = r.read_args();
                    log.push((off, len));
                    let m = if off == 65536 {
                        // The second chunk comes back short.
                        fc.reply(&r, OK, &read_body(&served[65536..65536 + 1000]))
                    } else {
                        fc.answer_read(&r, &served)
                    };
                    fc.send_one(m).await;
                }
            }
            log
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let mut pieces = Vec::new();
        let n = t
            .read_pipelined(FILE_ID, 0, LEN as u64, DEFAULT_IN_FLIGHT_BYTES, |b| {
                pieces.push(b);
                Ok(())
            })
            .await
            .unwrap();
        drop((t, s));
        let log = fake::join(fake).await;
        assert_eq!(n, LEN as u64);
        assert_eq!(pieces.iter().map(|p| p.len()).collect::<Vec<_>>(), [65536, 1000, 64536, 65536, 65536]);
        assert!(pieces.concat() == file, "delivered bytes differ from the file");
        assert_eq!(log, [(0, 65536), (65536, 65536), (131072, 65536), (196608, 65536), (66536, 64536)]);
    })
    .await;
}

// 10. Signed sessions ---------------------------------------------------------------

fn signed_opts(dialect: u16, alg: SigningAlgorithm) -> Opts {
    Opts { dialect, signing_alg: alg, signing_required: true, auth: Auth::User, ..Opts::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flipped_bit_in_a_signed_response_is_an_integrity_error() {
    bounded(async {
        for (d, alg) in [
            (dialect::SMB302, SigningAlgorithm::AesCmac),
            (dialect::SMB311, SigningAlgorithm::AesCmac),
            (dialect::SMB311, SigningAlgorithm::AesGmac),
        ] {
            // 100 bytes: a frame cut from the staging buffer; 200,000: a
            // frame read into a buffer of its own (over 128 KiB).
            for len in [100usize, 200_000] {
                let file = pattern(len, 10);
                let served = file.clone();
                let opts = Opts { max_read: 256 << 10, ..signed_opts(d, alg) };
                let (addr, fake) = fake::start(opts, move |mut fc: FakeConn| async move {
                    // A good signed answer first: the keys agree.
                    let r = fc.expect(Command::Read).await;
                    let m = fc.answer_read(&r, &served);
                    fc.send_one(m).await;
                    // Then one bit of the payload flipped after signing.
                    let r = fc.expect(Command::Read).await;
                    let m = fc.answer_read(&r, &served);
                    let mut f = fc.frame(vec![m]);
                    assert_ne!(u32::from_le_bytes(f[4 + 16..4 + 20].try_into().unwrap()) & flags::SIGNED, 0);
                    f[4 + 80 + 3] ^= 0x10;
                    fc.write_raw(&f).await;
                    fc.expect_eof().await;
                })
                .await;
                let (s, t) = connect_user(&addr, TIMEOUT).await;
                assert_eq!(s.negotiated.dialect, d);
                assert!(s.negotiated.sign_all);
                assert_eq!(s.negotiated.signing, Some(alg));
                assert!(!s.negotiated.is_guest);
                assert_eq!(&t.read(FILE_ID, 0, len as u32).await.expect("signed READ")[..], &file[..]);
                let e = t.read(FILE_ID, 0, len as u32).await.expect_err("tampered READ");
                assert_eq!(e.to_string(), "response failed its integrity check: bad signature", "{d:#x} {alg:?} {len}");
                assert!(matches!(e, Error::Integrity(_)));
                assert_dead(&t, "response failed its integrity check: bad signature").await;
                drop((t, s));
                fake::join(fake).await;
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsigned_response_on_a_signed_session_is_an_integrity_error() {
    bounded(async {
        let (addr, fake) =
            fake::start(signed_opts(dialect::SMB311, SigningAlgorithm::AesGmac), |mut fc: FakeConn| async move {
                let r = fc.expect(Command::Read).await;
                let m = fc.answer_read(&r, &[1; 100]);
                fc.set_signing(false);
                fc.send_one(m).await;
                fc.expect_eof().await;
            })
            .await;
        let (s, t) = connect_user(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("unsigned READ");
        let want = "response failed its integrity check: unsigned response on a signed session";
        assert_eq!(e.to_string(), want);
        assert_dead(&t, want).await;
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_tree_connect_answer_is_refused_with_signing_off() {
    // Issue 23, point 6.10: with signing off on 3.1.1 (sign only what the
    // server requires), the TREE_CONNECT answer's ShareFlags decide whether
    // the share is encrypted; a man in the middle stripping its signature
    // could clear that flag. Its answer must be signed.
    bounded(async {
        for stripped in [false, true] {
            let opts = Opts { auth: Auth::User, unsigned_tree_connect: stripped, ..Opts::default() };
            let (addr, fake) = fake::start(opts, |mut fc: FakeConn| async move {
                fc.expect_eof().await;
            })
            .await;
            let mut cfg = fake::user_config(&addr, TIMEOUT);
            cfg.require_signing = false;
            let s = Session::connect(&cfg).await.expect("session setup with the fake");
            assert!(!s.negotiated.sign_all, "signing off: only what the server requires is signed");
            let r = s.tree_connect("share").await;
            match stripped {
                false => assert_eq!(r.expect("a signed TREE_CONNECT answer").tree_id(), fake::TREE_ID),
                true => assert_eq!(
                    r.err().expect("an unsigned TREE_CONNECT answer is an error").to_string(),
                    "response failed its integrity check: unsigned TREE_CONNECT response"
                ),
            }
            drop(s);
            fake::join(fake).await;
        }
    })
    .await;
}

// ------------------------------------------------- responses bound to requests

/// The fake answers the first READ with a header altered by `alter`; the
/// client must refuse it with `want` and poison the connection.
async fn refuses_altered_read_answer(alter: fn(&mut Header), want: &'static str) {
    bounded(async move {
        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let mut h = fc.header(&r, OK);
            alter(&mut h);
            fc.send_one(build(&h, &read_body(b"forged"))).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("a response that answers another request");
        assert_eq!(e.to_string(), format!("response failed its integrity check: {want}"));
        assert_dead(&t, &e.to_string()).await;
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answered_with_another_command_is_refused() {
    refuses_altered_read_answer(|h| h.command = Command::Write, "response command does not match its request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answered_for_another_tree_is_refused() {
    refuses_altered_read_answer(|h| h.tree_id += 1, "response TreeId does not match its request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answered_for_another_session_is_refused() {
    refuses_altered_read_answer(|h| h.session_id ^= 1, "response SessionId does not match its request").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_answer_without_an_interim_is_refused() {
    refuses_altered_read_answer(
        |h| h.async_id = Some(0x55),
        "async response without the AsyncId of its interim answer",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interim_answer_extends_the_deadline() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let interim = fc.interim(&r, 0x31, 1);
            fc.send_one(interim).await;
            // Longer than the 1 s request timeout, well within MAX_PENDING.
            tokio::time::sleep(Duration::from_millis(2500)).await;
            let mut h = fc.header(&r, OK);
            h.async_id = Some(0x31);
            fc.send_one(build(&h, &read_body(b"late but whole"))).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, Duration::from_secs(1)).await;
        let got = t.read(FILE_ID, 0, 100).await.expect("a slow answer after STATUS_PENDING");
        assert_eq!(&got[..], b"late but whole");
        assert!(!t.conn().is_poisoned());
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_session_poisons_the_connection_so_the_pool_replaces_it() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let m = fc.reply(&r, NtStatus::STATUS_USER_SESSION_DELETED, &error_body());
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("session deleted");
        assert_eq!(e.status(), Some(NtStatus::STATUS_USER_SESSION_DELETED));
        assert!(e.is_connection_error());
        assert_dead(&t, "connection lost: the server ended the session: STATUS_USER_SESSION_DELETED (0xc0000203)")
            .await;
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answer_longer_than_asked_is_refused() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            let m = fc.reply(&r, OK, &read_body(&[7u8; 150]));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("150 bytes for 100 asked");
        assert_eq!(e.to_string(), "protocol: READ returned 150 bytes for 100 asked");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_does_not_decode_poisons_the_connection() {
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            let r = fc.expect(Command::Read).await;
            // DataOffset points past the end of the message.
            let m = fc.reply(&r, OK, &read_body_raw(0xF0, 10, b"0123456789"));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.read(FILE_ID, 0, 100).await.expect_err("malformed READ answer");
        assert!(matches!(e, Error::Decode(_)), "{e:?}");
        assert!(t.conn().is_poisoned(), "a malformed body poisons the connection");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

/// The chunks of a FSCTL_SRV_COPYCHUNK_WRITE request (MS-SMB2 2.2.31.1):
/// (count, largest chunk length).
fn copychunk_shape(m: &Msg) -> (u32, u32) {
    assert_eq!(m.hdr.command, Command::Ioctl);
    let b = &m.raw[smb_proto::header::HEADER_LEN..];
    let ctl = u32::from_le_bytes(b[4..8].try_into().unwrap());
    assert_eq!(ctl, smb_proto::ioctl::FSCTL_SRV_COPYCHUNK_WRITE);
    let off = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    let input = &m.raw[off..];
    let count = u32::from_le_bytes(input[24..28].try_into().unwrap());
    let longest = (0..count as usize)
        .map(|i| u32::from_le_bytes(input[32 + 24 * i + 16..32 + 24 * i + 20].try_into().unwrap()))
        .max()
        .unwrap_or(0);
    (count, longest)
}

/// Answers FSCTL_SRV_REQUEST_RESUME_KEY with a key.
async fn answer_resume_key(fc: &mut FakeConn) {
    let k = fc.expect(Command::Ioctl).await;
    let mut out = vec![0x4b; 24];
    out.extend_from_slice(&0u32.to_le_bytes()); // ContextLength
    let m = fc.reply(&k, OK, &fake::ioctl_body(&out));
    fc.send_one(m).await;
}

/// A COPYCHUNK answer body carrying (ChunksWritten, ChunkBytesWritten,
/// TotalBytesWritten): the limits, when the status is INVALID_PARAMETER.
fn copychunk_answer(a: u32, b: u32, c: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for v in [a, b, c] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    fake::ioctl_body(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_changing_its_copychunk_limits_is_given_up_on() {
    // Issue 9, point 3: each refusal names new limits; the client adopts
    // them at most 4 times, then fails, instead of looping forever.
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            answer_resume_key(&mut fc).await;
            for i in 0..5u32 {
                let r = fc.expect(Command::Ioctl).await;
                copychunk_shape(&r);
                let limits = copychunk_answer(8 + i, (64 << 10) + i, 8 << 20);
                let m = fc.reply(&r, NtStatus::STATUS_INVALID_PARAMETER, &limits);
                fc.send_one(m).await;
            }
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.copy_chunks(FILE_ID, 0, FILE_ID, 0, 64 << 20).await.expect_err("limits never settle");
        assert_eq!(e.status(), Some(NtStatus::STATUS_INVALID_PARAMETER), "{e}");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copychunk_limits_from_the_server_are_bounded() {
    // A server asking for tiny chunks is refused at once (billions of
    // chunks); one offering huge limits gets at most 256 chunks of at most
    // 256 MiB, and a claim of more bytes than asked is an error.
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            answer_resume_key(&mut fc).await;
            let r = fc.expect(Command::Ioctl).await;
            let m = fc.reply(&r, NtStatus::STATUS_INVALID_PARAMETER, &copychunk_answer(1 << 30, 1, 1 << 30));
            fc.send_one(m).await;

            answer_resume_key(&mut fc).await;
            let r = fc.expect(Command::Ioctl).await;
            assert_eq!(copychunk_shape(&r), (16, 1 << 20), "the client starts at 16 chunks of 1 MiB");
            let m = fc.reply(&r, NtStatus::STATUS_INVALID_PARAMETER, &copychunk_answer(u32::MAX, u32::MAX, u32::MAX));
            fc.send_one(m).await;
            let r = fc.expect(Command::Ioctl).await;
            let (count, longest) = copychunk_shape(&r);
            assert!(count <= 256 && longest <= 256 << 20, "{count} chunks, the longest {longest} bytes");
            // More written than the whole request asked for.
            let m = fc.reply(&r, OK, &copychunk_answer(count, longest, u32::MAX));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.copy_chunks(FILE_ID, 0, FILE_ID, 0, 1 << 40).await.expect_err("1-byte chunks");
        assert_eq!(e.status(), Some(NtStatus::STATUS_INVALID_PARAMETER), "{e}");
        let e = t.copy_chunks(FILE_ID, 0, FILE_ID, 0, 1 << 40).await.expect_err("more than asked");
        assert!(e.to_string().starts_with("protocol: COPYCHUNK reported 4294967295 bytes written"), "{e}");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copychunk_that_crawls_is_given_up_on_at_its_first_answer() {
    // Issue 23, point 6.10: a server answering success with one byte
    // written per round trip would hold a 1 TiB copy for 2^40 round trips.
    // The first answer under a chunk's worth (64 KiB, or all that was
    // asked) ends the copy; one under a whole batch but past a chunk is
    // progress.
    bounded(async {
        let (addr, fake) = fake::start(Opts::default(), |mut fc: FakeConn| async move {
            answer_resume_key(&mut fc).await;
            let r = fc.expect(Command::Ioctl).await;
            copychunk_shape(&r);
            let m = fc.reply(&r, OK, &copychunk_answer(1, 64 << 10, 64 << 10));
            fc.send_one(m).await;
            let r = fc.expect(Command::Ioctl).await;
            copychunk_shape(&r);
            let m = fc.reply(&r, OK, &copychunk_answer(1, 1, 1));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        let e = t.copy_chunks(FILE_ID, 0, FILE_ID, 0, 1 << 40).await.expect_err("1 byte per round trip");
        assert_eq!(e.to_string(), "protocol: COPYCHUNK made too little progress: 1 bytes written of 16777216 asked");
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}

/// A hostile server's directory and EA answers whose entries overlap: each
/// a few bytes after the last, each claiming much of the buffer as its
/// name or value. Decoded as given, an answer became one entry per 8 bytes,
/// so memory grew with the square of its size (a 1 MiB answer could hold
/// GiBs of names). Now the client refuses the answer, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_directory_and_ea_entries_are_refused() {
    // The repeating 8 bytes read, at every entry, as NextEntryOffset 8 and
    // (at offset 60) FileNameLength 0xF000, also valid UTF-16.
    let dir: Vec<u8> = [8u8, 0, 0, 0, 0, 0xF0, 0, 0].repeat(8192);
    // An EA entry 4 bytes long, pointing 4 bytes on: NextEntryOffset 4,
    // Flags 0, EaNameLength 0, EaValueLength 0xFFF0 (read from what follows).
    let ea: Vec<u8> = [4u8, 0, 0, 0, 0, 0, 0xF0, 0xFF].repeat(8192);
    bounded(async {
        // Each on a connection of its own: a malformed answer poisons its
        // connection.
        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            let q = fc.expect(Command::QueryDirectory).await;
            let m = fc.reply(&q, OK, &output_body(&dir));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        match t.query_directory(FILE_ID, "*", true).await {
            Err(Error::Decode(e)) => {
                assert_eq!(e, smb_proto::DecodeError::BadValue { field: "NextEntryOffset", got: 8 })
            }
            other => panic!("directory answer accepted: {:?}", other.map(|v| v.map(|v| v.len()))),
        }
        drop((t, s));
        fake::join(fake).await;

        let (addr, fake) = fake::start(Opts::default(), move |mut fc: FakeConn| async move {
            let q = fc.expect(Command::QueryInfo).await;
            let m = fc.reply(&q, OK, &output_body(&ea));
            fc.send_one(m).await;
            fc.expect_eof().await;
        })
        .await;
        let (s, t) = connect(&addr, TIMEOUT).await;
        match t.query_eas(FILE_ID, &[]).await {
            Err(Error::Decode(e)) => {
                assert_eq!(e, smb_proto::DecodeError::BadValue { field: "EA NextEntryOffset", got: 4 })
            }
            other => panic!("EA answer accepted: {:?}", other.map(|v| v.len())),
        }
        drop((t, s));
        fake::join(fake).await;
    })
    .await;
}
