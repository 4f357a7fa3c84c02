//! Whole-exchange tests for `NtlmClient`, driven with hand-built server tokens.

use super::*;
use crate::crypto::{hmac_md5, utf16le};
use crate::ntlm::Challenge;
use crate::vectors::{hex, AUTHENTICATE, CHALLENGE, VERSION};
use rand::{rngs::StdRng, Rng, SeedableRng};

const SERVER_CHALLENGE: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
/// NegotiateFlags of the MS-NLMP 4.2.4 CHALLENGE_MESSAGE.
const SPEC_FLAGS: u32 = 0xe28a_8233;
const TIMESTAMP: u64 = 0x01d9_0000_1234_5678;

/// A CHALLENGE_MESSAGE laid out like the MS-NLMP 4.2.4.3 one (TargetName
/// "Server", Version, then TargetInfo), with the given AV pairs.
fn challenge_msg(flags: u32, pairs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut info = Vec::new();
    for (id, value) in pairs.iter().chain([&(0u16, &[][..])]) {
        info.extend_from_slice(&id.to_le_bytes());
        info.extend_from_slice(&(value.len() as u16).to_le_bytes());
        info.extend_from_slice(value);
    }
    let name = utf16le("Server");
    let mut m = b"NTLMSSP\0".to_vec();
    m.extend_from_slice(&2u32.to_le_bytes());
    m.extend_from_slice(&[12, 0, 12, 0, 56, 0, 0, 0]);
    m.extend_from_slice(&flags.to_le_bytes());
    m.extend_from_slice(&SERVER_CHALLENGE);
    m.extend_from_slice(&[0; 8]);
    let (len, off) = (info.len() as u16, 56 + name.len() as u32);
    m.extend_from_slice(&len.to_le_bytes());
    m.extend_from_slice(&len.to_le_bytes());
    m.extend_from_slice(&off.to_le_bytes());
    m.extend_from_slice(&hex("060070170000000f"));
    m.extend_from_slice(&name);
    m.extend_from_slice(&info);
    m
}

fn spec_pairs() -> Vec<(u16, Vec<u8>)> {
    vec![(2, utf16le("Domain")), (1, utf16le("Server"))]
}

fn server_token(challenge: Vec<u8>) -> Vec<u8> {
    NegTokenResp {
        neg_state: Some(NegState::AcceptIncomplete),
        supported_mech: Some(NTLMSSP_OID.to_vec()),
        response_token: Some(challenge),
        mech_list_mic: None,
    }
    .encode()
}

fn spec_client() -> NtlmClient {
    let mut creds = NtlmCredentials::new("User", "Domain", "Password");
    creds.workstation = "COMPUTER".into();
    NtlmClient::new(
        creds,
        NtlmOptions {
            client_challenge: Some([0xaa; 8]),
            timestamp: Some(0),
            exported_session_key: Some([0x55; 16]),
            version: VERSION,
            ..NtlmOptions::default()
        },
    )
}

/// (length, offset) of the AUTHENTICATE payload field whose header is at `at`.
fn field(msg: &[u8], at: usize) -> &[u8] {
    let len = u16::from_le_bytes([msg[at], msg[at + 1]]) as usize;
    let off = u32::from_le_bytes(msg[at + 4..at + 8].try_into().unwrap()) as usize;
    &msg[off..off + len]
}

#[test]
fn ms_nlmp_4_2_4_exchange_through_spnego() {
    let mut client = spec_client();
    let init = NegTokenInit::decode(&client.initial_token()).unwrap();
    assert_eq!(init.mech_types, vec![NTLMSSP_OID.to_vec()]);
    let negotiate = hex("4e544c4d53535000 01000000 358288e2 0000000028000000 0000000028000000 0501280a0000000f");
    assert_eq!(init.mech_token.as_deref(), Some(&negotiate[..]));

    let spec_challenge = hex(CHALLENGE);
    let pairs = spec_pairs();
    let pairs: Vec<_> = pairs.iter().map(|(id, v)| (*id, &v[..])).collect();
    assert_eq!(challenge_msg(SPEC_FLAGS, &pairs), spec_challenge);

    let reply = NegTokenResp::decode(&client.step(&server_token(spec_challenge)).unwrap()).unwrap();
    // MS-NLMP 4.2.4.3 AUTHENTICATE_MESSAGE, byte for byte.
    let expected = hex(AUTHENTICATE);
    assert_eq!(reply.response_token, Some(expected));
    assert_eq!((reply.neg_state, reply.mech_list_mic), (None, None));
    assert_eq!(client.session_key(), Some([0x55; 16]));
    assert_eq!(client.negotiated_flags(), 0xe288_8235);

    let done = NegTokenResp { neg_state: Some(NegState::AcceptCompleted), ..Default::default() };
    assert_eq!(client.finish(&done.encode()), Ok(()));
    assert_eq!(client.session_key(), Some([0x55; 16]));
}

#[test]
fn server_timestamp_brings_mic_and_mech_list_mic() {
    let mut pairs = spec_pairs();
    pairs.push((7, TIMESTAMP.to_le_bytes().to_vec()));
    let pairs: Vec<_> = pairs.iter().map(|(id, v)| (*id, &v[..])).collect();
    let challenge = challenge_msg(SPEC_FLAGS, &pairs);

    let mut client = spec_client();
    let negotiate = NegTokenInit::decode(&client.initial_token()).unwrap().mech_token.unwrap();
    let reply = NegTokenResp::decode(&client.step(&server_token(challenge.clone())).unwrap()).unwrap();
    let msg = reply.response_token.unwrap();

    // Payload starts after the 16-byte MIC field.
    assert_eq!(&msg[32..36], &88u32.to_le_bytes(), "DomainName offset");
    assert_eq!(field(&msg, 12), &[0; 24], "LmChallengeResponse is Z(24)");
    let nt = field(&msg, 20);
    assert_eq!(&nt[24..32], &TIMESTAMP.to_le_bytes(), "server time in the blob");
    let blob_pairs = &nt[44..]; // after NTProofStr and the 28-byte blob header
    let want_pairs =
        hex("02000c0044006f006d00610069006e00 01000c00530065007200760065007200 0700080078563412 0000d901 \
         0600040002000000 00000000 00000000");
    assert_eq!(blob_pairs, &want_pairs[..], "MsvAvFlags = MIC present, before EOL");

    let mut zeroed = msg.clone();
    zeroed[72..88].fill(0);
    let mic = hmac_md5(&[0x55; 16], &[&negotiate, &challenge, &zeroed]);
    assert_eq!(&msg[72..88], &mic, "MIC over NEGOTIATE || CHALLENGE || AUTHENTICATE");

    // mechListMIC: NTLM signature of the DER MechTypeList, sealed under key
    // exchange, sequence 0 (RFC 4178 5).
    let list = hex("300c060a2b06010401823702020a");
    let sig = |dir| {
        let mut rc4 = Rc4::new(&seal_key(&[0x55; 16], 0xe288_8235, dir));
        mac(&sign_key(&[0x55; 16], dir), Some(&mut rc4), 0, &list).to_vec()
    };
    assert_eq!(reply.mech_list_mic, Some(sig(Direction::ClientToServer)));

    let mut done = NegTokenResp {
        neg_state: Some(NegState::AcceptCompleted),
        mech_list_mic: Some(sig(Direction::ServerToClient)),
        ..Default::default()
    };
    let mut late = spec_client();
    late.initial_token();
    late.step(&server_token(challenge)).unwrap();
    assert_eq!(client.finish(&done.encode()), Ok(()));
    done.mech_list_mic = Some(sig(Direction::ClientToServer));
    assert_eq!(late.finish(&done.encode()), Err(AuthError::MicMismatch));
}

#[test]
fn anonymous_sends_empty_responses_and_has_no_key() {
    let mut client = NtlmClient::new(NtlmCredentials::anonymous(), NtlmOptions::default());
    assert!(client.is_anonymous());
    client.initial_token();
    let mut pairs = spec_pairs();
    pairs.push((7, TIMESTAMP.to_le_bytes().to_vec()));
    let pairs: Vec<_> = pairs.iter().map(|(id, v)| (*id, &v[..])).collect();
    let reply = NegTokenResp::decode(&client.step(&server_token(challenge_msg(SPEC_FLAGS, &pairs))).unwrap()).unwrap();
    let msg = reply.response_token.unwrap();
    assert_eq!(msg.len(), 73, "72-byte header, no MIC, one LM byte");
    assert_eq!(field(&msg, 12), &[0], "LmChallengeResponse is Z(1)");
    assert!(field(&msg, 20).is_empty() && field(&msg, 52).is_empty() && field(&msg, 36).is_empty());
    let neg_flags = u32::from_le_bytes(msg[60..64].try_into().unwrap());
    assert_ne!(neg_flags & flags::ANONYMOUS, 0);
    assert_eq!(neg_flags & flags::KEY_EXCH, 0);
    assert_eq!(reply.mech_list_mic, None);
    assert_eq!(client.session_key(), None);
    assert_eq!(client.finish(&[]), Ok(()));
}

#[test]
fn default_options_draw_fresh_randomness() {
    let run = || {
        let mut c = NtlmClient::new(NtlmCredentials::new("u", "d", "p"), NtlmOptions::default());
        c.initial_token();
        let reply = c.step(&server_token(challenge_msg(SPEC_FLAGS, &[]))).unwrap();
        (reply, c.session_key().unwrap())
    };
    let (a, b) = (run(), run());
    assert_ne!(a.0, b.0);
    assert_ne!(a.1, b.1);
}

#[test]
fn refuses_bad_server_tokens_and_misuse() {
    let good = challenge_msg(SPEC_FLAGS, &[]);
    let step = |token: &[u8]| {
        let mut c = spec_client();
        c.initial_token();
        c.step(token)
    };
    let resp = |state, mech: &[u8], token: Option<Vec<u8>>| {
        NegTokenResp {
            neg_state: state,
            supported_mech: Some(mech.to_vec()),
            response_token: token,
            mech_list_mic: None,
        }
        .encode()
    };
    let kerberos = hex("2a864886f712010202");
    assert_eq!(step(&resp(Some(NegState::Reject), NTLMSSP_OID, None)), Err(AuthError::Rejected));
    assert_eq!(step(&resp(None, &kerberos, Some(good.clone()))), Err(AuthError::NotNtlm));
    assert_eq!(step(&resp(None, NTLMSSP_OID, None)), Err(AuthError::Missing("responseToken")));
    assert_eq!(
        step(&resp(Some(NegState::AcceptCompleted), NTLMSSP_OID, Some(good.clone()))),
        Err(AuthError::UnexpectedState(0))
    );
    assert_eq!(step(&server_token(challenge_msg(SPEC_FLAGS & !1, &[]))), Err(AuthError::Unsupported("UNICODE")));
    let mut negotiate_not_challenge = good.clone();
    negotiate_not_challenge[8] = 1;
    assert_eq!(step(&server_token(negotiate_not_challenge)), Err(AuthError::BadNtlm("not a CHALLENGE_MESSAGE")));
    let mut lying_info_len = good.clone();
    lying_info_len[40] = 0xff;
    assert_eq!(step(&server_token(lying_info_len)), Err(AuthError::Truncated("TargetInfo")));
    let mut lying_av_len = challenge_msg(SPEC_FLAGS, &[(1, b"ab")]);
    let n = lying_av_len.len();
    lying_av_len[n - 8] = 9; // AvLen of the only pair
    assert_eq!(step(&server_token(lying_av_len)), Err(AuthError::Truncated("AV_PAIR value")));
    let huge = vec![0u8; 65_500];
    assert_eq!(
        step(&server_token(challenge_msg(SPEC_FLAGS, &[(1, &huge)]))),
        Err(AuthError::TooLong("NtChallengeResponse"))
    );
    for cut in 0..48 {
        assert!(step(&server_token(good[..cut].to_vec())).is_err(), "cut at {cut}");
    }

    let mut c = spec_client();
    assert!(matches!(c.step(&server_token(good.clone())), Err(AuthError::OutOfOrder(_))));
    assert!(matches!(c.finish(&[]), Err(AuthError::OutOfOrder(_))));
    c.initial_token();
    assert!(c.step(&[0x30, 0x00]).is_err());
    assert!(matches!(c.step(&server_token(good)), Err(AuthError::OutOfOrder(_))), "spent after an error");

    let reject = NegTokenResp { neg_state: Some(NegState::Reject), ..Default::default() };
    assert_eq!(NtlmClient::parse_final(&reject.encode()), Err(AuthError::Rejected));
    let more = NegTokenResp { neg_state: Some(NegState::RequestMic), ..Default::default() };
    assert_eq!(NtlmClient::parse_final(&more.encode()), Err(AuthError::UnexpectedState(3)));
}

#[test]
fn random_and_mutated_input_never_panics() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut pairs = spec_pairs();
    pairs.push((7, TIMESTAMP.to_le_bytes().to_vec()));
    let pairs: Vec<_> = pairs.iter().map(|(id, v)| (*id, &v[..])).collect();
    let valid = server_token(challenge_msg(SPEC_FLAGS, &pairs));
    for i in 0..3000 {
        let input: Vec<u8> = if i % 2 == 0 {
            let len = rng.gen_range(0..160);
            (0..len).map(|_| rng.gen()).collect()
        } else {
            let mut v = valid.clone();
            for _ in 0..rng.gen_range(1..4) {
                let at = rng.gen_range(0..v.len());
                v[at] = rng.gen();
            }
            v.truncate(rng.gen_range(0..=v.len()));
            v
        };
        let _ = NegTokenInit::decode(&input);
        let _ = NegTokenResp::decode(&input);
        let _ = NtlmClient::parse_final(&input);
        let _ = Challenge::parse(&input);
        let mut c = spec_client();
        c.initial_token();
        let _ = c.step(&input);
        let _ = c.finish(&input);
    }
}
