//! Parallel PUT: a streamed body is cut into segments that are written at
//! their offsets over several pooled connections, so several smbd
//! processes (or NAS threads) absorb one upload. Segment i goes to lane
//! i mod W; lane 0 is the caller's handle, the others open the same file
//! on other connections once the body grows past the first segment. Each
//! lane keeps at most its share of the body's bytes in flight, which come
//! from the process-wide write-behind budget, so memory stays bounded
//! whatever the body size and however many bodies arrive at once.
//!
//! A lane whose connection is lost goes on: its file is reopened on
//! another pooled connection (its durable handle reclaimed, or the same
//! file by name, see `smb_client::durable`) and the WRITEs the server had
//! not acknowledged are sent again, so a PUT survives connection resets.
//! Each lane recovers on its own, from up to [`MAX_REOPENS`] losses.

use bytes::Bytes;
use smb_client::durable::Reopen;
use smb_client::pipeline::PipelinedWriter;
use smb_client::tree::Tree;
use smb_client::Handle;

use super::budget::Held;
use super::{share, Store, StoreResult};

/// One connection's writer into the file.
struct Lane {
    tree: Tree,
    /// The lane's own handle, opened here; `None` for lane 0, the caller's.
    /// Closes itself when the writer is dropped on an error path, so the
    /// caller's cleanup (delete or retry) is not blocked by it.
    own: Option<Handle>,
    writer: PipelinedWriter,
    /// How to open the lane's file again after its connection is lost.
    reopen: Option<Reopen>,
    /// Bytes acknowledged by this lane's earlier writers (before a reopen).
    acked_before: u64,
    /// Connection losses this lane has survived.
    reopens: u32,
}

/// How many of `n` bytes given at file offset `at` a writer took (buffered,
/// sent or kept as unacknowledged) when it stopped at `pos`; `ok`: it did
/// not fail. A failed seek leaves `pos` elsewhere: nothing was taken.
fn taken(pos: u64, at: u64, n: usize, ok: bool) -> usize {
    if ok {
        n
    } else if (at..=at + n as u64).contains(&pos) {
        (pos - at) as usize
    } else {
        0
    }
}

/// Connection losses each lane of a body survives.
pub(crate) const MAX_REOPENS: u32 = 8;
/// Tries to reopen a lane's file after one loss.
const MAX_TRIES: u32 = 8;

/// Writes a body at `base..` of one file over up to W connections; see the
/// module docs.
pub(crate) struct SpreadWriter {
    store: Store,
    path: String,
    base: u64,
    segment: u64,
    want_lanes: usize,
    lane_budget: usize,
    lanes: Vec<Lane>,
    /// Body bytes accepted so far.
    accepted: u64,

    /// This body's share of the write-behind budget.
    _held: Option<Held>,
}

/// Bytes in flight a body gets when the write-behind budget is spent.
const MIN_WRITE_BEHIND: u64 = 1 << 20;

impl SpreadWriter {
    /// A writer of body bytes to `path` (already open as `file`) starting at
    /// file offset `base`. Its bytes in flight come from
    /// the store's write-behind budget (at least [`MIN_WRITE_BEHIND`]), and
    /// it uses no more lanes than that budget fills with segments.
    pub(crate) fn new(store: &Store, file: &Handle, path: &str, base: u64) -> SpreadWriter {
        let tree = file.tree();
        let opts = store.options();
        let segment = opts.segment_size.max(1 << 20);
        let (granted, held) = store.write_behind().take_up_to(store.in_flight() as u64);
        let in_flight = granted.max(MIN_WRITE_BEHIND);
        let want_lanes = opts.put_parallel.clamp(1, (in_flight / segment).max(1) as usize);
        let lane_budget = (in_flight as usize / want_lanes).max(MIN_WRITE_BEHIND as usize);
        let first = Lane {
            tree: tree.clone(),
            own: None,
            writer: tree.writer(file.id(), base, lane_budget),
            reopen: file.reopen_info(),
            acked_before: 0,
            reopens: 0,
        };
        SpreadWriter {
            store: store.clone(),
            path: path.to_string(),
            base,
            segment,
            want_lanes,
            lane_budget,
            lanes: vec![first],
            accepted: 0,
            _held: held,
        }
    }

    /// Queues `data` (the next body bytes), waiting only while the lane it
    /// goes to has its budget outstanding.
    ///
    /// Errors: the first failing WRITE on any lane.
    pub(crate) async fn write(&mut self, mut data: &[u8]) -> StoreResult<()> {
        while !data.is_empty() {
            let seg = self.accepted / self.segment;
            let room = (self.segment - self.accepted % self.segment) as usize;
            let n = room.min(data.len());
            let idx = self.lane_for(seg).await;
            let at = self.base + self.accepted;
            let lane = &mut self.lanes[idx];
            let mut sent = Ok(());
            if lane.writer.position() != at {
                sent = lane.writer.seek(at).await;
            }
            if sent.is_ok() {
                sent = lane.writer.write(&data[..n]).await;
            }
            let took = taken(lane.writer.position(), at, n, sent.is_ok());
            self.accepted += took as u64;
            data = &data[took..];
            if let Err(e) = sent {
                self.recover(idx, e).await?;
            }
        }
        Ok(())
    }

    /// Lane `idx` failed with `cause`: if its connection was lost, reopens
    /// its file on another pooled connection and sends again what the
    /// server had not acknowledged; otherwise returns `cause`.
    async fn recover(&mut self, idx: usize, cause: smb_client::Error) -> StoreResult<()> {
        let mut cause = cause;
        if self.lanes[idx].reopens >= MAX_REOPENS {
            return Err(cause.into());
        }
        self.lanes[idx].reopens += 1;
        // Pieces no writer holds yet (a resend that failed part way).
        let mut carry: Vec<(u64, Bytes)> = Vec::new();
        // A connection lost with this one may not be known as lost yet, so a
        // try can fail at once on it: tries are bounded apart from losses.
        let mut tries = 0;
        loop {
            let Some(reopen) = self.lanes[idx].reopen.clone() else { return Err(cause.into()) };
            if !cause.is_connection_error() || tries >= MAX_TRIES {
                return Err(cause.into());
            }
            tries += 1;
            tracing::warn!(
                path = %self.path, lane = idx, error = %cause,
                "SMB connection lost during a PUT; reopening the file on another connection"
            );
            let tree = self.store.pool().get().await?;
            let handle = match tree.reopen(&reopen).await {
                Ok((h, _)) => h,
                Err(e) => {
                    cause = e;
                    continue;
                }
            };
            let lane = &mut self.lanes[idx];
            let fresh = tree.writer(handle.id(), lane.writer.position(), self.lane_budget);
            let unacked = std::mem::replace(&mut lane.writer, fresh).into_unacked();
            lane.acked_before += unacked.acked;
            lane.tree = tree;
            lane.reopen = handle.reopen_info();
            lane.own = Some(handle); // the lost handle, if the lane's, is dropped
            carry.extend(unacked.pieces);
            carry.sort_by_key(|p| p.0);
            let pieces = std::mem::take(&mut carry);
            let mut failed = false;
            for (i, (off, bytes)) in pieces.iter().enumerate() {
                let mut sent = lane.writer.seek(*off).await;
                if sent.is_ok() {
                    sent = lane.writer.write(bytes).await;
                }
                if let Err(e) = sent {
                    let took = taken(lane.writer.position(), *off, bytes.len(), false);
                    if took < bytes.len() {
                        carry.push((off + took as u64, bytes.slice(took..)));
                    }
                    carry.extend(pieces[i + 1..].iter().cloned());
                    cause = e;
                    failed = true;
                    break;
                }
            }
            if !failed {
                return Ok(());
            }
        }
    }

    /// The lane for segment `seg`, opening another connection's handle the
    /// first time a lane is needed. A lane that cannot be opened (pool
    /// busy or broken) just means fewer lanes.
    async fn lane_for(&mut self, seg: u64) -> usize {
        let idx = (seg % self.want_lanes as u64) as usize;
        if idx < self.lanes.len() {
            return idx;
        }
        if idx == self.lanes.len() {
            if let Some(lane) = self.open_lane().await {
                self.lanes.push(lane);
                return idx;
            }
            self.want_lanes = self.lanes.len();
        }
        (seg % self.lanes.len() as u64) as usize
    }

    async fn open_lane(&self) -> Option<Lane> {
        let tree = self
            .store
            .pool()
            .spread(self.want_lanes)
            .into_iter()
            .find(|t| !self.lanes.iter().any(|l| l.tree.conn().same_as(t.conn())))?;
        match share::open_lane(&tree, &self.path).await {
            Ok(f) => {
                let writer = tree.writer(f.id(), 0, self.lane_budget);
                Some(Lane { tree, reopen: f.reopen_info(), own: Some(f), writer, acked_before: 0, reopens: 0 })
            }
            Err(e) => {
                tracing::debug!(error = %e, "parallel PUT lane not opened; continuing with fewer lanes");
                None
            }
        }
    }

    /// Waits for every WRITE on every lane (recovering lanes whose
    /// connection is lost meanwhile) and closes the extra handles. Returns
    /// the body bytes written and, if lane 0 had to reopen the caller's
    /// file, the handle it reopened (the caller's own is lost).
    ///
    /// Errors: the first failing WRITE; the extra handles are closed either way.
    pub(crate) async fn finish(mut self) -> StoreResult<(u64, Option<Handle>)> {
        let mut first_err = None;
        for idx in 0..self.lanes.len() {
            loop {
                match self.lanes[idx].writer.drain().await {
                    Ok(()) => break,
                    Err(e) => {
                        if let Err(e) = self.recover(idx, e).await {
                            first_err.get_or_insert(e);
                            break;
                        }
                    }
                }
            }
        }
        let mut total = 0u64;
        let mut replacement = None;
        for (i, lane) in std::mem::take(&mut self.lanes).into_iter().enumerate() {
            total += lane.acked_before + lane.writer.written();
            match lane.own {
                Some(own) if i == 0 => replacement = Some(own),
                Some(own) => {
                    let _ = own.close().await;
                }
                None => {}
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok((total, replacement)),
        }
    }
}
