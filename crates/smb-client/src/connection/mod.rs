//! One TCP connection to an SMB server. A writer task sends queued frames
//! with one vectored write, a reader task checks signatures or decrypts
//! and wakes each waiter by MessageId, and credits bound what is in
//! flight. Any framing, integrity or timeout failure poisons the
//! connection: every waiter fails and nothing is sent on it again.
//!
//! By concern:
//! - this file: the API ([`Connection`]) and the state its parts share;
//! - `response`: what a caller gets back ([`Response`], [`ResponseFuture`]);
//! - `waiting`: awaiting an answer, with its deadline;
//! - `table`: the MessageId and credit table, plain data with its tests;
//! - `lease_table`: the leases held on the connection, plain data with its
//!   tests (the lease operations of a tree are `crate::lease`'s);
//! - `seal`: signing and encryption, out and in, written once;
//! - `write_frame`: one WRITE sent from a buffer its caller filled, its
//!   header written into the headroom and sealed in place;
//! - `writer` and `reader`: the two socket tasks;
//! - `reaper`: the queue of handles nobody will close, and the task that
//!   closes them;
//! - `round_trip`: the trace span of each round trip;
//! - [`fuzz`]: the receive path without a socket, for the fuzz target.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smb_proto::frame::FRAME_HEADER_LEN;
use smb_proto::Command;
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::oplock::Oplocks;
use reaper::{reaper_task, Reaper, Ticket};

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;
pub(crate) mod lease_table;
mod reader;
mod reaper;
mod response;
pub mod round_trip;
mod seal;
mod table;
mod waiting;
mod write_frame;
mod writer;

pub use response::{Op, Response, ResponseFuture, MAX_PENDING};
use seal::encode_chain;
pub(crate) use seal::Security;
use table::{Bind, Slot, Table};
pub use write_frame::WRITE_HEADROOM;

/// Timeouts and limits of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionOptions {
    /// TCP connect deadline.
    pub connect_timeout: Duration,
    /// Deadline for one response (and for one socket write).
    pub request_timeout: Duration,
    /// Credit window to grow toward, in credits (64 KiB each).
    pub credit_target: u32,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            credit_target: 2048,
        }
    }
}

/// What the socket tasks and the callers share under one lock: the
/// MessageId and credit table, and the frames waiting for the writer.
struct State {
    table: Table,
    queue: Vec<Bytes>,
}

/// What a connection's handles, tasks and answers share.
pub(crate) struct Inner {
    state: Mutex<State>,
    pub(crate) security: RwLock<Security>,
    writer_wake: Notify,
    credit_wake: Notify,
    poisoned: AtomicBool,
    in_flight: AtomicUsize,
    /// Bytes (credit charge × 64 KiB) outstanding when a transport fault
    /// killed the connection; 0 otherwise. Taken once by the pool.
    lost_in_flight: AtomicUsize,
    pub(crate) opts: ConnectionOptions,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Sent frame buffers kept for reuse.
    free_bufs: Mutex<Vec<BytesMut>>,
    /// Queue of handles to close that no caller will (failure class 26).
    reaper: Reaper,
    /// Oplocks held by durable handles, and their breaks.
    pub(crate) oplocks: Oplocks,
    /// Leases of opens made with `Tree::open_leased`, and their breaks.
    pub(crate) leases: lease_table::Leases,
    /// This connection, for the answers it hands out.
    me: std::sync::Weak<Inner>,
    /// The server's address as opened (`host:port`), for traces.
    peer: Box<str>,
}

/// Bytes of sent frame buffers kept for reuse per connection (a few
/// MaxWrite-sized WRITE frames; more would stay resident after a burst).
const FREE_BYTES: usize = 26 << 20;
/// Buffers smaller than this are not worth recycling.
const RECYCLE_MIN: usize = 256 << 10;

/// A connection remembered without keeping it open: what a durable
/// handle's reopen data asks of the connection it was opened on.
#[derive(Clone)]
pub(crate) struct WeakConnection(std::sync::Weak<Inner>);

impl WeakConnection {
    /// The oplock level `file_id` still holds on the connection
    /// ([`smb_proto::create::oplock`]); `None` once the connection is gone.
    pub(crate) fn oplock_level(&self, file_id: smb_proto::create::FileId) -> Option<u8> {
        self.0.upgrade().map(|c| c.oplocks.level(file_id))
    }
}

/// A cheaply clonable handle on one SMB connection. When the last handle
/// is dropped the connection is shut down.
#[derive(Clone)]
pub struct Connection {
    pub(crate) inner: Arc<Inner>,
    /// `None` only for the connection's own reaper task, which must not
    /// keep the connection open.
    _guard: Option<Arc<CloseOnDrop>>,
}

struct CloseOnDrop(Arc<Inner>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.shut(Error::ConnectionLost("connection closed by the client".into()), false);
    }
}

impl Connection {
    /// This connection, remembered without keeping it open.
    pub(crate) fn downgrade(&self) -> WeakConnection {
        WeakConnection(Arc::downgrade(&self.inner))
    }

    /// Forgets the oplock `file_id` holds here (its handle is closed).
    pub(crate) fn forget_oplock(&self, file_id: smb_proto::create::FileId) {
        self.inner.oplocks.release(file_id);
    }

    /// Forgets the lease `key` holds here (its open is closed).
    pub(crate) fn forget_lease(&self, key: &[u8; 16]) {
        self.inner.leases.release(key);
    }

    /// This connection's lease table, which leased opens register into.
    pub(crate) fn leases(&self) -> &lease_table::Leases {
        &self.inner.leases
    }

    /// This connection's oplocks, which durable opens record theirs in.
    pub(crate) fn oplocks(&self) -> &Oplocks {
        &self.inner.oplocks
    }
}

impl Connection {
    /// Opens a TCP connection to `addr` (e.g. `127.0.0.1:445`) and starts
    /// its reader and writer tasks. No SMB message is sent yet.
    ///
    /// Errors: [`Error::Timeout`] or [`Error::Io`].
    pub async fn open(addr: &str, opts: ConnectionOptions) -> Result<Connection> {
        let stream = tokio::time::timeout(opts.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::Timeout("TCP connect"))??;
        stream.set_nodelay(true)?;
        {
            let s = socket2::SockRef::from(&stream);
            let _ = s.set_recv_buffer_size(4 << 20);
            let _ = s.set_send_buffer_size(4 << 20);
            let ka =
                socket2::TcpKeepalive::new().with_time(Duration::from_secs(30)).with_interval(Duration::from_secs(10));
            let _ = s.set_tcp_keepalive(&ka);
        }
        let (rd, wr) = stream.into_split();
        let (reaper, reap_rx) = Reaper::new();
        let inner = Arc::new_cyclic(|me| Inner::new(opts, reaper.clone(), me.clone(), addr));
        let w = tokio::spawn(writer::writer_task(inner.clone(), wr));
        let r = tokio::spawn(reader::reader_task(inner.clone(), rd));
        let c = tokio::spawn(reaper_task(Arc::downgrade(&inner), reaper, reap_rx));
        inner.tasks.lock().unwrap().extend([w, r, c]);
        Ok(Connection { _guard: Some(Arc::new(CloseOnDrop(inner.clone()))), inner })
    }

    /// A handle that does not keep the connection open (for its reaper).
    pub(crate) fn unguarded(inner: Arc<Inner>) -> Connection {
        Connection { inner, _guard: None }
    }

    /// Queues a CLOSE of `file_id` on `tree_id`, sent by the connection's
    /// reaper task; never blocks. Nothing is sent once the connection has
    /// failed: the server closes the handles of a lost connection itself.
    pub fn close_later(&self, tree_id: u32, file_id: smb_proto::create::FileId, encrypt: bool) {
        if !self.is_poisoned() {
            self.inner.reaper.queue(tree_id, file_id, encrypt);
        }
    }

    /// Handles closed by the reaper (dropped [`crate::file::Handle`]s and
    /// CREATE answers whose caller had gone), for tests and metrics.
    pub fn handles_reaped(&self) -> u64 {
        self.inner.reaper.closed()
    }

    /// True if both handles are on the same TCP connection.
    pub fn same_as(&self, other: &Connection) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// True once the connection has failed; it must be replaced.
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }

    /// Requests sent and not yet answered (for least-loaded dispatch), but
    /// for CHANGE_NOTIFYs waiting for a change: they are not load.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// Bytes of requests (CreditCharge × 64 KiB) that were outstanding
    /// when a transport fault (reset, EOF, timeout) killed this connection,
    /// returned once; 0 for a healthy connection, an orderly close, an
    /// integrity or decode fault, or a second call. Lets the pool tell a
    /// server dropping connections under load from an idle drop
    /// (failure classes 7 and 10).
    pub fn take_lost_in_flight(&self) -> usize {
        self.inner.lost_in_flight.swap(0, Ordering::AcqRel)
    }

    /// The credit window the server has granted: credits available plus
    /// those charged to outstanding requests. No single request may charge
    /// more than this (failure class 2).
    pub fn credit_window(&self) -> u32 {
        let st = self.inner.state.lock().unwrap();
        st.table.credits.available + st.table.credits.in_flight
    }

    /// Credits currently available to spend.
    pub fn credits_available(&self) -> u32 {
        self.inner.state.lock().unwrap().table.credits.available
    }

    /// Marks the connection failed with `err`, fails all waiters and stops
    /// its tasks. Idempotent.
    pub fn poison(&self, err: Error) {
        self.inner.poison(err);
    }

    /// Closes the connection in an orderly way: like [`Connection::poison`]
    /// but not logged as a fault.
    pub fn close(&self) {
        self.inner.shut(Error::ConnectionLost("connection closed by the client".into()), false);
    }
    /// The SessionId sent with the next requests: what a SESSION_SETUP
    /// round answered, while the session is being set up.
    pub(crate) fn set_session_id(&self, session_id: u64) {
        self.inner.security.write().unwrap().session_id = session_id;
    }

    /// The set-up session's keys and rules, from now on.
    pub(crate) fn install_security(&self, security: Security) {
        *self.inner.security.write().unwrap() = security;
    }

    /// The SessionId in use (0 before SESSION_SETUP).
    pub fn session_id(&self) -> u64 {
        self.inner.security.read().unwrap().session_id
    }

    /// Sends several compound chains as one batch: all are encoded into one
    /// buffer (each chain signed or encrypted as a unit) and queued for one
    /// socket write. Waits for enough credits first. Within a chain every
    /// message after the first is sent as a related operation.
    ///
    /// Returns one [`ResponseFuture`] per message, chain by chain.
    /// Errors: the connection is poisoned, or credits did not arrive in time.
    pub async fn send_batch(&self, chains: &[&[Op<'_>]], encrypt: bool) -> Result<Vec<ResponseFuture>> {
        self.send_inner(chains, encrypt, true, true).await.map(|(rx, _)| rx)
    }

    /// Sends `chain` as one *unrelated* compound (MS-SMB2 3.2.4.1.4): the
    /// server runs its messages in order, each on the FileId it names
    /// (a related chain would apply the first message's FileId to the
    /// rest, whatever they name). For steps on different handles that must
    /// run back to back in this order.
    ///
    /// Returns one [`ResponseFuture`] per message. Errors: as
    /// [`Connection::send_batch`].
    pub async fn send_unrelated(&self, chain: &[Op<'_>], encrypt: bool) -> Result<Vec<ResponseFuture>> {
        self.send_inner(&[chain], encrypt, true, false).await.map(|(rx, _)| rx)
    }

    /// Sends one message and waits for its final response.
    pub async fn call(&self, op: Op<'_>, encrypt: bool) -> Result<Response> {
        let mut rx = self.send_batch(&[&[op]], encrypt).await?;
        self.wait(rx.pop().expect("one receiver")).await
    }

    /// Sends one message whose answer nothing needs (a break's
    /// acknowledgment, MS-SMB2 3.2.4.23) and waits up to the request
    /// timeout for it. `Ok(None)` if none came: unlike [`Connection::call`]
    /// this does not poison the connection, since every other answer still
    /// arrives (answers are matched by MessageId). A server that never
    /// answers leaves one pending entry, one credit and one request counted
    /// in flight behind (the pool's idle keepalive then skips this
    /// connection).
    ///
    /// Errors: as [`Connection::call`], but for the timeout.
    pub(crate) async fn call_unawaited(&self, op: Op<'_>, encrypt: bool) -> Result<Option<Response>> {
        let rx = self.send_batch(&[&[op]], encrypt).await?.pop().expect("one receiver");
        match tokio::time::timeout(self.inner.opts.request_timeout, rx.rx).await {
            Ok(Ok(r)) => r.map(Some),
            Ok(Err(_)) => Err(self.inner.poison_error()),
            Err(_) => Ok(None),
        }
    }

    /// Sends one unsigned, unencrypted message and returns its exact bytes
    /// too, for the SMB 3.1.1 preauth hash.
    pub(crate) async fn call_captured(&self, op: Op<'_>) -> Result<(Response, Bytes)> {
        let (mut rx, sent) = self.send_inner(&[&[op]], false, false, true).await?;
        let resp = self.wait(rx.pop().expect("one receiver")).await?;
        Ok((resp, sent))
    }

    /// Spends credits for messages charging `charges` (waiting for grants
    /// if the window is spent), allocates their MessageIds and registers
    /// their waiters. Returns `(MessageId, CreditCharge, CreditRequest)` per
    /// message, in order, and the futures.
    /// `tickets` is empty (no message needs one) or holds one entry per
    /// message; `binds` holds one per message.
    async fn reserve(
        &self,
        charges: &[u16],
        mut tickets: Vec<Option<Ticket>>,
        binds: &[Bind],
    ) -> Result<(Vec<Slot>, Vec<ResponseFuture>)> {
        let deadline = tokio::time::Instant::now() + self.inner.opts.request_timeout;
        loop {
            let notified = self.inner.credit_wake.notified();
            if let Some((slots, rxs)) = self.inner.state.lock().unwrap().table.reserve(charges, &mut tickets, binds)? {
                let counted = binds.iter().filter(|b| table::counts_in_flight(b.command)).count();
                self.inner.in_flight.fetch_add(counted, Ordering::Relaxed);
                return Ok((slots, rxs));
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let e = Error::Timeout("waiting for credits");
                self.poison(e.clone());
                return Err(e);
            }
        }
    }

    /// What the answer to a `command` on `tree_id` must match; `encrypt`:
    /// the caller asked for encryption (the session may require it anyway).
    fn bind(&self, command: Command, tree_id: u32, encrypt: bool) -> Bind {
        let sec = self.inner.security.read().unwrap();
        Bind { command, session_id: sec.session_id, tree_id, encrypted: sec.encrypts(encrypt) }
    }

    /// A buffer for building frames, reused from earlier sends when one is
    /// free so that large batches do not fault in fresh pages every time.
    fn frame_buffer(&self, capacity: usize) -> BytesMut {
        if capacity < RECYCLE_MIN {
            return BytesMut::with_capacity(capacity);
        }
        let mut free = self.inner.free_bufs.lock().unwrap();
        match free.iter().position(|b| b.capacity() >= capacity) {
            Some(i) => free.swap_remove(i),
            None => BytesMut::with_capacity(capacity),
        }
    }

    fn enqueue(&self, frame: Bytes) -> Result<()> {
        {
            let mut st = self.inner.state.lock().unwrap();
            if let Some(e) = st.table.poisoned() {
                return Err(e.clone());
            }
            st.queue.push(frame);
        }
        self.inner.writer_wake.notify_one();
        Ok(())
    }

    /// Whether a request sent with `encrypt` goes out encrypted: asked
    /// for, or the session encrypts everything, and a cipher exists.
    pub fn will_encrypt(&self, encrypt: bool) -> bool {
        self.inner.security.read().unwrap().encrypts(encrypt)
    }

    async fn send_inner(
        &self,
        chains: &[&[Op<'_>]],
        encrypt: bool,
        sign: bool,
        related: bool,
    ) -> Result<(Vec<ResponseFuture>, Bytes)> {
        // A field that does not fit would be truncated on the wire (a name
        // over 65,535 bytes): refuse it before anything is encoded.
        for op in chains.iter().flat_map(|c| c.iter()) {
            op.body.check().map_err(Error::InvalidArgument)?;
        }
        let charges: Vec<u16> = chains
            .iter()
            .flat_map(|c| c.iter())
            .map(|op| smb_proto::header::credit_charge(op.body.credit_bytes()))
            .collect();
        // A CREATE whose chain has no CLOSE after it leaves a handle open:
        // its answer carries a ticket to close it if nobody claims it.
        // Batches without a CREATE (pipelined READs and WRITEs) build none.
        let mut tickets = Vec::new();
        if chains.iter().flat_map(|c| c.iter()).any(|op| op.body.command() == Command::Create) {
            for chain in chains {
                for (i, op) in chain.iter().enumerate() {
                    let leaves_open = op.body.command() == Command::Create
                        && !chain[i + 1..].iter().any(|o| o.body.command() == Command::Close);
                    tickets.push(leaves_open.then(|| Ticket {
                        reaper: self.inner.reaper.clone(),
                        tree_id: op.tree_id,
                        encrypt,
                        delete: op.body.opens().is_some_and(reaper::undo_if_abandoned),
                    }));
                }
            }
        }
        // One look at the session's security state for the whole batch.
        let proto = self.bind(Command::Echo, 0, encrypt);
        let binds: Vec<Bind> = chains
            .iter()
            .flat_map(|c| c.iter())
            .map(|op| Bind { command: op.body.command(), tree_id: op.tree_id, ..proto })
            .collect();
        let span = round_trip::batch_span(chains, &charges, &self.inner.peer);
        let (all, mut rxs) = self.reserve(&charges, tickets, &binds).await?;
        if !span.is_none() {
            for rx in &mut rxs {
                rx.span = span.clone();
            }
        }
        let buf = {
            let sec = self.inner.security.read().unwrap();
            let size_hint: usize = chains
                .iter()
                .flat_map(|c| c.iter())
                .map(|op| if op.body.command() == Command::Write { op.body.credit_bytes() as usize } else { 0 } + 192)
                .sum();
            let mut buf = self.frame_buffer(size_hint);
            buf.clear();
            let mut at = 0;
            for chain in chains {
                let reqs = &all[at..at + chain.len()];
                at += chain.len();
                if let Err(e) = encode_chain(&mut buf, &sec, chain, reqs, encrypt, sign, related) {
                    drop(sec);
                    self.poison(e.clone());
                    return Err(e);
                }
            }
            buf.freeze()
        };
        span.record("smb.bytes_sent", buf.len() as i64);
        let sent = if sign { Bytes::new() } else { buf.slice(FRAME_HEADER_LEN..) };
        self.enqueue(buf)?;
        Ok((rxs, sent))
    }
}

impl Inner {
    /// A connection's state before anything is sent: one credit, no keys.
    fn new(opts: ConnectionOptions, reaper: Reaper, me: std::sync::Weak<Inner>, peer: &str) -> Inner {
        Inner {
            state: Mutex::new(State { table: Table::new(opts.credit_target), queue: Vec::new() }),
            security: RwLock::new(Security::default()),
            writer_wake: Notify::new(),
            credit_wake: Notify::new(),
            poisoned: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            lost_in_flight: AtomicUsize::new(0),
            opts,
            tasks: Mutex::new(Vec::new()),
            free_bufs: Mutex::new(Vec::new()),
            reaper,
            oplocks: Oplocks::default(),
            leases: Default::default(),
            me,
            peer: peer.into(),
        }
    }

    fn poison_error(&self) -> Error {
        let st = self.state.lock().unwrap();
        st.table.poisoned().cloned().unwrap_or_else(|| Error::ConnectionLost("connection closed".into()))
    }

    pub(crate) fn poison(&self, err: Error) {
        self.shut(err, true)
    }

    /// Fails every waiter with `err` and stops the tasks; `fault` says
    /// whether this is a failure worth a warning or an orderly close.
    pub(crate) fn shut(&self, err: Error, fault: bool) {
        let pending = {
            let mut st = self.state.lock().unwrap();
            let Some((pending, charged)) = st.table.fail(err.clone()) else { return };
            if fault {
                tracing::warn!(error = %err, "SMB connection poisoned");
            } else {
                tracing::debug!(error = %err, "SMB connection closed");
            }
            st.queue.clear();
            if fault && matches!(err, Error::Io(_) | Error::Timeout(_) | Error::ConnectionLost(_)) {
                self.lost_in_flight.store(charged as usize * 65536, Ordering::Release);
            }
            pending
        };
        self.poisoned.store(true, Ordering::Release);
        for p in pending {
            let _ = p.tx.send(Err(err.clone()));
        }
        self.in_flight.store(0, Ordering::Relaxed);
        self.credit_wake.notify_waiters();
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}
