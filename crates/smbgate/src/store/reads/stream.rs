//! Split streaming for GET: a large range is cut into ordered segments; up
//! to W segments are fetched at once, each on its own pooled connection
//! with pipelined READs, while the bytes go to the client strictly in
//! order. W adapts: a segment is fetched ahead only while the pool has an
//! idle connection and the process-wide read-ahead budget has room for it
//! (otherwise it is read on a handle of its own when its turn comes), so
//! memory stays bounded however many GETs run and however slowly their
//! clients read. A segment whose connection fails is read again, or goes on
//! from its first unsent byte, on another connection; a file that changed
//! between segments aborts the response instead of splicing two versions.

use crate::store::share_data::ShareData;
use std::collections::VecDeque;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::Stream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::store::share::{Handle, Tree};

use super::prefetch_depth::PrefetchDepth;
use crate::store::share::{self, ShareError};
use crate::store::sse_c::Opener;
use crate::store::types::{ObjectInfo, Opened};
use crate::store::{backoff, Reads};

/// The response body: bytes from the segment pipeline, in order; of an
/// SSE-C object, opened package by package as they come.
pub struct BodyStream {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
    opener: Option<Opener>,
    opened: VecDeque<Bytes>,
    /// The body ended in an error: nothing more is sent.
    failed: bool,
    /// The object's path, for the log of a package that fails its check.
    path: String,
}

impl BodyStream {
    fn of(rx: mpsc::Receiver<Result<Bytes, std::io::Error>>) -> BodyStream {
        BodyStream { rx, opener: None, opened: VecDeque::new(), failed: false, path: String::new() }
    }

    /// This stream's bytes are the stored packages of the SSE-C object at
    /// `path`: the body is what `opener` makes of them, and ends in an
    /// error (logged at WARN), never in other bytes, where a package fails
    /// its tag.
    pub fn opened_with(self, opener: Opener, path: &str) -> BodyStream {
        BodyStream { opener: Some(opener), path: path.to_string(), ..self }
    }
}

impl Stream for BodyStream {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        loop {
            if let Some(b) = this.opened.pop_front() {
                return Poll::Ready(Some(Ok(b)));
            }
            let next = std::task::ready!(this.rx.poll_recv(cx));
            let Some(opener) = this.opener.as_mut() else { return Poll::Ready(next) };
            // The stored bytes opened, or where the body ends: at their
            // end, at a read that failed, or at a package that fails its
            // check (logged: the client sees only a cut body).
            let ended = match next {
                Some(Ok(stored)) => match opener.push(&stored) {
                    Ok(plain) => {
                        this.opened.extend(plain);
                        continue;
                    }
                    Err(damaged) => Some(damaged),
                },
                None => opener.finish().err(),
                Some(Err(e)) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
            };
            this.failed = true;
            if let Some(e) = &ended {
                tracing::warn!(path = this.path, "{e}; the response was cut there");
            }
            return Poll::Ready(ended.map(|e| Err(io_err(e))));
        }
    }
}

fn io_err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

/// Starts streaming `range` of the opened object; see the module docs.
/// `head`, if given, holds bytes already read from `range.start`; with no
/// `opened` it must hold the whole range (the body ends with an error
/// where it does not). Every handle the stream opens or is given closes
/// when the stream ends or is dropped.
pub fn object_stream(
    reads: Reads,
    opened: Option<Opened>,
    info: ObjectInfo,
    mut range: Range<u64>,
    head: Option<Bytes>,
) -> BodyStream {
    // A few chunks (each at most one READ, 8 MiB by default) between the
    // segment pipeline and hyper: enough to overlap the two, and bounded in
    // bytes however slow the client reads.
    let (tx, rx) = mpsc::channel(1);
    // Bytes already read with the open: all of a small object, or the
    // start of a large one.
    let head = head.map(|h| h.slice(..h.len().min((range.end - range.start) as usize))).filter(|h| !h.is_empty());
    if let Some(h) = &head {
        range.start += h.len() as u64;
        let _ = tx.try_send(Ok(h.clone()));
    }
    let Some(opened) = opened else {
        if range.start < range.end {
            let missing = io_err(format!("{} bytes of the object were not in memory", range.end - range.start));
            let _ = tx.try_send(Err(missing));
        }
        return BodyStream::of(rx);
    };
    let span = tracing::debug_span!("store.stream", bytes = (range.end - range.start) as i64);
    let streaming = async move {
        if range.start >= range.end {
            drop(tx); // end the body now; the CLOSE need not delay it
            opened.close().await;
            return;
        }
        let result = run(&reads, opened, &info, range, &tx).await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "GET stream aborted");
            let _ = tx.send(Err(e)).await;
        }
    };
    tokio::spawn(streaming.instrument(span));
    BodyStream::of(rx)
}

/// The trace span of one segment of a GET (its READs get none of their
/// own: see `smb_client::connection::round_trip`); `fetch_segment` and
/// `stream_resuming` make theirs alike.
fn segment_span(s: &Range<u64>) -> tracing::Span {
    tracing::debug_span!("store.segment", offset = s.start as i64, bytes = (s.end - s.start) as i64)
}

/// Read-ahead a GET gets when the budget is spent.
const MIN_READ_AHEAD: usize = 1 << 20;

/// One segment of the response, in order.
enum Segment {
    /// Streamed when its turn comes: the first from the GET's own handle,
    /// later ones each on a handle of their own.
    Inline(Range<u64>),
    /// Being fetched on another connection, holding its share of the
    /// read-ahead budget until its bytes are handed to the body.
    /// The task gives the bytes, the segment's length and how long it took.
    Fetched(JoinHandle<(Result<Vec<Bytes>, std::io::Error>, u64, Duration)>, OwnedSemaphorePermit),
}

async fn run(
    reads: &Reads,
    opened: Opened,
    info: &ObjectInfo,
    range: Range<u64>,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Result<(), std::io::Error> {
    let opts = reads.root.options();
    let seg = opts.segment_size.max(1 << 20);
    let len = range.end - range.start;
    let mut depth = PrefetchDepth::for_setting(opts.prefetch);
    // Read-ahead on the GET's own handle: what the budget allows, but at
    // least MIN_READ_AHEAD so every GET makes progress (the overdraft is
    // bounded by that much per running GET; READs shrink to fit).
    let (granted, _ahead) = reads.read_ahead.take_up_to(reads.root.in_flight() as u64);
    let in_flight = (granted as usize).max(MIN_READ_AHEAD);
    if depth.current() == 1 || len <= 2 * seg {
        return stream_resuming(reads, info, Some(opened.handle), range, in_flight, tx).await;
    }
    // The head segment streams from the open handle while up to W - 1
    // following ones are fetched on other connections. A segment is fetched
    // ahead only while the pool has an idle connection and the budget has
    // room; otherwise it streams on a handle of its own when its turn comes.
    let mut queue: VecDeque<Segment> = VecDeque::new();
    let mut next = range.start;
    // The GET's own handle serves the first segment only, then closes: a
    // PUT of the same key cannot rename over a file that is open (Samba
    // answers ACCESS_DENIED), so no handle is held longer than one segment.
    let mut own = Some(opened);
    let result = async {
        loop {
            while queue.len() < depth.current() && next < range.end {
                let s = next..(next + seg).min(range.end);
                if queue.is_empty() {
                    queue.push_back(Segment::Inline(s.clone()));
                } else {
                    let permit = match reads.root.pool().idle() {
                        0 => None,
                        _ => reads.read_ahead.try_take(s.end - s.start),
                    };
                    let Some(permit) = permit else { break };
                    let (reads, info, s) = (reads.clone(), info.clone(), s.clone());
                    let h = tokio::spawn(
                        async move {
                            let started = Instant::now();
                            let data = fetch_segment(reads, info, s.clone()).await;
                            (data, s.end - s.start, started.elapsed())
                        }
                        .in_current_span(),
                    );
                    queue.push_back(Segment::Fetched(h, permit));
                }
                next = s.end;
            }
            match queue.pop_front() {
                None => return Ok(()),
                Some(Segment::Inline(s)) => {
                    // With room for the whole segment, read it, close, then
                    // send: a client that pauses then holds no handle.
                    let whole = in_flight as u64 >= s.end - s.start;
                    match own.take() {
                        Some(o) if whole => {
                            let want = s.end - s.start;
                            let r = {
                                let tree = share::connection_of(&o.handle);
                                let live = reads.root.live(&tree);
                                let read = live.read_range_whole(&o.handle, s.clone(), in_flight);
                                read.instrument(segment_span(&s)).await
                            };
                            drop(o); // closed by its connection, without delaying the body
                            let data = match r {
                                Ok((data, got)) if got == want => data,
                                Ok((_, got)) => {
                                    return Err(io_err(format!("object shrank while reading: {got} of {want} bytes")))
                                }
                                // Nothing of it was sent yet: read it again
                                // on another connection.
                                Err(e) if e.is_connection_error() => {
                                    fetch_segment(reads.clone(), info.clone(), s).await?
                                }
                                Err(e) => return Err(io_err(e)),
                            };
                            if !send_all(tx, data).await {
                                return Ok(());
                            }
                        }
                        Some(o) => stream_resuming(reads, info, Some(o.handle), s, in_flight, tx).await?,
                        None if whole => {
                            let data = fetch_segment(reads.clone(), info.clone(), s).await?;
                            if !send_all(tx, data).await {
                                return Ok(());
                            }
                        }
                        None => stream_resuming(reads, info, None, s, in_flight, tx).await?,
                    }
                }
                Some(Segment::Fetched(h, permit)) => {
                    let waited = !h.is_finished();
                    let (data, bytes, took) = h.await.map_err(io_err)?;
                    let data = data?;
                    depth.segment_done(bytes, took, waited);
                    if !send_all(tx, data).await {
                        return Ok(());
                    }
                    drop(permit);
                }
            }
            if tx.is_closed() {
                return Ok(());
            }
        }
    }
    .await;
    // Segments still being fetched run to their end in the background and
    // close their handles: aborting one between its CREATE and CLOSE would
    // leave the file open on the share for the connection's lifetime, and
    // Samba then refuses renames over it. Each holds its budget until done.
    let pending: Vec<_> = queue
        .into_iter()
        .filter_map(|s| match s {
            Segment::Fetched(h, permit) => Some((h, permit)),
            Segment::Inline(_) => None,
        })
        .collect();
    if !pending.is_empty() {
        tokio::spawn(async move {
            for (h, permit) in pending {
                let _ = h.await;
                drop(permit);
            }
        });
    }
    drop(own);
    result
}

/// Streams `range` into the body in order, from `first` (an open handle)
/// or else a handle opened on a pooled connection. After a connection
/// failure it goes on from the first byte not yet sent, on a new handle from
/// another connection, if the object is still the same generation (at most
/// as many tries in a row without progress as [`backoff::SEGMENT`] allows). Closes every handle it opens or
/// is given.
///
/// Errors: the last SMB error; "object changed" or "object shrank" when the
/// file is no longer the version the GET started with.
#[tracing::instrument(level = "debug", name = "store.segment", skip_all, fields(offset = range.start as i64, bytes = (range.end - range.start) as i64))]
async fn stream_resuming(
    reads: &Reads,
    info: &ObjectInfo,
    mut first: Option<Handle>,
    range: Range<u64>,
    in_flight: usize,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Result<(), std::io::Error> {
    let mut pos = range.start;
    let mut backoff = backoff::SEGMENT.start();
    loop {
        let from = pos;
        let (handle, tree) = match first.take() {
            Some(h) => {
                let tree = share::connection_of(&h);
                (h, tree)
            }
            None => match open_same(reads, info).await {
                Ok(opened) => opened,
                Err(FetchError::Other(e)) => {
                    if !before_retry(reads, &mut backoff).await {
                        return Err(e);
                    }
                    tracing::debug!(error = %e, "GET could not re-open the object; retrying");
                    continue;
                }
                Err(e) => return Err(e.into_io()),
            },
        };
        let r = stream_from(&reads.root.live(&tree), &handle, pos..range.end, in_flight, tx, &mut pos).await;
        // Closed by its connection: the end of the body does not wait for it.
        drop((handle, tree));
        match r {
            Ok(()) if pos < range.end && !tx.is_closed() => {
                let (got, want) = (pos - range.start, range.end - range.start);
                return Err(io_err(format!("object shrank while reading: {got} of {want} bytes")));
            }
            Ok(()) => return Ok(()),
            Err(e) if e.is_connection_error() => {
                if pos > from {
                    // Losses far apart each get their own attempts; the
                    // object's size bounds how often that can happen.
                    backoff = backoff::SEGMENT.start();
                }
                if !before_retry(reads, &mut backoff).await {
                    return Err(io_err(e));
                }
                tracing::debug!(error = %e, offset = pos, "GET resumes on another connection");
            }
            Err(e) => return Err(io_err(e)),
        }
    }
}

/// Streams `range` of the open `handle` on `s` into the body, in order,
/// moving `pos` past each chunk handed to the body. Returns early (Ok) if
/// the client went away or the file ended.
async fn stream_from<S: ShareData>(
    s: &S,
    handle: &S::Handle,
    range: Range<u64>,
    in_flight: usize,
    tx: &mpsc::Sender<Result<Bytes, std::io::Error>>,
    pos: &mut u64,
) -> Result<(), ShareError> {
    let mut r = s.read_range(handle, range, in_flight)?;
    while let Some(b) = s.next_piece(&mut r).await? {
        let n = b.len() as u64;
        if tx.send(Ok(b)).await.is_err() {
            return Ok(());
        }
        *pos += n;
    }
    Ok(())
}

/// Reads one segment on a pooled connection, retrying on another
/// connection after a connection failure. Checks that the file is the same
/// generation (size and LastWriteTime) as when the GET started.
#[tracing::instrument(level = "debug", name = "store.segment", skip_all, fields(offset = seg.start as i64, bytes = (seg.end - seg.start) as i64))]
async fn fetch_segment(reads: Reads, info: ObjectInfo, seg: Range<u64>) -> Result<Vec<Bytes>, std::io::Error> {
    let mut backoff = backoff::SEGMENT.start();
    loop {
        match fetch_once(&reads, &info, seg.clone()).await {
            Ok(v) => return Ok(v),
            Err(e @ FetchError::Changed) => return Err(e.into_io()),
            Err(FetchError::Other(e)) => {
                if !before_retry(&reads, &mut backoff).await {
                    return Err(e);
                }
            }
        }
    }
}

/// Between attempts: start replacing broken connections, then wait
/// ([`backoff::SEGMENT`]). Returns false, with no wait, once the attempts
/// are spent and the GET is to be aborted.
async fn before_retry(reads: &Reads, backoff: &mut backoff::Backoff) -> bool {
    reads.root.pool().kick();
    backoff.wait().await
}

enum FetchError {
    Changed,
    Other(std::io::Error),
}

impl FetchError {
    fn into_io(self) -> std::io::Error {
        match self {
            FetchError::Changed => io_err("object changed during the GET; response aborted"),
            FetchError::Other(e) => e,
        }
    }
}

/// Opens the object again on a pooled connection and checks it is the
/// generation the GET started with: same size, LastWriteTime and on-disk
/// file id (when the server reports one). Returns the open and the
/// connection it is on.
async fn open_same(reads: &Reads, info: &ObjectInfo) -> Result<(Handle, Tree), FetchError> {
    let tree = reads.root.tree().await.map_err(|e| FetchError::Other(io_err(e)))?;
    let f = reads.root.live(&tree).open_read(&info.path).await.map_err(|e| FetchError::Other(io_err(e)))?;
    let c = f.info();
    let other_file = matches!((info.disk_id, c.on_disk_id()), (Some(a), Some(b)) if a != b);
    if c.times.end_of_file != info.size || c.times.last_write != info.last_modified || other_file {
        return Err(FetchError::Changed);
    }
    Ok((f, tree))
}

async fn fetch_once(reads: &Reads, info: &ObjectInfo, seg: Range<u64>) -> Result<Vec<Bytes>, FetchError> {
    let (handle, tree) = open_same(reads, info).await?;
    let r = reads.root.live(&tree).read_range_whole(&handle, seg.clone(), reads.root.in_flight()).await;
    drop((handle, tree));
    let (data, got) = r.map_err(|e| FetchError::Other(io_err(e)))?;
    if got != seg.end - seg.start {
        return Err(FetchError::Changed);
    }
    Ok(data)
}

/// Sends chunks to the body in order; false if the client went away.
async fn send_all(tx: &mpsc::Sender<Result<Bytes, std::io::Error>>, data: Vec<Bytes>) -> bool {
    for b in data {
        if tx.send(Ok(b)).await.is_err() {
            return false;
        }
    }
    true
}
