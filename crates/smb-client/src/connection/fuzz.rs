//! A receive path with no socket, for fuzzing and its tests: frames go
//! through the same checks (`open_frame`) and dispatch as the reader task
//! gives them, against made-up pending requests.

use std::sync::Arc;

use bytes::BytesMut;
use smb_proto::frame::{frame_len, FRAME_HEADER_LEN, MAX_FRAME_LEN};
use smb_proto::header::HEADER_LEN;
use smb_proto::negotiate::{Cipher, SigningAlgorithm};
use smb_proto::transform::TRANSFORM_HEADER_LEN;
use smb_proto::Command;

use super::reaper::Reaper;
use super::table::Bind;
use super::{ConnectionOptions, Inner};
use crate::crypto::{Cipherer, SessionKeys, Signer};

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
    let inner = Arc::new_cyclic(|me| Inner::new(ConnectionOptions::default(), reaper, me.clone(), "fuzz:0"));
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
        st.table.credits.available = 1024;
        for (id, r) in reqs.iter().enumerate() {
            let bind = Bind {
                command: COMMANDS[(*r & 7) as usize],
                session_id: SESSION_ID,
                tree_id: TREE_ID,
                encrypted: r & 8 != 0,
            };
            rxs.push(st.table.insert_for_fuzzing(id as u64, bind));
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
    use smb_proto::header::{flags, Header};

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
