//! Property tests: encode/decode round trips for the header, EA lists and
//! compound chains, and the codec's promise that no input makes a decoder
//! panic, whether arbitrary bytes or real messages with random mutations and
//! truncations (seeded from the golden fixtures).

mod common;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use smb_proto::compound::{decode_error_data, split_compound, ChainBuilder};
use smb_proto::create::{
    CloseRequest, CloseResponse, CreateContext, CreateRequest, CreateResponse, Disposition, FileId,
};
use smb_proto::frame::{frame_header, frame_len, MAX_FRAME_LEN};
use smb_proto::header::{flags, HEADER_LEN, PROTOCOL_ID};
use smb_proto::info::{decode_dir_entries, decode_full_ea, encode_full_ea, FileTimes, FullEa};
use smb_proto::io::{ReadRequest, ReadResponse, WriteRequest, WriteResponse};
use smb_proto::ioctl::IoctlResponse;
use smb_proto::message::Empty;
use smb_proto::negotiate::NegotiateResponse;
use smb_proto::query::OutputBuffer;
use smb_proto::security::{Ace, SecurityDescriptor};
use smb_proto::session::SessionSetupResponse;
use smb_proto::transform::{TransformHeader, TRANSFORM_HEADER_LEN};
use smb_proto::tree::TreeConnectResponse;
use smb_proto::{Command, Header, NtStatus, Request};

// ---------------------------------------------------------------- strategies

fn arb_command() -> impl Strategy<Value = Command> {
    (0u16..=18).prop_map(|v| Command::from_u16(v).unwrap())
}

/// A header whose form is consistent: the ASYNC flag is set exactly when
/// `async_id` is, and an async header has TreeId 0 (it has no such field).
fn arb_header() -> impl Strategy<Value = Header> {
    (
        (any::<u16>(), any::<u32>(), arb_command(), any::<u16>(), any::<u32>()),
        (any::<u32>(), any::<u64>(), any::<Option<u64>>(), any::<u32>()),
        (any::<u64>(), any::<[u8; 16]>()),
    )
        .prop_map(
            |(
                (credit_charge, status, command, credits, fl),
                (next_command, message_id, async_id, tree_id),
                (session_id, signature),
            )| {
                let fl = match async_id {
                    Some(_) => fl | flags::ASYNC_COMMAND,
                    None => fl & !flags::ASYNC_COMMAND,
                };
                Header {
                    credit_charge,
                    status: NtStatus(status),
                    command,
                    credits,
                    flags: fl,
                    next_command,
                    message_id,
                    async_id,
                    tree_id: if async_id.is_some() { 0 } else { tree_id },
                    session_id,
                    signature,
                }
            },
        )
}

fn arb_ea() -> impl Strategy<Value = FullEa> {
    (prop::collection::vec(0x20u8..0x7f, 0..=255), prop::collection::vec(any::<u8>(), 0..300))
        .prop_map(|(name, value)| FullEa { name: String::from_utf8(name).unwrap(), value })
}

/// A request body for a compound chain: either raw bytes under any command
/// or one of the real request encoders.
#[derive(Debug, Clone)]
enum Body {
    Raw(Command, Vec<u8>),
    Write(u64, Vec<u8>),
    Read(u32, u64),
    Create(String, Vec<FullEa>),
    Close(bool),
    Echo,
}

struct Raw(Command, Vec<u8>);

impl Request for Raw {
    fn command(&self) -> Command {
        self.0
    }
    fn encode_body(&self, out: &mut BytesMut, _hdr: usize) {
        out.extend_from_slice(&self.1);
    }
}

impl Body {
    /// Calls `f` with this body as a request.
    fn with_request<R>(&self, f: impl FnOnce(&dyn Request) -> R) -> R {
        match self {
            Body::Raw(c, b) => f(&Raw(*c, b.clone())),
            Body::Write(offset, data) => f(&WriteRequest { file_id: FileId::RELATED, offset: *offset, data }),
            Body::Read(length, offset) => {
                f(&ReadRequest { file_id: FileId::RELATED, length: *length, offset: *offset, minimum_count: 0 })
            }
            Body::Create(name, eas) => {
                let ctx = [CreateContext::QueryMaximalAccess, CreateContext::EaBuffer(eas)];
                f(&CreateRequest {
                    name,
                    oplock_level: 0,
                    desired_access: 0x0012_019f,
                    file_attributes: 0,
                    share_access: 7,
                    disposition: Disposition::OpenIf,
                    options: 0,
                    contexts: if eas.is_empty() { &ctx[..1] } else { &ctx },
                })
            }
            Body::Close(post_query) => f(&CloseRequest { file_id: FileId::RELATED, post_query: *post_query }),
            Body::Echo => f(&Empty(Command::Echo)),
        }
    }
}

fn arb_body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (arb_command(), prop::collection::vec(any::<u8>(), 0..200)).prop_map(|(c, b)| Body::Raw(c, b)),
        (any::<u64>(), prop::collection::vec(any::<u8>(), 0..300)).prop_map(|(o, d)| Body::Write(o, d)),
        (any::<u32>(), any::<u64>()).prop_map(|(l, o)| Body::Read(l, o)),
        ("[a-z\\\\.]{0,20}", prop::collection::vec(arb_ea(), 0..3)).prop_map(|(n, e)| Body::Create(n, e)),
        any::<bool>().prop_map(Body::Close),
        Just(Body::Echo),
    ]
}

// ------------------------------------------------------------ decode-all

fn within(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    inner.is_empty() || (i >= o && i + inner.len() <= o + outer.len())
}

/// Runs every public decoder over `msg` and checks that whatever they
/// return as a view of the message really lies inside it. The point is
/// that none of these calls panics.
fn decode_message(msg: &Bytes) {
    let _ = Header::decode(msg);
    if let Ok(n) = NegotiateResponse::decode(msg) {
        assert!(within(msg, &n.security_buffer));
    }
    if let Ok(s) = SessionSetupResponse::decode(msg) {
        assert!(within(msg, &s.token));
    }
    let _ = TreeConnectResponse::decode(msg);
    if let Ok(c) = CreateResponse::decode(msg) {
        let _ = c.on_disk_id();
    }
    let _ = CloseResponse::decode(msg);
    if let Ok(r) = ReadResponse::decode(msg) {
        assert!(within(msg, &r.data));
    }
    let _ = WriteResponse::decode(msg);
    if let Ok(o) = OutputBuffer::decode(msg) {
        assert!(within(msg, &o.0));
        decode_buffers(&o.0);
    }
    if let Ok(io) = IoctlResponse::decode(msg) {
        assert!(within(msg, &io.output));
    }
    if let Ok(e) = decode_error_data(msg) {
        assert!(within(msg, &e));
    }
    let _ = TransformHeader::decode(msg);
    decode_buffers(msg);
    decode_buffers(msg.get(HEADER_LEN..).unwrap_or_default());
}

/// The decoders of information buffers (QUERY_INFO / QUERY_DIRECTORY
/// output, EA lists).
fn decode_buffers(b: &[u8]) {
    let mut n = 0usize;
    let _ = decode_dir_entries(b, |_| n += 1);
    let _ = decode_full_ea(b);
    let _ = FileTimes::decode_network_open(b);
    // A security descriptor read back is written back (the lock's ACEs):
    // whatever decodes must encode without a panic, and read the same.
    if let Ok(sd) = SecurityDescriptor::decode(b) {
        for ace in sd.dacl.iter().flatten() {
            let _ = ace.mask_and_sid();
        }
        if let (Some(_), Some(again)) = (&sd.dacl, sd.encode_dacl()) {
            assert_eq!(SecurityDescriptor::decode(&again).map(|s| s.dacl), Ok(sd.dacl));
        }
    }
}

/// A whole received frame: the transport header check, the transform
/// header, the compound split and then each message.
fn decode_frame(frame: &Bytes) {
    if frame.len() >= 4 {
        let _ = frame_len(frame[..4].try_into().unwrap());
    }
    let _ = TransformHeader::decode(frame);
    match split_compound(frame) {
        Ok(msgs) => {
            assert!(!msgs.is_empty());
            let mut at = 0usize;
            for m in &msgs {
                assert!(m.len() >= HEADER_LEN);
                assert_eq!(m.as_ptr(), frame[at..].as_ptr(), "contiguous split");
                at += m.len();
                decode_message(m);
            }
            assert_eq!(at, frame.len(), "split covers the frame");
        }
        Err(_) => decode_message(frame),
    }
}

/// One random edit to a message.
#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite one byte.
    Byte(usize, u8),
    /// Overwrite a little-endian u16 (length/offset fields are u16 or u32).
    U16(usize, u16),
    /// Overwrite a little-endian u32.
    U32(usize, u32),
    /// Insert bytes.
    Insert(usize, Vec<u8>),
    /// Remove a range.
    Remove(usize, usize),
}

fn interesting_u16() -> impl Strategy<Value = u16> {
    prop_oneof![
        any::<u16>(),
        prop::sample::select(vec![0u16, 1, 2, 7, 8, 9, 16, 63, 64, 65, 120, 0x7fff, 0xfff8, 0xffff]),
    ]
}

fn interesting_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        any::<u32>(),
        prop::sample::select(vec![0u32, 1, 4, 8, 24, 64, 88, 152, 240, 0x7fff_ffff, 0xffff_fff8, 0xffff_ffff,]),
    ]
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, v)| Mutation::Byte(i, v)),
        3 => (any::<usize>(), interesting_u16()).prop_map(|(i, v)| Mutation::U16(i, v)),
        3 => (any::<usize>(), interesting_u32()).prop_map(|(i, v)| Mutation::U32(i, v)),
        1 => (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, v)| Mutation::Insert(i, v)),
        1 => (any::<usize>(), 1usize..32).prop_map(|(i, n)| Mutation::Remove(i, n)),
    ]
}

fn mutate(mut b: Vec<u8>, muts: &[Mutation], truncate: Option<usize>) -> Bytes {
    for m in muts {
        if b.is_empty() {
            break;
        }
        let len = b.len();
        match m {
            Mutation::Byte(i, v) => b[i % len] = *v,
            Mutation::U16(i, v) => {
                let i = i % len;
                let n = (len - i).min(2);
                b[i..i + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            Mutation::U32(i, v) => {
                let i = i % len;
                let n = (len - i).min(4);
                b[i..i + n].copy_from_slice(&v.to_le_bytes()[..n]);
            }
            Mutation::Insert(i, v) => {
                let i = i % (len + 1);
                b.splice(i..i, v.iter().copied());
            }
            Mutation::Remove(i, n) => {
                let i = i % len;
                b.drain(i..(i + n).min(len));
            }
        }
    }
    if let Some(t) = truncate {
        b.truncate(t % (b.len() + 1));
    }
    Bytes::from(b)
}

/// Real messages to mutate: every golden fixture, each message of every
/// compound on its own, and a few encoder outputs.
fn seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for name in common::FIXTURES {
        let frame = common::fixture(name);
        for m in split_compound(&frame).unwrap() {
            v.push(m.to_vec());
        }
        v.push(frame.to_vec());
    }
    let mut t = BytesMut::new();
    TransformHeader { signature: [1; 16], nonce: [2; 16], original_message_size: 300, flags: 1, session_id: 7 }
        .encode(&mut t);
    v.push(t.to_vec());
    v
}

fn arb_seeded_input() -> impl Strategy<Value = Bytes> {
    let seeds = seeds();
    (
        prop::sample::select(seeds),
        prop::collection::vec(arb_mutation(), 0..6),
        prop::option::weighted(0.3, any::<usize>()),
    )
        .prop_map(|(seed, muts, truncate)| mutate(seed, &muts, truncate))
}

/// Arbitrary bytes behind a valid header and a plausible StructureSize, so
/// random input reaches past the first checks of every decoder.
fn arb_shaped_message() -> impl Strategy<Value = Bytes> {
    (arb_header(), prop::sample::select(vec![9u16, 16, 17, 49, 60, 65, 89]), prop::collection::vec(any::<u8>(), 0..400))
        .prop_map(|(h, size, rest)| {
            let mut b = BytesMut::new();
            h.encode(&mut b);
            b.extend_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&rest);
            b.freeze()
        })
}

// ---------------------------------------------------------------- tests

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn security_descriptors_round_trip_and_bent_ones_never_panic(
        aces in prop::collection::vec((0u8..4, any::<u8>(), prop::collection::vec(any::<u8>(), 0..48)), 0..8),
        at in any::<usize>(),
        byte in any::<u8>(),
    ) {
        let dacl: Vec<Ace> = aces.into_iter().map(|(ace_type, flags, body)| Ace { ace_type, flags, body }).collect();
        let sd = SecurityDescriptor { dacl: Some(dacl), ..Default::default() };
        let mut b = sd.encode_dacl().unwrap().to_vec();
        prop_assert_eq!(SecurityDescriptor::decode(&b).unwrap().dacl, sd.dacl);
        let i = at % b.len();
        b[i] = byte;
        decode_buffers(&b);
    }

    #[test]
    fn header_round_trip(h in arb_header(), tail in prop::collection::vec(any::<u8>(), 0..32)) {
        let mut b = BytesMut::new();
        h.encode(&mut b);
        prop_assert_eq!(b.len(), HEADER_LEN);
        prop_assert_eq!(&b[..4], &PROTOCOL_ID[..]);
        prop_assert_eq!(Header::decode(&b).unwrap(), h.clone());
        // Trailing body bytes do not affect the header.
        b.extend_from_slice(&tail);
        prop_assert_eq!(Header::decode(&b).unwrap(), h);
    }

    /// Any 64 bytes that decode as a header re-encode to the same bytes,
    /// except the sync form's Reserved field, which is not kept.
    #[test]
    fn decoded_header_reencodes(mut raw in any::<[u8; 64]>(), cmd in 0u16..=18) {
        raw[..4].copy_from_slice(&PROTOCOL_ID);
        raw[4..6].copy_from_slice(&64u16.to_le_bytes());
        raw[12..14].copy_from_slice(&cmd.to_le_bytes());
        let h = Header::decode(&raw).unwrap();
        let mut b = BytesMut::new();
        h.encode(&mut b);
        if h.async_id.is_none() {
            raw[32..36].fill(0);
        }
        prop_assert_eq!(&b[..], &raw[..]);
    }

    #[test]
    fn header_rejects_short_input(raw in prop::collection::vec(any::<u8>(), 0..HEADER_LEN)) {
        prop_assert!(Header::decode(&raw).is_err());
    }

    #[test]
    fn full_ea_round_trip(eas in prop::collection::vec(arb_ea(), 0..8)) {
        let mut b = BytesMut::new();
        encode_full_ea(&mut b, &eas);
        prop_assert_eq!(decode_full_ea(&b).unwrap(), eas.clone());
        // Every NextEntryOffset is 4-aligned and the last one is 0.
        let mut off = 0usize;
        for i in 0..eas.len() {
            let next = u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) as usize;
            if i + 1 == eas.len() {
                prop_assert_eq!(next, 0);
            } else {
                prop_assert_eq!(next % 4, 0);
                prop_assert!(next >= 9 + eas[i].name.len() + eas[i].value.len());
                off += next;
            }
        }
    }

    /// A chain built with ChainBuilder (after an arbitrary prefix, as the
    /// client leaves room for the transport header) splits back into the
    /// same messages: same headers except the patched NextCommand, which is
    /// 8-aligned and equals each message's length; bodies unchanged; only
    /// zero padding between messages; `finish` ranges match the split.
    #[test]
    fn chain_split_round_trip(
        prefix in 0usize..16,
        chain in prop::collection::vec((arb_header(), arb_body()), 1..8),
    ) {
        let mut out = BytesMut::new();
        out.resize(prefix, 0xAA);
        let mut cb = ChainBuilder::new();
        let mut want = Vec::new();
        for (h, body) in &chain {
            let mut h = h.clone();
            h.next_command = 0;
            h.command = body.with_request(|r| r.command());
            // The body as encoded on its own after a header.
            let mut alone = BytesMut::new();
            h.encode(&mut alone);
            body.with_request(|r| r.encode_body(&mut alone, 0));
            let start = body.with_request(|r| cb.push(&mut out, &h, r));
            want.push((h, start, alone.split_off(HEADER_LEN)));
        }
        prop_assert_eq!(cb.len(), chain.len());
        let ranges = cb.finish(out.len());
        let frame = out.freeze().slice(prefix..);
        let msgs = split_compound(&frame).unwrap();
        prop_assert_eq!(msgs.len(), chain.len());
        for (i, (m, (h, start, body))) in msgs.iter().zip(&want).enumerate() {
            let got = Header::decode(m).unwrap();
            let last = i + 1 == msgs.len();
            prop_assert_eq!(ranges[i].clone(), *start..*start + m.len());
            if last {
                prop_assert_eq!(got.next_command, 0);
            } else {
                prop_assert_eq!(got.next_command as usize, m.len());
                prop_assert_eq!(m.len() % 8, 0);
                prop_assert!(m.len() - HEADER_LEN - body.len() < 8, "at most 7 bytes of padding");
            }
            let mut h = h.clone();
            h.next_command = got.next_command;
            prop_assert_eq!(&got, &h);
            prop_assert_eq!(&m[HEADER_LEN..HEADER_LEN + body.len()], &body[..]);
            prop_assert!(m[HEADER_LEN + body.len()..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn transform_header_round_trip(
        signature in any::<[u8; 16]>(),
        nonce in any::<[u8; 16]>(),
        original_message_size in any::<u32>(),
        fl in any::<u16>(),
        session_id in any::<u64>(),
    ) {
        let t = TransformHeader { signature, nonce, original_message_size, flags: fl, session_id };
        let mut b = BytesMut::new();
        t.encode(&mut b);
        prop_assert_eq!(b.len(), TRANSFORM_HEADER_LEN);
        prop_assert_eq!(TransformHeader::decode(&b).unwrap(), t);
        prop_assert!(TransformHeader::decode(&b[..TRANSFORM_HEADER_LEN - 1]).is_err());
    }

    #[test]
    fn frame_len_matches_frame_header(hdr in any::<[u8; 4]>(), len in 0usize..=MAX_FRAME_LEN + 16) {
        match frame_len(hdr) {
            Ok(n) => {
                prop_assert_eq!(hdr[0], 0);
                prop_assert!(n <= MAX_FRAME_LEN);
            }
            Err(_) => prop_assert_ne!(hdr[0], 0),
        }
        match frame_header(len) {
            Ok(h) => prop_assert_eq!(frame_len(h).unwrap(), len),
            Err(_) => prop_assert!(len > MAX_FRAME_LEN),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn no_panic_on_arbitrary_bytes(raw in prop::collection::vec(any::<u8>(), 0..600)) {
        decode_frame(&Bytes::from(raw));
    }

    #[test]
    fn no_panic_on_shaped_messages(msg in arb_shaped_message()) {
        decode_frame(&msg);
    }

    #[test]
    fn no_panic_on_mutated_real_messages(input in arb_seeded_input()) {
        decode_frame(&input);
    }
}

/// The decoder for a response's command, as the client dispatches it.
fn decode_by_command(msg: &Bytes) -> Result<(), smb_proto::DecodeError> {
    let h = Header::decode(msg)?;
    let more = h.command == Command::SessionSetup && h.status == NtStatus::STATUS_MORE_PROCESSING_REQUIRED;
    if (h.status.is_error() && !more) || h.status == NtStatus::STATUS_PENDING {
        return decode_error_data(msg).map(drop);
    }
    match h.command {
        Command::Negotiate => NegotiateResponse::decode(msg).map(drop),
        Command::SessionSetup => SessionSetupResponse::decode(msg).map(drop),
        Command::TreeConnect => TreeConnectResponse::decode(msg).map(drop),
        Command::Create => CreateResponse::decode(msg).map(drop),
        Command::Close => CloseResponse::decode(msg).map(drop),
        Command::Read => ReadResponse::decode(msg).map(drop),
        Command::Write => WriteResponse::decode(msg).map(drop),
        Command::QueryDirectory | Command::QueryInfo => OutputBuffer::decode(msg).map(drop),
        Command::Ioctl => IoctlResponse::decode(msg).map(drop),
        _ => Ok(()),
    }
}

/// The unmutated seeds split, every response among them decodes with the
/// decoder for its command (so the mutation test starts from real, valid
/// input), and they pass the decode-all invariants.
#[test]
fn seeds_are_valid() {
    let seeds = seeds();
    assert!(seeds.len() > 25);
    for s in seeds {
        decode_frame(&Bytes::from(s));
    }
    let mut responses = 0;
    for name in common::FIXTURES {
        for m in split_compound(&common::fixture(name)).unwrap() {
            if Header::decode(&m).unwrap().is_response() {
                decode_by_command(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
                responses += 1;
            }
        }
    }
    assert!(responses > 20, "{responses}");
}
