//! A multipart upload's checksum (`x-amz-checksum-algorithm` and
//! `x-amz-checksum-type` of CreateMultipartUpload): which pairs AWS allows,
//! and the object's checksum made from its parts' at completion, either
//! `COMPOSITE` (the algorithm over the parts' raw checksums, then `-N`) or
//! `FULL_OBJECT` (the parts' CRCs combined into the CRC of the whole
//! object, without reading it).

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::store::checksum::{Algorithm, ChecksumType, Checksums};
use crate::store::error::{StoreError, StoreResult};

/// The checksum an upload was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadChecksum {
    /// The algorithm of every part's checksum and of the object's.
    pub algorithm: Algorithm,
    /// How the object's checksum is made from the parts'.
    #[serde(rename = "type")]
    pub kind: ChecksumType,
}

/// The checksum of an upload created with `algorithm` and `kind` (both as
/// sent). Without a type, CRC-64/NVME is `FULL_OBJECT` and the others
/// `COMPOSITE`, as on AWS.
///
/// Errors: InvalidRequest for a type without an algorithm, an unknown
/// type, `FULL_OBJECT` with SHA-1 or SHA-256 (they cannot be combined) and
/// `COMPOSITE` with CRC-64/NVME; InvalidArgument for an unknown algorithm.
pub fn of_create(algorithm: Option<&str>, kind: Option<&str>) -> StoreResult<Option<UploadChecksum>> {
    let Some(algorithm) = algorithm else {
        return match kind {
            None => Ok(None),
            Some(_) => Err(StoreError::InvalidRequest(
                "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.".into(),
            )),
        };
    };
    let algorithm = Algorithm::parse(algorithm)?;
    let kind = match kind.map(|k| k.trim().to_ascii_uppercase()) {
        None if algorithm == Algorithm::Crc64nvme => ChecksumType::FullObject,
        None => ChecksumType::Composite,
        Some(k) if k == "COMPOSITE" => ChecksumType::Composite,
        Some(k) if k == "FULL_OBJECT" => ChecksumType::FullObject,
        Some(k) => {
            return Err(StoreError::InvalidRequest(format!("Value for x-amz-checksum-type header is invalid: {k}")))
        }
    };
    let allowed = match kind {
        ChecksumType::FullObject => !matches!(algorithm, Algorithm::Sha1 | Algorithm::Sha256),
        ChecksumType::Composite => algorithm != Algorithm::Crc64nvme,
    };
    if !allowed {
        return Err(StoreError::InvalidRequest(format!(
            "The {} checksum type cannot be used with the {} checksum algorithm.",
            kind.name(),
            algorithm.name().to_ascii_lowercase()
        )));
    }
    Ok(Some(UploadChecksum { algorithm, kind }))
}

impl UploadChecksum {
    /// The object's checksum (base64, with `-N` for `COMPOSITE`) from its
    /// parts', in order: (part number, checksum in base64, size in bytes).
    ///
    /// Errors: InvalidPart for a part without a checksum of the algorithm,
    /// or one that does not decode.
    pub fn of_parts(&self, parts: &[(i32, Option<&str>, u64)]) -> StoreResult<String> {
        let mut raw = Vec::with_capacity(parts.len());
        for (n, value, size) in parts {
            let missing = || StoreError::InvalidPart(format!("part {n} has no {} checksum", self.algorithm.name()));
            let bytes = base64::engine::general_purpose::STANDARD.decode(value.ok_or_else(missing)?.trim());
            raw.push((bytes.map_err(|_| missing())?, *size));
        }
        match self.kind {
            ChecksumType::Composite => {
                let mut c = Checksums::new(&[self.algorithm]);
                for (bytes, _) in &raw {
                    c.update(bytes);
                }
                let value = c.finish().remove(&self.algorithm).unwrap_or_default();
                Ok(format!("{value}-{}", parts.len()))
            }
            ChecksumType::FullObject => {
                let (crc, width) = match self.algorithm {
                    Algorithm::Crc32 => (crc_fast::CrcAlgorithm::Crc32IsoHdlc, 4),
                    Algorithm::Crc32c => (crc_fast::CrcAlgorithm::Crc32Iscsi, 4),
                    Algorithm::Crc64nvme => (crc_fast::CrcAlgorithm::Crc64Nvme, 8),
                    // Refused at creation ([`of_create`]).
                    Algorithm::Sha1 | Algorithm::Sha256 => {
                        return Err(StoreError::InvalidRequest("a SHA checksum cannot cover the full object".into()))
                    }
                };
                let mut whole: Option<u64> = None;
                for (i, (bytes, size)) in raw.iter().enumerate() {
                    if bytes.len() != width {
                        return Err(StoreError::InvalidPart(format!(
                            "the checksum of part {} does not decode",
                            parts[i].0
                        )));
                    }
                    let part = bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
                    whole = Some(match whole {
                        None => part,
                        Some(acc) => crc_fast::checksum_combine(crc, acc, part, *size),
                    });
                }
                let v = whole.unwrap_or(0).to_be_bytes();
                Ok(base64::engine::general_purpose::STANDARD.encode(&v[8 - width..]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(alg: Algorithm, data: &[u8]) -> String {
        let mut c = Checksums::new(&[alg]);
        c.update(data);
        c.finish().remove(&alg).unwrap()
    }

    #[test]
    fn create_pairs_are_aws_s() {
        let ok = |a, k| of_create(Some(a), k).unwrap().unwrap();
        assert_eq!(ok("crc32", None).kind, ChecksumType::Composite);
        assert_eq!(ok("SHA256", None).kind, ChecksumType::Composite);
        assert_eq!(ok("CRC64NVME", None).kind, ChecksumType::FullObject);
        assert_eq!(ok("CRC32C", Some("FULL_OBJECT")).kind, ChecksumType::FullObject);
        assert!(of_create(None, None).unwrap().is_none());
        for (a, k) in [
            (Some("SHA256"), Some("FULL_OBJECT")),
            (Some("SHA1"), Some("FULL_OBJECT")),
            (Some("CRC64NVME"), Some("COMPOSITE")),
            (None, Some("COMPOSITE")),
            (Some("CRC32"), Some("PARTIAL")),
        ] {
            assert!(matches!(of_create(a, k), Err(StoreError::InvalidRequest(_))), "{a:?} {k:?}");
        }
        assert!(matches!(of_create(Some("MD5"), None), Err(StoreError::InvalidArgument(_))));
    }

    #[test]
    fn full_object_crcs_combine_to_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let cuts = [(0, 7_000), (7_000, 15_001), (15_001, 20_000)];
        for alg in [Algorithm::Crc32, Algorithm::Crc32c, Algorithm::Crc64nvme] {
            let parts: Vec<String> = cuts.iter().map(|&(a, b)| sum(alg, &data[a..b])).collect();
            let input: Vec<(i32, Option<&str>, u64)> = cuts
                .iter()
                .enumerate()
                .map(|(i, &(a, b))| (i as i32 + 1, Some(parts[i].as_str()), (b - a) as u64))
                .collect();
            let c = UploadChecksum { algorithm: alg, kind: ChecksumType::FullObject };
            assert_eq!(c.of_parts(&input).unwrap(), sum(alg, &data), "{alg:?}");
        }
    }

    #[test]
    fn composite_is_the_checksum_of_the_part_checksums() {
        let (a, b) = (sum(Algorithm::Sha256, b"part one"), sum(Algorithm::Sha256, b"part two"));
        let mut raw = base64::engine::general_purpose::STANDARD.decode(&a).unwrap();
        raw.extend(base64::engine::general_purpose::STANDARD.decode(&b).unwrap());
        let c = UploadChecksum { algorithm: Algorithm::Sha256, kind: ChecksumType::Composite };
        let got = c.of_parts(&[(1, Some(&a), 8), (2, Some(&b), 8)]).unwrap();
        assert_eq!(got, format!("{}-2", sum(Algorithm::Sha256, &raw)));
        assert!(
            matches!(c.of_parts(&[(1, Some(&a), 8), (2, None, 8)]), Err(StoreError::InvalidPart(m)) if m.contains("part 2"))
        );
    }
}
