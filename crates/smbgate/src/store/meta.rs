//! Object metadata kept in one SMB extended attribute on the file:
//! Content-* headers, user metadata, the ETag, checksums, and the size and
//! on-disk id the record was written for (so a file edited by someone else
//! is recognised and gets a derived ETag instead of a stale one).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use smb_proto::info::FullEa;

/// Name of the EA holding [`ObjectMeta`] as JSON.
pub const META_EA: &str = "smbgate.meta";

/// Stored object metadata (format version 1). An empty `etag` marks the
/// record of a file someone else put on the share, kept only for its tags:
/// its ETag stays the derived one ([`derived_etag`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// Quoted-less ETag value, e.g. `9e107d9d372bb6826bd81d3542a419d6` or
    /// `...-3` for multipart.
    pub etag: String,
    /// Size in bytes the record was written for.
    pub size: u64,
    /// On-disk file id (inode) the record was written for, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_id: Option<u64>,
    /// Content-Type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// Content-Encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    /// Content-Disposition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    /// Content-Language.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    /// Cache-Control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// Expires, as the HTTP date string the client sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// `x-amz-meta-*` without the prefix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user: BTreeMap<String, String>,
    /// Checksums by algorithm (stored under S3's names: `CRC32`, `CRC32C`,
    /// `CRC64NVME`, `SHA1`, `SHA256`), base64 as S3 returns them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checksums: BTreeMap<super::checksum::Algorithm, String>,
    /// What `checksums` cover, when not the whole object as sent (a
    /// multipart object's `COMPOSITE` or combined `FULL_OBJECT` checksum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_type: Option<super::checksum::ChecksumType>,
    /// Part sizes of a multipart object, in bytes, for `partNumber` GETs.
    /// Stored as runs (`part_runs`: `[size, count]` pairs), so that 10,000
    /// parts of one size take a few bytes: a server may keep a record in as
    /// little as about 4 KB (an ext4 extended attribute). Records written
    /// before as `parts` (one size each) still read.
    #[serde(default, skip_serializing_if = "Vec::is_empty", rename = "part_runs", alias = "parts", with = "part_runs")]
    pub parts: Vec<u64>,
    /// The parts' checksums (base64, of the upload's algorithm), in part
    /// order, for an upload created with one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_checksums: Vec<String>,
    /// The S3 key this record was written for. On a case-insensitive share
    /// an open of `mixed` may land on `Mixed`; the key tells them apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The multipart upload this object was completed from: a repeated
    /// CompleteMultipartUpload of that upload answers this object's ETag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<String>,
    /// True on a directory that is also a directory-marker object (`a/b/`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub marker: bool,
    /// The object's tags (key, value), in the order they were given
    /// (checked by `store::tags`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<(String, String)>,
    /// The version ID this object was written as, on a bucket with
    /// versioning enabled (`None`: the `null` version; see `versions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
    /// Object Lock retention of this version (see `versions::lock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// Object Lock legal hold of this version.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub legal_hold: bool,
    /// Set on an object stored encrypted with its client's key (SSE-C):
    /// the key's MD5, the salt and the object's size (`size` above is the
    /// file's, which holds the packages' tags too; see `store::sse_c`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sse_c: Option<super::sse_c::SseCRecord>,
    /// True on the stub left in an EA or stream whose full record went to
    /// a sidecar for its size (see `share::spill`): read past it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spilled: bool,
}

/// An Object Lock retention mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LockMode {
    /// Shortened or removed only by a user allowed to bypass it.
    #[serde(rename = "GOVERNANCE")]
    Governance,
    /// Only ever extended, by anyone; never shortened or removed.
    #[serde(rename = "COMPLIANCE")]
    Compliance,
}

impl LockMode {
    /// S3's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Governance => "GOVERNANCE",
            LockMode::Compliance => "COMPLIANCE",
        }
    }

    /// The mode S3 names `name`; `None` for any other word.
    pub fn parse(name: &str) -> Option<LockMode> {
        match name {
            "GOVERNANCE" => Some(LockMode::Governance),
            "COMPLIANCE" => Some(LockMode::Compliance),
            _ => None,
        }
    }
}

/// A version's Object Lock retention: no delete or overwrite before
/// `until_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// The mode.
    pub mode: LockMode,
    /// The retain-until date, in milliseconds since the Unix epoch.
    pub until_ms: i64,
}

impl ObjectMeta {
    /// The stub a record too large for an EA leaves there: all but the
    /// user metadata, tags, Content-* headers and the parts' checksums,
    /// marked [`ObjectMeta::spilled`].
    pub fn stub(&self) -> ObjectMeta {
        ObjectMeta {
            content_type: None,
            content_encoding: None,
            content_disposition: None,
            content_language: None,
            cache_control: None,
            expires: None,
            user: BTreeMap::new(),
            part_checksums: Vec::new(),
            tags: Vec::new(),
            spilled: true,
            ..self.clone()
        }
    }

    /// Encodes as the EA to set.
    pub fn to_ea(&self) -> FullEa {
        FullEa { name: META_EA.to_string(), value: serde_json::to_vec(self).expect("serialisable") }
    }

    /// The size in bytes of the record [`ObjectMeta::to_ea`] writes.
    pub fn record_len(&self) -> usize {
        serde_json::to_vec(self).map_or(0, |v| v.len())
    }

    /// Decodes from an EA value; `None` if it is not ours or is corrupt
    /// (the object is then treated as a foreign file).
    pub fn from_ea(value: &[u8]) -> Option<ObjectMeta> {
        serde_json::from_slice(value).ok()
    }

    /// Finds and decodes our EA in a list.
    pub fn from_eas(eas: &[FullEa]) -> Option<ObjectMeta> {
        eas.iter().find(|e| e.name.eq_ignore_ascii_case(META_EA)).and_then(|e| Self::from_ea(&e.value))
    }

    /// True if this record still describes a file of `size` bytes with
    /// on-disk id `disk_id`.
    pub fn matches(&self, size: u64, disk_id: Option<u64>) -> bool {
        self.size == size && (self.disk_id.is_none() || disk_id.is_none() || self.disk_id == disk_id)
    }
}

/// Part sizes as runs of equal sizes: `[[size, count], ...]` in part
/// order. Reading takes runs, and plain sizes (the older form).
mod part_runs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Parts of 5 GiB each, 10,000 of them: the most a run may expand to.
    const MAX_PARTS: u64 = 10_000;

    pub fn serialize<S: Serializer>(parts: &[u64], s: S) -> Result<S::Ok, S::Error> {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &size in parts {
            match runs.last_mut() {
                Some((last, count)) if *last == size => *count += 1,
                _ => runs.push((size, 1)),
            }
        }
        runs.serialize(s)
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        Size(u64),
        Run(u64, u64),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
        let mut parts = Vec::new();
        for item in Vec::<Item>::deserialize(d)? {
            let (size, count) = match item {
                Item::Size(size) => (size, 1),
                Item::Run(size, count) => (size, count),
            };
            if parts.len() as u64 + count > MAX_PARTS {
                return Err(serde::de::Error::custom("more than 10,000 parts"));
            }
            parts.extend(std::iter::repeat_n(size, count as usize));
        }
        Ok(parts)
    }
}

/// The ETag of a file we did not write (or whose record no longer matches):
/// stable for a given size, LastWriteTime and file id, and marked as not an
/// MD5 by its `-` suffix so clients do not verify bodies against it.
pub fn derived_etag(size: u64, last_write: u64, file_id: u64) -> String {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    h.update(size.to_le_bytes());
    h.update(last_write.to_le_bytes());
    h.update(file_id.to_le_bytes());
    format!("{}-1", hex::encode(h.finalize()))
}

/// Converts a FILETIME (100 ns since 1601) to Unix seconds and nanoseconds.
pub fn filetime_to_unix(ft: u64) -> (i64, u32) {
    let t = ft as i128 - 116_444_736_000_000_000;
    let secs = t.div_euclid(10_000_000) as i64;
    let nanos = (t.rem_euclid(10_000_000) * 100) as u32;
    (secs, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_match() {
        let mut m = ObjectMeta { etag: "abc".into(), size: 5, disk_id: Some(9), ..Default::default() };
        m.user.insert("color".into(), "blue".into());
        let ea = m.to_ea();
        assert_eq!(ea.name, "smbgate.meta");
        assert_eq!(ObjectMeta::from_eas(&[ea]).unwrap(), m);
        assert!(m.matches(5, Some(9)));
        assert!(!m.matches(6, Some(9)));
        assert!(!m.matches(5, Some(10)));
        assert_eq!(ObjectMeta::from_ea(b"not json"), None);
    }

    #[test]
    fn part_sizes_are_kept_as_runs_and_the_older_form_still_reads() {
        let mut m = ObjectMeta { etag: "e-3".into(), size: 10, ..Default::default() };
        m.parts = vec![8 << 20; 9_999];
        m.parts.push(5);
        let ea = m.to_ea();
        let text = String::from_utf8(ea.value.clone()).unwrap();
        assert!(text.contains(r#""part_runs":[[8388608,9999],[5,1]]"#), "{text}");
        assert!(ea.value.len() < 200, "{} bytes", ea.value.len());
        assert_eq!(ObjectMeta::from_ea(&ea.value).unwrap(), m);
        let older = ObjectMeta::from_ea(br#"{"etag":"e-3","size":10,"parts":[4,4,2]}"#).unwrap();
        assert_eq!(older.parts, vec![4, 4, 2]);
        assert_eq!(ObjectMeta::from_ea(br#"{"etag":"e","size":1,"part_runs":[[1,10001]]}"#), None);
    }

    #[test]
    fn derived_etags_are_stable_and_marked() {
        let a = derived_etag(10, 20, 30);
        assert_eq!(a, derived_etag(10, 20, 30));
        assert_ne!(a, derived_etag(10, 21, 30));
        assert!(a.ends_with("-1"));
        assert_eq!(a.len(), 34);
    }
}
