//! Golden bytes shared by the tests: the MS-NLMP 4.2.4 NTLMv2 example
//! (user "User", domain "Domain", password "Password", workstation
//! "COMPUTER", ServerChallenge 0123456789abcdef, ClientChallenge aa * 8,
//! time 0, RandomSessionKey 55 * 16), as hex with spaces for readability.

/// Decodes hex, ignoring spaces.
pub(crate) fn hex(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).expect("valid hex fixture")
}

/// 4.2.4 TargetInfo: NbDomainName "Domain", NbComputerName "Server", EOL.
pub(crate) const TARGET_INFO: &str = "02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000";

/// 4.2.4.3 CHALLENGE_MESSAGE (flags 0xe28a8233).
pub(crate) const CHALLENGE: &str = "4e544c4d53535000 02000000 0c000c0038000000 33828ae2 \
    0123456789abcdef 0000000000000000 2400240044000000 060070170000000f \
    530065007200760065007200 \
    02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000";

/// 4.2.4.3 AUTHENTICATE_MESSAGE (flags 0xe2888235, no MIC).
pub(crate) const AUTHENTICATE: &str = "4e544c4d53535000 03000000 180018006c000000 \
    5400540084000000 0c000c0048000000 0800080054000000 100010005c000000 10001000d8000000 \
    358288e2 0501280a0000000f \
    44006f006d00610069006e00 5500730065007200 43004f004d0050005500540045005200 \
    86c35097ac9cec102554764a57cccc19 aaaaaaaaaaaaaaaa \
    68cd0ab851e51c96aabc927bebef6a1c 0101000000000000 0000000000000000 aaaaaaaaaaaaaaaa 00000000 \
    02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000 00000000 \
    c5dad2544fc9799094ce1ce90bc9d03e";

/// The VERSION structure of the 4.2.4.3 AUTHENTICATE_MESSAGE (5.1.2600, rev 15).
pub(crate) const VERSION: [u8; 8] = [0x05, 0x01, 0x28, 0x0a, 0, 0, 0, 0x0f];
