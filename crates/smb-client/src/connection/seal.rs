//! Sealing frames on their way out and opening them on their way in, each
//! written once: a message is signed in place (MS-SMB2 3.2.4.1.1), or the
//! whole frame is encrypted in place behind a TRANSFORM header (3.2.4.1.8);
//! a received frame is decrypted or has each message's signature checked
//! in place (3.2.5.1.1, 3.2.5.1.3) before anything reads its bodies.

use bytes::BytesMut;
use smb_proto::compound::ChainBuilder;
use smb_proto::frame::{FRAME_HEADER_LEN, MAX_FRAME_LEN};
use smb_proto::header::{flags, Header, HEADER_LEN};
use smb_proto::transform::{is_transform, TransformHeader, TRANSFORM_HEADER_LEN};
use smb_proto::{Command, NtStatus};

use super::response::Op;
use super::table::Slot;
use crate::crypto::{Cipherer, Signer};
use crate::error::{Error, Result};

/// Security state installed after SESSION_SETUP.
#[derive(Default)]
pub(crate) struct Security {
    pub session_id: u64,
    pub signer: Option<Signer>,
    /// Sign every request and require signed responses.
    pub sign_all: bool,
    pub cipher: Option<Cipherer>,
    /// The session requires encryption of everything.
    pub encrypt_all: bool,
}

impl Security {
    /// Whether a request sent with `encrypt` goes out encrypted: asked
    /// for, or the session encrypts everything, and a cipher exists.
    pub(crate) fn encrypts(&self, encrypt: bool) -> bool {
        (encrypt || self.encrypt_all) && self.cipher.is_some()
    }

    /// Encrypts `region` in place: [`TRANSFORM_HEADER_LEN`] bytes of room
    /// for the TRANSFORM header, then the messages. Needs a cipher
    /// ([`Security::encrypts`] said so).
    fn encrypt(&self, region: &mut [u8]) {
        let th = TransformHeader {
            signature: [0; 16],
            nonce: [0; 16],
            original_message_size: (region.len() - TRANSFORM_HEADER_LEN) as u32,
            flags: 1,
            session_id: self.session_id,
        };
        let mut hdr = BytesMut::with_capacity(TRANSFORM_HEADER_LEN);
        th.encode(&mut hdr);
        region[..TRANSFORM_HEADER_LEN].copy_from_slice(&hdr);
        self.cipher.as_ref().expect("encrypts() checked for a cipher").encrypt(region);
    }

    /// Signs one message in place, if the session has a signing key.
    fn sign(&self, msg: &mut [u8]) {
        if let Some(signer) = &self.signer {
            signer.sign(msg);
        }
    }
}

/// Seals a frame laid out as a transport header, [`TRANSFORM_HEADER_LEN`]
/// bytes of room and one message (a WRITE whose payload was appended in
/// place): encrypts it, or drops the room and signs the message when the
/// session signs everything. Fills in the transport header last.
///
/// Errors: the frame is over the 16 MiB limit.
pub(crate) fn seal_single(sec: &Security, frame: &mut BytesMut, encrypt: bool) -> Result<()> {
    if sec.encrypts(encrypt) {
        sec.encrypt(&mut frame[FRAME_HEADER_LEN..]);
    } else {
        // The message follows the transport header directly.
        let _ = frame.split_to(TRANSFORM_HEADER_LEN);
        if sec.sign_all {
            sec.sign(&mut frame[FRAME_HEADER_LEN..]);
        }
    }
    put_frame_length(frame, 0)
}

/// Appends one compound chain as one transport frame to `buf`: each message
/// gets its header (MessageId, CreditCharge and CreditRequest from
/// `slots`), related-operation flags when `related`, then the chain is
/// signed message by message (when `sign` and the session signs, or for a
/// TREE_CONNECT, MS-SMB2 3.2.4.1.1) or encrypted as a whole.
///
/// Errors: the frame is over the 16 MiB limit.
pub(crate) fn encode_chain(
    buf: &mut BytesMut,
    sec: &Security,
    chain: &[Op<'_>],
    slots: &[Slot],
    encrypt: bool,
    sign: bool,
    related: bool,
) -> Result<()> {
    let encrypt = sec.encrypts(encrypt);
    let start = buf.len();
    buf.extend_from_slice(&[0; FRAME_HEADER_LEN]);
    if encrypt {
        buf.extend_from_slice(&[0; TRANSFORM_HEADER_LEN]);
    }
    let mut builder = ChainBuilder::new();
    for (i, (op, &(message_id, charge, credits))) in chain.iter().zip(slots).enumerate() {
        let mut h = Header::request(op.body.command());
        h.credit_charge = charge;
        h.credits = credits;
        h.message_id = message_id;
        h.tree_id = op.tree_id;
        h.session_id = sec.session_id;
        if i > 0 && related {
            h.flags |= flags::RELATED_OPERATIONS;
        }
        builder.push(buf, &h, op.body);
    }
    let ranges = builder.finish(buf.len());
    if encrypt {
        sec.encrypt(&mut buf[start + FRAME_HEADER_LEN..]);
    } else if sign && (sec.sign_all || chain.iter().any(|op| op.body.command() == Command::TreeConnect)) {
        for r in ranges {
            sec.sign(&mut buf[r]);
        }
    }
    put_frame_length(buf, start)
}

/// Writes the transport header of the frame that starts at `start` and runs
/// to the end of `buf` (MS-SMB2 2.1: a 4-byte big-endian length).
///
/// Errors: the frame is over the 16 MiB limit.
fn put_frame_length(buf: &mut [u8], start: usize) -> Result<()> {
    let len = buf.len() - start - FRAME_HEADER_LEN;
    if len > MAX_FRAME_LEN {
        return Err(Error::InvalidArgument(format!("request of {len} bytes exceeds the 16 MiB frame limit")));
    }
    buf[start..start + FRAME_HEADER_LEN].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(())
}

/// Where the messages of a received frame are, after its checks.
pub(crate) struct FrameLayout {
    /// Offset of the first message (past a transform header).
    pub(crate) start: usize,
    /// Each message's offset from `start`, length and header.
    pub(crate) messages: Vec<(usize, usize, Header)>,
}

/// Checks one received frame (its transport header removed) in place:
/// decrypts it, or verifies each message's signature once the session has
/// a key. Interim STATUS_PENDING answers and unsolicited notifications
/// (MessageId all ones) are not signed (MS-SMB2 3.3.4.1.1, 3.3.4.6).
///
/// Returns where its messages are. Errors: [`Error::Integrity`] for a bad
/// signature or decryption, an unsigned or unencrypted answer the session
/// requires signed or encrypted, or a mismatched TRANSFORM header; a
/// decode error or [`Error::Protocol`] for a malformed compound.
pub(crate) fn open_frame(sec: &Security, frame: &mut [u8]) -> Result<FrameLayout> {
    let encrypted = is_transform(frame);
    let mut start = 0;
    if encrypted {
        let th = TransformHeader::decode(frame)?;
        let cipher = sec.cipher.as_ref().ok_or(Error::Integrity("encrypted message without a cipher"))?;
        if th.session_id != sec.session_id || th.original_message_size as usize != frame.len() - TRANSFORM_HEADER_LEN {
            return Err(Error::Integrity("transform header does not match"));
        }
        cipher.decrypt(frame).map_err(|_| Error::Integrity("decryption failed"))?;
        start = TRANSFORM_HEADER_LEN;
    }
    let mut bounds = Vec::with_capacity(1);
    let mut off = start;
    loop {
        let rest = &frame[off..];
        let header = Header::decode(rest)?;
        let len = if header.next_command == 0 {
            rest.len()
        } else {
            let n = header.next_command as usize;
            if n < HEADER_LEN || n > rest.len() {
                return Err(smb_proto::DecodeError::OutOfBounds("NextCommand").into());
            }
            n
        };
        if !header.is_response() {
            return Err(Error::Protocol("server sent a request".into()));
        }
        if !encrypted {
            let interim = header.status == NtStatus::STATUS_PENDING && header.flags & flags::ASYNC_COMMAND != 0;
            let unsolicited = header.message_id == u64::MAX;
            if sec.encrypt_all && !interim && !unsolicited {
                return Err(Error::Integrity("unencrypted response on an encrypted session"));
            }
            // Once the session has a key, every final answer is checked,
            // SESSION_SETUP included; before it, nothing can be.
            if let Some(signer) = &sec.signer {
                if !interim && !unsolicited {
                    if header.flags & flags::SIGNED != 0 {
                        if !signer.verify(&mut frame[off..off + len]) {
                            return Err(Error::Integrity("bad signature"));
                        }
                    } else if sec.sign_all {
                        return Err(Error::Integrity("unsigned response on a signed session"));
                    } else if header.command == Command::TreeConnect && header.status.is_success() {
                        // Its ShareFlags say whether the share must be
                        // encrypted: with signing off, only this signature
                        // keeps a man in the middle from clearing that flag.
                        // The request was signed (MS-SMB2 3.2.4.1.1), so
                        // the server signs the answer.
                        return Err(Error::Integrity("unsigned TREE_CONNECT response"));
                    }
                }
            }
        }
        bounds.push((off - start, len, header));
        off += len;
        if off >= frame.len() {
            break;
        }
    }
    Ok(FrameLayout { start, messages: bounds })
}
