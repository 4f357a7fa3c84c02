//! A man in the middle for tests: a TCP proxy between a client and smbd
//! that forwards both ways and, once, answers a request itself with a
//! forged, unsigned READ response before the real one comes back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// Which request is answered by the forgery, and how it is dressed.
#[derive(Debug, Clone, Copy)]
pub enum Forge {
    /// The first plaintext READ request: the forgery carries its MessageId,
    /// SessionId and TreeId and says it is a SESSION_SETUP answer (which
    /// signing checks used to skip).
    FirstReadAsSessionSetup,
    /// The client's `frame`-th frame (0 = NEGOTIATE), which the test knows
    /// to be a READ with MessageId `message_id`, even if encrypted; the
    /// forgery is a plaintext READ answer with the real command.
    FrameAsRead { frame: usize, message_id: u64, session_id: u64 },
}

/// Bytes every forged READ answer carries.
pub const FORGED_BYTE: u8 = b'X';

/// Starts the proxy in front of `upstream`; returns its address and a count
/// of forgeries sent.
pub async fn start(upstream: String, forge: Forge, data_len: u32) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(AtomicUsize::new(0));
    let count = sent.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&upstream).await.unwrap();
            let (mut cr, cw) = client.into_split();
            let (sr, mut sw) = server.into_split();
            let cw = Arc::new(Mutex::new(cw));
            let to_client = cw.clone();
            tokio::spawn(async move {
                let mut sr = sr;
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 || to_client.lock().await.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
            let sent = sent.clone();
            tokio::spawn(async move {
                let mut index = 0usize;
                loop {
                    let mut len = [0u8; 4];
                    if cr.read_exact(&mut len).await.is_err() {
                        break;
                    }
                    let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
                    if cr.read_exact(&mut frame).await.is_err() {
                        break;
                    }
                    let target = match forge {
                        Forge::FirstReadAsSessionSetup => smb_proto::header::Header::decode(&frame)
                            .ok()
                            .filter(|h| h.command == smb_proto::Command::Read)
                            .map(|h| (h.message_id, h.session_id, h.tree_id, 1u16)),
                        Forge::FrameAsRead { frame: f, message_id, session_id } if f == index => {
                            Some((message_id, session_id, 0, 8u16))
                        }
                        _ => None,
                    };
                    index += 1;
                    if let Some((mid, sid, tid, command)) = target.filter(|_| sent.load(Ordering::SeqCst) == 0) {
                        let forged = forged_read(command, mid, sid, tid, data_len);
                        // Counted before it is sent: the client may refuse it
                        // and the test read the count before this task runs on.
                        sent.fetch_add(1, Ordering::SeqCst);
                        cw.lock().await.write_all(&forged).await.unwrap();
                    }
                    if sw.write_all(&len).await.is_err() || sw.write_all(&frame).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, count)
}

/// A transport frame holding an unsigned SMB2 header (MS-SMB2 2.2.1.2) for
/// `command` with `mid`, `sid` and `tid`, STATUS_SUCCESS, and a READ
/// response body (2.2.20) of `len` forged bytes.
fn forged_read(command: u16, mid: u64, sid: u64, tid: u32, len: u32) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(b"\xfeSMB");
    m.extend_from_slice(&64u16.to_le_bytes());
    m.extend_from_slice(&1u16.to_le_bytes()); // CreditCharge
    m.extend_from_slice(&0u32.to_le_bytes()); // STATUS_SUCCESS
    m.extend_from_slice(&command.to_le_bytes());
    m.extend_from_slice(&1u16.to_le_bytes()); // CreditResponse
    m.extend_from_slice(&1u32.to_le_bytes()); // SERVER_TO_REDIR
    m.extend_from_slice(&0u32.to_le_bytes()); // NextCommand
    m.extend_from_slice(&mid.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes()); // ProcessId
    m.extend_from_slice(&tid.to_le_bytes());
    m.extend_from_slice(&sid.to_le_bytes());
    m.extend_from_slice(&[0; 16]); // no signature
    m.extend_from_slice(&17u16.to_le_bytes());
    m.push(0x50); // DataOffset
    m.push(0);
    m.extend_from_slice(&len.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend(std::iter::repeat_n(FORGED_BYTE, len as usize));
    let mut f = (m.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(&m);
    f
}
