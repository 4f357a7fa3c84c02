//! One WRITE sent from a buffer its caller filled ([`Connection::write_frame`],
//! [`Connection::send_write_frame`]): the payload goes in after
//! [`WRITE_HEADROOM`] bytes, the transport, SMB2 and WRITE headers are
//! written into that room, and the message is signed or encrypted in
//! place, so the payload is never copied again. Sent frames come back for
//! reuse ([`Connection::recycle`]).

use bytes::{Bytes, BytesMut};
use smb_proto::frame::{FRAME_HEADER_LEN, MAX_FRAME_LEN};
use smb_proto::header::{Header, HEADER_LEN};
use smb_proto::transform::TRANSFORM_HEADER_LEN;
use smb_proto::Command;

use super::seal::seal_single;
use super::{writer, Connection, ResponseFuture};
use crate::error::Error;

/// Bytes reserved at the start of a [`Connection::write_frame`] buffer for
/// the transport header, a transform header, the SMB2 header and the fixed
/// part of the WRITE request.
pub const WRITE_HEADROOM: usize = FRAME_HEADER_LEN + TRANSFORM_HEADER_LEN + HEADER_LEN + 48;

impl Connection {
    /// A buffer for [`Connection::send_write_frame`]: [`WRITE_HEADROOM`]
    /// bytes reserved, and room for `payload` bytes after them.
    pub fn write_frame(&self, payload: usize) -> BytesMut {
        let mut b = self.frame_buffer(WRITE_HEADROOM + payload);
        b.clear();
        b.resize(WRITE_HEADROOM, 0);
        b
    }

    /// Sends one WRITE whose payload the caller has appended to a
    /// [`Connection::write_frame`] buffer. The header and the WRITE fixed
    /// part are filled into the headroom, then the message is signed or
    /// encrypted in place: the payload is never copied again.
    ///
    /// Returns the response future and the sent frame (kept by the caller
    /// to redo a short write; hand it to [`Connection::recycle`] when done).
    /// Errors: as [`Connection::send_batch`], or a payload over 16 MiB,
    /// each with the frame, whose last bytes are still the payload unless
    /// it was encrypted in place (so a caller can send it again elsewhere).
    pub async fn send_write_frame(
        &self,
        mut frame: BytesMut,
        tree_id: u32,
        file_id: smb_proto::create::FileId,
        offset: u64,
        encrypt: bool,
    ) -> std::result::Result<(ResponseFuture, Bytes), (Error, Bytes)> {
        let Some(data_len) = frame.len().checked_sub(WRITE_HEADROOM) else {
            return Err((Error::InvalidArgument("write frame without headroom".into()), frame.freeze()));
        };
        if data_len + WRITE_HEADROOM > MAX_FRAME_LEN {
            let e = Error::InvalidArgument(format!("WRITE of {data_len} bytes exceeds the frame limit"));
            return Err((e, frame.freeze()));
        }
        let bind = self.bind(Command::Write, tree_id, encrypt);
        let charge = [smb_proto::header::credit_charge(data_len as u64)];
        let (reqs, mut rxs) = match self.reserve(&charge, Vec::new(), &[bind]).await {
            Ok(r) => r,
            Err(e) => return Err((e, frame.freeze())),
        };
        let (message_id, charge, credits) = reqs[0];
        {
            let sec = self.inner.security.read().unwrap();
            let mut h = Header::request(Command::Write);
            h.credit_charge = charge;
            h.credits = credits;
            h.message_id = message_id;
            h.tree_id = tree_id;
            h.session_id = sec.session_id;
            let msg_start = FRAME_HEADER_LEN + TRANSFORM_HEADER_LEN;
            let mut fixed = BytesMut::with_capacity(HEADER_LEN + 48);
            h.encode(&mut fixed);
            smb_proto::io::encode_write_fixed(&mut fixed, file_id, offset, data_len as u32);
            frame[msg_start..WRITE_HEADROOM].copy_from_slice(&fixed);
            seal_single(&sec, &mut frame, encrypt).expect("the length was checked above");
        }
        let frame = frame.freeze();
        if let Err(e) = self.enqueue(frame.clone()) {
            return Err((e, frame));
        }
        Ok((rxs.pop().expect("one future"), frame))
    }

    /// Offers a sent frame back for reuse (ignored unless this was the last
    /// reference to it).
    pub fn recycle(&self, frame: Bytes) {
        if let Ok(m) = frame.try_into_mut() {
            writer::keep_free(&mut self.inner.free_bufs.lock().unwrap(), m);
        }
    }
}
