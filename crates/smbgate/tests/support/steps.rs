//! Share operations one at a time: each waits at a [`Gate`], and
//! [`interleave`] lets one waiting operation through at a time, chosen
//! by a seeded generator, so that a seed names one interleaving of racing
//! tasks and a failing one can be replayed (`memory_share`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

/// Where share operations wait for their turn.
#[derive(Default)]
pub(crate) struct Gate {
    waiting: Mutex<Vec<(&'static str, oneshot::Sender<()>)>>,
}

impl Gate {
    /// Waits until [`interleave`] lets this operation (`op`) through.
    pub(crate) async fn step(&self, op: &'static str) {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().push((op, tx));
        let _ = rx.await;
    }
}

/// A share whose operations wait at a [`Gate`].
pub(crate) trait Gated {
    /// Where its operations wait.
    fn gate(&self) -> &Gate;
}

/// Runs `racers` to their ends on `share`, letting one operation waiting
/// at its gate through at a time, chosen by a generator seeded with `seed`.
/// Between two choices every racer runs until it waits (at the gate, or
/// in a backoff pause, which the paused test clock skips). Returns each
/// racer's output, in order.
pub(crate) async fn interleave<F: Future>(share: &impl Gated, seed: u64, racers: Vec<F>) -> Vec<F::Output> {
    let gate = share.gate();
    let done = AtomicUsize::new(0);
    let n = racers.len();
    let racers = racers.into_iter().map(|f| async {
        let out = f.await;
        done.fetch_add(1, Ordering::SeqCst);
        out
    });
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let driver = async {
        while done.load(Ordering::SeqCst) < n {
            super::backoff::test_pause_ms(1).await;
            let mut waiting = gate.waiting.lock().unwrap();
            if waiting.is_empty() {
                continue;
            }
            // xorshift64: a seed names one sequence of choices.
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng % waiting.len() as u64) as usize;
            let (_, go) = waiting.swap_remove(i);
            let _ = go.send(());
        }
    };
    let (outs, ()) = tokio::join!(futures::future::join_all(racers), driver);
    outs
}

/// `f` alone on `share`, its operations let through as [`interleave`]
/// lets them.
pub(crate) async fn alone<F: Future>(share: &impl Gated, f: F) -> F::Output {
    interleave(share, 0, vec![f]).await.remove(0)
}

/// `writer` and `reader` racing on `share` ([`interleave`], the writer
/// first), where the reader's output is not the writer's. Returns both.
pub(crate) async fn race<W: Future, R: Future>(
    share: &impl Gated,
    seed: u64,
    writer: W,
    reader: R,
) -> (W::Output, R::Output) {
    let (wrote, read) = (Mutex::new(None), Mutex::new(None));
    let racers: Vec<Pin<Box<dyn Future<Output = ()> + '_>>> = vec![
        Box::pin(async { *wrote.lock().unwrap() = Some(writer.await) }),
        Box::pin(async { *read.lock().unwrap() = Some(reader.await) }),
    ];
    interleave(share, seed, racers).await;
    (ended(wrote), ended(read))
}

fn ended<T>(out: Mutex<Option<T>>) -> T {
    out.into_inner().unwrap().expect("every racer ends")
}
