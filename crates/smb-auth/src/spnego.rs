//! SPNEGO tokens (RFC 4178, with the MS-SPNG profile) as plain structs.
//!
//! Only what an SMB client needs: the GSS-API InitialContextToken wrapping a
//! NegTokenInit (the first leg, and also what servers put in the SMB2
//! NEGOTIATE response), and NegTokenResp (every later leg, both ways).
//! OIDs are kept as the content octets of their DER encoding.

use crate::der::{read_any, read_tlv, write_bytes, write_tlv};
use crate::reader::Reader;
use crate::AuthError;

/// DER content octets of the SPNEGO mechanism OID 1.3.6.1.5.5.2 (RFC 4178 3).
pub const SPNEGO_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x02];
/// DER content octets of the NTLMSSP mechanism OID 1.3.6.1.4.1.311.2.2.10
/// (MS-NLMP 1.9).
pub const NTLMSSP_OID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x02, 0x02, 0x0a];

const TAG_GSS_TOKEN: u8 = 0x60;
const TAG_OID: u8 = 0x06;
const TAG_OCTETS: u8 = 0x04;
const TAG_ENUM: u8 = 0x0a;
const TAG_SEQUENCE: u8 = 0x30;
const fn ctx(n: u8) -> u8 {
    0xa0 | n
}

/// The negState of a NegTokenResp (RFC 4178 4.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegState {
    /// 0: the acceptor is done and authentication succeeded.
    AcceptCompleted = 0,
    /// 1: more legs are needed.
    AcceptIncomplete = 1,
    /// 2: the acceptor rejected the exchange.
    Reject = 2,
    /// 3: the acceptor wants a mechListMIC from the initiator.
    RequestMic = 3,
}

impl NegState {
    fn from_u8(v: u8) -> Result<Self, AuthError> {
        Ok(match v {
            0 => Self::AcceptCompleted,
            1 => Self::AcceptIncomplete,
            2 => Self::Reject,
            3 => Self::RequestMic,
            other => return Err(AuthError::UnexpectedState(other)),
        })
    }
}

/// A NegTokenInit (RFC 4178 4.2.1) inside a GSS-API InitialContextToken
/// (RFC 2743 3.1). reqFlags, negHints and mechListMIC are skipped on decode
/// and never encoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegTokenInit {
    /// Offered mechanisms, most preferred first, as OID content octets.
    pub mech_types: Vec<Vec<u8>>,
    /// The optimistic token of the first mechanism, if any.
    pub mech_token: Option<Vec<u8>>,
}

impl NegTokenInit {
    /// Encodes the full InitialContextToken (`0x60` tag, SPNEGO OID, `[0]`
    /// NegTokenInit). Never fails.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_tlv(&mut out, TAG_GSS_TOKEN, |o| {
            write_bytes(o, TAG_OID, SPNEGO_OID);
            write_tlv(o, ctx(0), |o| {
                write_tlv(o, TAG_SEQUENCE, |o| {
                    write_tlv(o, ctx(0), |o| o.extend(self.mech_type_list()));
                    if let Some(token) = &self.mech_token {
                        write_tlv(o, ctx(2), |o| write_bytes(o, TAG_OCTETS, token));
                    }
                });
            });
        });
        out
    }

    /// The DER MechTypeList (`SEQUENCE OF OID`): the bytes a mechListMIC
    /// covers (RFC 4178 5).
    pub fn mech_type_list(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_tlv(&mut out, TAG_SEQUENCE, |o| {
            for oid in &self.mech_types {
                write_bytes(o, TAG_OID, oid);
            }
        });
        out
    }

    /// Decodes an InitialContextToken holding a NegTokenInit, such as the
    /// security buffer of an SMB2 NEGOTIATE response (MS-SPNG 2.2.1, where
    /// it is a NegTokenInit2; its extra fields are skipped).
    ///
    /// Errors: [`AuthError::NotSpnego`] if the mechanism OID is not SPNEGO,
    /// and the decoding errors (`Truncated`, `BadTag`, `BadLength`,
    /// `TrailingData`) for malformed input.
    pub fn decode(token: &[u8]) -> Result<Self, AuthError> {
        let mut outer = Reader::new(token);
        let mut gss = read_tlv(&mut outer, TAG_GSS_TOKEN, "InitialContextToken")?;
        outer.finish("InitialContextToken")?;
        if read_tlv(&mut gss, TAG_OID, "thisMech")?.rest() != SPNEGO_OID {
            return Err(AuthError::NotSpnego);
        }
        let mut choice = read_tlv(&mut gss, ctx(0), "negTokenInit")?;
        gss.finish("InitialContextToken")?;
        let mut seq = read_tlv(&mut choice, TAG_SEQUENCE, "NegTokenInit")?;
        choice.finish("negTokenInit")?;

        let mut init = NegTokenInit::default();
        for_each_field(&mut seq, "NegTokenInit", |tag, mut body| {
            match tag {
                0xa0 => {
                    let mut list = read_tlv(&mut body, TAG_SEQUENCE, "mechTypes")?;
                    while !list.is_empty() {
                        let oid = read_tlv(&mut list, TAG_OID, "MechType")?.rest();
                        init.mech_types.push(oid.to_vec());
                    }
                }
                0xa2 => init.mech_token = Some(octets(&mut body, "mechToken")?),
                // reqFlags [1], negHints [3] (NegTokenInit2) / mechListMIC
                _ => return Ok(()),
            }
            body.finish("NegTokenInit field")
        })?;
        Ok(init)
    }
}

/// A NegTokenResp (RFC 4178 4.2.2), the `[1]` choice of NegotiationToken.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NegTokenResp {
    /// negState `[0]`, if present.
    pub neg_state: Option<NegState>,
    /// supportedMech `[1]` as OID content octets, if present.
    pub supported_mech: Option<Vec<u8>>,
    /// responseToken `[2]`: the mechanism's token, if present.
    pub response_token: Option<Vec<u8>>,
    /// mechListMIC `[3]`, if present.
    pub mech_list_mic: Option<Vec<u8>>,
}

impl NegTokenResp {
    /// Decodes the NegTokenResp a server sends with its final SMB answer and
    /// checks its negState: accept-completed (0) or absent is success,
    /// reject (2) is [`AuthError::Rejected`], anything else
    /// [`AuthError::UnexpectedState`] (RFC 4178 4.2.2).
    pub fn decode_final(token: &[u8]) -> Result<Self, AuthError> {
        let resp = Self::decode(token)?;
        match resp.neg_state {
            Some(NegState::AcceptCompleted) | None => Ok(resp),
            Some(NegState::Reject) => Err(AuthError::Rejected),
            Some(other) => Err(AuthError::UnexpectedState(other as u8)),
        }
    }

    /// Encodes `[1] { SEQUENCE { ... } }` with the present fields in order.
    /// Never fails.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        write_tlv(&mut out, ctx(1), |o| {
            write_tlv(o, TAG_SEQUENCE, |o| {
                if let Some(state) = self.neg_state {
                    write_tlv(o, ctx(0), |o| write_bytes(o, TAG_ENUM, &[state as u8]));
                }
                if let Some(mech) = &self.supported_mech {
                    write_tlv(o, ctx(1), |o| write_bytes(o, TAG_OID, mech));
                }
                if let Some(token) = &self.response_token {
                    write_tlv(o, ctx(2), |o| write_bytes(o, TAG_OCTETS, token));
                }
                if let Some(mic) = &self.mech_list_mic {
                    write_tlv(o, ctx(3), |o| write_bytes(o, TAG_OCTETS, mic));
                }
            });
        });
        out
    }

    /// Decodes a NegTokenResp, e.g. an SMB2 SESSION_SETUP response's
    /// security buffer.
    ///
    /// Errors: [`AuthError::UnexpectedState`] for a negState above 3, and the
    /// decoding errors (`Truncated`, `BadTag`, `BadLength`, `TrailingData`)
    /// for malformed input.
    pub fn decode(token: &[u8]) -> Result<Self, AuthError> {
        let mut outer = Reader::new(token);
        let mut choice = read_tlv(&mut outer, ctx(1), "negTokenResp")?;
        outer.finish("negTokenResp")?;
        let mut seq = read_tlv(&mut choice, TAG_SEQUENCE, "NegTokenResp")?;
        choice.finish("negTokenResp")?;

        let mut resp = NegTokenResp::default();
        for_each_field(&mut seq, "NegTokenResp", |tag, mut body| {
            match tag {
                0xa0 => {
                    let mut e = read_tlv(&mut body, TAG_ENUM, "negState")?;
                    let v = e.u8("negState")?;
                    e.finish("negState")?;
                    resp.neg_state = Some(NegState::from_u8(v)?);
                }
                0xa1 => {
                    let oid = read_tlv(&mut body, TAG_OID, "supportedMech")?.rest();
                    resp.supported_mech = Some(oid.to_vec());
                }
                0xa2 => resp.response_token = Some(octets(&mut body, "responseToken")?),
                0xa3 => resp.mech_list_mic = Some(octets(&mut body, "mechListMIC")?),
                found => return Err(AuthError::BadTag { what: "NegTokenResp", expected: 0xa3, found }),
            }
            body.finish("NegTokenResp field")
        })?;
        Ok(resp)
    }
}

/// Walks the context-tagged fields of a SEQUENCE, which must appear with
/// strictly increasing tags.
fn for_each_field<'a>(
    seq: &mut Reader<'a>,
    what: &'static str,
    mut field: impl FnMut(u8, Reader<'a>) -> Result<(), AuthError>,
) -> Result<(), AuthError> {
    let mut next = ctx(0);
    while !seq.is_empty() {
        let (tag, body) = read_any(seq, what)?;
        if tag & 0xe0 != 0xa0 || tag < next {
            return Err(AuthError::BadTag { what, expected: next, found: tag });
        }
        next = tag + 1;
        field(tag, body)?;
    }
    Ok(())
}

fn octets(body: &mut Reader<'_>, what: &'static str) -> Result<Vec<u8>, AuthError> {
    Ok(read_tlv(body, TAG_OCTETS, what)?.rest().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::hex;

    #[test]
    fn neg_token_init_matches_known_bytes_and_round_trips() {
        let init = NegTokenInit { mech_types: vec![NTLMSSP_OID.to_vec()], mech_token: Some(b"NTLMSSP\0".to_vec()) };
        let bytes = init.encode();
        let expected = hex("60 28 06 06 2b0601050502 a0 1e 30 1c a0 0e 30 0c 06 0a 2b06010401823702020a \
             a2 0a 04 08 4e544c4d53535000");
        assert_eq!(bytes, expected);
        assert_eq!(NegTokenInit::decode(&bytes).unwrap(), init);
        assert_eq!(init.mech_type_list(), hex("30 0c 06 0a 2b06010401823702020a"));
    }

    #[test]
    fn decodes_neg_token_init2_with_hints() {
        // Shape of a Windows SMB2 NEGOTIATE security buffer: two mechs and a
        // negHints [3] field, which is skipped.
        let hints = hex("a3 0a 30 08 a0 06 1b 04 6e6f6e65");
        let list = hex("30 18 06 0a 2b06010401823702020a 06 0a 2b06010401823702021e");
        let mut seq = Vec::new();
        write_tlv(&mut seq, 0x30, |o| {
            write_bytes(o, 0xa0, &list);
            o.extend_from_slice(&hints);
        });
        let mut token = Vec::new();
        write_tlv(&mut token, 0x60, |o| {
            write_bytes(o, 0x06, SPNEGO_OID);
            write_bytes(o, 0xa0, &seq);
        });
        let init = NegTokenInit::decode(&token).unwrap();
        assert_eq!(init.mech_types.len(), 2);
        assert_eq!(init.mech_types[0], NTLMSSP_OID);
        assert_eq!(init.mech_token, None);
    }

    #[test]
    fn neg_token_resp_round_trips() {
        let resp = NegTokenResp {
            neg_state: Some(NegState::AcceptIncomplete),
            supported_mech: Some(NTLMSSP_OID.to_vec()),
            response_token: Some(vec![7; 300]),
            mech_list_mic: Some(vec![1; 16]),
        };
        let bytes = resp.encode();
        assert_eq!(&bytes[..4], &[0xa1, 0x82, 0x01, 0x5f]);
        assert_eq!(NegTokenResp::decode(&bytes).unwrap(), resp);
        let empty = NegTokenResp::default();
        assert_eq!(empty.encode(), [0xa1, 0x02, 0x30, 0x00]);
        assert_eq!(NegTokenResp::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn rejects_malformed_tokens() {
        let good = NegTokenInit { mech_types: vec![NTLMSSP_OID.to_vec()], mech_token: Some(vec![1, 2, 3]) }.encode();
        for cut in 0..good.len() {
            assert!(NegTokenInit::decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong_oid = good.clone();
        wrong_oid[8] = 0x03; // 1.3.6.1.5.5.3
        assert_eq!(NegTokenInit::decode(&wrong_oid), Err(AuthError::NotSpnego));
        let mut trailing = good.clone();
        trailing.push(0);
        assert_eq!(NegTokenInit::decode(&trailing), Err(AuthError::TrailingData("InitialContextToken")));
        let huge = hex("a1 84 7f ff ff ff 30 00");
        assert_eq!(NegTokenResp::decode(&huge), Err(AuthError::Truncated("negTokenResp")));
        let bad_state = hex("a1 07 30 05 a0 03 0a 01 09");
        assert_eq!(NegTokenResp::decode(&bad_state), Err(AuthError::UnexpectedState(9)));
        let out_of_order = hex("a1 0c 30 0a a2 03 04 01 00 a0 03 0a 01 01");
        assert!(matches!(NegTokenResp::decode(&out_of_order), Err(AuthError::BadTag { found: 0xa0, .. })));
        let two_in_field = hex("a1 0a 30 08 a2 06 04 01 00 04 01 00");
        assert_eq!(NegTokenResp::decode(&two_in_field), Err(AuthError::TrailingData("NegTokenResp field")));
        assert!(NegTokenResp::decode(&good).is_err());
        assert!(NegTokenInit::decode(&NegTokenResp::default().encode()).is_err());
    }
}
