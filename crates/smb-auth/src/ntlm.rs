//! NTLM messages (MS-NLMP 2.2.1): building NEGOTIATE, parsing CHALLENGE and
//! building the NTLMv2 AUTHENTICATE with key exchange and MIC. Only the
//! Unicode form and NTLMv2 responses are supported.

use crate::crypto::{hmac_md5, ntlmv2_response, ntowfv2, utf16le, Rc4};
use crate::flags;
use crate::reader::Reader;
use crate::AuthError;

const SIGNATURE: &[u8; 8] = b"NTLMSSP\0";
/// AvId values (MS-NLMP 2.2.2.1).
const AV_EOL: u16 = 0;
const AV_FLAGS: u16 = 6;
const AV_TIMESTAMP: u16 = 7;
const AV_TARGET_NAME: u16 = 9;
/// MsvAvFlags bit: the AUTHENTICATE message carries a MIC.
const AV_FLAG_MIC: u32 = 0x2;

/// NEGOTIATE_MESSAGE (MS-NLMP 2.2.1.1) with no domain or workstation
/// supplied: a 40-byte header whose payload offsets point at its end.
pub(crate) fn negotiate_message(flags: u32, version: &[u8; 8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(40);
    m.extend_from_slice(SIGNATURE);
    m.extend_from_slice(&1u32.to_le_bytes());
    m.extend_from_slice(&flags.to_le_bytes());
    for _ in 0..2 {
        // DomainNameFields, WorkstationFields: Len 0, MaxLen 0, Offset 40.
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&40u32.to_le_bytes());
    }
    m.extend_from_slice(version);
    m
}

/// The parts of a CHALLENGE_MESSAGE (MS-NLMP 2.2.1.2) the client uses.
#[derive(Debug)]
pub(crate) struct Challenge<'a> {
    pub flags: u32,
    pub server_challenge: [u8; 8],
    /// The AV_PAIRs before MsvAvEOL, each with its raw bytes.
    pub av_pairs: Vec<(u16, &'a [u8])>,
}

impl<'a> Challenge<'a> {
    pub(crate) fn parse(msg: &'a [u8]) -> Result<Self, AuthError> {
        let mut r = Reader::new(msg);
        if r.take(8, "CHALLENGE signature")? != SIGNATURE {
            return Err(AuthError::BadNtlm("signature"));
        }
        if r.u32_le("MessageType")? != 2 {
            return Err(AuthError::BadNtlm("not a CHALLENGE_MESSAGE"));
        }
        r.take(8, "TargetNameFields")?;
        let flags = r.u32_le("NegotiateFlags")?;
        let mut server_challenge = [0; 8];
        server_challenge.copy_from_slice(r.take(8, "ServerChallenge")?);
        r.take(8, "Reserved")?;
        let info_len = usize::from(r.u16_le("TargetInfoFields")?);
        r.u16_le("TargetInfoFields")?;
        let info_off = r.u32_le("TargetInfoFields")? as usize;
        let mut info = Reader::new(msg);
        info.take(info_off, "TargetInfo")?;
        let info = info.sub(info_len, "TargetInfo")?;
        Ok(Self { flags, server_challenge, av_pairs: parse_av_pairs(info)? })
    }

    fn timestamp(&self) -> Option<u64> {
        let (_, v) = self.av_pairs.iter().find(|(id, _)| *id == AV_TIMESTAMP)?;
        Some(u64::from_le_bytes((*v).try_into().ok()?))
    }
}

/// AV_PAIR list (MS-NLMP 2.2.2.1) up to MsvAvEOL or the end of the buffer.
fn parse_av_pairs(mut r: Reader<'_>) -> Result<Vec<(u16, &[u8])>, AuthError> {
    let mut pairs = Vec::new();
    while !r.is_empty() {
        let id = r.u16_le("AvId")?;
        let len = usize::from(r.u16_le("AvLen")?);
        let value = r.take(len, "AV_PAIR value")?;
        if id == AV_EOL {
            break;
        }
        pairs.push((id, value));
    }
    Ok(pairs)
}

fn push_av(out: &mut Vec<u8>, id: u16, value: &[u8]) -> Result<(), AuthError> {
    let len = u16::try_from(value.len()).map_err(|_| AuthError::TooLong("AV_PAIR"))?;
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(value);
    Ok(())
}

/// Everything the AUTHENTICATE message depends on besides the server's bytes.
pub(crate) struct AuthInputs<'a> {
    pub user: &'a str,
    pub domain: &'a str,
    pub password: &'a str,
    pub workstation: &'a str,
    pub anonymous: bool,
    /// The flags this client sent in NEGOTIATE.
    pub client_flags: u32,
    pub version: [u8; 8],
    pub client_challenge: [u8; 8],
    /// FILETIME used when the server sends no MsvAvTimestamp.
    pub timestamp: u64,
    /// The ExportedSessionKey to send under key exchange.
    pub random_session_key: [u8; 16],
    pub target_spn: Option<&'a str>,
}

/// The AUTHENTICATE_MESSAGE and what the session keeps from it.
pub(crate) struct Authenticate {
    pub message: Vec<u8>,
    /// The flags of the AUTHENTICATE message: what both sides agreed to.
    pub flags: u32,
    /// ExportedSessionKey (MS-NLMP 3.1.5.1.2); `None` when anonymous.
    pub session_key: Option<[u8; 16]>,
    /// Whether the message carries a MIC (and so SPNEGO needs a mechListMIC).
    pub has_mic: bool,
}

/// Builds the AUTHENTICATE_MESSAGE answering `challenge` (MS-NLMP 3.1.5.1.2,
/// 3.3.2). `negotiate` and `challenge_bytes` are the exact messages of the
/// exchange, which the MIC covers.
pub(crate) fn authenticate(
    inp: &AuthInputs<'_>,
    negotiate: &[u8],
    challenge_bytes: &[u8],
) -> Result<Authenticate, AuthError> {
    let challenge = Challenge::parse(challenge_bytes)?;
    if challenge.flags & flags::UNICODE == 0 {
        return Err(AuthError::Unsupported("UNICODE"));
    }
    let mut neg_flags = inp.client_flags & (challenge.flags | flags::REQUEST_TARGET);
    let (lm, nt, session_key, encrypted_key, has_mic);
    if inp.anonymous {
        // 3.3.2 special case: empty NtChallengeResponse, LmChallengeResponse
        // Z(1), and no session key to exchange.
        neg_flags = (neg_flags | flags::ANONYMOUS) & !flags::KEY_EXCH;
        (lm, nt, session_key, encrypted_key, has_mic) = (vec![0], vec![], None, vec![], false);
    } else {
        let server_time = challenge.timestamp();
        has_mic = server_time.is_some();
        let mut info = Vec::new();
        let mut av_flags = None;
        for &(id, value) in &challenge.av_pairs {
            match id {
                AV_FLAGS => av_flags = Some(value.try_into().map(u32::from_le_bytes).unwrap_or(0)),
                _ => push_av(&mut info, id, value)?,
            }
        }
        if has_mic {
            av_flags = Some(av_flags.unwrap_or(0) | AV_FLAG_MIC);
        }
        if let Some(f) = av_flags {
            push_av(&mut info, AV_FLAGS, &f.to_le_bytes())?;
        }
        if let Some(spn) = inp.target_spn {
            push_av(&mut info, AV_TARGET_NAME, &utf16le(spn))?;
        }
        push_av(&mut info, AV_EOL, &[])?;

        let key = ntowfv2(inp.user, inp.domain, inp.password);
        let time = server_time.unwrap_or(inp.timestamp);
        let r = ntlmv2_response(&key, &challenge.server_challenge, &inp.client_challenge, time, &info);
        // 3.1.5.1.2: with MsvAvTimestamp the client sends Z(24) as LM response.
        lm = if has_mic { vec![0; 24] } else { r.lm_response.to_vec() };
        nt = r.nt_response;
        // KXKEY for NTLMv2 is SessionBaseKey (3.4.5.1).
        if neg_flags & flags::KEY_EXCH != 0 {
            let mut enc = inp.random_session_key;
            Rc4::new(&r.session_base_key).apply(&mut enc);
            (session_key, encrypted_key) = (Some(inp.random_session_key), enc.to_vec());
        } else {
            (session_key, encrypted_key) = (Some(r.session_base_key), vec![]);
        }
    }

    // Header: 64 bytes of fixed fields, Version, then the MIC if present.
    let header_len = if has_mic { 88 } else { 72 };
    let mut m = vec![0u8; header_len];
    m[..8].copy_from_slice(SIGNATURE);
    m[8..12].copy_from_slice(&3u32.to_le_bytes());
    let fields: [(usize, &[u8], &'static str); 6] = [
        (28, &utf16le(inp.domain), "DomainName"),
        (36, &utf16le(inp.user), "UserName"),
        (44, &utf16le(inp.workstation), "Workstation"),
        (12, &lm, "LmChallengeResponse"),
        (20, &nt, "NtChallengeResponse"),
        (52, &encrypted_key, "EncryptedRandomSessionKey"),
    ];
    for (at, value, what) in fields {
        let len = u16::try_from(value.len()).map_err(|_| AuthError::TooLong(what))?;
        let offset = m.len() as u32;
        m[at..at + 2].copy_from_slice(&len.to_le_bytes());
        m[at + 2..at + 4].copy_from_slice(&len.to_le_bytes());
        m[at + 4..at + 8].copy_from_slice(&offset.to_le_bytes());
        m.extend_from_slice(value);
    }
    m[60..64].copy_from_slice(&neg_flags.to_le_bytes());
    if neg_flags & flags::VERSION != 0 {
        m[64..72].copy_from_slice(&inp.version);
    }
    if let (true, Some(key)) = (has_mic, session_key) {
        // 3.1.5.1.2: MIC over all three messages, with the MIC field zeroed.
        let mic = hmac_md5(&key, &[negotiate, challenge_bytes, &m]);
        m[72..88].copy_from_slice(&mic);
    }
    Ok(Authenticate { message: m, flags: neg_flags, session_key, has_mic })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::{hex, AUTHENTICATE, CHALLENGE, VERSION};

    fn spec_inputs() -> AuthInputs<'static> {
        AuthInputs {
            user: "User",
            domain: "Domain",
            password: "Password",
            workstation: "COMPUTER",
            anonymous: false,
            client_flags: flags::UNICODE
                | flags::REQUEST_TARGET
                | flags::SIGN
                | flags::SEAL
                | flags::NTLM
                | flags::ALWAYS_SIGN
                | flags::EXTENDED_SESSIONSECURITY
                | flags::TARGET_INFO
                | flags::VERSION
                | flags::NEGOTIATE_128
                | flags::KEY_EXCH
                | flags::NEGOTIATE_56,
            version: VERSION,
            client_challenge: [0xaa; 8],
            timestamp: 0,
            random_session_key: [0x55; 16],
            target_spn: None,
        }
    }

    #[test]
    fn ms_nlmp_4_2_4_3_authenticate_message() {
        let challenge = hex(CHALLENGE);
        let auth = authenticate(&spec_inputs(), &[], &challenge).unwrap();
        let expected = hex(AUTHENTICATE);
        assert_eq!(hex::encode(&auth.message), hex::encode(expected));
        assert_eq!(auth.session_key, Some([0x55; 16]));
        assert!(!auth.has_mic);
    }
}
