//! Signing, encryption and key derivation for SMB 3.x (MS-SMB2 3.1.4).
//!
//! aws-lc-rs provides HMAC-SHA256, AES-CMAC, AES-GCM (and GMAC as GCM with an
//! empty plaintext) and SHA-512; RustCrypto provides AES-CCM, which aws-lc-rs
//! lacks. Everything works in place on the caller's buffer.

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::{cmac, digest, hmac};
use ccm::aead::AeadInPlace;
use ccm::KeyInit;
use smb_proto::header::{flags, Command, SIGNATURE_RANGE};
use smb_proto::negotiate::{Cipher, SigningAlgorithm};
use smb_proto::transform::{AAD_RANGE, TAG_RANGE, TRANSFORM_HEADER_LEN};

type Aes128Ccm = ccm::Ccm<aes::Aes128, ccm::consts::U16, ccm::consts::U11>;
type Aes256Ccm = ccm::Ccm<aes::Aes256, ccm::consts::U16, ccm::consts::U11>;

/// SP800-108 KDF in counter mode with HMAC-SHA256, r = 32, as SMB 3.x uses
/// it (MS-SMB2 3.1.4.2). `label` and `context` include their NUL terminators
/// where the spec says so; `out.len()` is L/8 (16 or 32 bytes).
pub fn kdf(key: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&k);
    ctx.update(&1u32.to_be_bytes());
    ctx.update(label);
    ctx.update(&[0]);
    ctx.update(context);
    ctx.update(&((out.len() as u32) * 8).to_be_bytes());
    let tag = ctx.sign();
    out.copy_from_slice(&tag.as_ref()[..out.len()]);
}

/// The SMB 3.1.1 preauth integrity hash: SHA-512 chained over the NEGOTIATE
/// and SESSION_SETUP exchange (MS-SMB2 3.2.5.2, 3.2.5.3.1).
#[derive(Clone)]
pub struct PreauthHash(pub [u8; 64]);

impl PreauthHash {
    /// The all-zero starting value.
    pub fn new() -> Self {
        PreauthHash([0; 64])
    }
    /// hash = SHA-512(hash || message).
    pub fn update(&mut self, message: &[u8]) {
        let mut c = digest::Context::new(&digest::SHA512);
        c.update(&self.0);
        c.update(message);
        self.0.copy_from_slice(c.finish().as_ref());
    }
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

/// Session keys derived from the authentication's session key.
pub struct SessionKeys {
    /// Signing key (16 bytes).
    pub signing: [u8; 16],
    /// Client-to-server encryption key (16 or 32 bytes used).
    pub encryption: [u8; 32],
    /// Server-to-client decryption key.
    pub decryption: [u8; 32],
}

/// Derives signing and cipher keys for `dialect` (MS-SMB2 3.2.5.3.1) from
/// the key authentication gave (`full_key`: NTLM's 16 bytes, or Kerberos's
/// 16 or 32). Session.SessionKey is its first 16 bytes, zero-padded if
/// shorter; a 3.1.1 session with an AES-256 cipher derives its cipher keys
/// from the whole key (Session.FullSessionKey). For 3.1.1 `preauth` is the
/// hash up to and including the final SESSION_SETUP request; 3.0/3.0.2 use
/// fixed contexts instead.
pub fn derive_keys(full_key: &[u8], dialect: u16, preauth: &PreauthHash, cipher: Option<Cipher>) -> SessionKeys {
    let klen = cipher.map(|c| c.key_len()).unwrap_or(16);
    let mut session_key = [0u8; 16];
    let n = full_key.len().min(16);
    session_key[..n].copy_from_slice(&full_key[..n]);
    let mut keys = SessionKeys { signing: [0; 16], encryption: [0; 32], decryption: [0; 32] };
    if dialect == smb_proto::negotiate::dialect::SMB311 {
        let cipher_key: &[u8] = if klen == 32 { full_key } else { &session_key };
        kdf(&session_key, b"SMBSigningKey\0", &preauth.0, &mut keys.signing);
        kdf(cipher_key, b"SMBC2SCipherKey\0", &preauth.0, &mut keys.encryption[..klen]);
        kdf(cipher_key, b"SMBS2CCipherKey\0", &preauth.0, &mut keys.decryption[..klen]);
    } else {
        kdf(&session_key, b"SMB2AESCMAC\0", b"SmbSign\0", &mut keys.signing);
        kdf(&session_key, b"SMB2AESCCM\0", b"ServerIn \0", &mut keys.encryption[..klen]);
        kdf(&session_key, b"SMB2AESCCM\0", b"ServerOut\0", &mut keys.decryption[..klen]);
    }
    keys
}

/// Signs and verifies SMB2 messages with the negotiated algorithm.
pub enum Signer {
    /// HMAC-SHA256, truncated to 16 bytes (SMB 2.x).
    HmacSha256(Box<hmac::Key>),
    /// AES-128-CMAC (SMB 3.0, 3.0.2, and 3.1.1 without the signing context).
    AesCmac(cmac::Key),
    /// AES-128-GMAC (SMB 3.1.1 with SMB2_SIGNING_CAPABILITIES).
    AesGmac(LessSafeKey),
}

impl Signer {
    /// A signer for `algorithm` with a 16-byte signing key.
    pub fn new(algorithm: SigningAlgorithm, key: &[u8; 16]) -> Signer {
        match algorithm {
            SigningAlgorithm::HmacSha256 => Signer::HmacSha256(Box::new(hmac::Key::new(hmac::HMAC_SHA256, key))),
            SigningAlgorithm::AesCmac => Signer::AesCmac(cmac::Key::new(cmac::AES_128, key).expect("16-byte key")),
            SigningAlgorithm::AesGmac => {
                Signer::AesGmac(LessSafeKey::new(UnboundKey::new(&aead::AES_128_GCM, key).expect("16-byte key")))
            }
        }
    }

    fn compute(&self, msg: &[u8]) -> [u8; 16] {
        let mut sig = [0u8; 16];
        match self {
            Signer::HmacSha256(k) => sig.copy_from_slice(&hmac::sign(k, msg).as_ref()[..16]),
            Signer::AesCmac(k) => sig.copy_from_slice(&cmac::sign(k, msg).expect("cmac").as_ref()[..16]),
            Signer::AesGmac(k) => {
                let flags = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]);
                let command = u16::from_le_bytes([msg[12], msg[13]]);
                let mut nonce = [0u8; 12];
                nonce[..8].copy_from_slice(&msg[24..32]);
                let mut role = 0u32;
                if flags & flags::SERVER_TO_REDIR != 0 {
                    role |= 1;
                }
                if command == Command::Cancel as u16 && flags & flags::SERVER_TO_REDIR == 0 {
                    role |= 2;
                }
                nonce[8..].copy_from_slice(&role.to_le_bytes());
                let tag = k
                    .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(msg), &mut [])
                    .expect("gmac");
                sig.copy_from_slice(tag.as_ref());
            }
        }
        sig
    }

    /// Sets the SIGNED flag, zeroes the Signature field and writes the
    /// signature of `msg` (one message, header first, padding included).
    pub fn sign(&self, msg: &mut [u8]) {
        let f = u32::from_le_bytes([msg[16], msg[17], msg[18], msg[19]]) | flags::SIGNED;
        msg[16..20].copy_from_slice(&f.to_le_bytes());
        msg[SIGNATURE_RANGE].fill(0);
        let sig = self.compute(msg);
        msg[SIGNATURE_RANGE].copy_from_slice(&sig);
    }

    /// Checks the signature of a received message in place; the Signature
    /// field is restored afterwards. Returns false on mismatch or if `msg`
    /// is shorter than a header.
    pub fn verify(&self, msg: &mut [u8]) -> bool {
        if msg.len() < smb_proto::header::HEADER_LEN {
            return false;
        }
        let mut got = [0u8; 16];
        got.copy_from_slice(&msg[SIGNATURE_RANGE]);
        msg[SIGNATURE_RANGE].fill(0);
        let want = self.compute(msg);
        msg[SIGNATURE_RANGE].copy_from_slice(&got);
        aws_lc_rs::constant_time::verify_slices_are_equal(&got, &want).is_ok()
    }
}

enum AeadKey {
    Gcm(LessSafeKey),
    Ccm128(Box<Aes128Ccm>),
    Ccm256(Box<Aes256Ccm>),
}

impl AeadKey {
    fn new(cipher: Cipher, key: &[u8]) -> AeadKey {
        match cipher {
            Cipher::Aes128Gcm => {
                AeadKey::Gcm(LessSafeKey::new(UnboundKey::new(&aead::AES_128_GCM, &key[..16]).expect("key")))
            }
            Cipher::Aes256Gcm => {
                AeadKey::Gcm(LessSafeKey::new(UnboundKey::new(&aead::AES_256_GCM, &key[..32]).expect("key")))
            }
            Cipher::Aes128Ccm => AeadKey::Ccm128(Box::new(Aes128Ccm::new_from_slice(&key[..16]).expect("key"))),
            Cipher::Aes256Ccm => AeadKey::Ccm256(Box::new(Aes256Ccm::new_from_slice(&key[..32]).expect("key"))),
        }
    }
}

/// Encrypts outgoing and decrypts incoming messages with the negotiated
/// cipher (MS-SMB2 3.1.4.3, 3.2.5.1.1).
pub struct Cipherer {
    cipher: Cipher,
    enc: AeadKey,
    dec: AeadKey,
    nonce_prefix: [u8; 4],
    counter: std::sync::atomic::AtomicU64,
}

/// Why an encrypted message was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecryptError;

impl Cipherer {
    /// Keys for both directions.
    pub fn new(cipher: Cipher, keys: &SessionKeys) -> Cipherer {
        Cipherer {
            cipher,
            enc: AeadKey::new(cipher, &keys.encryption),
            dec: AeadKey::new(cipher, &keys.decryption),
            nonce_prefix: rand::random(),
            counter: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The negotiated cipher.
    pub fn cipher(&self) -> Cipher {
        self.cipher
    }

    /// Encrypts `buf[TRANSFORM_HEADER_LEN..]` in place. `buf` starts with a
    /// transform header whose Nonce and Signature this fills in.
    pub fn encrypt(&self, buf: &mut [u8]) {
        let n = self.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut nonce = [0u8; 16];
        nonce[..4].copy_from_slice(&self.nonce_prefix);
        nonce[4..11].copy_from_slice(&n.to_le_bytes()[..7]);
        if matches!(self.enc, AeadKey::Gcm(_)) {
            nonce[11] = n.to_le_bytes()[7];
        }
        buf[20..36].copy_from_slice(&nonce);
        let (hdr, body) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
        let tag: [u8; 16] = match &self.enc {
            AeadKey::Gcm(k) => {
                let mut n12 = [0u8; 12];
                n12.copy_from_slice(&nonce[..12]);
                let t = k
                    .seal_in_place_separate_tag(Nonce::assume_unique_for_key(n12), Aad::from(&hdr[AAD_RANGE]), body)
                    .expect("gcm seal");
                t.as_ref().try_into().expect("16-byte tag")
            }
            AeadKey::Ccm128(k) => {
                k.encrypt_in_place_detached((&nonce[..11]).into(), &hdr[AAD_RANGE], body).expect("ccm").into()
            }
            AeadKey::Ccm256(k) => {
                k.encrypt_in_place_detached((&nonce[..11]).into(), &hdr[AAD_RANGE], body).expect("ccm").into()
            }
        };
        hdr[TAG_RANGE].copy_from_slice(&tag);
    }

    /// Decrypts `buf[TRANSFORM_HEADER_LEN..]` in place after checking the
    /// tag in the transform header at the start of `buf`.
    pub fn decrypt(&self, buf: &mut [u8]) -> Result<(), DecryptError> {
        if buf.len() < TRANSFORM_HEADER_LEN {
            return Err(DecryptError);
        }
        let (hdr, body) = buf.split_at_mut(TRANSFORM_HEADER_LEN);
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&hdr[TAG_RANGE]);
        let nonce = &hdr[20..36];
        match &self.dec {
            AeadKey::Gcm(k) => {
                let mut n12 = [0u8; 12];
                n12.copy_from_slice(&nonce[..12]);
                k.open_in_place_separate_tag(Nonce::assume_unique_for_key(n12), Aad::from(&hdr[AAD_RANGE]), &tag, body)
                    .map(|_| ())
                    .map_err(|_| DecryptError)
            }
            AeadKey::Ccm128(k) => k
                .decrypt_in_place_detached(nonce[..11].into(), &hdr[AAD_RANGE], body, (&tag).into())
                .map_err(|_| DecryptError),
            AeadKey::Ccm256(k) => k
                .decrypt_in_place_detached(nonce[..11].into(), &hdr[AAD_RANGE], body, (&tag).into())
                .map_err(|_| DecryptError),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_round_trip_all_algorithms() {
        for alg in [SigningAlgorithm::HmacSha256, SigningAlgorithm::AesCmac, SigningAlgorithm::AesGmac] {
            let s = Signer::new(alg, &[7u8; 16]);
            let mut msg = vec![0u8; 100];
            msg[..4].copy_from_slice(&[0xFE, b'S', b'M', b'B']);
            msg[24] = 9;
            s.sign(&mut msg);
            assert!(s.verify(&mut msg), "{alg:?}");
            msg[80] ^= 1;
            assert!(!s.verify(&mut msg), "{alg:?} must reject a flipped bit");
        }
    }

    #[test]
    fn encrypt_decrypt_round_trip_all_ciphers() {
        for c in [Cipher::Aes128Gcm, Cipher::Aes256Gcm, Cipher::Aes128Ccm, Cipher::Aes256Ccm] {
            let keys = SessionKeys { signing: [0; 16], encryption: [3; 32], decryption: [3; 32] };
            let cph = Cipherer::new(c, &keys);
            let mut buf = vec![0u8; TRANSFORM_HEADER_LEN + 200];
            buf[TRANSFORM_HEADER_LEN..].iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
            let plain = buf[TRANSFORM_HEADER_LEN..].to_vec();
            cph.encrypt(&mut buf);
            // The whole payload, not one byte: with a random nonce any one
            // ciphertext byte equals its plaintext byte 1 time in 256.
            assert_ne!(&buf[TRANSFORM_HEADER_LEN..], &plain[..], "{c:?}");
            cph.decrypt(&mut buf).unwrap();
            assert_eq!(&buf[TRANSFORM_HEADER_LEN..], &plain[..], "{c:?}");
            cph.encrypt(&mut buf);
            buf[60] ^= 1;
            assert_eq!(cph.decrypt(&mut buf), Err(DecryptError), "{c:?}");
        }
    }
}
