//! Parallel PUT: a streamed body is cut into segments that are written at
//! their offsets over several pooled connections (lanes), so several smbd
//! processes (or NAS threads) absorb one upload. Lane 0 is the caller's
//! handle; the others open the same file on other connections when first
//! given a segment. The lanes in use take segments in turn. Each lane
//! keeps at most an equal share (for the most lanes the body may use) of
//! the body's bytes in flight, which come from the process-wide
//! write-behind budget, so memory stays bounded whatever the body size and
//! however many bodies arrive at once. A share is not moved between lanes
//! as their number changes: bytes queued on one lane (in a NAS's or a
//! proxy's buffers) cannot be moved to another, and a lane with a deep
//! queue would hide for a long while what more lanes bring.
//!
//! How many lanes is fixed (`--put-parallel N`: segment i goes to lane
//! i mod N) or chosen per body (`auto`, see [`super::put_lanes`]): the
//! writer times each segment and how long it spent handing it to its lane,
//! and gives the next segments to the lanes just added first. Lanes given
//! back stay open, unused, until the body ends.
//!
//! A lane whose connection is lost goes on: its file is reopened on
//! another pooled connection (its durable handle reclaimed, or the same
//! file by name) and the WRITEs the server had not acknowledged are sent
//! again, so a PUT survives connection resets. Each lane recovers on its
//! own, from up to [`share::lane::MAX_REOPENS`] losses (see `share::lane`).

use std::time::{Duration, Instant};

use crate::store::share::Handle;

use super::put_lanes::{self, LaneCount};
use crate::store::budget::Held;
use crate::store::fan_out::FanOut;
use crate::store::share::lane::Lane;
use crate::store::{share, StoreResult, Writes};

/// The log target of these events: the name `SMBGATE_LOG` filters by (docs/configuration.md), kept when the file moved.
const LOG_TARGET: &str = "smbgate::store::spread";

/// Writes a body at `base..` of one file over up to W connections; see the
/// module docs.
pub(crate) struct SpreadWriter {
    store: Writes,
    path: String,
    base: u64,
    segment: u64,
    /// Lanes to write over now.
    count: LaneCount,
    /// Each lane's bytes in flight.
    lane_budget: usize,
    /// Lanes opened so far (more than `count` after a try that did not pay).
    lanes: Vec<Lane>,
    /// Body bytes accepted so far.
    accepted: u64,
    /// The lane the current segment goes to (opened when first written).
    lane: usize,
    /// When the current segment began, and how long the body has waited
    /// on a lane in it.
    segment_began: Instant,
    segment_waited: Duration,

    /// This body's share of the write-behind budget.
    _held: Option<Held>,
}

/// Bytes in flight a body gets when the write-behind budget is spent.
const MIN_WRITE_BEHIND: u64 = 1 << 20;

impl SpreadWriter {
    /// A writer of body bytes to `path` (already open as `file`) starting at
    /// file offset `base`. Its bytes in flight come from the store's
    /// write-behind budget (at least [`MIN_WRITE_BEHIND`]), and it uses no
    /// more lanes than that budget fills with segments.
    pub(crate) fn new(store: &Writes, file: &Handle, path: &str, base: u64) -> SpreadWriter {
        let opts = store.root.options();
        let segment = opts.segment_size.max(1 << 20);
        let (granted, held) = store.write_behind.take_up_to(store.root.in_flight() as u64);
        let in_flight = granted.max(MIN_WRITE_BEHIND);
        let max_lanes = put_lanes::max_lanes(opts.put_parallel).clamp(1, (in_flight / segment).max(1) as usize);
        let lane_budget = (in_flight as usize / max_lanes).max(MIN_WRITE_BEHIND as usize);
        let count = match opts.put_parallel {
            FanOut::Fixed(_) => LaneCount::fixed(max_lanes),
            FanOut::Auto => {
                LaneCount::adaptive(max_lanes, store.put_lanes.start(), (lane_budget as u64).div_ceil(segment) as u32)
            }
        };
        let first = Lane::on(file, base, lane_budget);
        SpreadWriter {
            store: store.clone(),
            path: path.to_string(),
            base,
            segment,
            count,
            lane_budget,
            lanes: vec![first],
            accepted: 0,
            lane: 0,
            segment_began: Instant::now(),
            segment_waited: Duration::ZERO,
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
            self.lane = self.lane_for(self.lane).await;
            let idx = self.lane;
            let at = self.base + self.accepted;
            let began = Instant::now();
            let (took, sent) = self.lanes[idx].write_at(at, &data[..n]).await;
            self.accepted += took as u64;
            data = &data[took..];
            if let Err(e) = sent {
                self.lanes[idx].recover(self.store.root.pool(), &self.path, idx, e).await?;
            }
            self.segment_waited += began.elapsed();
            if took > 0 && self.accepted.is_multiple_of(self.segment) {
                self.segment_done(seg);
            }
        }
        Ok(())
    }

    /// Segment `seg` is accepted: reports it to the count and picks the
    /// next segment's lane: the next in turn, or the first of the lanes
    /// just added, or lane 0 after going back.
    fn segment_done(&mut self, seg: u64) {
        let now = Instant::now();
        let waited = std::mem::take(&mut self.segment_waited);
        let before = self.count.current();
        self.count.segment_done(self.segment, now - self.segment_began, waited);
        self.segment_began = now;
        let lanes = self.count.current();
        if lanes == before {
            self.lane = (self.lane + 1) % lanes;
            return;
        }
        self.lane = if lanes > before { before } else { 0 };
        tracing::debug!(target: LOG_TARGET, path = %self.path, segment = seg, before, now = lanes, "PUT lanes changed");
    }

    /// Lane `idx` (below the count), opening another connection's handle
    /// the first time it is needed. A lane that cannot be opened (pool
    /// busy or broken) just means fewer lanes: lane 0 takes its segment.
    async fn lane_for(&mut self, idx: usize) -> usize {
        if idx < self.lanes.len() {
            return idx;
        }
        if let Some(lane) = self.open_lane().await {
            self.lanes.push(lane);
            return self.lanes.len() - 1;
        }
        self.count.cap(self.lanes.len());
        0
    }

    async fn open_lane(&self) -> Option<Lane> {
        let holding: Vec<_> = self.lanes.iter().map(|l| l.connection()).collect();
        let tree =
            share::other_connections(self.store.root.pool(), self.count.current(), &holding).into_iter().next()?;
        match Lane::open(tree, &self.path, self.lane_budget).await {
            Ok(lane) => Some(lane),
            Err(e) => {
                tracing::debug!(target: LOG_TARGET, error = %e, "parallel PUT lane not opened; continuing with fewer lanes");
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
        for (idx, lane) in self.lanes.iter_mut().enumerate() {
            while let Err(e) = lane.drain().await {
                if let Err(e) = lane.recover(self.store.root.pool(), &self.path, idx, e).await {
                    first_err.get_or_insert(e);
                    break;
                }
            }
        }
        let mut total = 0u64;
        let mut replacement = None;
        for (i, lane) in std::mem::take(&mut self.lanes).into_iter().enumerate() {
            let (written, own) = lane.finish();
            total += written;
            match own {
                Some(own) if i == 0 => replacement = Some(own),
                Some(own) => {
                    let _ = own.close().await;
                }
                None => {}
            }
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => {
                if let Some(kept) = self.count.kept() {
                    self.store.put_lanes.set(kept);
                }
                Ok((total, replacement))
            }
        }
    }
}
