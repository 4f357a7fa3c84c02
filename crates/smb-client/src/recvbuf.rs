//! Receive buffers for large frames (READ responses), reused across
//! connections once every slice of a frame has been dropped. A fresh
//! multi-MiB allocation costs a page fault per 4 KiB on first touch, which
//! on a 1 GiB GET is more CPU than the signature check; a reused buffer's
//! pages are already mapped.

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

/// Bytes of idle buffers the process keeps for reuse.
const KEEP_BYTES: usize = 96 << 20;

/// A process-wide set of idle receive buffers, capped at [`KEEP_BYTES`].
pub(crate) struct RecvPool {
    idle: Mutex<Idle>,
}

#[derive(Default)]
struct Idle {
    bufs: Vec<Vec<u8>>,
    bytes: usize,
}

impl RecvPool {
    /// The pool every connection of this process shares.
    pub(crate) fn global() -> &'static Arc<RecvPool> {
        static POOL: OnceLock<Arc<RecvPool>> = OnceLock::new();
        POOL.get_or_init(|| Arc::new(RecvPool { idle: Mutex::new(Idle::default()) }))
    }

    /// An empty buffer with room for at least `len` bytes.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let mut idle = self.idle.lock().unwrap();
        if let Some(i) = idle.bufs.iter().position(|b| b.capacity() >= len) {
            let b = idle.bufs.swap_remove(i);
            idle.bytes -= b.capacity();
            return b;
        }
        drop(idle);
        Vec::with_capacity(len)
    }

    fn give(&self, mut buf: Vec<u8>) {
        let mut idle = self.idle.lock().unwrap();
        if idle.bytes + buf.capacity() <= KEEP_BYTES {
            buf.clear();
            idle.bytes += buf.capacity();
            idle.bufs.push(buf);
        }
    }

    /// Freezes a filled buffer into `Bytes`; when the last slice of it is
    /// dropped the buffer comes back to this pool.
    pub(crate) fn freeze(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Pooled { buf, home: self.clone() })
    }
}

struct Pooled {
    buf: Vec<u8>,
    home: Arc<RecvPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.home.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_returns_when_last_slice_drops() {
        let pool = Arc::new(RecvPool { idle: Mutex::new(Idle::default()) });
        let mut v = pool.take(1 << 20);
        v.extend_from_slice(&[7u8; 1 << 20]);
        let ptr = v.as_ptr();
        let b = pool.freeze(v);
        let s = b.slice(10..20);
        drop(b);
        assert_eq!(pool.idle.lock().unwrap().bufs.len(), 0, "a slice is still alive");
        assert_eq!(&s[..], &[7u8; 10]);
        drop(s);
        let again = pool.take(1 << 20);
        assert_eq!(again.as_ptr(), ptr, "the same allocation is reused");
        assert!(again.is_empty());
    }

    #[test]
    fn keeps_at_most_the_cap() {
        let pool = Arc::new(RecvPool { idle: Mutex::new(Idle::default()) });
        let bufs: Vec<Bytes> = (0..20).map(|_| pool.freeze(Vec::with_capacity(8 << 20))).collect();
        drop(bufs);
        assert!(pool.idle.lock().unwrap().bytes <= KEEP_BYTES);
    }
}
