//! S3 content checksums: the algorithms (parsed once, at the S3 boundary),
//! incremental hashing of a body, and verification against what the client
//! declared.

use std::collections::BTreeMap;

use super::error::{StoreError, StoreResult};

/// A checksum algorithm S3 defines (`x-amz-checksum-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Algorithm {
    /// CRC-32 (ISO-HDLC).
    Crc32,
    /// CRC-32C (Castagnoli).
    Crc32c,
    /// CRC-64/NVME.
    Crc64nvme,
    /// SHA-1.
    Sha1,
    /// SHA-256.
    Sha256,
}

impl Algorithm {
    /// Every algorithm, in S3's order.
    pub const ALL: [Algorithm; 5] =
        [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64nvme, Algorithm::Sha1, Algorithm::Sha256];

    /// The name S3 uses (`CRC32`, ..., `SHA256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Crc32 => "CRC32",
            Algorithm::Crc32c => "CRC32C",
            Algorithm::Crc64nvme => "CRC64NVME",
            Algorithm::Sha1 => "SHA1",
            Algorithm::Sha256 => "SHA256",
        }
    }

    /// Parses an S3 algorithm name, case-insensitively.
    ///
    /// Errors: InvalidDigest-style InvalidArgument naming the value.
    pub fn parse(name: &str) -> StoreResult<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| StoreError::InvalidArgument(format!("checksum algorithm {name:?} is not supported")))
    }
}

/// What an object's checksum covers (`x-amz-checksum-type`): the whole
/// object, or (a multipart upload's `COMPOSITE`) the checksums of its
/// parts, written `<base64>-<parts>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ChecksumType {
    /// A checksum of the part checksums.
    Composite,
    /// A checksum of the whole object's bytes.
    FullObject,
}

impl ChecksumType {
    /// The name S3 uses (`COMPOSITE`, `FULL_OBJECT`).
    pub fn name(self) -> &'static str {
        match self {
            ChecksumType::Composite => "COMPOSITE",
            ChecksumType::FullObject => "FULL_OBJECT",
        }
    }
}

/// Incremental hashers for a set of algorithms.
pub struct Checksums {
    inner: s3s::checksum::ChecksumHasher,
}

impl Checksums {
    /// Hashers for `algs`.
    pub fn new(algs: &[Algorithm]) -> Checksums {
        use s3s::crypto::Checksum as _;
        let mut h = s3s::checksum::ChecksumHasher::default();
        for a in algs {
            match a {
                Algorithm::Crc32 => h.crc32 = Some(s3s::crypto::Crc32::new()),
                Algorithm::Crc32c => h.crc32c = Some(s3s::crypto::Crc32c::new()),
                Algorithm::Crc64nvme => h.crc64nvme = Some(s3s::crypto::Crc64Nvme::new()),
                Algorithm::Sha1 => h.sha1 = Some(s3s::crypto::Sha1::new()),
                Algorithm::Sha256 => h.sha256 = Some(s3s::crypto::Sha256::new()),
            }
        }
        Checksums { inner: h }
    }

    /// Feeds bytes.
    pub fn update(&mut self, b: &[u8]) {
        self.inner.update(b);
    }

    /// Final values, base64, by algorithm.
    pub fn finish(self) -> BTreeMap<Algorithm, String> {
        let c = self.inner.finalize();
        [
            (Algorithm::Crc32, c.checksum_crc32),
            (Algorithm::Crc32c, c.checksum_crc32c),
            (Algorithm::Crc64nvme, c.checksum_crc64nvme),
            (Algorithm::Sha1, c.checksum_sha1),
            (Algorithm::Sha256, c.checksum_sha256),
        ]
        .into_iter()
        .filter_map(|(a, v)| v.map(|v| (a, v)))
        .collect()
    }
}

/// Checks each expected value (base64) against the computed ones.
///
/// Errors: BadDigest for a mismatch; InvalidDigest for an algorithm that
/// was expected but not computed.
pub fn verify(expected: &BTreeMap<Algorithm, String>, computed: &BTreeMap<Algorithm, String>) -> StoreResult<()> {
    for (alg, want) in expected {
        match computed.get(alg) {
            Some(got) if got == want.trim() => {}
            Some(_) => {
                return Err(StoreError::BadDigest(format!(
                    "The {} you specified did not match the calculated checksum.",
                    alg.name()
                )))
            }
            None => return Err(StoreError::InvalidDigest(format!("checksum {} was not computed", alg.name()))),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_hash() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(&a.name().to_lowercase()).unwrap(), a);
        }
        assert!(Algorithm::parse("MD5").is_err());
        let mut c = Checksums::new(&[Algorithm::Crc32, Algorithm::Sha256]);
        c.update(b"hello");
        let got = c.finish();
        assert_eq!(got[&Algorithm::Crc32], "NhCmhg==");
        assert_eq!(got.len(), 2);
        let mut want = BTreeMap::new();
        want.insert(Algorithm::Crc32, "AAAAAA==".to_string());
        assert!(matches!(verify(&want, &got), Err(StoreError::BadDigest(_))));
    }
}
