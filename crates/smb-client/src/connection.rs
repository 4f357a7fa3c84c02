//! One TCP connection to an SMB server: framing, a writer task that sends
//! queued frames with one vectored write, a reader task that checks
//! signatures or decrypts and wakes each waiter by MessageId, and credit
//! accounting. Any framing, integrity or timeout failure poisons the
//! connection: every waiter fails and nothing is sent on it again.

use std::collections::HashMap;
use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use smb_proto::compound::ChainBuilder;
use smb_proto::create::CloseRequest;
use smb_proto::frame::{frame_len, FRAME_HEADER_LEN, MAX_FRAME_LEN};
use smb_proto::header::{flags, Header, HEADER_LEN};
use smb_proto::info::SetFileInfo;
use smb_proto::query::SetInfoRequest;
use smb_proto::transform::{is_transform, TransformHeader, TRANSFORM_HEADER_LEN};
use smb_proto::{Command, NtStatus, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};
use tokio::task::JoinHandle;

use crate::credits::CreditWindow;
use crate::crypto::{Cipherer, Signer};
use crate::error::{Error, Result};
use crate::oplock::Oplocks;
use crate::reaper::{Orphan, Reaper, Ticket};
use crate::recvbuf::RecvPool;

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

/// A received message: its header and the whole message bytes (header
/// first), sliced from the received frame without a copy.
///
/// The answer to a CREATE that its own chain does not close owns the
/// handle it opened: dropping the answer without
/// [`Response::into_create`] queues a CLOSE on the connection (see
/// `reaper`), so a caller that goes away mid-request leaks nothing. It is
/// therefore not `Clone`.
pub struct Response {
    /// Decoded header.
    pub header: Header,
    /// The message, header included.
    pub msg: Bytes,
    ticket: Option<Ticket>,
    /// The connection it came on, poisoned if its body does not decode.
    conn: std::sync::Weak<Inner>,
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Response").field("header", &self.header).field("len", &self.msg.len()).finish()
    }
}

impl Drop for Response {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            t.reap(self.header.status, &self.msg);
        }
    }
}

impl Response {
    /// Decodes the body with `f`. A body that does not decode means the
    /// stream or the server cannot be trusted: the connection is poisoned
    /// (failure class 4) and the error returned.
    ///
    /// Errors: [`Error::Decode`].
    pub fn body<T>(&self, f: impl FnOnce(&Bytes) -> std::result::Result<T, smb_proto::DecodeError>) -> Result<T> {
        f(&self.msg).map_err(|e| {
            let e = Error::Decode(e);
            if let Some(inner) = self.conn.upgrade() {
                inner.poison(e.clone());
            }
            e
        })
    }

    /// Decodes a CREATE answer and hands its handle to the caller, who must
    /// now close it (or wrap it in a [`crate::file::Handle`]).
    ///
    /// Errors: the answer is not a successful CREATE ([`Error::Status`]),
    /// or does not decode.
    pub fn into_create(mut self) -> Result<smb_proto::create::CreateResponse> {
        let s = self.header.status;
        if s != NtStatus::STATUS_SUCCESS {
            return Err(Error::Status { command: self.header.command, status: s });
        }
        let c = self.body(smb_proto::create::CreateResponse::decode)?;
        self.ticket = None;
        Ok(c)
    }

    /// The NTSTATUS of the response.
    pub fn status(&self) -> NtStatus {
        self.header.status
    }

    /// `Ok(self)` for STATUS_SUCCESS (and the listed warnings), otherwise a
    /// typed [`Error::Status`].
    pub fn ok_or_status(self, also_ok: &[NtStatus]) -> Result<Response> {
        let s = self.header.status;
        if s == NtStatus::STATUS_SUCCESS || also_ok.contains(&s) {
            Ok(self)
        } else {
            Err(Error::Status { command: self.header.command, status: s })
        }
    }
}

/// One message of a chain to send.
pub struct Op<'a> {
    /// The request body.
    pub body: &'a dyn Request,
    /// TreeId for the header.
    pub tree_id: u32,
}

/// A response on its way; await it with [`Connection::wait`].
pub struct ResponseFuture {
    rx: oneshot::Receiver<Result<Response>>,
    /// Its MessageId: on a timeout, the pending entry says whether an
    /// interim STATUS_PENDING came (the deadline then extends, up to
    /// [`MAX_PENDING`]).
    message_id: u64,
}

/// Longest a request answered with an interim STATUS_PENDING may take
/// (MS-SMB2 3.2.5.1.5: the final answer may come much later).
pub const MAX_PENDING: Duration = Duration::from_secs(300);

/// What a response must match to answer a request (failure class 24).
#[derive(Debug, Clone, Copy)]
struct Bind {
    command: Command,
    /// SessionId the request was sent with (0 before SESSION_SETUP).
    session_id: u64,
    tree_id: u32,
    /// The request went out encrypted, so its answer must come back so.
    encrypted: bool,
}

/// Security state installed after SESSION_SETUP.
#[derive(Default)]
pub(crate) struct Security {
    pub session_id: u64,
    pub signer: Option<Signer>,
    /// Sign every request and require signed responses.
    pub sign_all: bool,
    pub cipher: Option<Cipherer>,
    /// The session requires encryption of everything.
    pub encrypt_all: bool,
}

struct Pending {
    tx: oneshot::Sender<Result<Response>>,
    charge: u32,
    /// For a CREATE whose chain leaves the handle open.
    ticket: Option<Ticket>,
    bind: Bind,
    /// AsyncId from an interim STATUS_PENDING; the final answer must carry it.
    async_id: Option<u64>,
}

struct State {
    next_message_id: u64,
    pending: HashMap<u64, Pending>,
    credits: CreditWindow,
    queue: Vec<Bytes>,
    poisoned: Option<Error>,
}

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
    /// This connection, for the answers it hands out.
    me: std::sync::Weak<Inner>,
}

/// Bytes reserved at the start of a [`Connection::write_frame`] buffer for
/// the transport header, a transform header, the SMB2 header and the fixed
/// part of the WRITE request.
pub const WRITE_HEADROOM: usize = FRAME_HEADER_LEN + TRANSFORM_HEADER_LEN + HEADER_LEN + 48;

/// Bytes of sent frame buffers kept for reuse per connection (a few
/// MaxWrite-sized WRITE frames; more would stay resident after a burst).
const FREE_BYTES: usize = 26 << 20;
/// Buffers smaller than this are not worth recycling.
const RECYCLE_MIN: usize = 256 << 10;

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
        let inner = Arc::new_cyclic(|me| Inner::new(opts, reaper.clone(), me.clone()));
        let w = tokio::spawn(writer_task(inner.clone(), wr));
        let r = tokio::spawn(reader_task(inner.clone(), rd));
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

    /// Requests sent and not yet answered (for least-loaded dispatch).
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
        st.credits.available + st.credits.in_flight
    }

    /// Credits currently available to spend.
    pub fn credits_available(&self) -> u32 {
        self.inner.state.lock().unwrap().credits.available
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

    /// Sends one unsigned, unencrypted message and returns its exact bytes
    /// too, for the SMB 3.1.1 preauth hash.
    pub(crate) async fn call_captured(&self, op: Op<'_>) -> Result<(Response, Bytes)> {
        let (mut rx, sent) = self.send_inner(&[&[op]], false, false, true).await?;
        let resp = self.wait(rx.pop().expect("one receiver")).await?;
        Ok((resp, sent))
    }

    /// Awaits a response with the request timeout; a timeout poisons the
    /// connection (its stream may be desynchronised).
    ///
    /// An interim STATUS_PENDING extends the deadline by the request timeout
    /// at a time, up to [`MAX_PENDING`] in all.
    pub async fn wait(&self, rx: ResponseFuture) -> Result<Response> {
        let ResponseFuture { mut rx, message_id } = rx;
        let interim = || {
            let st = self.inner.state.lock().unwrap();
            st.pending.get(&message_id).is_some_and(|p| p.async_id.is_some())
        };
        let start = tokio::time::Instant::now();
        let step = self.inner.opts.request_timeout;
        let mut deadline = start + step;
        loop {
            match tokio::time::timeout_at(deadline, &mut rx).await {
                Ok(Ok(r)) => return r,
                Ok(Err(_)) => return Err(self.inner.poison_error()),
                Err(_) if deadline < start + MAX_PENDING && interim() => {
                    deadline = (deadline + step).min(start + MAX_PENDING);
                }
                Err(_) => {
                    let e = Error::Timeout("no response from server");
                    self.poison(e.clone());
                    return Err(e);
                }
            }
        }
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
    ) -> Result<(Vec<(u64, u16, u16)>, Vec<ResponseFuture>)> {
        let total: u32 = charges.iter().map(|&c| c as u32).sum();
        let deadline = tokio::time::Instant::now() + self.inner.opts.request_timeout;
        loop {
            let notified = self.inner.credit_wake.notified();
            {
                let mut st = self.inner.state.lock().unwrap();
                if let Some(e) = &st.poisoned {
                    return Err(e.clone());
                }
                if st.credits.try_spend(total) {
                    let mut id = st.next_message_id;
                    let mut reqs = Vec::with_capacity(charges.len());
                    let mut rxs = Vec::with_capacity(charges.len());
                    for (i, (&c, &bind)) in charges.iter().zip(binds).enumerate() {
                        let ticket = tickets.get_mut(i).and_then(Option::take);
                        reqs.push((id, c, st.credits.request_for(c)));
                        let (tx, rx) = oneshot::channel();
                        st.pending.insert(id, Pending { tx, charge: c as u32, ticket, bind, async_id: None });
                        rxs.push(ResponseFuture { rx, message_id: id });
                        id += c as u64;
                    }
                    st.next_message_id = id;
                    drop(st);
                    self.inner.in_flight.fetch_add(rxs.len(), Ordering::Relaxed);
                    return Ok((reqs, rxs));
                }
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
        let encrypted = (encrypt || sec.encrypt_all) && sec.cipher.is_some();
        Bind { command, session_id: sec.session_id, tree_id, encrypted }
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
            if let Some(e) = &st.poisoned {
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
        let sec = self.inner.security.read().unwrap();
        (encrypt || sec.encrypt_all) && sec.cipher.is_some()
    }

    /// A buffer for [`Connection::send_write_frame`]: [`WRITE_HEADROOM`]
    /// bytes reserved, and room for `payload` bytes after them.
    pub fn write_frame(&self, payload: usize) -> BytesMut {
        let mut b = self.frame_buffer(WRITE_HEADROOM + payload);
        b.clear();
        b.resize(WRITE_HEADROOM, 0);
        b
    }

    /// Sends one WRITE whose payload the caller has appended to a
    /// [`Connection::write_frame`] buffer. The header and the WRITE fixed
    /// part are filled into the headroom, then the message is signed or
    /// encrypted in place: the payload is never copied again.
    ///
    /// Returns the response future and the sent frame (kept by the caller
    /// to redo a short write; hand it to [`Connection::recycle`] when done).
    /// Errors: as [`Connection::send_batch`], or a payload over 16 MiB,
    /// each with the frame, whose last bytes are still the payload unless
    /// it was encrypted in place (so a caller can send it again elsewhere).
    pub async fn send_write_frame(
        &self,
        mut frame: BytesMut,
        tree_id: u32,
        file_id: smb_proto::create::FileId,
        offset: u64,
        encrypt: bool,
    ) -> std::result::Result<(ResponseFuture, Bytes), (Error, Bytes)> {
        let Some(data_len) = frame.len().checked_sub(WRITE_HEADROOM) else {
            return Err((Error::InvalidArgument("write frame without headroom".into()), frame.freeze()));
        };
        if data_len + WRITE_HEADROOM > MAX_FRAME_LEN {
            let e = Error::InvalidArgument(format!("WRITE of {data_len} bytes exceeds the frame limit"));
            return Err((e, frame.freeze()));
        }
        let bind = self.bind(Command::Write, tree_id, encrypt);
        let charge = [smb_proto::header::credit_charge(data_len as u64)];
        let (reqs, mut rxs) = match self.reserve(&charge, Vec::new(), &[bind]).await {
            Ok(r) => r,
            Err(e) => return Err((e, frame.freeze())),
        };
        let (message_id, charge, credits) = reqs[0];
        {
            let sec = self.inner.security.read().unwrap();
            let encrypt = (encrypt || sec.encrypt_all) && sec.cipher.is_some();
            let mut h = Header::request(Command::Write);
            h.credit_charge = charge;
            h.credits = credits;
            h.message_id = message_id;
            h.tree_id = tree_id;
            h.session_id = sec.session_id;
            let msg_start = FRAME_HEADER_LEN + TRANSFORM_HEADER_LEN;
            let mut fixed = BytesMut::with_capacity(HEADER_LEN + 48);
            h.encode(&mut fixed);
            smb_proto::io::encode_write_fixed(&mut fixed, file_id, offset, data_len as u32);
            frame[msg_start..WRITE_HEADROOM].copy_from_slice(&fixed);
            if encrypt {
                let th = TransformHeader {
                    signature: [0; 16],
                    nonce: [0; 16],
                    original_message_size: (frame.len() - msg_start) as u32,
                    flags: 1,
                    session_id: sec.session_id,
                };
                let mut hdr = BytesMut::with_capacity(TRANSFORM_HEADER_LEN);
                th.encode(&mut hdr);
                frame[FRAME_HEADER_LEN..msg_start].copy_from_slice(&hdr);
                sec.cipher.as_ref().expect("checked").encrypt(&mut frame[FRAME_HEADER_LEN..]);
            } else {
                // Unencrypted: drop the transform headroom so the message
                // follows the transport header directly.
                let _ = frame.split_to(TRANSFORM_HEADER_LEN);
                if sec.sign_all {
                    if let Some(signer) = &sec.signer {
                        signer.sign(&mut frame[FRAME_HEADER_LEN..]);
                    }
                }
            }
            let len = (frame.len() - FRAME_HEADER_LEN) as u32;
            frame[..FRAME_HEADER_LEN].copy_from_slice(&len.to_be_bytes());
        }
        let frame = frame.freeze();
        if let Err(e) = self.enqueue(frame.clone()) {
            return Err((e, frame));
        }
        Ok((rxs.pop().expect("one future"), frame))
    }

    /// Offers a sent frame back for reuse (ignored unless this was the last
    /// reference to it).
    pub fn recycle(&self, frame: Bytes) {
        if let Ok(m) = frame.try_into_mut() {
            keep_free(&mut self.inner.free_bufs.lock().unwrap(), m);
        }
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
                        delete: op.body.as_create().is_some_and(crate::reaper::undo_if_abandoned),
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
        let (all, rxs) = self.reserve(&charges, tickets, &binds).await?;
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
        let sent = if sign { Bytes::new() } else { buf.slice(FRAME_HEADER_LEN..) };
        self.enqueue(buf)?;
        Ok((rxs, sent))
    }
}

fn encode_chain(
    buf: &mut BytesMut,
    sec: &Security,
    chain: &[Op<'_>],
    reqs: &[(u64, u16, u16)],
    encrypt: bool,
    sign: bool,
    related: bool,
) -> Result<()> {
    let encrypt = (encrypt || sec.encrypt_all) && sec.cipher.is_some();
    let start = buf.len();
    buf.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    if encrypt {
        buf.extend_from_slice(&[0; TRANSFORM_HEADER_LEN]);
    }
    let msgs_start = buf.len();
    let mut builder = ChainBuilder::new();
    for (i, (op, &(message_id, charge, credits))) in chain.iter().zip(reqs).enumerate() {
        let mut h = Header::request(op.body.command());
        h.credit_charge = charge;
        h.credits = credits;
        h.message_id = message_id;
        h.tree_id = op.tree_id;
        h.session_id = sec.session_id;
        if i > 0 && related {
            h.flags |= flags::RELATED_OPERATIONS;
        }
        builder.push(buf, &h, op.body);
    }
    let ranges = builder.finish(buf.len());
    let must_sign = sign
        && !encrypt
        && sec.signer.is_some()
        && (sec.sign_all || chain.iter().any(|op| op.body.command() == Command::TreeConnect));
    if must_sign {
        let signer = sec.signer.as_ref().expect("checked");
        for r in ranges {
            signer.sign(&mut buf[r]);
        }
    }
    if encrypt {
        let th = TransformHeader {
            signature: [0; 16],
            nonce: [0; 16],
            original_message_size: (buf.len() - msgs_start) as u32,
            flags: 1,
            session_id: sec.session_id,
        };
        let mut hdr = BytesMut::with_capacity(TRANSFORM_HEADER_LEN);
        th.encode(&mut hdr);
        buf[start + FRAME_HEADER_LEN..msgs_start].copy_from_slice(&hdr);
        sec.cipher.as_ref().expect("checked").encrypt(&mut buf[start + FRAME_HEADER_LEN..]);
    }
    let len = buf.len() - start - FRAME_HEADER_LEN;
    if len > MAX_FRAME_LEN {
        return Err(Error::InvalidArgument(format!("request of {len} bytes exceeds the 16 MiB frame limit")));
    }
    buf[start..start + 4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

impl Inner {
    /// A connection's state before anything is sent: one credit, no keys.
    fn new(opts: ConnectionOptions, reaper: Reaper, me: std::sync::Weak<Inner>) -> Inner {
        Inner {
            state: Mutex::new(State {
                next_message_id: 0,
                pending: HashMap::new(),
                credits: CreditWindow::new(opts.credit_target),
                queue: Vec::new(),
                poisoned: None,
            }),
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
            me,
        }
    }

    fn poison_error(&self) -> Error {
        self.state.lock().unwrap().poisoned.clone().unwrap_or_else(|| Error::ConnectionLost("connection closed".into()))
    }

    pub(crate) fn poison(&self, err: Error) {
        self.shut(err, true)
    }

    /// Fails every waiter with `err` and stops the tasks; `fault` says
    /// whether this is a failure worth a warning or an orderly close.
    pub(crate) fn shut(&self, err: Error, fault: bool) {
        let pending = {
            let mut st = self.state.lock().unwrap();
            if st.poisoned.is_some() {
                return;
            }
            if fault {
                tracing::warn!(error = %err, "SMB connection poisoned");
            } else {
                tracing::debug!(error = %err, "SMB connection closed");
            }
            st.poisoned = Some(err.clone());
            st.queue.clear();
            if fault && matches!(err, Error::Io(_) | Error::Timeout(_) | Error::ConnectionLost(_)) {
                let charged: usize = st.pending.values().map(|p| p.charge as usize).sum();
                self.lost_in_flight.store(charged * 65536, Ordering::Release);
            }
            std::mem::take(&mut st.pending)
        };
        self.poisoned.store(true, Ordering::Release);
        for (_, p) in pending {
            let _ = p.tx.send(Err(err.clone()));
        }
        self.in_flight.store(0, Ordering::Relaxed);
        self.credit_wake.notify_waiters();
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    /// An oplock break notification (unsolicited, so unsigned: MS-SMB2
    /// 3.3.4.6). Acknowledges it at the level it names if we hold a batch
    /// or exclusive oplock on that handle; anything else is ignored, since
    /// a forged break can only make us give up caching we never use.
    fn on_oplock_break(&self, msg: &Bytes) {
        let b = match smb_proto::oplock::OplockBreak::decode(msg) {
            Ok(b) => b,
            Err(e) => {
                tracing::debug!(error = %e, "ignoring an OPLOCK_BREAK notification that does not decode");
                return;
            }
        };
        let Some(ack) = self.oplocks.on_break(b) else { return };
        tracing::debug!(file_id = ?b.file_id, level = b.oplock_level, "oplock broken; acknowledging");
        let (Some(inner), Ok(rt)) = (self.me.upgrade(), tokio::runtime::Handle::try_current()) else { return };
        rt.spawn(async move {
            let conn = Connection::unguarded(inner);
            let op = Op { body: &ack.body, tree_id: ack.tree_id };
            if let Err(e) = conn.call(op, ack.encrypt).await {
                tracing::debug!(error = %e, "oplock break acknowledgment failed");
            }
        });
    }

    /// Handles one decoded (and verified) message; `encrypted` says whether
    /// its frame was. A response must answer its request exactly (failure
    /// class 24): the same command, SessionId and TreeId, the AsyncId of its
    /// interim answer, and encrypted if the request was. Anything else is an
    /// integrity error, which poisons the connection.
    fn dispatch(&self, header: Header, msg: Bytes, encrypted: bool) -> Result<()> {
        let mut st = self.state.lock().unwrap();
        if header.message_id == u64::MAX && header.command == Command::OplockBreak {
            drop(st);
            self.on_oplock_break(&msg);
            return Ok(());
        }
        let is_async = header.flags & flags::ASYNC_COMMAND != 0;
        let interim = header.status == NtStatus::STATUS_PENDING && is_async;
        if interim {
            let Some(p) = st.pending.get_mut(&header.message_id) else {
                return Err(Error::Protocol(format!("interim response for unknown MessageId {}", header.message_id)));
            };
            if header.command != p.bind.command || p.async_id.is_some_and(|a| Some(a) != header.async_id) {
                return Err(Error::Integrity("interim response does not match its request"));
            }
            p.async_id = header.async_id;
            st.credits.on_response(header.credits, 0);
            drop(st);
            self.credit_wake.notify_waiters();
            return Ok(());
        }
        let Some(p) = st.pending.remove(&header.message_id) else {
            return Err(Error::Protocol(format!("response for unknown MessageId {}", header.message_id)));
        };
        if let Err(e) = check_bound(&p, &header, encrypted) {
            // Poisoned first, then its waiter hears why (not just that the
            // connection closed).
            drop(st);
            self.poison(e.clone());
            let _ = p.tx.send(Err(e.clone()));
            return Err(e);
        }
        st.credits.on_response(header.credits, p.charge);
        drop(st);
        self.credit_wake.notify_waiters();
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        // The server has ended the session or the tree: the answer goes to
        // its waiter (a connection error there), and the connection is
        // replaced rather than kept answering this forever.
        let ended = matches!(
            header.status,
            NtStatus::STATUS_USER_SESSION_DELETED
                | NtStatus::STATUS_NETWORK_SESSION_EXPIRED
                | NtStatus::STATUS_NETWORK_NAME_DELETED
        );
        let status = header.status;
        let ended = ended.then(|| Error::ConnectionLost(format!("the server ended the session: {status}")));
        if let Some(e) = &ended {
            self.poison(e.clone());
        }
        // If the waiter has gone, the answer is dropped here, and a CREATE
        // answer's ticket closes the handle nobody will use.
        let _ = p.tx.send(Ok(Response { header, msg, ticket: p.ticket, conn: self.me.clone() }));
        ended.map_or(Ok(()), Err)
    }

    /// Checks one received frame in place: decrypts it or verifies each
    /// message's signature. Returns where its messages are.
    fn open_frame(&self, frame: &mut [u8]) -> Result<FrameLayout> {
        let encrypted = is_transform(frame);
        let sec = self.security.read().unwrap();
        let mut start = 0;
        if encrypted {
            let th = TransformHeader::decode(frame)?;
            let cipher = sec.cipher.as_ref().ok_or(Error::Integrity("encrypted message without a cipher"))?;
            if th.session_id != sec.session_id
                || th.original_message_size as usize != frame.len() - TRANSFORM_HEADER_LEN
            {
                return Err(Error::Integrity("transform header does not match"));
            }
            cipher.decrypt(frame).map_err(|_| Error::Integrity("decryption failed"))?;
            start = TRANSFORM_HEADER_LEN;
        }
        // Walk the compound on the mutable buffer to verify signatures in place.
        let mut bounds = Vec::with_capacity(1);
        let mut off = start;
        loop {
            let rest = &frame[off..];
            let header = Header::decode(rest)?;
            let len = if header.next_command == 0 {
                rest.len()
            } else {
                let n = header.next_command as usize;
                if n < HEADER_LEN || n > rest.len() {
                    return Err(smb_proto::DecodeError::OutOfBounds("NextCommand").into());
                }
                n
            };
            if !header.is_response() {
                return Err(Error::Protocol("server sent a request".into()));
            }
            if !encrypted {
                let interim = header.status == NtStatus::STATUS_PENDING && header.flags & flags::ASYNC_COMMAND != 0;
                let unsolicited = header.message_id == u64::MAX;
                if sec.encrypt_all && !interim && !unsolicited {
                    return Err(Error::Integrity("unencrypted response on an encrypted session"));
                }
                // Once the session has a key, every final answer is checked,
                // SESSION_SETUP included; before it, nothing can be.
                if let Some(signer) = &sec.signer {
                    if !interim && !unsolicited {
                        if header.flags & flags::SIGNED != 0 {
                            if !signer.verify(&mut frame[off..off + len]) {
                                return Err(Error::Integrity("bad signature"));
                            }
                        } else if sec.sign_all {
                            return Err(Error::Integrity("unsigned response on a signed session"));
                        }
                    }
                }
            }
            bounds.push((off - start, len, header));
            off += len;
            if off >= frame.len() {
                break;
            }
        }
        Ok(FrameLayout { start, messages: bounds })
    }

    /// Dispatches the messages of a checked frame.
    fn dispatch_frame(&self, frame: Bytes, layout: FrameLayout) -> Result<()> {
        let encrypted = layout.start > 0;
        let frame = frame.slice(layout.start..);
        for (off, len, header) in layout.messages {
            self.dispatch(header, frame.slice(off..off + len), encrypted)?;
        }
        Ok(())
    }
}

/// Checks that a final answer fits the request it claims to answer.
fn check_bound(p: &Pending, h: &Header, encrypted: bool) -> Result<()> {
    let b = &p.bind;
    if h.command != b.command {
        return Err(Error::Integrity("response command does not match its request"));
    }
    if b.encrypted && !encrypted {
        return Err(Error::Integrity("unencrypted response to an encrypted request"));
    }
    // SESSION_SETUP answers carry the SessionId being set up.
    if !matches!(b.command, Command::Negotiate | Command::SessionSetup) && h.session_id != b.session_id {
        return Err(Error::Integrity("response SessionId does not match its request"));
    }
    if h.flags & flags::ASYNC_COMMAND != 0 {
        if p.async_id.is_none() || h.async_id != p.async_id {
            return Err(Error::Integrity("async response without the AsyncId of its interim answer"));
        }
    } else if b.command != Command::TreeConnect && h.tree_id != b.tree_id {
        return Err(Error::Integrity("response TreeId does not match its request"));
    }
    Ok(())
}

/// Where the messages of a received frame are, after its checks.
struct FrameLayout {
    /// Offset of the first message (past a transform header).
    start: usize,
    /// Each message's offset from `start`, length and header.
    messages: Vec<(usize, usize, Header)>,
}

async fn writer_task(inner: Arc<Inner>, mut wr: OwnedWriteHalf) {
    loop {
        let wake = inner.writer_wake.notified();
        let queue = std::mem::take(&mut inner.state.lock().unwrap().queue);
        if queue.is_empty() {
            wake.await;
            continue;
        }
        let res = tokio::time::timeout(inner.opts.request_timeout, write_all_vectored(&mut wr, &queue)).await;
        let err = match res {
            Ok(Ok(())) => {
                let mut free = inner.free_bufs.lock().unwrap();
                for b in queue {
                    if let Ok(m) = b.try_into_mut() {
                        keep_free(&mut free, m);
                    }
                }
                continue;
            }
            Ok(Err(e)) => Error::ConnectionLost(format!("write: {e}")),
            Err(_) => Error::Timeout("socket write stalled"),
        };
        inner.poison(err);
        return;
    }
}

/// Keeps a sent frame buffer for reuse if it is large enough to be worth it
/// and the connection's free list has room (FREE_BYTES).
fn keep_free(free: &mut Vec<BytesMut>, mut m: BytesMut) {
    let held: usize = free.iter().map(|b| b.capacity()).sum();
    if m.capacity() >= RECYCLE_MIN && held + m.capacity() <= FREE_BYTES {
        m.clear();
        free.push(m);
    }
}

async fn write_all_vectored(wr: &mut OwnedWriteHalf, bufs: &[Bytes]) -> std::io::Result<()> {
    let mut idx = 0usize;
    let mut off = 0usize;
    while idx < bufs.len() {
        let slices: Vec<IoSlice<'_>> = std::iter::once(IoSlice::new(&bufs[idx][off..]))
            .chain(bufs[idx + 1..].iter().take(63).map(|b| IoSlice::new(b)))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && idx < bufs.len() {
            let left = bufs[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
    wr.flush().await
}

/// Most CLOSEs the reaper sends in one batch (one buffer, one write).
const REAP_BATCH: usize = 64;

/// The reaper task of one connection: sends queued CLOSEs until the
/// connection is gone.
async fn reaper_task(
    weak: std::sync::Weak<Inner>,
    reaper: Reaper,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Orphan>,
) {
    while let Some(first) = rx.recv().await {
        let Some(inner) = weak.upgrade() else { return };
        let conn = Connection::unguarded(inner);
        if conn.is_poisoned() {
            continue; // the server dropped these handles with the connection
        }
        // Never ask for more credits than the window holds (failure class 2).
        let most = (conn.credit_window() as usize).clamp(1, REAP_BATCH);
        let mut batch = vec![first];
        while batch.len() < most {
            match rx.try_recv() {
                Ok(o) => batch.push(o),
                Err(_) => break,
            }
        }
        for encrypt in [false, true] {
            let mine: Vec<&Orphan> = batch.iter().filter(|o| o.encrypt == encrypt).collect();
            if mine.is_empty() {
                continue;
            }
            // A file to undo is marked delete-pending, then closed, in one
            // chain: the CLOSE runs even if the mark fails.
            let marks: Vec<SetInfoRequest<'_>> = mine
                .iter()
                .map(|o| SetInfoRequest { file_id: o.file_id, info: SetFileInfo::Disposition { delete_pending: true } })
                .collect();
            let closes: Vec<CloseRequest> =
                mine.iter().map(|o| CloseRequest { file_id: o.file_id, post_query: false }).collect();
            let ops: Vec<Vec<Op<'_>>> = mine
                .iter()
                .zip(marks.iter().zip(&closes))
                .map(|(o, (mark, close))| {
                    let close = Op { body: close, tree_id: o.tree_id };
                    if o.delete {
                        vec![Op { body: mark, tree_id: o.tree_id }, close]
                    } else {
                        vec![close]
                    }
                })
                .collect();
            let chains: Vec<&[Op<'_>]> = ops.iter().map(|o| &o[..]).collect();
            let rxs = match conn.send_batch(&chains, encrypt).await {
                Ok(rxs) => rxs,
                Err(e) => {
                    tracing::debug!(error = %e, "reaper: connection gone; the server closes its handles");
                    break;
                }
            };
            let mut rxs = rxs.into_iter();
            for chain in &ops {
                let mut closed = false;
                for op in chain {
                    let r = conn.wait(rxs.next().expect("one future per message")).await;
                    closed = op.body.command() == Command::Close && r.is_ok();
                }
                if closed {
                    reaper.count_closed();
                }
            }
        }
    }
}

/// Frames longer than this (READ responses) are read into a buffer of
/// their own from [`RecvPool`]; shorter ones are cut from a staging buffer.
const LARGE_FRAME: usize = 128 << 10;
/// Most bytes one staging read asks for.
const STAGE_READ: usize = 64 << 10;

async fn reader_task(inner: Arc<Inner>, mut rd: OwnedReadHalf) {
    let pool = RecvPool::global();
    let mut buf = BytesMut::with_capacity(2 * STAGE_READ);
    let result: Result<()> = async {
        loop {
            while buf.len() < FRAME_HEADER_LEN {
                read_more(&mut rd, &mut buf, STAGE_READ).await?;
            }
            let len = frame_len([buf[0], buf[1], buf[2], buf[3]])?;
            if len > MAX_FRAME_LEN || len < HEADER_LEN.min(TRANSFORM_HEADER_LEN) {
                return Err(Error::Protocol(format!("frame length {len}")));
            }
            if len > LARGE_FRAME {
                // Take what staging already holds, then read exactly the
                // rest, so the payload is copied once (by the kernel).
                let mut frame = pool.take(len);
                let have = buf.len().min(FRAME_HEADER_LEN + len);
                frame.extend_from_slice(&buf[FRAME_HEADER_LEN..have]);
                buf.advance(have);
                while frame.len() < len {
                    let want = len - frame.len();
                    let n = rd
                        .read_buf(&mut (&mut frame).limit(want))
                        .await
                        .map_err(|e| Error::ConnectionLost(format!("read: {e}")))?;
                    if n == 0 {
                        return Err(Error::ConnectionLost("server closed the connection".into()));
                    }
                }
                let layout = inner.open_frame(&mut frame)?;
                inner.dispatch_frame(pool.freeze(frame), layout)?;
                continue;
            }
            while buf.len() < FRAME_HEADER_LEN + len {
                let want = FRAME_HEADER_LEN + len - buf.len();
                read_more(&mut rd, &mut buf, want.max(STAGE_READ)).await?;
            }
            let mut frame = buf.split_to(FRAME_HEADER_LEN + len);
            frame.advance(FRAME_HEADER_LEN);
            let layout = inner.open_frame(&mut frame)?;
            inner.dispatch_frame(frame.freeze(), layout)?;
        }
    }
    .await;
    if let Err(e) = result {
        // Whatever stops the reader kills the connection, so every waiter
        // must see a connection error (retryable elsewhere), including for
        // protocol violations such as a bad frame length or a reply to an
        // unknown MessageId.
        let e = match e {
            Error::Protocol(m) => Error::ConnectionLost(format!("protocol violation: {m}")),
            e => e,
        };
        inner.poison(e);
    }
}

/// Reads at most `want` more bytes into `buf`, so staging never swallows
/// much of a following large frame.
async fn read_more(rd: &mut OwnedReadHalf, buf: &mut BytesMut, want: usize) -> Result<()> {
    buf.reserve(want);
    let n = rd.read_buf(&mut (&mut *buf).limit(want)).await.map_err(|e| Error::ConnectionLost(format!("read: {e}")))?;
    if n == 0 {
        return Err(Error::ConnectionLost("server closed the connection".into()));
    }
    Ok(())
}

/// A receive path with no socket, for fuzzing and its tests: frames go
/// through the same checks (`open_frame`) and dispatch as the reader task
/// gives them, against made-up pending requests.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz {
    use super::*;
    use crate::crypto::SessionKeys;
    use smb_proto::negotiate::{Cipher, SigningAlgorithm};

    const SESSION_ID: u64 = 0x11;
    const TREE_ID: u32 = 5;
    const COMMANDS: [Command; 8] = [
        Command::Create,
        Command::Close,
        Command::Read,
        Command::Write,
        Command::QueryInfo,
        Command::QueryDirectory,
        Command::Ioctl,
        Command::SessionSetup,
    ];

    /// Runs `data` through the receive path. Layout: one byte of flags (bit
    /// 0: the session has a signing key; bit 1: a cipher; bit 2: encrypt
    /// everything; bit 3: sign everything), one byte N (up to 16), N bytes
    /// describing pending requests with MessageIds 0..N (low 3 bits: the
    /// command; bit 3: sent encrypted), then transport frames. Never
    /// panics; stops where the reader task would poison the connection.
    /// Returns how many answers reached their waiters.
    pub fn receive(data: &[u8]) -> usize {
        let mut delivered = 0;
        let [flags, n, rest @ ..] = data else { return 0 };
        let n = (*n as usize).min(16).min(rest.len());
        let (reqs, mut stream) = rest.split_at(n);
        let (reaper, _rx) = Reaper::new();
        let inner = Arc::new_cyclic(|me| Inner::new(ConnectionOptions::default(), reaper, me.clone()));
        {
            let mut sec = inner.security.write().unwrap();
            sec.session_id = SESSION_ID;
            let keys = SessionKeys { signing: [7; 16], encryption: [8; 32], decryption: [9; 32] };
            if flags & 1 != 0 {
                sec.signer = Some(Signer::new(SigningAlgorithm::AesGmac, &keys.signing));
            }
            if flags & 2 != 0 {
                sec.cipher = Some(Cipherer::new(Cipher::Aes128Gcm, &keys));
            }
            sec.encrypt_all = flags & 4 != 0;
            sec.sign_all = flags & 8 != 0;
        }
        let mut rxs = Vec::new();
        {
            let mut st = inner.state.lock().unwrap();
            st.credits.available = 1024;
            for (id, r) in reqs.iter().enumerate() {
                let (tx, rx) = oneshot::channel();
                let bind = Bind {
                    command: COMMANDS[(*r & 7) as usize],
                    session_id: SESSION_ID,
                    tree_id: TREE_ID,
                    encrypted: r & 8 != 0,
                };
                st.pending.insert(id as u64, Pending { tx, charge: 1, ticket: None, bind, async_id: None });
                rxs.push(rx);
            }
        }
        while stream.len() >= FRAME_HEADER_LEN {
            let Ok(len) = frame_len([stream[0], stream[1], stream[2], stream[3]]) else { break };
            if len > MAX_FRAME_LEN || len < HEADER_LEN.min(TRANSFORM_HEADER_LEN) || stream.len() < 4 + len {
                break;
            }
            let mut frame = BytesMut::from(&stream[4..4 + len]);
            stream = &stream[4 + len..];
            let Ok(layout) = inner.open_frame(&mut frame) else { break };
            if inner.dispatch_frame(frame.freeze(), layout).is_err() {
                break;
            }
        }
        // What a caller does with what it was given: decode the body.
        for mut rx in rxs {
            if let Ok(Ok(r)) = rx.try_recv() {
                delivered += 1;
                let _ = match r.header.command {
                    Command::Read => r.body(smb_proto::io::ReadResponse::decode).map(|_| ()),
                    Command::Write => r.body(smb_proto::io::WriteResponse::decode).map(|_| ()),
                    Command::Close => r.body(smb_proto::create::CloseResponse::decode).map(|_| ()),
                    Command::Create => r.into_create().map(|_| ()),
                    _ => r.body(smb_proto::query::OutputBuffer::decode).map(|_| ()),
                };
            }
        }
        delivered
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// A well-formed unsigned READ answer to MessageId 0 is delivered,
        /// and a forged command or a truncated frame stops the loop, without
        /// a panic either way.
        #[test]
        fn receive_survives_odd_input() {
            let mut h = Header::request(Command::Read);
            h.flags = flags::SERVER_TO_REDIR;
            h.session_id = SESSION_ID;
            h.tree_id = TREE_ID;
            let mut msg = BytesMut::new();
            h.encode(&mut msg);
            msg.extend_from_slice(&[17, 0, 0x50, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b'a', b'b', b'c']);
            let mut input = vec![0u8, 1, 2];
            input.extend_from_slice(&(msg.len() as u32).to_be_bytes());
            input.extend_from_slice(&msg);
            assert_eq!(receive(&input), 1, "a well-formed answer is delivered");
            input[2] = 1; // the request was a CLOSE
            assert_eq!(receive(&input), 0, "an answer with another command is not");
            input[2] = 2 | 8; // the request went encrypted
            assert_eq!(receive(&input), 0, "nor a plaintext answer to an encrypted request");
            input[2] = 2;
            input[0] = 1 | 8; // a signed session
            assert_eq!(receive(&input), 0, "nor an unsigned one on a signed session");
            input[0] = 0;
            receive(&input[..input.len() - 5]);
            for len in 0..input.len() {
                receive(&input[..len]);
            }
            receive(&[0xff; 64]);
        }
    }
}
