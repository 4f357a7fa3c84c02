//! Fuzz target: a received frame as the client handles it. The transform
//! header check, the compound split, then for each message the SMB2 header
//! and the response decoder for its command (plus the information-buffer
//! decoders behind QUERY_INFO / QUERY_DIRECTORY / IOCTL outputs). Any panic
//! is a bug: the codec promises a DecodeError for malformed input.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use smb_proto::compound::{decode_error_data, split_compound};
use smb_proto::create::{CloseResponse, CreateResponse};
use smb_proto::frame::frame_len;
use smb_proto::info::{decode_dir_entries, decode_full_ea, FileTimes, FsFullSize};
use smb_proto::io::{ReadResponse, WriteResponse};
use smb_proto::ioctl::{decode_resume_key, CopyChunkResponse, IoctlResponse};
use smb_proto::negotiate::NegotiateResponse;
use smb_proto::query::OutputBuffer;
use smb_proto::security::SecurityDescriptor;
use smb_proto::session::SessionSetupResponse;
use smb_proto::transform::{is_transform, TransformHeader, TRANSFORM_HEADER_LEN};
use smb_proto::tree::TreeConnectResponse;
use smb_proto::{Command, Header, NtStatus};

fuzz_target!(|data: &[u8]| {
    if data.len() >= 4 {
        let _ = frame_len(data[..4].try_into().unwrap());
    }
    let frame = Bytes::copy_from_slice(data);
    // An encrypted frame: the header, then (after decryption, which the
    // fuzzer cannot do) the plaintext; feed what follows the header as is.
    let frame = if is_transform(&frame) {
        if TransformHeader::decode(&frame).is_err() {
            return;
        }
        frame.slice(TRANSFORM_HEADER_LEN..)
    } else {
        frame
    };
    let Ok(msgs) = split_compound(&frame) else {
        return;
    };
    for msg in &msgs {
        decode_message(msg);
    }
});

fn decode_message(msg: &Bytes) {
    let Ok(h) = Header::decode(msg) else {
        return;
    };
    let more = h.command == Command::SessionSetup && h.status == NtStatus::STATUS_MORE_PROCESSING_REQUIRED;
    if (h.status.is_error() && !more) || h.status == NtStatus::STATUS_PENDING {
        let _ = decode_error_data(msg);
        return;
    }
    match h.command {
        Command::Negotiate => drop(NegotiateResponse::decode(msg)),
        Command::SessionSetup => drop(SessionSetupResponse::decode(msg)),
        Command::TreeConnect => drop(TreeConnectResponse::decode(msg)),
        Command::Create => {
            if let Ok(c) = CreateResponse::decode(msg) {
                let _ = c.on_disk_id();
            }
        }
        Command::Close => drop(CloseResponse::decode(msg)),
        Command::Read => drop(ReadResponse::decode(msg)),
        Command::Write => drop(WriteResponse::decode(msg)),
        Command::QueryDirectory => {
            if let Ok(out) = OutputBuffer::decode(msg) {
                let _ = decode_dir_entries(&out.0, |_| {});
            }
        }
        Command::QueryInfo => {
            if let Ok(out) = OutputBuffer::decode(msg) {
                let _ = FileTimes::decode_network_open(&out.0);
                let _ = decode_full_ea(&out.0);
                let _ = FsFullSize::decode(&out.0);
                if let Ok(sd) = SecurityDescriptor::decode(&out.0) {
                    let _ = sd.encode_dacl();
                }
            }
        }
        Command::Ioctl => {
            if let Ok(io) = IoctlResponse::decode(msg) {
                let _ = decode_resume_key(&io.output);
                let _ = CopyChunkResponse::decode(&io.output);
            }
        }
        Command::OplockBreak => {
            let _ = smb_proto::oplock::OplockBreak::decode(msg);
            let _ = smb_proto::lease::LeaseBreak::decode(msg);
            let _ = smb_proto::lease::LeaseBreakAck::decode_answer(msg);
        }
        _ => drop(decode_error_data(msg)),
    }
}
