//! The writer task of one connection: sends every queued frame with one
//! vectored write per wake-up, so a batch of requests leaves in as few
//! syscalls as the kernel allows; a write that stalls past the request
//! timeout poisons the connection (failure class 5).

use std::io::IoSlice;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

use super::{Inner, FREE_BYTES, RECYCLE_MIN};
use crate::error::Error;

pub(super) async fn writer_task(inner: Arc<Inner>, mut wr: OwnedWriteHalf) {
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
pub(super) fn keep_free(free: &mut Vec<BytesMut>, mut m: BytesMut) {
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
