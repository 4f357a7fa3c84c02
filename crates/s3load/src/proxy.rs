//! The TCP proxy `scripts/bench-live` puts between a client and smbd: a
//! delay each way, and for the weak-NAS profile a per-connection rate cap
//! and a delay on each SMB2 CREATE answer.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::Result;

/// The delay proxy uses plain threads: tokio's timer has 1 ms granularity and
/// rounds up, so `sleep_until(now + 1 ms)` would add 1–2 ms; `thread::sleep`
/// is accurate to tens of µs. Per direction, a reader stamps each chunk with
/// its due time and queues it (Instant, buffer); a writer sleeps until it is
/// due and sends it.
/// Reading never waits for writing, so throughput is kept while every byte is
/// late by the delay. A handful of connections (smbgate's pool) means a
/// handful of threads.
pub fn proxy(listen: &str, target: &str, delay: Duration, nas: Nas) -> Result<()> {
    let listener = TcpListener::bind(listen)?;
    eprintln!("s3load proxy: {listen} -> {target}, +{delay:?} each way, {nas:?}");
    for conn in listener.incoming() {
        let client = conn?;
        let server = match TcpStream::connect(target) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("s3load proxy: connect {target}: {e}");
                continue;
            }
        };
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        pipe(client.try_clone()?, server.try_clone()?, delay, Nas { create_delay: Duration::ZERO, ..nas });
        pipe(server, client, delay, nas);
    }
    Ok(())
}

/// What makes a proxied connection look like a weak NAS.
#[derive(Debug, Clone, Copy, Default)]
pub struct Nas {
    /// Bytes per second one direction of one connection carries (0: no cap).
    pub rate: f64,
    /// Added to a chunk in which an SMB2 CREATE answer starts.
    pub create_delay: Duration,
}

/// Finds where SMB2 messages start in one direction of a connection
/// (MS-SMB2 2.1: a 4-byte transport header giving the length, then the
/// message, whose Command is at byte 12 of its header), across reads.
#[derive(Default)]
struct Frames {
    /// Bytes left of the current transport frame.
    left: usize,
    /// The first bytes of a frame whose start straddles reads.
    head: Vec<u8>,
}

/// SMB2 CREATE (MS-SMB2 2.2.1).
const SMB2_CREATE: u16 = 5;
/// Transport header plus the SMB2 header up to and including Command.
const HEAD: usize = 4 + 14;

impl Frames {
    /// Reads `data`, the next bytes of the stream; true if a frame whose
    /// first message is a CREATE starts in it.
    fn create_starts(&mut self, mut data: &[u8]) -> bool {
        let mut found = false;
        while !data.is_empty() {
            if self.left > 0 {
                let n = self.left.min(data.len());
                self.left -= n;
                data = &data[n..];
                continue;
            }
            let n = (HEAD - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..n]);
            data = &data[n..];
            if self.head.len() < HEAD {
                break;
            }
            let h = std::mem::take(&mut self.head);
            let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
            found |= h[4..8] == *b"\xfeSMB" && u16::from_le_bytes([h[16], h[17]]) == SMB2_CREATE;
            self.left = len.saturating_sub(HEAD - 4);
        }
        found
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration, nas: Nas) {
    const BUF: usize = 256 << 10;
    let (tx, rx) = mpsc::sync_channel::<(Instant, Vec<u8>, usize)>(1024);
    // Written buffers go back to the reader: no allocation, page faults or
    // zeroing per chunk (that had doubled the proxy's CPU per GiB).
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    let mut frames = Frames::default();
    thread::spawn(move || loop {
        let mut buf = back_rx.try_recv().unwrap_or_else(|_| vec![0; BUF]);
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut due = Instant::now() + delay;
        if !nas.create_delay.is_zero() && frames.create_starts(&buf[..n]) {
            due += nas.create_delay;
        }
        if tx.send((due, buf, n)).is_err() {
            break;
        }
    });
    thread::spawn(move || {
        // The default 50 µs timer slack would add to every delay.
        // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        // When the capped link is free again.
        let mut free = Instant::now();
        for (due, buf, n) in rx {
            let start = if nas.rate > 0.0 { due.max(free) } else { due };
            let now = Instant::now();
            if start > now {
                thread::sleep(start - now);
            }
            if nas.rate > 0.0 {
                free = start.max(Instant::now()) + Duration::from_secs_f64(n as f64 / nas.rate);
            }
            if to.write_all(&buf[..n]).is_err() {
                let _ = to.shutdown(Shutdown::Both);
                return;
            }
            let _ = back_tx.send(buf);
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport frame holding one SMB2 message of `command`, `body`
    /// bytes after its 64-byte header.
    fn frame(command: u16, body: usize) -> Vec<u8> {
        let len = 64 + body;
        let mut f = vec![0, (len >> 16) as u8, (len >> 8) as u8, len as u8];
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\xfeSMB");
        h[12..14].copy_from_slice(&command.to_le_bytes());
        f.extend(h);
        f.extend(vec![0xAB; body]);
        f
    }

    #[test]
    fn create_answers_are_found_across_reads() {
        let stream: Vec<u8> = [frame(8, 70_000), frame(SMB2_CREATE, 100), frame(6, 0)].concat();
        // Whole, then cut at every size (a frame's head straddling reads).
        assert!(Frames::default().create_starts(&stream));
        for cut in [1, 3, 5, 17, 18, 19, 4096] {
            let mut f = Frames::default();
            let hits: Vec<bool> = stream.chunks(cut).map(|c| f.create_starts(c)).collect();
            assert_eq!(hits.iter().filter(|h| **h).count(), 1, "cut {cut}");
        }
        let mut f = Frames::default();
        assert!(!f.create_starts(&[frame(8, 10), frame(6, 0)].concat()));
    }
}
