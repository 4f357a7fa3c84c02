//! Golden bytes: SMB2 messages captured from a real exchange with Samba smbd
//! (our own client and smbclient talking to it), decoded with the public
//! decoders and checked field by field. Requests are re-encoded with our
//! encoders and compared byte for byte with what smbd accepted.
//!
//! How the fixtures were captured: tests/fixtures/README.md.

mod common;

use bytes::{Bytes, BytesMut};
use common::{fixture, payload, FIXTURES};
use smb_proto::compound::{decode_error_data, split_compound, ChainBuilder};
use smb_proto::create::{
    access, attributes, create_action, options, share, CloseRequest, CloseResponse, CreateContext, CreateRequest,
    CreateResponse, CreateResponseContext, Disposition, FileId,
};
use smb_proto::header::{flags, HEADER_LEN};
use smb_proto::info::{decode_dir_entries, decode_full_ea, FileTimes, FullEa};
use smb_proto::io::{ReadResponse, WriteRequest, WriteResponse};
use smb_proto::ioctl::{decode_resume_key, IoctlResponse, FSCTL_SRV_REQUEST_RESUME_KEY};
use smb_proto::negotiate::{
    capabilities, dialect, security_mode, Cipher, NegotiateRequest, NegotiateResponse, SigningAlgorithm,
};
use smb_proto::query::OutputBuffer;
use smb_proto::session::SessionSetupResponse;
use smb_proto::tree::TreeConnectResponse;
use smb_proto::{Command, DecodeError, Header, NtStatus, Request};

/// SessionId and TreeId of the capclient session.
const SESSION: u64 = 0x7200_aa09;
const TREE: u32 = 0x6c06_e8f5;
/// SessionId and TreeId of the smbclient session.
const SC_SESSION: u64 = 0x454d_ffd7;
const SC_TREE: u32 = 0x36d2_fbc9;

/// FILETIMEs of golden.txt: created, then written, then read.
const T_CREATED: u64 = 134_405_115_334_466_964;
const T_WRITTEN: u64 = 134_405_115_334_518_104;
const T_READ: u64 = 134_405_115_334_530_473;
/// The inode of golden.txt as reported by QFid and by the directory listing.
const GOLDEN_INODE: u64 = 0x98_c0a0;

fn header(msg: &[u8]) -> Header {
    Header::decode(msg).expect("header")
}

/// Splits a compound fixture and checks the chain: NextCommand of each but
/// the last equals its length and is 8-aligned, later messages are related.
fn split_checked(frame: &Bytes, want: &[(Command, usize)]) -> Vec<Bytes> {
    let msgs = split_compound(frame).expect("split");
    assert_eq!(msgs.len(), want.len());
    for (i, (m, &(cmd, len))) in msgs.iter().zip(want).enumerate() {
        let h = header(m);
        assert_eq!(h.command, cmd, "message {i}");
        assert_eq!(m.len(), len, "message {i} length");
        if i + 1 < msgs.len() {
            assert_eq!(h.next_command as usize, len);
            assert_eq!(len % 8, 0);
        } else {
            assert_eq!(h.next_command, 0);
        }
        assert_eq!(h.flags & flags::RELATED_OPERATIONS != 0, i > 0);
    }
    msgs
}

#[test]
fn every_header_decodes_and_reencodes_identically() {
    for name in FIXTURES {
        let frame = fixture(name);
        for m in split_compound(&frame).unwrap_or_else(|e| panic!("{name}: {e}")) {
            let h = header(&m);
            let mut out = BytesMut::new();
            h.encode(&mut out);
            assert_eq!(&out[..], &m[..HEADER_LEN], "{name}");
        }
    }
}

#[test]
fn negotiate_response_311_with_contexts() {
    let m = fixture("negotiate_response");
    let h = header(&m);
    assert_eq!(h.command, Command::Negotiate);
    assert!(h.is_response());
    assert_eq!(h.status, NtStatus::STATUS_SUCCESS);
    assert_eq!(h.message_id, 0);
    assert_eq!(h.credits, 1);

    let n = NegotiateResponse::decode(&m).unwrap();
    assert_eq!(n.dialect, dialect::SMB311);
    assert_eq!(n.security_mode, security_mode::SIGNING_ENABLED);
    assert_eq!(&n.server_guid, b"smbgatetest\0\0\0\0\0");
    assert_eq!(n.capabilities, capabilities::DFS | capabilities::LEASING | capabilities::LARGE_MTU);
    assert_eq!(n.max_transact_size, 8 << 20);
    assert_eq!(n.max_read_size, 8 << 20);
    assert_eq!(n.max_write_size, 8 << 20);
    // SPNEGO NegTokenInit hint: GSS InitialContextToken with the SPNEGO OID.
    assert_eq!(n.security_buffer.len(), 74);
    assert_eq!(n.security_buffer[..2], [0x60, 0x48]);
    assert_eq!(n.security_buffer[2..10], [6, 6, 0x2b, 6, 1, 5, 5, 2]);
    assert_eq!(n.security_buffer.as_ptr(), m[128..].as_ptr(), "zero-copy");
    // Contexts: preauth SHA-512 and signing AES-GMAC; no encryption context
    // since the server has encryption off.
    assert!(n.preauth_sha512);
    assert_eq!(n.signing, Some(SigningAlgorithm::AesGmac));
    assert_eq!(n.cipher, None);
}

#[test]
fn session_setup_challenge_and_final() {
    let m = fixture("session_setup_response_challenge");
    let h = header(&m);
    assert_eq!(h.command, Command::SessionSetup);
    assert_eq!(h.status, NtStatus::STATUS_MORE_PROCESSING_REQUIRED);
    assert_eq!(h.session_id, SESSION);
    let s = SessionSetupResponse::decode(&m).unwrap();
    assert_eq!(s.session_flags, 0);
    assert_eq!(s.token.len(), 189);
    assert_eq!(s.token[0], 0xa1, "SPNEGO NegTokenResp");
    let ntlm =
        s.token.windows(12).position(|w| w == b"NTLMSSP\0\x02\0\0\0").expect("NTLMSSP CHALLENGE inside the token");
    assert_eq!(ntlm, 31);

    let m = fixture("session_setup_response");
    let h = header(&m);
    assert_eq!(h.status, NtStatus::STATUS_SUCCESS);
    assert_eq!(h.flags, flags::SERVER_TO_REDIR | flags::SIGNED);
    assert_eq!(h.signature, *b"\x13\xe2\xe3\x59\xea\xff\x4c\x7d\xf1\x70\xf1\x9e\x33\x13\x88\xb1");
    assert_eq!(h.credits, 257);
    let s = SessionSetupResponse::decode(&m).unwrap();
    assert_eq!(s.session_flags, 0, "neither guest nor null, no forced encryption");
    assert_eq!(s.token.len(), 29);
    // NegTokenResp { negState accept-completed, mechListMIC }.
    assert_eq!(s.token[..9], [0xa1, 0x1b, 0x30, 0x19, 0xa0, 3, 0x0a, 1, 0]);
}

#[test]
fn tree_connect_disk_share() {
    let m = fixture("tree_connect_response");
    let h = header(&m);
    assert_eq!(h.command, Command::TreeConnect);
    assert_eq!(h.tree_id, TREE);
    assert_eq!(h.session_id, SESSION);
    let t = TreeConnectResponse::decode(&m).unwrap();
    assert_eq!(t.share_type, 1, "disk");
    assert_eq!(t.share_flags, 0);
    assert_eq!(t.capabilities, 0);
    assert_eq!(t.maximal_access, 0x001f_01ff, "FILE_ALL_ACCESS");
}

#[test]
fn compound_create_write_close_response() {
    let frame = fixture("compound_create_write_close_response");
    let msgs = split_checked(&frame, &[(Command::Create, 240), (Command::Write, 80), (Command::Close, 128)]);
    for (i, m) in msgs.iter().enumerate() {
        let h = header(m);
        assert_eq!(h.message_id, 4 + i as u64);
        assert_eq!(h.status, NtStatus::STATUS_SUCCESS);
        assert_eq!((h.tree_id, h.session_id), (TREE, SESSION));
    }
    assert_eq!(header(&msgs[2]).credits, 771, "credits granted on the last");

    let c = CreateResponse::decode(&msgs[0]).unwrap();
    assert_eq!(c.oplock_level, 0);
    assert_eq!(c.create_action, create_action::CREATED);
    assert_eq!(c.file_id, FileId { persistent: 0xd703_250a, volatile: 0x2205_0af9 });
    assert_eq!(
        c.times,
        FileTimes {
            creation: T_CREATED,
            last_access: T_CREATED,
            last_write: T_CREATED,
            change: T_CREATED,
            allocation_size: 0,
            end_of_file: 0,
            attributes: attributes::ARCHIVE,
        }
    );
    assert_eq!(
        c.contexts,
        [
            CreateResponseContext::MaximalAccess { status: 0, access: 0x0017_019f },
            CreateResponseContext::OnDiskId { disk_file_id: GOLDEN_INODE, volume_id: 0xfe00 },
        ]
    );
    assert_eq!(c.on_disk_id(), Some(GOLDEN_INODE));

    assert_eq!(WriteResponse::decode(&msgs[1]).unwrap().count, 267);

    let cl = CloseResponse::decode(&msgs[2]).unwrap();
    assert_eq!(cl.flags, 1, "SMB2_CLOSE_FLAG_POSTQUERY_ATTRIB echoed");
    assert_eq!(
        cl.times,
        FileTimes {
            creation: T_CREATED,
            last_access: T_CREATED,
            last_write: T_WRITTEN,
            change: T_WRITTEN,
            allocation_size: 4096,
            end_of_file: 267,
            attributes: attributes::ARCHIVE,
        }
    );
}

#[test]
fn compound_create_read_close_response() {
    let frame = fixture("compound_create_read_close_response");
    let msgs = split_checked(&frame, &[(Command::Create, 240), (Command::Read, 352), (Command::Close, 128)]);
    let c = CreateResponse::decode(&msgs[0]).unwrap();
    assert_eq!(c.create_action, create_action::OPENED);
    assert_eq!(c.file_id, FileId { persistent: 0xeb2d_a01e, volatile: 0x776e_c930 });
    assert_eq!(c.times.end_of_file, 267);
    assert_eq!(c.times.allocation_size, 4096);
    assert_eq!(c.times.last_write, T_WRITTEN);
    assert!(!c.times.is_directory());
    assert_eq!(c.on_disk_id(), Some(GOLDEN_INODE));

    let r = ReadResponse::decode(&msgs[1]).unwrap();
    assert_eq!(r.remaining, 0);
    assert_eq!(&r.data[..], &payload()[..]);
    assert!(r.data.starts_with(b"PRETTY_NAME=\"Debian GNU/Linux 12"));
    // Zero copy: the payload is a view of the received frame, at DataOffset 80
    // of the second message (which starts at 240). The 5 bytes after it are
    // compound padding.
    assert_eq!(r.data.as_ptr(), frame[240 + 80..].as_ptr());

    let cl = CloseResponse::decode(&msgs[2]).unwrap();
    assert_eq!(cl.flags, 0);
    assert_eq!(cl.times, FileTimes::default(), "no post-query asked");
}

#[test]
fn query_info_network_open() {
    let m = fixture("query_info_network_open_response");
    assert_eq!(header(&m).command, Command::QueryInfo);
    let out = OutputBuffer::decode(&m).unwrap().0;
    assert_eq!(out.len(), 56);
    let t = FileTimes::decode_network_open(&out).unwrap();
    assert_eq!(
        t,
        FileTimes {
            creation: T_CREATED,
            last_access: T_READ,
            last_write: T_WRITTEN,
            change: T_WRITTEN,
            allocation_size: 4096,
            end_of_file: 267,
            attributes: attributes::ARCHIVE,
        }
    );
}

#[test]
fn query_info_full_ea() {
    let m = fixture("query_info_full_ea_response");
    let out = OutputBuffer::decode(&m).unwrap().0;
    assert_eq!(out.len(), 27);
    assert_eq!(decode_full_ea(&out).unwrap(), [FullEa { name: "user.golden".into(), value: b"fixture".to_vec() }]);
}

#[test]
fn ioctl_resume_key() {
    let m = fixture("ioctl_resume_key_response");
    assert_eq!(header(&m).command, Command::Ioctl);
    let io = IoctlResponse::decode(&m).unwrap();
    assert_eq!(io.ctl_code, FSCTL_SRV_REQUEST_RESUME_KEY);
    // SRV_REQUEST_RESUME_KEY: 24-byte key, ContextLength 0, 4 bytes Context.
    assert_eq!(io.output.len(), 32);
    assert_eq!(
        decode_resume_key(&io.output).unwrap(),
        *b"\x06\x63\xcb\xb4\0\0\0\0\xba\x52\xb8\x55\0\0\0\0\x78\x00\x14\x00\0\0\0\0"
    );
    assert_eq!(io.output[24..], [0; 8]);
}

#[test]
fn compound_create_query_directory_close_response() {
    let frame = fixture("compound_create_query_directory_close_response");
    let msgs = split_checked(&frame, &[(Command::Create, 152), (Command::QueryDirectory, 352), (Command::Close, 128)]);
    let root = CreateResponse::decode(&msgs[0]).unwrap();
    assert!(root.times.is_directory());
    assert!(root.contexts.is_empty());

    let buf = OutputBuffer::decode(&msgs[1]).unwrap().0;
    assert_eq!(buf.len(), 276);
    let mut entries = Vec::new();
    decode_dir_entries(&buf, |e| entries.push(e)).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, [".", "..", "golden.txt"]);
    assert!(entries[0].times.is_directory() && entries[1].times.is_directory());
    assert_eq!(entries[0].times, root.times, "'.' is the opened root");
    let g = &entries[2];
    assert_eq!(g.file_id, GOLDEN_INODE, "same inode as the QFid context");
    assert_eq!(g.ea_size, 27, "the user.golden EA set through ExtA");
    assert_eq!(
        g.times,
        FileTimes {
            creation: T_CREATED,
            last_access: T_READ,
            last_write: T_WRITTEN,
            change: T_WRITTEN,
            allocation_size: 4096,
            end_of_file: 267,
            attributes: attributes::ARCHIVE,
        }
    );
    assert_eq!(CloseResponse::decode(&msgs[2]).unwrap().times, FileTimes::default());
}

/// The exact compound that smbd accepted, rebuilt with ChainBuilder and the
/// request encoders (contexts, EA list, padding, NextCommand, RELATED flags).
#[test]
fn compound_create_write_close_request_reencodes_byte_identically() {
    let captured = fixture("compound_create_write_close_request");
    let data = payload();
    let eas = [FullEa { name: "user.golden".into(), value: b"fixture".to_vec() }];
    let ctx = [CreateContext::QueryMaximalAccess, CreateContext::QueryOnDiskId, CreateContext::EaBuffer(&eas)];
    let open = CreateRequest {
        name: "golden.txt",
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::OverwriteIf,
        options: options::NON_DIRECTORY_FILE,
        contexts: &ctx,
    };
    let write = WriteRequest { file_id: FileId::RELATED, offset: 0, data: &data };
    let close = CloseRequest { file_id: FileId::RELATED, post_query: true };
    let bodies: [&dyn Request; 3] = [&open, &write, &close];
    let mut out = BytesMut::new();
    let mut chain = ChainBuilder::new();
    for (i, b) in bodies.iter().enumerate() {
        let mut h = Header::request(b.command());
        h.credits = 257;
        h.message_id = 4 + i as u64;
        h.tree_id = TREE;
        h.session_id = SESSION;
        if i > 0 {
            h.flags = flags::RELATED_OPERATIONS;
        }
        chain.push(&mut out, &h, *b);
    }
    let ranges = chain.finish(out.len());
    assert_eq!(ranges, [0..248, 248..632, 632..720]);
    assert_eq!(hex::encode(&out), hex::encode(&captured));
}

/// Our NEGOTIATE encoder, given smbclient's parameters, produces smbclient's
/// bytes for the fixed part, the dialects and the three contexts we send
/// (smbclient sends a fourth, NETNAME, after them).
#[test]
fn negotiate_request_matches_smbclient() {
    let theirs = fixture("negotiate_request_smbclient");
    let h = header(&theirs);
    assert_eq!(h.command, Command::Negotiate);
    assert!(!h.is_response());
    assert_eq!((h.credit_charge, h.credits, h.message_id), (0, 31, 0));
    assert_eq!(theirs.len(), 226);

    let req = NegotiateRequest {
        dialects: vec![0x0202, 0x0210, dialect::SMB300, dialect::SMB302, dialect::SMB311],
        security_mode: security_mode::SIGNING_ENABLED,
        capabilities: 0x7f,
        client_guid: theirs[76..92].try_into().unwrap(),
        salt: theirs[126..158].try_into().unwrap(),
        ciphers: vec![Cipher::Aes128Gcm, Cipher::Aes128Ccm, Cipher::Aes256Gcm, Cipher::Aes256Ccm],
        signing: vec![SigningAlgorithm::AesGmac, SigningAlgorithm::AesCmac, SigningAlgorithm::HmacSha256],
    };
    let mut ours = BytesMut::new();
    h.encode(&mut ours);
    req.encode_body(&mut ours, 0);
    assert_eq!(ours.len(), 200);

    let mut want = theirs[..200].to_vec();
    assert_eq!(u16::from_le_bytes([want[96], want[97]]), 4, "smbclient's count");
    want[96] = 3; // NegotiateContextCount: we send three
    assert_eq!(hex::encode(&ours), hex::encode(&want));
    // What follows in smbclient's request is the NETNAME context (type 5).
    assert_eq!(theirs[200..202], [5, 0]);
}

/// Our CREATE encoder, given smbclient's parameters, produces smbclient's
/// request; smbclient only pads the name buffer with two more zero bytes.
#[test]
fn create_request_matches_smbclient() {
    let theirs = fixture("create_request_smbclient");
    let h = header(&theirs);
    assert_eq!(h.command, Command::Create);
    assert_eq!((h.message_id, h.tree_id, h.session_id), (7, SC_TREE, SC_SESSION));

    let req = CreateRequest {
        name: "f",
        oplock_level: 0,
        desired_access: 0x0012_019f,
        file_attributes: 0,
        share_access: share::READ | share::WRITE,
        disposition: Disposition::OverwriteIf,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    };
    let mut ours = BytesMut::new();
    h.encode(&mut ours);
    req.encode_body(&mut ours, 0);
    assert_eq!(ours.len(), 122);
    assert_eq!(hex::encode(&ours), hex::encode(&theirs[..122]));
    assert_eq!(theirs[122..], [0, 0]);
}

#[test]
fn smbclient_create_response_without_contexts() {
    let m = fixture("create_response_smbclient");
    let h = header(&m);
    assert_eq!(h.flags, flags::SERVER_TO_REDIR | 0x10, "priority 1 echoed");
    let c = CreateResponse::decode(&m).unwrap();
    assert_eq!(c.create_action, create_action::CREATED);
    assert_eq!(c.file_id, FileId { persistent: 0x2f12_b1f0, volatile: 0x35a9_5691 });
    assert_eq!(c.times.creation, 134_405_113_836_707_972);
    assert_eq!(c.times.end_of_file, 0);
    assert_eq!(c.times.attributes, attributes::ARCHIVE);
    assert!(c.contexts.is_empty());
    assert_eq!(c.on_disk_id(), None);
}

#[test]
fn smbclient_write_interim_pending_then_final_async() {
    let m = fixture("write_response_pending_smbclient");
    let h = header(&m);
    assert_eq!(h.command, Command::Write);
    assert_eq!(h.status, NtStatus::STATUS_PENDING);
    assert_eq!(h.async_id, Some(8));
    assert_eq!(h.tree_id, 0);
    assert_eq!(h.credit_charge, 0);
    assert_eq!(h.flags, flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND | 0x10);
    // Error body with ByteCount 0 (followed by one byte of ErrorData padding).
    assert_eq!(decode_error_data(&m).unwrap(), Bytes::new());
    assert!(WriteResponse::decode(&m).is_err());

    let m = fixture("write_response_smbclient");
    let h = header(&m);
    assert_eq!(h.status, NtStatus::STATUS_SUCCESS);
    assert_eq!((h.async_id, h.message_id), (Some(8), 8));
    assert_eq!(WriteResponse::decode(&m).unwrap().count, 267);
}

#[test]
fn smbclient_read_and_close() {
    let m = fixture("read_response_smbclient");
    let h = header(&m);
    assert_eq!((h.command, h.message_id), (Command::Read, 273));
    let r = ReadResponse::decode(&m).unwrap();
    assert_eq!(&r.data[..], &payload()[..]);
    assert_eq!(r.data.as_ptr(), m[80..].as_ptr());
    assert_eq!(m.len(), 80 + 267);

    let m = fixture("close_response_smbclient");
    let c = CloseResponse::decode(&m).unwrap();
    assert_eq!(c.flags, 0);
    assert_eq!(c.times, FileTimes::default());
}

#[test]
fn smbclient_error_object_name_not_found() {
    let m = fixture("error_object_name_not_found_smbclient");
    let h = header(&m);
    assert_eq!(h.command, Command::Create);
    assert_eq!(h.status, NtStatus::STATUS_OBJECT_NAME_NOT_FOUND);
    assert!(h.status.is_error());
    assert_eq!(h.message_id, 287);
    assert_eq!(m.len(), HEADER_LEN + 9);
    assert_eq!(decode_error_data(&m).unwrap(), Bytes::new());
    assert_eq!(
        CreateResponse::decode(&m).unwrap_err(),
        DecodeError::BadValue { field: "CREATE StructureSize", got: 9 }
    );
}
