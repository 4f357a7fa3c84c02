//! Security descriptors as SMB2 QUERY_INFO and SET_INFO carry them
//! (InfoType SECURITY, MS-SMB2 2.2.37 and 2.2.39): the self-relative
//! SECURITY_DESCRIPTOR, its ACL, ACEs and SIDs ([MS-DTYP] 2.4.2, 2.4.4,
//! 2.4.5, 2.4.6). Only what a client needs to read a file's owner and
//! DACL and to write a DACL back; ACE kinds it has no use for pass
//! through as they came.

use bytes::BytesMut;

use crate::error::{DecodeError, DecodeResult};
use crate::message::{put_u16, put_u32};
use crate::reader::{slice_at, Reader};

/// AdditionalInformation bits of a security QUERY_INFO / SET_INFO
/// (MS-SMB2 2.2.37): which parts of the descriptor are asked for or set.
pub mod security_information {
    #![allow(missing_docs)]
    pub const OWNER: u32 = 0x0000_0001;
    pub const GROUP: u32 = 0x0000_0002;
    pub const DACL: u32 = 0x0000_0004;
}

/// AceType values ([MS-DTYP] 2.4.4.1) of the two ACE kinds read here.
pub mod ace_type {
    #![allow(missing_docs)]
    pub const ACCESS_ALLOWED: u8 = 0;
    pub const ACCESS_DENIED: u8 = 1;
}

/// SECURITY_DESCRIPTOR Control bits ([MS-DTYP] 2.4.6).
pub mod control {
    #![allow(missing_docs)]
    pub const DACL_PRESENT: u16 = 0x0004;
    pub const DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
    pub const DACL_AUTO_INHERITED: u16 = 0x0400;
    pub const DACL_PROTECTED: u16 = 0x1000;
    pub const SELF_RELATIVE: u16 = 0x8000;
}

/// A security identifier ([MS-DTYP] 2.4.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sid {
    /// IdentifierAuthority (48 bits, big-endian on the wire).
    pub authority: u64,
    /// SubAuthority values, at most 15.
    pub sub_authorities: Vec<u32>,
}

impl Sid {
    /// Everyone, S-1-1-0 ([MS-DTYP] 2.4.2.4).
    pub fn everyone() -> Sid {
        Sid { authority: 1, sub_authorities: vec![0] }
    }

    /// OWNER RIGHTS, S-1-3-4: an ACE for it replaces the rights a file's
    /// owner has without asking (READ_CONTROL and WRITE_DAC).
    pub fn owner_rights() -> Sid {
        Sid { authority: 3, sub_authorities: vec![4] }
    }

    /// Reads a SID from the front of `r`.
    ///
    /// Errors: Truncated; BadValue for a Revision other than 1 or more
    /// than 15 sub-authorities.
    pub fn decode(r: &mut Reader<'_>) -> DecodeResult<Sid> {
        let revision = r.u8("Sid.Revision")?;
        if revision != 1 {
            return Err(DecodeError::BadValue { field: "Sid.Revision", got: revision as u64 });
        }
        let count = r.u8("Sid.SubAuthorityCount")?;
        if count > 15 {
            return Err(DecodeError::BadValue { field: "Sid.SubAuthorityCount", got: count as u64 });
        }
        let authority = r.array::<6>("Sid.IdentifierAuthority")?.iter().fold(0u64, |a, b| (a << 8) | *b as u64);
        let sub_authorities = (0..count).map(|_| r.u32("Sid.SubAuthority")).collect::<DecodeResult<_>>()?;
        Ok(Sid { authority, sub_authorities })
    }

    /// Appends the SID's wire form.
    pub fn encode(&self, out: &mut BytesMut) {
        out.extend_from_slice(&[1, self.sub_authorities.len() as u8]);
        out.extend_from_slice(&self.authority.to_be_bytes()[2..]);
        for s in &self.sub_authorities {
            put_u32(out, *s);
        }
    }

    /// Length of the wire form in bytes.
    pub fn len(&self) -> usize {
        8 + 4 * self.sub_authorities.len()
    }

    /// Always false: a SID has at least its 8-byte header.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl std::fmt::Display for Sid {
    /// The string form, `S-1-5-21-…` ([MS-DTYP] 2.4.2.1).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S-1-{}", self.authority)?;
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

/// One ACE ([MS-DTYP] 2.4.4): its header and the body after it, kept as
/// it came, so that ACE kinds not read here (object, callback, audit)
/// are written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ace {
    /// AceType, see [`ace_type`].
    pub ace_type: u8,
    /// AceFlags (inheritance bits).
    pub flags: u8,
    /// What follows the 4-byte header.
    pub body: Vec<u8>,
}

impl Ace {
    /// An ACCESS_ALLOWED or ACCESS_DENIED ACE ([MS-DTYP] 2.4.4.2, 2.4.4.4)
    /// giving or refusing `mask` to `sid`, without inheritance flags.
    pub fn access(ace_type: u8, mask: u32, sid: &Sid) -> Ace {
        let mut body = BytesMut::with_capacity(4 + sid.len());
        put_u32(&mut body, mask);
        sid.encode(&mut body);
        Ace { ace_type, flags: 0, body: body.to_vec() }
    }

    /// The access mask and SID of an ACCESS_ALLOWED or ACCESS_DENIED ACE;
    /// `None` for other kinds or a body that does not read as one.
    pub fn mask_and_sid(&self) -> Option<(u32, Sid)> {
        if !matches!(self.ace_type, ace_type::ACCESS_ALLOWED | ace_type::ACCESS_DENIED) {
            return None;
        }
        let mut r = Reader::new(&self.body);
        let mask = r.u32("Ace.Mask").ok()?;
        Some((mask, Sid::decode(&mut r).ok()?))
    }
}

/// The parts of a security descriptor this crate reads ([MS-DTYP] 2.4.6).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityDescriptor {
    /// Control bits, see [`control`].
    pub control: u16,
    /// The owner, if the descriptor carries one.
    pub owner: Option<Sid>,
    /// The DACL's ACEs in order; `None` when there is no DACL (which
    /// grants everyone everything, unlike an empty one).
    pub dacl: Option<Vec<Ace>>,
    /// The DACL's AclRevision (2, or 4 with object ACEs).
    pub dacl_revision: u8,
}

impl SecurityDescriptor {
    /// Decodes a self-relative descriptor (a QUERY_INFO answer).
    ///
    /// Errors: Truncated; BadValue for a Revision other than 1, a
    /// descriptor that is not self-relative, or an ACE whose AceSize is
    /// under its header; OutOfBounds for an offset past the buffer.
    pub fn decode(b: &[u8]) -> DecodeResult<SecurityDescriptor> {
        let mut r = Reader::new(b);
        let revision = r.u8("SecurityDescriptor.Revision")?;
        if revision != 1 {
            return Err(DecodeError::BadValue { field: "SecurityDescriptor.Revision", got: revision as u64 });
        }
        r.skip(1, "SecurityDescriptor.Sbz1")?;
        let control = r.u16("SecurityDescriptor.Control")?;
        if control & control::SELF_RELATIVE == 0 {
            return Err(DecodeError::BadValue { field: "SecurityDescriptor.Control", got: control as u64 });
        }
        let owner_at = r.u32("OffsetOwner")? as usize;
        r.skip(8, "OffsetGroup, OffsetSacl")?;
        let dacl_at = r.u32("OffsetDacl")? as usize;
        let owner = match owner_at {
            0 => None,
            at => Some(Sid::decode(&mut Reader::new(slice_at(b, at, b.len().saturating_sub(at), "OwnerSid")?))?),
        };
        let (dacl, dacl_revision) = match (control & control::DACL_PRESENT, dacl_at) {
            (0, _) | (_, 0) => (None, 2),
            (_, at) => {
                let (aces, rev) = decode_acl(slice_at(b, at, b.len().saturating_sub(at), "Dacl")?)?;
                (Some(aces), rev)
            }
        };
        Ok(SecurityDescriptor { control, owner, dacl, dacl_revision })
    }

    /// Encodes the descriptor a DACL-only SET_INFO carries: self-relative,
    /// with the DACL (an empty one if `dacl` is `None`), no owner, group
    /// or SACL, and the DACL's inheritance control bits as read. `None`
    /// if the DACL or an ACE would be over the 65,535 bytes their 16-bit
    /// sizes can say.
    pub fn encode_dacl(&self) -> Option<BytesMut> {
        let kept = control::DACL_AUTO_INHERIT_REQ | control::DACL_AUTO_INHERITED | control::DACL_PROTECTED;
        let aces = self.dacl.as_deref().unwrap_or_default();
        let size = u16::try_from(8 + aces.iter().map(|a| 4 + a.body.len()).sum::<usize>()).ok()?;
        let count = u16::try_from(aces.len()).ok()?;
        let mut out = BytesMut::with_capacity(20 + size as usize);
        out.extend_from_slice(&[1, 0]);
        put_u16(&mut out, control::SELF_RELATIVE | control::DACL_PRESENT | (self.control & kept));
        put_u32(&mut out, 0); // OffsetOwner
        put_u32(&mut out, 0); // OffsetGroup
        put_u32(&mut out, 0); // OffsetSacl
        put_u32(&mut out, 20); // OffsetDacl
        out.extend_from_slice(&[self.dacl_revision.max(2), 0]);
        put_u16(&mut out, size);
        put_u16(&mut out, count);
        put_u16(&mut out, 0);
        for a in aces {
            out.extend_from_slice(&[a.ace_type, a.flags]);
            put_u16(&mut out, (4 + a.body.len()) as u16); // within `size`, checked above
            out.extend_from_slice(&a.body);
        }
        Some(out)
    }
}

/// The ACEs of an ACL ([MS-DTYP] 2.4.5) at the front of `b`, and its
/// AclRevision.
fn decode_acl(b: &[u8]) -> DecodeResult<(Vec<Ace>, u8)> {
    let mut r = Reader::new(b);
    let revision = r.u8("Acl.AclRevision")?;
    r.skip(1, "Acl.Sbz1")?;
    let size = r.u16("Acl.AclSize")? as usize;
    let count = r.u16("Acl.AceCount")?;
    r.skip(2, "Acl.Sbz2")?;
    let mut r = Reader::new(slice_at(b, 8, size.saturating_sub(8), "Acl.Aces")?);
    // An ACE takes at least 8 bytes: a count the ACL cannot hold
    // reserves no more than it can.
    let mut aces = Vec::with_capacity((count as usize).min(size / 8));
    for _ in 0..count {
        let ace_type = r.u8("Ace.AceType")?;
        let flags = r.u8("Ace.AceFlags")?;
        let len = r.u16("Ace.AceSize")? as usize;
        if len < 4 {
            return Err(DecodeError::BadValue { field: "Ace.AceSize", got: len as u64 });
        }
        aces.push(Ace { ace_type, flags, body: r.take(len - 4, "Ace body")?.to_vec() });
    }
    Ok((aces, revision))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Samba answered for a file's owner and DACL: owner
    /// S-1-5-21-1-2-3-1000, and three ALLOWED ACEs.
    fn samba_like() -> Vec<u8> {
        let owner = Sid { authority: 5, sub_authorities: vec![21, 1, 2, 3, 1000] };
        let group = Sid { authority: 22, sub_authorities: vec![2, 993] };
        let sd = SecurityDescriptor {
            control: control::SELF_RELATIVE | control::DACL_PRESENT,
            owner: None,
            dacl: Some(vec![
                Ace::access(ace_type::ACCESS_ALLOWED, 0x001f_01ff, &owner),
                Ace::access(ace_type::ACCESS_ALLOWED, 0x001f_01ff, &group),
                Ace::access(ace_type::ACCESS_ALLOWED, 0x0012_00a9, &Sid::everyone()),
            ]),
            dacl_revision: 2,
        };
        // Put the owner after the DACL, as servers may.
        let mut b = sd.encode_dacl().unwrap();
        let at = b.len() as u32;
        owner.encode(&mut b);
        b[4..8].copy_from_slice(&at.to_le_bytes());
        b.to_vec()
    }

    #[test]
    fn a_descriptor_reads_back_with_its_owner_and_aces() {
        let sd = SecurityDescriptor::decode(&samba_like()).unwrap();
        assert_eq!(sd.owner.as_ref().unwrap().to_string(), "S-1-5-21-1-2-3-1000");
        let aces = sd.dacl.as_ref().unwrap();
        assert_eq!(aces.len(), 3);
        assert_eq!(aces[2].mask_and_sid(), Some((0x0012_00a9, Sid::everyone())));
        // Written back without the owner, it reads as the same DACL.
        let again = SecurityDescriptor::decode(&sd.encode_dacl().unwrap()).unwrap();
        assert_eq!((again.owner, again.dacl), (None, sd.dacl));
    }

    #[test]
    fn the_wire_forms_match_ms_dtyp() {
        let mut b = BytesMut::new();
        Sid::everyone().encode(&mut b);
        assert_eq!(&b[..], &[1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
        let sd = SecurityDescriptor { dacl: Some(vec![]), ..Default::default() };
        assert_eq!(
            &sd.encode_dacl().unwrap()[..],
            &[1, 0, 4, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2, 0, 8, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn bad_input_is_an_error_never_a_panic() {
        let good = samba_like();
        for n in 0..good.len() {
            let _ = SecurityDescriptor::decode(&good[..n]);
        }
        let mut bad = good.clone();
        bad[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(SecurityDescriptor::decode(&bad), Err(DecodeError::OutOfBounds("Dacl")));
        let huge = SecurityDescriptor {
            dacl: Some(vec![Ace { ace_type: 0, flags: 0, body: vec![0; 40_000] }; 2]),
            ..Default::default()
        };
        assert_eq!(huge.encode_dacl(), None);
        let mut not_relative = good;
        not_relative[3] = 0;
        assert!(matches!(SecurityDescriptor::decode(&not_relative), Err(DecodeError::BadValue { .. })));
    }
}
