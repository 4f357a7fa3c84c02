//! One connection's pipelined writer into a file, which survives the loss
//! of its connection: the file is opened again on another pooled
//! connection (its durable handle reclaimed, or the same file by name, see
//! `smb_client::durable`) and the WRITEs the server had not acknowledged
//! are sent again. The store's parallel PUT (`store::spread`) runs one lane
//! per connection.

use super::Pool;
use super::{Handle, Tree};
use bytes::Bytes;
use smb_client::durable::Reopen;
use smb_client::pipeline::PipelinedWriter;

use super::{connection, open_lane, Result, ShareError};

/// Connection losses each lane survives.
pub const MAX_REOPENS: u32 = 8;
/// Tries to reopen a lane's file after one loss: a connection lost with
/// this one may not be known as lost yet, so a try can fail at once on it.
const MAX_TRIES: u32 = 8;

/// One connection's writer into a file; see the module docs.
pub struct Lane {
    tree: Tree,
    /// The lane's own handle, opened here; `None` for a lane on the
    /// caller's handle. Closes itself when the lane is dropped on an error
    /// path, so the caller's cleanup (delete or retry) is not blocked by it.
    own: Option<Handle>,
    writer: PipelinedWriter,
    /// Bytes the lane's writer keeps in flight.
    budget: usize,
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

impl Lane {
    /// A lane on the caller's open `file`, writing from file offset `at`
    /// with up to `budget` bytes in flight.
    pub fn on(file: &Handle, at: u64, budget: usize) -> Lane {
        let tree = file.tree();
        let writer = tree.smb().writer(file.smb().id(), at, budget);
        Lane { tree, own: None, writer, budget, reopen: file.smb().reopen_info(), acked_before: 0, reopens: 0 }
    }

    /// A lane on `tree` with its own open of the existing file `path`.
    ///
    /// Errors: the CREATE's failure.
    pub async fn open(tree: Tree, path: &str, budget: usize) -> Result<Lane> {
        let f = open_lane(&tree, path).await?;
        let writer = tree.smb().writer(f.smb().id(), 0, budget);
        Ok(Lane { tree, reopen: f.smb().reopen_info(), own: Some(f), writer, budget, acked_before: 0, reopens: 0 })
    }

    /// The connection the lane writes on.
    pub fn connection(&self) -> &Tree {
        &self.tree
    }

    /// Writes `data` at file offset `at` (queued within the lane's budget).
    /// Returns how many bytes the lane took, with the failure that stopped
    /// it, if any: a failed lane keeps what it took for
    /// [`Lane::recover`] to send again.
    pub async fn write_at(&mut self, at: u64, data: &[u8]) -> (usize, std::result::Result<(), ShareError>) {
        let mut sent = Ok(());
        if self.writer.position() != at {
            sent = self.writer.seek(at).await;
        }
        if sent.is_ok() {
            sent = self.writer.write(data).await;
        }
        let took = taken(self.writer.position(), at, data.len(), sent.is_ok());
        (took, sent.map_err(Into::into))
    }

    /// Waits for every WRITE sent.
    ///
    /// Errors: the first failing WRITE.
    pub async fn drain(&mut self) -> Result<()> {
        self.writer.drain().await.map_err(Into::into)
    }

    /// The lane failed with `cause`: if its connection was lost, reopens
    /// its file on another connection of `pool` and sends again what the
    /// server had not acknowledged; otherwise returns `cause`.
    ///
    /// Errors: `cause` when it is not a lost connection, or when the lane
    /// has survived [`MAX_REOPENS`] losses; the last failure after
    /// [`MAX_TRIES`] tries.
    pub async fn recover(&mut self, pool: &Pool, path: &str, lane: usize, cause: ShareError) -> Result<()> {
        let mut cause = cause;
        if self.reopens >= MAX_REOPENS {
            return Err(cause);
        }
        self.reopens += 1;
        // Pieces no writer holds yet (a resend that failed part way).
        let mut carry: Vec<(u64, Bytes)> = Vec::new();
        let mut tries = 0;
        loop {
            let Some(reopen) = self.reopen.clone() else { return Err(cause) };
            if !cause.is_connection_error() || tries >= MAX_TRIES {
                return Err(cause);
            }
            tries += 1;
            tracing::warn!(
                path, lane, error = %cause,
                "SMB connection lost during a PUT; reopening the file on another connection"
            );
            let tree = connection(pool).await?;
            let handle = match tree.smb().reopen(&reopen).await {
                Ok((h, _)) => Handle::of(h),
                Err(e) => {
                    cause = e.into();
                    continue;
                }
            };
            let fresh = tree.smb().writer(handle.smb().id(), self.writer.position(), self.budget);
            let unacked = std::mem::replace(&mut self.writer, fresh).into_unacked();
            self.acked_before += unacked.acked;
            self.tree = tree;
            self.reopen = handle.smb().reopen_info();
            self.own = Some(handle); // the lost handle, if the lane's, is dropped
            carry.extend(unacked.pieces);
            carry.sort_by_key(|p| p.0);
            let pieces = std::mem::take(&mut carry);
            let mut failed = false;
            for (i, (off, bytes)) in pieces.iter().enumerate() {
                let (took, sent) = self.write_at(*off, bytes).await;
                if let Err(e) = sent {
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

    /// Ends the lane: returns the bytes the server acknowledged over all
    /// its connections, and its own handle, if it opened one (the caller's
    /// was lost, or the lane opened its own). Call after
    /// [`Lane::drain`].
    pub fn finish(self) -> (u64, Option<Handle>) {
        (self.acked_before + self.writer.written(), self.own)
    }
}

#[cfg(test)]
mod tests {
    use super::taken;

    #[test]
    fn a_failed_write_keeps_only_what_it_took() {
        assert_eq!(taken(10, 0, 100, true), 100);
        assert_eq!(taken(40, 0, 100, false), 40);
        assert_eq!(taken(0, 50, 100, false), 0);
    }
}
