//! DFS referrals (MS-DFSC), carried by FSCTL_DFS_GET_REFERRALS (MS-SMB2
//! 2.2.31, 3.2.4.20.3): the request naming a DFS path, and the answer
//! listing where that path really lives.

use bytes::BytesMut;

use crate::error::{DecodeError, DecodeResult};
use crate::reader::{put_utf16, utf16_to_string, Reader};

/// FSCTL_DFS_GET_REFERRALS (MS-SMB2 2.2.31), sent on a tree of IPC$.
pub const FSCTL_DFS_GET_REFERRALS: u32 = 0x0006_0194;

/// ReferralEntryFlags NameListReferral (MS-DFSC 2.2.5.3): a domain or DC
/// list instead of a target path; not a link target.
const NAME_LIST_REFERRAL: u16 = 0x0002;

/// Encodes REQ_GET_DFS_REFERRAL (MS-DFSC 2.2.2): MaxReferralLevel 4 and
/// `path` (`\server\share\rest`), null-terminated UTF-16.
pub fn encode_referral_request(out: &mut BytesMut, path: &str) {
    out.extend_from_slice(&4u16.to_le_bytes());
    put_utf16(out, path);
    out.extend_from_slice(&[0, 0]);
}

/// One target of a referral: where the DFS path's first `path_consumed`
/// characters really live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Referral {
    /// The referral's version (2, 3 or 4).
    pub version: u16,
    /// TimeToLive in seconds: how long a client may keep it.
    pub ttl: u32,
    /// DFSPath: the part of the request this referral covers.
    pub dfs_path: String,
    /// NetworkAddress: the target, `\server\share[\path]`.
    pub target: String,
}

/// RESP_GET_DFS_REFERRAL (MS-DFSC 2.2.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferralResponse {
    /// PathConsumed, in characters of the request's path (the field is in
    /// bytes of UTF-16; halved here).
    pub path_consumed: usize,
    /// The targets, best first; name-list referrals are left out.
    pub referrals: Vec<Referral>,
}

impl ReferralResponse {
    /// Decodes the IOCTL output of FSCTL_DFS_GET_REFERRALS. Version 1
    /// entries and name-list referrals are skipped; offsets are checked
    /// against their entry's place in `buf`.
    ///
    /// Errors: a truncated header or entry, an entry size or string offset
    /// outside the buffer, or a string that is not UTF-16.
    pub fn decode(buf: &[u8]) -> DecodeResult<ReferralResponse> {
        let mut r = Reader::new(buf);
        let consumed = r.u16("PathConsumed")? as usize;
        let count = r.u16("NumberOfReferrals")?;
        r.skip(4, "ReferralHeaderFlags")?;
        let mut referrals = Vec::new();
        let mut at = r.pos();
        for _ in 0..count {
            let entry = buf.get(at..).ok_or(DecodeError::Truncated("referral entry"))?;
            let mut e = Reader::new(entry);
            let version = e.u16("VersionNumber")?;
            let size = e.u16("Size")? as usize;
            if size < 8 || size > entry.len() {
                return Err(DecodeError::OutOfBounds("referral entry Size"));
            }
            e.skip(2, "ServerType")?;
            let flags = e.u16("ReferralEntryFlags")?;
            let (ttl, path_off, target_off) = match version {
                2 => {
                    e.skip(4, "Proximity")?;
                    let ttl = e.u32("TimeToLive")?;
                    let path = e.u16("DFSPathOffset")?;
                    e.skip(2, "DFSAlternatePathOffset")?;
                    (ttl, path, e.u16("NetworkAddressOffset")?)
                }
                3 | 4 => {
                    let ttl = e.u32("TimeToLive")?;
                    if flags & NAME_LIST_REFERRAL != 0 {
                        at += size;
                        continue;
                    }
                    let path = e.u16("DFSPathOffset")?;
                    e.skip(2, "DFSAlternatePathOffset")?;
                    (ttl, path, e.u16("NetworkAddressOffset")?)
                }
                _ => {
                    at += size;
                    continue;
                }
            };
            referrals.push(Referral {
                version,
                ttl,
                dfs_path: string_at(entry, path_off as usize, "DFSPath")?,
                target: string_at(entry, target_off as usize, "NetworkAddress")?,
            });
            at += size;
        }
        Ok(ReferralResponse { path_consumed: consumed / 2, referrals })
    }
}

/// The null-terminated UTF-16 string at `off` of `entry`.
fn string_at(entry: &[u8], off: usize, what: &'static str) -> DecodeResult<String> {
    let tail = entry.get(off..).filter(|t| !t.is_empty()).ok_or(DecodeError::OutOfBounds(what))?;
    let units = tail.chunks_exact(2).position(|c| c == [0, 0]).ok_or(DecodeError::Truncated(what))?;
    utf16_to_string(&tail[..units * 2], what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16z(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).chain([0, 0]).collect()
    }

    /// A version 3 answer as Samba sends it for one link: header, one
    /// 34-byte entry, then its strings.
    fn v3(consumed: u16, path: &str, target: &str, ttl: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&(consumed * 2).to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&3u32.to_le_bytes()); // ReferralServers | StorageServers
        let path_z = utf16z(path);
        let entry_len = 34u16;
        b.extend_from_slice(&3u16.to_le_bytes());
        b.extend_from_slice(&entry_len.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&ttl.to_le_bytes());
        b.extend_from_slice(&entry_len.to_le_bytes()); // DFSPath right after the entry
        b.extend_from_slice(&entry_len.to_le_bytes()); // alternate path: the same
        b.extend_from_slice(&(entry_len + path_z.len() as u16).to_le_bytes());
        b.extend_from_slice(&[0; 16]); // ServiceSiteGuid
        b.extend_from_slice(&path_z);
        b.extend_from_slice(&utf16z(target));
        b
    }

    #[test]
    fn a_request_names_the_path_at_level_4() {
        let mut out = BytesMut::new();
        encode_referral_request(&mut out, r"\srv\dfs\link");
        assert_eq!(&out[..2], &[4, 0]);
        assert_eq!(&out[2..], &utf16z(r"\srv\dfs\link")[..]);
    }

    #[test]
    fn a_version_3_link_referral_decodes() {
        let r = ReferralResponse::decode(&v3(14, r"\srv\dfs\link", r"\fs2\data\sub", 300)).unwrap();
        assert_eq!(r.path_consumed, 14);
        assert_eq!(
            r.referrals,
            vec![Referral { version: 3, ttl: 300, dfs_path: r"\srv\dfs\link".into(), target: r"\fs2\data\sub".into() }]
        );
    }

    #[test]
    fn malformed_answers_are_errors_not_panics() {
        let good = v3(14, r"\srv\dfs\link", r"\fs2\data", 300);
        for cut in 0..good.len() {
            let _ = ReferralResponse::decode(&good[..cut]);
        }
        // An entry Size past the buffer.
        let mut big = good.clone();
        big[10..12].copy_from_slice(&0xffffu16.to_le_bytes());
        assert_eq!(ReferralResponse::decode(&big), Err(DecodeError::OutOfBounds("referral entry Size")));
        // A NetworkAddress offset past the entry's bytes.
        let mut off = good.clone();
        off[24..26].copy_from_slice(&0x7fffu16.to_le_bytes());
        assert_eq!(ReferralResponse::decode(&off), Err(DecodeError::OutOfBounds("NetworkAddress")));
        // A string with no terminator.
        let unterminated = &good[..good.len() - 2];
        assert_eq!(ReferralResponse::decode(unterminated), Err(DecodeError::Truncated("NetworkAddress")));
    }
}
