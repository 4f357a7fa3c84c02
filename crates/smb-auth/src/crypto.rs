//! The NTLM cryptographic primitives (MS-NLMP 3.3.2, 3.4): NTOWFv2, the
//! NTLMv2 response, RC4 for key exchange, and the extended-session-security
//! signing used for the SPNEGO mechListMIC. RC4 is a dozen lines, so it is
//! written out here rather than pulled in as a dependency.

use hmac::{Hmac, Mac};
use md4::Md4;
use md5::{Digest, Md5};

/// HMAC-MD5 over the concatenation of `parts`.
pub(crate) fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Md5> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

fn md5(parts: &[&[u8]]) -> [u8; 16] {
    let mut h = Md5::new();
    for part in parts {
        h.update(part);
    }
    h.finalize().into()
}

/// UTF-16LE without a terminator, as NTLM encodes strings with UNICODE set.
pub(crate) fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Upper-cases one character at a time, keeping characters whose upper case
/// is longer than one character (e.g. 'ß'), as Windows' RtlUpcaseUnicodeString
/// does.
fn upcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

/// NTOWFv2 (MS-NLMP 3.3.2): HMAC-MD5(MD4(UTF16(password)), UTF16(UPPER(user) || domain)).
/// It is both ResponseKeyNT and ResponseKeyLM.
pub(crate) fn ntowfv2(user: &str, domain: &str, password: &str) -> [u8; 16] {
    let nt_hash: [u8; 16] = Md4::digest(utf16le(password)).into();
    hmac_md5(&nt_hash, &[&utf16le(&upcase(user)), &utf16le(domain)])
}

/// The NTLMv2 responses and key for one challenge (MS-NLMP 3.3.2).
pub(crate) struct V2Response {
    /// NTProofStr || temp.
    pub nt_response: Vec<u8>,
    /// LMv2: HMAC-MD5(key, ServerChallenge || ClientChallenge) || ClientChallenge.
    pub lm_response: [u8; 24],
    /// HMAC-MD5(ResponseKeyNT, NTProofStr); also the KeyExchangeKey for NTLMv2.
    pub session_base_key: [u8; 16],
}

/// ComputeResponse for NTLMv2, where `target_info` is the AV_PAIR list the
/// client puts in its blob (ServerName), EOL included.
pub(crate) fn ntlmv2_response(
    response_key: &[u8; 16],
    server_challenge: &[u8; 8],
    client_challenge: &[u8; 8],
    timestamp: u64,
    target_info: &[u8],
) -> V2Response {
    let mut temp = Vec::with_capacity(32 + target_info.len());
    temp.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]); // Responserversion, HiResponserversion, Z(6)
    temp.extend_from_slice(&timestamp.to_le_bytes());
    temp.extend_from_slice(client_challenge);
    temp.extend_from_slice(&[0; 4]);
    temp.extend_from_slice(target_info);
    temp.extend_from_slice(&[0; 4]);
    let proof = hmac_md5(response_key, &[server_challenge, &temp]);
    let mut lm_response = [0; 24];
    lm_response[..16].copy_from_slice(&hmac_md5(response_key, &[server_challenge, client_challenge]));
    lm_response[16..].copy_from_slice(client_challenge);
    V2Response {
        nt_response: [&proof[..], &temp].concat(),
        lm_response,
        session_base_key: hmac_md5(response_key, &[&proof]),
    }
}

/// RC4 (ARCFOUR) keystream state, as NTLM's RC4Init/RC4 use it.
pub(crate) struct Rc4 {
    s: [u8; 256],
    i: u8,
    j: u8,
}

impl Rc4 {
    /// Key schedule. `key` must not be empty (NTLM keys are 5, 7 or 16 bytes).
    pub(crate) fn new(key: &[u8]) -> Self {
        let mut s = [0u8; 256];
        for (i, v) in s.iter_mut().enumerate() {
            *v = i as u8;
        }
        let mut j = 0u8;
        for i in 0..256 {
            j = j.wrapping_add(s[i]).wrapping_add(key[i % key.len()]);
            s.swap(i, usize::from(j));
        }
        Self { s, i: 0, j: 0 }
    }

    /// XORs the next keystream bytes into `data`.
    pub(crate) fn apply(&mut self, data: &mut [u8]) {
        for byte in data {
            self.i = self.i.wrapping_add(1);
            self.j = self.j.wrapping_add(self.s[usize::from(self.i)]);
            self.s.swap(usize::from(self.i), usize::from(self.j));
            let k = self.s[usize::from(self.s[usize::from(self.i)].wrapping_add(self.s[usize::from(self.j)]))];
            *byte ^= k;
        }
    }
}

/// Direction of a signing or sealing key (MS-NLMP 3.4.5.2, 3.4.5.3).
#[derive(Clone, Copy)]
pub(crate) enum Direction {
    ClientToServer,
    ServerToClient,
}

/// SIGNKEY with extended session security (MS-NLMP 3.4.5.2).
pub(crate) fn sign_key(exported: &[u8; 16], dir: Direction) -> [u8; 16] {
    let magic: &[u8] = match dir {
        Direction::ClientToServer => b"session key to client-to-server signing key magic constant\0",
        Direction::ServerToClient => b"session key to server-to-client signing key magic constant\0",
    };
    md5(&[exported, magic])
}

/// SEALKEY with extended session security (MS-NLMP 3.4.5.3): the exported
/// key is first cut to 16, 7 or 5 bytes by the 128/56 flags.
pub(crate) fn seal_key(exported: &[u8; 16], flags: u32, dir: Direction) -> [u8; 16] {
    use crate::flags::{NEGOTIATE_128, NEGOTIATE_56};
    let len = if flags & NEGOTIATE_128 != 0 {
        16
    } else if flags & NEGOTIATE_56 != 0 {
        7
    } else {
        5
    };
    let magic: &[u8] = match dir {
        Direction::ClientToServer => b"session key to client-to-server sealing key magic constant\0",
        Direction::ServerToClient => b"session key to server-to-client sealing key magic constant\0",
    };
    md5(&[&exported[..len], magic])
}

/// The NTLMSSP_MESSAGE_SIGNATURE of `msg` with extended session security
/// (MS-NLMP 3.4.4.2): Version 1, the first 8 bytes of
/// HMAC-MD5(SigningKey, SeqNum || msg), RC4-sealed when key exchange was
/// negotiated, then SeqNum.
pub(crate) fn mac(sign_key: &[u8; 16], seal: Option<&mut Rc4>, seq: u32, msg: &[u8]) -> [u8; 16] {
    let mut checksum = [0u8; 8];
    checksum.copy_from_slice(&hmac_md5(sign_key, &[&seq.to_le_bytes(), msg])[..8]);
    if let Some(rc4) = seal {
        rc4.apply(&mut checksum);
    }
    let mut out = [0u8; 16];
    out[..4].copy_from_slice(&1u32.to_le_bytes());
    out[4..12].copy_from_slice(&checksum);
    out[12..].copy_from_slice(&seq.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags;
    use crate::vectors::{hex, TARGET_INFO};

    #[test]
    fn ms_nlmp_4_2_4_ntlmv2_vectors() {
        let key = ntowfv2("User", "Domain", "Password");
        assert_eq!(key.to_vec(), hex("0c868a403bfd7a93a3001ef22ef02e3f")); // 4.2.4.1.1
        let r =
            ntlmv2_response(&key, &[0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef], &[0xaa; 8], 0, &hex(TARGET_INFO));
        // 4.2.4.2.1 LMv2 response
        assert_eq!(r.lm_response.to_vec(), hex("86c35097ac9cec102554764a57cccc19 aaaaaaaaaaaaaaaa"));
        // 4.2.4.2.2 NTProofStr || temp
        let expected_nt = format!(
            "68cd0ab851e51c96aabc927bebef6a1c 0101000000000000 0000000000000000 \
             aaaaaaaaaaaaaaaa 00000000 {TARGET_INFO} 00000000"
        );
        assert_eq!(r.nt_response, hex(&expected_nt));
        // 4.2.4.1.2 / 4.2.4.2.2 SessionBaseKey
        assert_eq!(r.session_base_key.to_vec(), hex("8de40ccadbc14a82f15cb0ad0de95ca3"));
        // 4.2.4.2.3 EncryptedRandomSessionKey = RC4(KeyExchangeKey, 0x55 * 16)
        let mut session_key = [0x55u8; 16];
        Rc4::new(&r.session_base_key).apply(&mut session_key);
        assert_eq!(session_key.to_vec(), hex("c5dad2544fc9799094ce1ce90bc9d03e"));
    }

    #[test]
    fn ms_nlmp_4_2_4_signing_vectors() {
        let exported = [0x55u8; 16];
        let flags = flags::NEGOTIATE_128 | flags::NEGOTIATE_56 | flags::KEY_EXCH;
        let sign = sign_key(&exported, Direction::ClientToServer);
        let seal = seal_key(&exported, flags, Direction::ClientToServer);
        assert_eq!(sign.to_vec(), hex("4788dc861b4782f35d43fd98fe1a2d39"));
        assert_eq!(seal.to_vec(), hex("59f600973cc4960a25480a7c196e4c58"));
        // 4.2.4.4 GSS_WrapEx of "Plaintext": seal the data, then the checksum
        // with the same RC4 stream.
        let plaintext = utf16le("Plaintext");
        let mut sealed = plaintext.clone();
        let mut rc4 = Rc4::new(&seal);
        rc4.apply(&mut sealed);
        assert_eq!(sealed, hex("54e50165bf1936dc996020c1811b0f06fb5f"));
        let sig = mac(&sign, Some(&mut rc4), 0, &plaintext);
        assert_eq!(sig.to_vec(), hex("01000000 7fb38ec5c55d4976 00000000"));
        // Without key exchange the checksum is not sealed.
        let sig = mac(&sign, None, 0, &plaintext);
        assert_eq!(sig.to_vec(), hex("01000000 70352851f2564309 00000000"));
    }

    #[test]
    fn user_is_upcased_but_domain_is_not() {
        assert_eq!(ntowfv2("user", "Domain", "Password"), ntowfv2("USER", "Domain", "Password"));
        assert_ne!(ntowfv2("User", "domain", "Password"), ntowfv2("User", "Domain", "Password"));
        assert_eq!(upcase("straße"), "STRAßE");
    }
}
