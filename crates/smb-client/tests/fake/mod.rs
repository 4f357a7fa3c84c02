//! A scripted fake SMB2 server for fault-injection tests.
//!
//! It speaks just enough SMB2 to bring a real `Session` up (NEGOTIATE for
//! 3.0.2 or 3.1.1 with the preauth context, two SESSION_SETUP legs of
//! NTLMSSP in SPNEGO, TREE_CONNECT) and then hands the connection to a
//! per-test script that answers (or mangles) whatever the client sends.
//!
//! Guest sessions need no keys. For a signed user session the fake derives
//! the real NTLMv2 session key by replaying the client's AUTHENTICATE with
//! a mirror `NtlmClient` fed the same client challenge and timestamp (taken
//! from the NTLMv2 blob), which works because the CHALLENGE it sends has no
//! KEY_EXCH flag and no MsvAvTimestamp, so the client's answer and key are
//! fully determined by the credentials and the blob.
//!
//! Invariants checked on every request (the fake panics, failing the test):
//! MessageIds are never reused and always lie inside the credit window the
//! fake has granted so far (MS-SMB2 3.3.1.1), and on a signed session every
//! request is signed with the right key.
#![allow(dead_code)]

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smb_auth::spnego::{NegState, NegTokenResp, NTLMSSP_OID};
use smb_auth::{NtlmClient, NtlmCredentials, NtlmOptions};
use smb_client::crypto::{derive_keys, PreauthHash, Signer};
use smb_client::session::ClientConfig;
use smb_proto::compound::split_compound;
use smb_proto::create::FileId;
use smb_proto::header::{flags, HEADER_LEN};
use smb_proto::negotiate::{capabilities, dialect, security_mode, SigningAlgorithm};
use smb_proto::{Command, Header, NtStatus};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// SessionId the fake hands out.
pub const SESSION_ID: u64 = 0x0000_4000_1234_0001;
/// TreeId of the one share.
pub const TREE_ID: u32 = 7;
/// FileId of every CREATE.
pub const FILE_ID: FileId = FileId { persistent: 0x11, volatile: 0x22 };
/// User and password the fake accepts for signed sessions.
pub const USER: &str = "alice";
/// See [`USER`].
pub const PASSWORD: &str = "s3cret";

/// MS-NLMP 4.2.4.3 CHALLENGE_MESSAGE (flags 0xe28a8233, KEY_EXCH set).
const CHALLENGE_KEY_EXCH: &str = "4e544c4d53535000 02000000 0c000c0038000000 33828ae2 \
    0123456789abcdef 0000000000000000 2400240044000000 060070170000000f \
    530065007200760065007200 \
    02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000";
/// The same CHALLENGE without KEY_EXCH (flags 0xa28a8233), so that the
/// session key is the NTLMv2 SessionBaseKey and the fake can recompute it.
const CHALLENGE_NO_KEY_EXCH: &str = "4e544c4d53535000 02000000 0c000c0038000000 33828aa2 \
    0123456789abcdef 0000000000000000 2400240044000000 060070170000000f \
    530065007200760065007200 \
    02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000";

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

/// How the session is authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    /// Any credentials; the session is a guest session (no keys).
    Guest,
    /// Only [`USER`]/[`PASSWORD`]; a real session key is derived.
    User,
}

/// Credit grant for a response, given the request header.
pub type GrantFn = Box<dyn FnMut(&Header) -> u16 + Send>;

/// What the fake negotiates.
pub struct Opts {
    /// Dialect to select (0x0302 or 0x0311).
    pub dialect: u16,
    /// MaxReadSize.
    pub max_read: u32,
    /// MaxWriteSize.
    pub max_write: u32,
    /// MaxTransactSize.
    pub max_transact: u32,
    /// SecurityMode SIGNING_REQUIRED (needs [`Auth::User`]).
    pub signing_required: bool,
    /// Signing algorithm for the 3.1.1 signing context.
    pub signing_alg: SigningAlgorithm,
    /// Guest or user session.
    pub auth: Auth,
    /// CreditResponse of every response built with [`FakeConn::header`].
    pub grant: GrantFn,
    /// Answer TREE_CONNECT unsigned even on a session with a key (a man
    /// in the middle stripping its signature).
    pub unsigned_tree_connect: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            dialect: dialect::SMB311,
            max_read: 65536,
            max_write: 65536,
            max_transact: 65536,
            signing_required: false,
            signing_alg: SigningAlgorithm::AesGmac,
            auth: Auth::Guest,
            // What the client asks for, capped like Samba's default window.
            grant: Box::new(|h: &Header| h.credits.clamp(1, 512)),
            unsigned_tree_connect: false,
        }
    }
}

/// One received request: its decoded header and its exact bytes.
#[derive(Debug, Clone)]
pub struct Msg {
    /// Decoded header.
    pub hdr: Header,
    /// The whole message, header first (padding included).
    pub raw: Bytes,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl Msg {
    /// `(Offset, Length)` of a READ request.
    pub fn read_args(&self) -> (u64, u32) {
        assert_eq!(self.hdr.command, Command::Read);
        let b = &self.raw[HEADER_LEN..];
        (u64_at(b, 8), u32_at(b, 4))
    }

    /// `(Offset, Data)` of a WRITE request.
    pub fn write_args(&self) -> (u64, Bytes) {
        assert_eq!(self.hdr.command, Command::Write);
        let b = &self.raw[HEADER_LEN..];
        let off = u16_at(b, 2) as usize;
        let len = u32_at(b, 4) as usize;
        (u64_at(b, 8), self.raw.slice(off..off + len))
    }

    /// The security buffer of a SESSION_SETUP request.
    pub fn session_token(&self) -> Bytes {
        assert_eq!(self.hdr.command, Command::SessionSetup);
        let b = &self.raw[HEADER_LEN..];
        let off = u16_at(b, 12) as usize;
        let len = u16_at(b, 14) as usize;
        self.raw.slice(off..off + len)
    }
}

/// Appends the 64 header bytes and `body`.
pub fn build(h: &Header, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::with_capacity(HEADER_LEN + body.len());
    h.encode(&mut b);
    b.extend_from_slice(body);
    b.to_vec()
}

/// ERROR response body (MS-SMB2 2.2.2), also used by interim responses.
pub fn error_body() -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.push(0);
    b
}

/// READ response body with the data right after the fixed part.
pub fn read_body(data: &[u8]) -> Vec<u8> {
    read_body_raw(80, data.len() as u32, data)
}

/// READ response body with explicit DataOffset and DataLength fields, for
/// lying responses.
pub fn read_body_raw(data_offset: u8, data_length: u32, data: &[u8]) -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&17u16.to_le_bytes());
    b.push(data_offset);
    b.push(0);
    b.extend_from_slice(&data_length.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // DataRemaining
    b.extend_from_slice(&0u32.to_le_bytes()); // Reserved2
    b.extend_from_slice(data);
    b
}

/// WRITE response body reporting `count` bytes written.
pub fn write_body(count: u32) -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&17u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // Remaining
    b.extend_from_slice(&0u16.to_le_bytes()); // WriteChannelInfoOffset
    b.extend_from_slice(&0u16.to_le_bytes()); // WriteChannelInfoLength
    b
}

/// Fixed file times used by CREATE and CLOSE responses.
pub const TIME: u64 = 133_000_000_000_000_000;

/// CREATE response body for a file of `eof` bytes with [`FILE_ID`].
pub fn create_body(eof: u64) -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&89u16.to_le_bytes());
    b.extend_from_slice(&[0, 0]); // OplockLevel, Flags
    b.extend_from_slice(&1u32.to_le_bytes()); // FILE_OPENED
    for _ in 0..4 {
        b.extend_from_slice(&TIME.to_le_bytes());
    }
    b.extend_from_slice(&eof.next_multiple_of(4096).to_le_bytes());
    b.extend_from_slice(&eof.to_le_bytes());
    b.extend_from_slice(&0x80u32.to_le_bytes()); // NORMAL
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&FILE_ID.persistent.to_le_bytes());
    b.extend_from_slice(&FILE_ID.volatile.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // CreateContextsOffset
    b.extend_from_slice(&0u32.to_le_bytes()); // CreateContextsLength
    b
}

/// CLOSE response body with post-query attributes of a file of `eof` bytes.
pub fn close_body(eof: u64) -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&60u16.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for _ in 0..4 {
        b.extend_from_slice(&TIME.to_le_bytes());
    }
    b.extend_from_slice(&eof.next_multiple_of(4096).to_le_bytes());
    b.extend_from_slice(&eof.to_le_bytes());
    b.extend_from_slice(&0x80u32.to_le_bytes());
    b
}

fn session_setup_body(session_flags: u16, token: &[u8]) -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&session_flags.to_le_bytes());
    b.extend_from_slice(&((HEADER_LEN + 8) as u16).to_le_bytes());
    b.extend_from_slice(&(token.len() as u16).to_le_bytes());
    b.extend_from_slice(token);
    b
}

fn tree_connect_body() -> Vec<u8> {
    let mut b = vec![];
    b.extend_from_slice(&16u16.to_le_bytes());
    b.extend_from_slice(&[1, 0]); // disk share
    b.extend_from_slice(&0u32.to_le_bytes()); // ShareFlags
    b.extend_from_slice(&0u32.to_le_bytes()); // Capabilities
    b.extend_from_slice(&0x001f_01ffu32.to_le_bytes()); // MaximalAccess
    b
}

/// The connection to one client, after the handshake.
pub struct FakeConn {
    /// The socket (tests may mangle it, e.g. SO_LINGER 0).
    pub stream: TcpStream,
    opts: Opts,
    signer: Option<Signer>,
    /// Responses are signed and requests must be.
    sign: bool,
    /// Credits granted so far (the window is `0 .. 1 + granted`).
    pub granted: u64,
    seen: HashSet<u64>,
    outstanding: HashSet<u64>,
    /// Largest number of requests awaiting a final response at once.
    pub max_outstanding: usize,
    /// One past the highest MessageId used so far.
    pub highest_end: u64,
    preauth: Option<PreauthHash>,
}

impl FakeConn {
    fn new(stream: TcpStream, opts: Opts) -> FakeConn {
        FakeConn {
            stream,
            opts,
            signer: None,
            sign: false,
            granted: 0,
            seen: HashSet::new(),
            outstanding: HashSet::new(),
            max_outstanding: 0,
            highest_end: 0,
            preauth: None,
        }
    }

    /// One past the highest MessageId the client may use right now.
    pub fn window_end(&self) -> u64 {
        1 + self.granted
    }

    /// Turns signing of responses on or off (to send unsigned ones on a
    /// signed session).
    pub fn set_signing(&mut self, on: bool) {
        self.sign = on;
    }

    /// Requests received and not yet finally answered.
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// Reads one frame and splits it into its messages; `None` once the
    /// client closed (or reset) the connection.
    pub async fn recv(&mut self) -> Option<Vec<Msg>> {
        let mut hdr = [0u8; 4];
        if self.stream.read_exact(&mut hdr).await.is_err() {
            return None;
        }
        assert_eq!(hdr[0], 0, "client sent a bad transport header");
        let len = u32::from_be_bytes(hdr) as usize;
        let mut buf = vec![0u8; len];
        if self.stream.read_exact(&mut buf).await.is_err() {
            return None;
        }
        let frame = Bytes::from(buf);
        let mut out = Vec::new();
        for raw in split_compound(&frame).expect("client sent a malformed compound") {
            let hdr = Header::decode(&raw).expect("client sent a bad header");
            assert!(!hdr.is_response(), "client sent a response");
            self.account(&hdr);
            if let Some(signer) = &self.signer {
                if hdr.flags & flags::SIGNED != 0 {
                    let mut copy = raw.to_vec();
                    assert!(signer.verify(&mut copy), "bad signature on client {:?}", hdr.command);
                } else {
                    assert!(!self.sign, "unsigned {:?} request on a signed session", hdr.command);
                }
            }
            out.push(Msg { hdr, raw });
        }
        Some(out)
    }

    /// Checks MessageId reuse and the credit window.
    fn account(&mut self, h: &Header) {
        let charge = h.credit_charge.max(1) as u64;
        let end = h.message_id + charge;
        assert!(
            end <= self.window_end(),
            "credit overrun: {:?} MessageId {} charge {} but only {} credits were ever granted (window end {})",
            h.command,
            h.message_id,
            charge,
            self.granted,
            self.window_end()
        );
        for id in h.message_id..end {
            assert!(self.seen.insert(id), "MessageId {id} reused");
        }
        self.highest_end = self.highest_end.max(end);
        self.outstanding.insert(h.message_id);
        self.max_outstanding = self.max_outstanding.max(self.outstanding.len());
    }

    /// Reads one frame holding exactly one message.
    pub async fn recv_one(&mut self) -> Msg {
        let mut v = self.recv().await.expect("client closed the connection");
        assert_eq!(v.len(), 1, "expected a single message, got a compound of {}", v.len());
        v.pop().unwrap()
    }

    /// Reads one single-message frame and checks its command.
    pub async fn expect(&mut self, cmd: Command) -> Msg {
        let m = self.recv_one().await;
        assert_eq!(m.hdr.command, cmd, "expected {cmd:?}");
        m
    }

    /// Waits (up to 5 s) for the client to close the connection; fails if
    /// anything else arrives first.
    pub async fn expect_eof(&mut self) {
        match tokio::time::timeout(Duration::from_secs(5), self.recv()).await {
            Ok(None) => {}
            Ok(Some(m)) => panic!("expected the client to close the connection, got {:?}", m[0].hdr),
            Err(_) => panic!("the client did not close the connection within 5 s"),
        }
    }

    /// A sync response header for `req` with `status`, granting what
    /// [`Opts::grant`] says.
    pub fn header(&mut self, req: &Msg, status: NtStatus) -> Header {
        let credits = (self.opts.grant)(&req.hdr);
        Header {
            credit_charge: req.hdr.credit_charge,
            status,
            command: req.hdr.command,
            credits,
            flags: flags::SERVER_TO_REDIR,
            next_command: 0,
            message_id: req.hdr.message_id,
            async_id: None,
            tree_id: req.hdr.tree_id,
            session_id: req.hdr.session_id,
            signature: [0; 16],
        }
    }

    /// A response message for `req`.
    pub fn reply(&mut self, req: &Msg, status: NtStatus, body: &[u8]) -> Vec<u8> {
        let h = self.header(req, status);
        build(&h, body)
    }

    /// An interim STATUS_PENDING response (async form) granting `credits`.
    pub fn interim(&mut self, req: &Msg, async_id: u64, credits: u16) -> Vec<u8> {
        let mut h = self.header(req, NtStatus::STATUS_PENDING);
        h.async_id = Some(async_id);
        h.credits = credits;
        build(&h, &error_body())
    }

    /// The READ response for `req` served from `file`: the bytes asked for
    /// (fewer at the end), or STATUS_END_OF_FILE at or past the end.
    pub fn answer_read(&mut self, req: &Msg, file: &[u8]) -> Vec<u8> {
        let (off, len) = req.read_args();
        let off = off as usize;
        if off >= file.len() {
            return self.reply(req, NtStatus::STATUS_END_OF_FILE, &error_body());
        }
        let end = (off + len as usize).min(file.len());
        self.reply(req, NtStatus::STATUS_SUCCESS, &read_body(&file[off..end]))
    }

    /// Links `msgs` into one compound (8-byte aligned NextCommand), signs
    /// each message on a signed session, prepends the transport header, and
    /// records the credits granted and the requests answered.
    pub fn frame(&mut self, msgs: Vec<Vec<u8>>) -> Vec<u8> {
        let n = msgs.len();
        let mut body = Vec::new();
        for (i, mut m) in msgs.into_iter().enumerate() {
            if i + 1 < n {
                m.resize(m.len().next_multiple_of(8), 0);
                let len = m.len() as u32;
                m[20..24].copy_from_slice(&len.to_le_bytes());
            }
            let h = Header::decode(&m).expect("fake built a bad header");
            self.granted += h.credits as u64;
            let interim = h.status == NtStatus::STATUS_PENDING && h.async_id.is_some();
            if !interim {
                self.outstanding.remove(&h.message_id);
            }
            if self.sign && !interim {
                self.signer.as_ref().unwrap().sign(&mut m);
            }
            body.extend_from_slice(&m);
        }
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(&body);
        f
    }

    /// Sends `msgs` as one compound frame.
    pub async fn send(&mut self, msgs: Vec<Vec<u8>>) {
        let f = self.frame(msgs);
        self.write_raw(&f).await;
    }

    /// Sends one message in its own frame.
    pub async fn send_one(&mut self, msg: Vec<u8>) {
        self.send(vec![msg]).await;
    }

    /// Writes bytes as they are (ignoring a client that already left).
    pub async fn write_raw(&mut self, bytes: &[u8]) {
        let _ = self.stream.write_all(bytes).await;
        let _ = self.stream.flush().await;
    }

    /// Answers one CREATE with a file of `eof` bytes.
    pub async fn answer_create(&mut self, eof: u64) {
        let c = self.expect(Command::Create).await;
        let m = self.reply(&c, NtStatus::STATUS_SUCCESS, &create_body(eof));
        self.send_one(m).await;
    }

    /// Answers one CLOSE.
    pub async fn answer_close(&mut self, eof: u64) {
        let c = self.expect(Command::Close).await;
        let m = self.reply(&c, NtStatus::STATUS_SUCCESS, &close_body(eof));
        self.send_one(m).await;
    }

    fn hash(&mut self, msg: &[u8]) {
        if let Some(p) = &mut self.preauth {
            p.update(msg);
        }
    }

    /// NEGOTIATE, SESSION_SETUP x2 and TREE_CONNECT.
    async fn handshake(&mut self) {
        let is_311 = self.opts.dialect == dialect::SMB311;
        if is_311 {
            self.preauth = Some(PreauthHash::new());
        }

        // NEGOTIATE
        let neg = self.expect(Command::Negotiate).await;
        let body = &neg.raw[HEADER_LEN..];
        let count = u16_at(body, 2) as usize;
        let offered: Vec<u16> = (0..count).map(|i| u16_at(body, 36 + 2 * i)).collect();
        assert!(offered.contains(&self.opts.dialect), "client offered {offered:x?}");
        self.hash(&neg.raw.clone());
        let resp = self.reply(&neg, NtStatus::STATUS_SUCCESS, &self.negotiate_body());
        self.hash(&resp.clone());
        self.send_one(resp).await;

        // SESSION_SETUP 1: the CHALLENGE.
        let ss1 = self.expect(Command::SessionSetup).await;
        assert_eq!(ss1.hdr.session_id, 0);
        self.hash(&ss1.raw.clone());
        let challenge = unhex(match self.opts.auth {
            Auth::Guest => CHALLENGE_KEY_EXCH,
            Auth::User => CHALLENGE_NO_KEY_EXCH,
        });
        let token = NegTokenResp {
            neg_state: Some(NegState::AcceptIncomplete),
            supported_mech: Some(NTLMSSP_OID.to_vec()),
            response_token: Some(challenge.clone()),
            mech_list_mic: None,
        }
        .encode();
        let mut h = self.header(&ss1, NtStatus::STATUS_MORE_PROCESSING_REQUIRED);
        h.session_id = SESSION_ID;
        let resp = build(&h, &session_setup_body(0, &token));
        self.hash(&resp.clone());
        self.send_one(resp).await;

        // SESSION_SETUP 2: the AUTHENTICATE.
        let ss2 = self.expect(Command::SessionSetup).await;
        assert_eq!(ss2.hdr.session_id, SESSION_ID);
        self.hash(&ss2.raw.clone());
        let token = NegTokenResp { neg_state: Some(NegState::AcceptCompleted), ..NegTokenResp::default() }.encode();
        let mut h = self.header(&ss2, NtStatus::STATUS_SUCCESS);
        h.session_id = SESSION_ID;
        match self.opts.auth {
            Auth::Guest => {
                let resp = build(&h, &session_setup_body(smb_proto::session::session_flags::IS_GUEST, &token));
                self.send_one(resp).await;
            }
            Auth::User => {
                let key = mirror_session_key(&ss2.session_token(), &challenge);
                let preauth = self.preauth.take().unwrap_or_default();
                let keys = derive_keys(&key, self.opts.dialect, &preauth, None);
                let alg = if is_311 { self.opts.signing_alg } else { SigningAlgorithm::AesCmac };
                let signer = Signer::new(alg, &keys.signing);
                let mut resp = build(&h, &session_setup_body(0, &token));
                // The final SESSION_SETUP response is signed (3.1.1 always).
                signer.sign(&mut resp);
                self.signer = Some(signer);
                self.send_one(resp).await;
                self.sign = self.opts.signing_required;
            }
        }

        // TREE_CONNECT
        let tc = self.expect(Command::TreeConnect).await;
        assert_eq!(tc.hdr.session_id, SESSION_ID);
        if self.signer.is_some() {
            assert!(tc.hdr.flags & flags::SIGNED != 0, "TREE_CONNECT must be signed");
        }
        let mut h = self.header(&tc, NtStatus::STATUS_SUCCESS);
        h.tree_id = TREE_ID;
        let resp = build(&h, &tree_connect_body());
        // Servers sign the answer to a signed request, whatever the
        // session's signing setting (MS-SMB2 3.3.4.1.1).
        let was = self.sign;
        self.sign = self.signer.is_some() && !self.opts.unsigned_tree_connect;
        self.send_one(resp).await;
        self.sign = was;

        // 3.0.x with a key: the client validates the NEGOTIATE with a signed
        // FSCTL_VALIDATE_NEGOTIATE_INFO (MS-SMB2 3.2.5.14.12).
        if !is_311 && self.signer.is_some() {
            let v = self.expect(Command::Ioctl).await;
            assert!(v.hdr.flags & flags::SIGNED != 0, "VALIDATE_NEGOTIATE_INFO must be signed");
            let mut out = Vec::new();
            out.extend_from_slice(&capabilities::LARGE_MTU.to_le_bytes());
            out.extend_from_slice(&[0x5a; 16]);
            out.extend_from_slice(&self.negotiate_security_mode().to_le_bytes());
            out.extend_from_slice(&self.opts.dialect.to_le_bytes());
            let was = self.sign;
            self.sign = true;
            let resp = self.reply(&v, NtStatus::STATUS_SUCCESS, &ioctl_body(&out));
            self.send_one(resp).await;
            self.sign = was;
        }
    }

    fn negotiate_security_mode(&self) -> u16 {
        let mut sec = security_mode::SIGNING_ENABLED;
        if self.opts.signing_required {
            sec |= security_mode::SIGNING_REQUIRED;
        }
        sec
    }

    fn negotiate_body(&self) -> Vec<u8> {
        let is_311 = self.opts.dialect == dialect::SMB311;
        let mut b = vec![];
        b.extend_from_slice(&65u16.to_le_bytes());
        b.extend_from_slice(&self.negotiate_security_mode().to_le_bytes());
        b.extend_from_slice(&self.opts.dialect.to_le_bytes());
        b.extend_from_slice(&(if is_311 { 2u16 } else { 0 }).to_le_bytes());
        b.extend_from_slice(&[0x5a; 16]); // ServerGuid
        b.extend_from_slice(&capabilities::LARGE_MTU.to_le_bytes());
        b.extend_from_slice(&self.opts.max_transact.to_le_bytes());
        b.extend_from_slice(&self.opts.max_read.to_le_bytes());
        b.extend_from_slice(&self.opts.max_write.to_le_bytes());
        b.extend_from_slice(&TIME.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&128u16.to_le_bytes()); // SecurityBufferOffset
        b.extend_from_slice(&0u16.to_le_bytes()); // SecurityBufferLength
        b.extend_from_slice(&(if is_311 { 128u32 } else { 0 }).to_le_bytes());
        assert_eq!(HEADER_LEN + b.len(), 128);
        if is_311 {
            // SMB2_PREAUTH_INTEGRITY_CAPABILITIES: SHA-512 with a salt.
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&38u16.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&32u16.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&[0x33; 32]);
            b.resize((b.len() + HEADER_LEN).next_multiple_of(8) - HEADER_LEN, 0);
            // SMB2_SIGNING_CAPABILITIES
            b.extend_from_slice(&8u16.to_le_bytes());
            b.extend_from_slice(&4u16.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
            b.extend_from_slice(&1u16.to_le_bytes());
            b.extend_from_slice(&(self.opts.signing_alg as u16).to_le_bytes());
        }
        b
    }
}

/// A QUERY_INFO or QUERY_DIRECTORY response body (MS-SMB2 2.2.38,
/// 2.2.34: the same layout) carrying `output`.
pub fn output_body(output: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&9u16.to_le_bytes());
    b.extend_from_slice(&((HEADER_LEN + 8) as u16).to_le_bytes()); // OutputBufferOffset
    b.extend_from_slice(&(output.len() as u32).to_le_bytes());
    b.extend_from_slice(output);
    b
}

/// An IOCTL response body (MS-SMB2 2.2.32) carrying `output`.
pub fn ioctl_body(output: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&smb_proto::ioctl::FSCTL_VALIDATE_NEGOTIATE_INFO.to_le_bytes());
    b.extend_from_slice(&[0xff; 16]); // FileId
    b.extend_from_slice(&((HEADER_LEN + 48) as u32).to_le_bytes()); // InputOffset
    b.extend_from_slice(&0u32.to_le_bytes()); // InputCount
    b.extend_from_slice(&((HEADER_LEN + 48) as u32).to_le_bytes()); // OutputOffset
    b.extend_from_slice(&(output.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // Flags
    b.extend_from_slice(&0u32.to_le_bytes()); // Reserved2
    b.extend_from_slice(output);
    b
}

/// Recomputes the client's NTLMv2 session key from its SESSION_SETUP token:
/// a mirror client with the same credentials, client challenge and
/// timestamp must produce the very same AUTHENTICATE (so this also checks
/// the password), and then holds the same SessionBaseKey.
fn mirror_session_key(token: &[u8], challenge: &[u8]) -> [u8; 16] {
    let resp = NegTokenResp::decode(token).expect("client AUTHENTICATE token");
    let auth = resp.response_token.clone().expect("responseToken");
    assert_eq!(&auth[..8], b"NTLMSSP\0");
    let nt_len = u16_at(&auth, 20) as usize;
    let nt_off = u32_at(&auth, 24) as usize;
    let nt = &auth[nt_off..nt_off + nt_len];
    let blob = &nt[16..];
    let timestamp = u64_at(blob, 8);
    let client_challenge: [u8; 8] = blob[16..24].try_into().unwrap();
    let mut mirror = NtlmClient::new(
        NtlmCredentials::new(USER, "", PASSWORD),
        NtlmOptions { client_challenge: Some(client_challenge), timestamp: Some(timestamp), ..NtlmOptions::default() },
    );
    mirror.initial_token();
    let server_token = NegTokenResp {
        neg_state: Some(NegState::AcceptIncomplete),
        supported_mech: Some(NTLMSSP_OID.to_vec()),
        response_token: Some(challenge.to_vec()),
        mech_list_mic: None,
    }
    .encode();
    let expected = mirror.step(&server_token).expect("mirror step");
    assert_eq!(hex::encode(&expected), hex::encode(token), "AUTHENTICATE differs: wrong user or password?");
    mirror.session_key().expect("session key")
}

/// Starts a fake on 127.0.0.1 that accepts one connection, runs the
/// handshake, then `script`. Returns the address and the script's handle.
pub async fn start<F, Fut, T>(opts: Opts, script: F) -> (String, JoinHandle<T>)
where
    F: FnOnce(FakeConn) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        s.set_nodelay(true).unwrap();
        let mut fc = FakeConn::new(s, opts);
        fc.handshake().await;
        script(fc).await
    });
    (addr, h)
}

/// Waits for the fake's script, re-raising its panic (a failed check)
/// in the test.
pub async fn join<T>(h: JoinHandle<T>) -> T {
    match tokio::time::timeout(Duration::from_secs(10), h).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Ok(Err(e)) => panic!("fake server task failed: {e}"),
        Err(_) => panic!("fake server script did not finish within 10 s"),
    }
}

/// An anonymous client config for the fake at `addr` with
/// `request_timeout` (the fake's [`Auth::Guest`] sessions: a client that
/// gave credentials refuses a guest session).
pub fn config(addr: &str, request_timeout: Duration) -> ClientConfig {
    let mut c = ClientConfig::new(addr, "", "");
    c.connection.connect_timeout = Duration::from_secs(2);
    c.connection.request_timeout = request_timeout;
    c
}

/// Like [`config`], as [`USER`] (the fake's [`Auth::User`] sessions).
pub fn user_config(addr: &str, request_timeout: Duration) -> ClientConfig {
    ClientConfig { user: USER.into(), password: PASSWORD.into(), ..config(addr, request_timeout) }
}
