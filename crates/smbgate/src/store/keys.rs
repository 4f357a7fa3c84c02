//! S3 keys to SMB paths, and back.
//!
//! An S3 key is any UTF-8 string up to 1024 bytes; an SMB/NTFS name is not.
//! This module is the one place that decides how a key becomes a path on the
//! share (and how a name found on the share becomes a key again). It is pure:
//! no I/O, no configuration, so every rule here can be tested exhaustively.
//!
//! The rules:
//! - `/` separates components. A key ending in `/` is a directory marker.
//! - Characters that SMB or NTFS cannot hold are mapped reversibly into the
//!   Unicode private-use area, exactly as macOS (Services for Macintosh, "SFM")
//!   and Samba (`vfs_fruit` / `vfs_catia`) do, so files stay readable from Macs
//!   and Windows (see [`encode_component`] for the table and its sources).
//! - Keys that cannot be mapped are refused with a [`KeyError`] before
//!   anything is written: empty keys and components, `.` and `..`, over-long
//!   keys or components, NUL, literal characters from our private-use range
//!   (which would make the mapping ambiguous), and the gateway's own
//!   [`INTERNAL_DIR`].

use std::fmt;

/// Name of the directory that holds gateway state (temporary files, multipart
/// uploads). A key whose first component equals it, compared
/// case-insensitively, is refused.
pub const INTERNAL_DIR: &str = ".smbgate";

/// The S3 limit on the length of a key, in bytes of UTF-8.
pub const MAX_KEY_BYTES: usize = 1024;

/// The NTFS/SMB limit on the length of one name, in UTF-16 code units.
pub const MAX_COMPONENT_UTF16: usize = 255;

/// Why a key cannot be stored on the share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The key is the empty string.
    Empty,
    /// The key is longer than [`MAX_KEY_BYTES`] bytes of UTF-8.
    TooLong,
    /// One component, once encoded, is longer than [`MAX_COMPONENT_UTF16`]
    /// UTF-16 code units. `component` is the component as it appears in the key.
    ComponentTooLong {
        /// The offending component, as written in the key (not encoded).
        component: String,
    },
    /// A component is `.` or `..`.
    DotComponent,
    /// A component is empty: `a//b`, a leading `/`, or the key `/`.
    EmptyComponent,
    /// The first component names the gateway's [`INTERNAL_DIR`].
    Internal,
    /// The key contains a literal character in U+F001..=U+F029, the range the
    /// mapping itself uses; accepting it would make two keys share one name.
    ReservedChar,
    /// The key contains U+0000, which no SMB name can hold.
    NulChar,
}

impl KeyError {
    /// The S3 error code to answer with.
    pub fn s3_code(&self) -> &'static str {
        match self {
            KeyError::TooLong | KeyError::ComponentTooLong { .. } => "KeyTooLongError",
            KeyError::Empty
            | KeyError::DotComponent
            | KeyError::EmptyComponent
            | KeyError::Internal
            | KeyError::ReservedChar
            | KeyError::NulChar => "InvalidArgument",
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Empty => f.write_str("the object key is empty"),
            KeyError::TooLong => write!(f, "the object key is longer than {MAX_KEY_BYTES} bytes"),
            KeyError::ComponentTooLong { component } => write!(
                f,
                "the key component {component:?} is longer than {MAX_COMPONENT_UTF16} UTF-16 code units, \
                 the longest name the file share can hold"
            ),
            KeyError::DotComponent => {
                f.write_str("the object key has a path component \".\" or \"..\", which the file share cannot hold")
            }
            KeyError::EmptyComponent => f.write_str(
                "the object key has an empty path component (a leading \"/\" or \"//\"), \
                 which the file share cannot hold",
            ),
            KeyError::Internal => write!(f, "keys beginning with {INTERNAL_DIR:?} are reserved by the gateway"),
            KeyError::ReservedChar => f.write_str(
                "the object key contains a character in U+F001..U+F029, \
                 which the gateway reserves for mapping characters the file share cannot hold",
            ),
            KeyError::NulChar => f.write_str("the object key contains a NUL character"),
        }
    }
}

impl std::error::Error for KeyError {}

/// A key mapped to names the share can hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedKey {
    /// The path components, already encoded (SMB-safe). Never empty.
    pub components: Vec<String>,
    /// True when the key ends in `/`: a directory marker object. `a/b/` has
    /// components `["a", "b"]`.
    pub dir_marker: bool,
}

// The mapping table.
//
// Sources (checked against public code, not copied):
// - Apple, msdosfs `Conv.c` (`mac2sfm`, `sfm2mac`, `ucs_to_sfm`): 0x01..=0x1F
//   become U+F001..=U+F01F; `"` `*` `:` `<` `>` `?` `\` `|` become
//   U+F020..=U+F027 in that order; the LAST character of a name, when it is a
//   space or a period, becomes U+F028 or U+F029. Decoding maps any
//   U+F001..=U+F029 back.
// - Linux `fs/smb/client/cifs_unicode.h` (the "SFM" remapping, `mapposix`):
//   SFM_DOUBLEQUOTE 0xF020, SFM_ASTERISK 0xF021, SFM_COLON 0xF022,
//   SFM_LESSTHAN 0xF023, SFM_GRTRTHAN 0xF024, SFM_QUESTION 0xF025,
//   SFM_SLASH (backslash) 0xF026, SFM_PIPE 0xF027, SFM_SPACE 0xF028,
//   SFM_PERIOD 0xF029.
// - Samba `source3/lib/string_replace.c` (`macos_string_replace_map`, used by
//   vfs_fruit and vfs_catia): the same U+F001..=U+F027 pairs. It has no
//   trailing space/period entries, so a Samba share never produces U+F028 or
//   U+F029 itself; Macs do, and we decode them anywhere.
// Apple's table also sends '/' to U+F022, because a Mac shows ':' where a
// POSIX path has '/'. That does not concern us: '/' separates key components.

/// First code point of the private-use block the mapping uses.
const PUA_BASE: u32 = 0xF000;
/// The reserved range: every character the mapping can produce.
const RESERVED: std::ops::RangeInclusive<char> = '\u{F001}'..='\u{F029}';
/// Characters NTFS forbids anywhere in a name, in the order of their private
/// use code points: `PUNCT[i]` maps to U+F020 + i.
const PUNCT: [u8; 8] = *b"\"*:<>?\\|";
/// A space as the last character of a name.
const TRAILING_SPACE: char = pua(0x28);
/// A period as the last character of a name.
const TRAILING_PERIOD: char = pua(0x29);

/// `ENCODE[b]` is the private-use character for ASCII `b`, or `'\0'` when `b`
/// is stored as itself (the trailing space/period rule is applied separately).
const ENCODE: [char; 0x80] = build_encode();
/// `DECODE[u - 0xF000]` is the ASCII character for a private-use `u` in
/// [`RESERVED`]; index 0 is unused.
const DECODE: [u8; 0x2A] = build_decode();

const fn pua(low: u32) -> char {
    match char::from_u32(PUA_BASE + low) {
        Some(c) => c,
        None => panic!("private-use code point out of range"),
    }
}

const fn build_encode() -> [char; 0x80] {
    let mut table = ['\0'; 0x80];
    let mut b = 0x01;
    while b < 0x20 {
        table[b] = pua(b as u32);
        b += 1;
    }
    let mut i = 0;
    while i < PUNCT.len() {
        table[PUNCT[i] as usize] = pua(0x20 + i as u32);
        i += 1;
    }
    table
}

const fn build_decode() -> [u8; 0x2A] {
    let mut table = [0u8; 0x2A];
    let mut b = 0x01;
    while b < 0x20 {
        table[b] = b as u8;
        b += 1;
    }
    let mut i = 0;
    while i < PUNCT.len() {
        table[0x20 + i] = PUNCT[i];
        i += 1;
    }
    table[0x28] = b' ';
    table[0x29] = b'.';
    table
}

/// Encodes one key component into a name the share can hold.
///
/// Control characters 0x01..=0x1F become U+F001..=U+F01F; `"` `*` `:` `<` `>`
/// `?` `\` `|` become U+F020..=U+F027; a space or `.` that is the last
/// character becomes U+F028 or U+F029 (`"dot."` → `"dot\u{F029}"`,
/// `"a. "` → `"a.\u{F028}"`). Everything else is kept. Every output character
/// is in the Basic Multilingual Plane exactly when its input was, so the
/// UTF-16 length does not change.
///
/// This is injective on strings without characters in U+F001..=U+F029, which
/// [`map_key`] refuses, and [`decode_component`] is its inverse there.
pub fn encode_component(c: &str) -> String {
    let mut out = String::with_capacity(c.len() + 2);
    let mut chars = c.chars().peekable();
    while let Some(ch) = chars.next() {
        let last = chars.peek().is_none();
        out.push(match ch {
            ' ' if last => TRAILING_SPACE,
            '.' if last => TRAILING_PERIOD,
            _ if ch.is_ascii() && ENCODE[ch as usize] != '\0' => ENCODE[ch as usize],
            _ => ch,
        });
    }
    out
}

/// Decodes a name found on the share into a key component: every character in
/// U+F001..=U+F029 becomes the ASCII character it stands for, wherever it is
/// (names made by Macs or by Samba's catia/fruit stay readable).
///
/// For names that [`encode_component`] produced this is the exact inverse. For
/// other names it can be lossy: a name with U+F028 in the middle decodes to a
/// space, which re-encodes to a space.
pub fn decode_component(n: &str) -> String {
    n.chars()
        .map(|ch| if RESERVED.contains(&ch) { char::from(DECODE[(ch as u32 - PUA_BASE) as usize]) } else { ch })
        .collect()
}

/// Maps an S3 key to the encoded path components under its bucket, or says why
/// it cannot be stored.
///
/// # Errors
///
/// A [`KeyError`] for a key the share cannot hold; nothing about it should be
/// written. The checks run in this order and the first that fails decides the
/// error: empty key, key length, NUL, reserved characters, empty or dot
/// components, the internal directory, component length.
pub fn map_key(key: &str) -> Result<MappedKey, KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(KeyError::TooLong);
    }
    if key.contains('\0') {
        return Err(KeyError::NulChar);
    }
    if key.chars().any(|c| RESERVED.contains(&c)) {
        return Err(KeyError::ReservedChar);
    }
    let (path, dir_marker) = match key.strip_suffix('/') {
        Some(path) => (path, true),
        None => (key, false),
    };
    // Shape errors (empty, `.`, `..`) are found in every component before
    // the internal-directory and length checks run.
    for part in path.split('/') {
        if part.is_empty() {
            return Err(KeyError::EmptyComponent);
        }
        if part == "." || part == ".." {
            return Err(KeyError::DotComponent);
        }
    }
    if path.split('/').next().is_some_and(is_internal) {
        return Err(KeyError::Internal);
    }
    let mut components = Vec::with_capacity(path.split('/').count());
    for part in path.split('/') {
        let encoded = encode_component(part);
        if encoded.encode_utf16().count() > MAX_COMPONENT_UTF16 {
            return Err(KeyError::ComponentTooLong { component: part.to_owned() });
        }
        components.push(encoded);
    }
    Ok(MappedKey { components, dir_marker })
}

/// True when `component` names [`INTERNAL_DIR`] on a case-insensitive share.
///
/// Compares under Unicode upper- and lower-casing rather than ASCII only, so
/// that a name a server might fold to `.SMBGATE` (for example with U+017F
/// LATIN SMALL LETTER LONG S, whose uppercase is `S`) is refused as well.
fn is_internal(component: &str) -> bool {
    component.chars().flat_map(char::to_uppercase).eq(INTERNAL_DIR.chars().map(|c| c.to_ascii_uppercase()))
        || component.chars().flat_map(char::to_lowercase).eq(INTERNAL_DIR.chars())
}

impl MappedKey {
    /// The S3 key this mapping came from.
    pub fn original(&self) -> String {
        let comps: Vec<&str> = self.components.iter().map(String::as_str).collect();
        key_from_components(&comps, self.dir_marker)
    }
}

/// The S3 key for encoded components found on the share: each is decoded,
/// they are joined with `/`, and a `/` is appended for a directory marker.
pub fn key_from_components(components: &[&str], dir_marker: bool) -> String {
    let mut key = components.iter().map(|c| decode_component(c)).collect::<Vec<_>>().join("/");
    if dir_marker {
        key.push('/');
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::path::SharePath;
    use proptest::prelude::*;

    /// Maps `key`, checks that it round-trips, and returns the components.
    fn ok(key: &str) -> Vec<String> {
        let m = map_key(key).unwrap_or_else(|e| panic!("{key:?} refused: {e}"));
        let parts: Vec<&str> = m.components.iter().map(String::as_str).collect();
        assert_eq!(key_from_components(&parts, m.dir_marker), key, "round trip of {key:?}");
        assert!(!m.dir_marker, "{key:?} is not a directory marker");
        m.components
    }

    fn err(key: &str) -> KeyError {
        match map_key(key) {
            Ok(m) => panic!("{key:?} accepted as {m:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn plain_and_percent_keys_are_unchanged() {
        assert_eq!(ok("a b"), ["a b"]);
        assert_eq!(ok("a+b"), ["a+b"]);
        assert_eq!(ok("100%"), ["100%"]);
        assert_eq!(ok("ü/é"), ["ü", "é"]);
        assert_eq!(ok("a/b/c.txt"), ["a", "b", "c.txt"]);
    }

    #[test]
    fn forbidden_characters_map_to_private_use() {
        assert_eq!(ok("x:y"), ["x\u{F022}y"]);
        assert_eq!(ok("q?"), ["q\u{F025}"]);
        assert_eq!(ok("ctl\u{1}x"), ["ctl\u{F001}x"]);
        assert_eq!(ok("\u{1f}"), ["\u{F01F}"]);
        assert_eq!(ok("\"*:<>?\\|"), ["\u{F020}\u{F021}\u{F022}\u{F023}\u{F024}\u{F025}\u{F026}\u{F027}"]);
        // Characters NTFS allows are kept, even where they look odd.
        assert_eq!(ok("\u{7f}~#"), ["\u{7f}~#"]);
    }

    #[test]
    fn only_the_last_space_or_period_is_mapped() {
        assert_eq!(ok("dot."), ["dot\u{F029}"]);
        assert_eq!(ok("trail "), ["trail\u{F028}"]);
        assert_eq!(ok("a. "), ["a.\u{F028}"]);
        assert_eq!(ok("a .."), ["a .\u{F029}"]);
        assert_eq!(ok(".hidden"), [".hidden"]);
        assert_eq!(ok("..."), ["..\u{F029}"]);
        assert_eq!(ok(" "), ["\u{F028}"]);
        assert_eq!(ok("d./e. /f"), ["d\u{F029}", "e.\u{F028}", "f"]);
    }

    #[test]
    fn every_table_entry_round_trips() {
        for b in 0x01u8..0x80 {
            let c = char::from(b);
            let enc = encode_component(&format!("{c}x"));
            assert_eq!(decode_component(&enc), format!("{c}x"));
            let expected = match b {
                0x01..=0x1f => char::from_u32(0xF000 + u32::from(b)).unwrap(),
                b'"' => '\u{F020}',
                b'*' => '\u{F021}',
                b':' => '\u{F022}',
                b'<' => '\u{F023}',
                b'>' => '\u{F024}',
                b'?' => '\u{F025}',
                b'\\' => '\u{F026}',
                b'|' => '\u{F027}',
                _ => c,
            };
            assert_eq!(enc.chars().next(), Some(expected), "byte {b:#04x}");
        }
    }

    #[test]
    fn names_from_macs_decode_anywhere() {
        assert_eq!(decode_component("a\u{F028}b"), "a b");
        assert_eq!(decode_component("\u{F029}x"), ".x");
        assert_eq!(decode_component("\u{F001}\u{F026}"), "\u{1}\\");
        // Just outside the range: kept.
        assert_eq!(decode_component("\u{F000}\u{F02A}"), "\u{F000}\u{F02A}");
    }

    #[test]
    fn unmappable_keys_are_refused() {
        assert_eq!(err(""), KeyError::Empty);
        assert_eq!(err(".."), KeyError::DotComponent);
        assert_eq!(err("."), KeyError::DotComponent);
        assert_eq!(err("a/./b"), KeyError::DotComponent);
        assert_eq!(err("a/../b"), KeyError::DotComponent);
        assert_eq!(err("a/.."), KeyError::DotComponent);
        assert_eq!(err("../"), KeyError::DotComponent);
        assert_eq!(err("a//b"), KeyError::EmptyComponent);
        assert_eq!(err("/a"), KeyError::EmptyComponent);
        assert_eq!(err("/"), KeyError::EmptyComponent);
        assert_eq!(err("//"), KeyError::EmptyComponent);
        assert_eq!(err("a//"), KeyError::EmptyComponent);
        assert_eq!(err("a\0b"), KeyError::NulChar);
        assert_eq!(err("a\u{F022}b"), KeyError::ReservedChar);
        assert_eq!(err("\u{F001}"), KeyError::ReservedChar);
        assert_eq!(err("x\u{F029}"), KeyError::ReservedChar);
        assert_eq!(ok("\u{F000}\u{F02A}"), ["\u{F000}\u{F02A}"]);
    }

    #[test]
    fn key_length_is_limited_to_1024_bytes() {
        let long = "a".repeat(1025);
        assert_eq!(err(&long), KeyError::TooLong);
        // 4 × 255 + 3 separators + a trailing '/' = 1024 bytes.
        let c = "b".repeat(255);
        let max = format!("{c}/{c}/{c}/{c}/");
        assert_eq!(max.len(), 1024);
        let m = map_key(&max).unwrap();
        assert_eq!(m.components.len(), 4);
        assert!(m.dir_marker);
        // Bytes, not chars: 684 chars, but 'é' takes two bytes, so 1026 bytes.
        assert_eq!(err(&"é/".repeat(342)), KeyError::TooLong);
    }

    #[test]
    fn component_length_is_limited_to_255_utf16_units() {
        let c255 = "c".repeat(255);
        assert_eq!(ok(&c255), [c255]);
        let c256 = "c".repeat(256);
        assert_eq!(err(&c256), KeyError::ComponentTooLong { component: c256.clone() });
        assert_eq!(err(&format!("ok/{c256}/ok")), KeyError::ComponentTooLong { component: c256 });
        // Mapping does not change the length: 254 chars plus a trailing '.'.
        let dotted = format!("{}.", "d".repeat(254));
        assert_eq!(ok(&dotted).concat().encode_utf16().count(), 255);
        // Outside the BMP each char is two units: 127 × '😀' = 254, 128 = 256.
        assert_eq!(ok(&"😀".repeat(127)), ["😀".repeat(127)]);
        let smileys = "😀".repeat(128);
        assert_eq!(err(&smileys), KeyError::ComponentTooLong { component: smileys.clone() });
        assert_eq!(err(&smileys).s3_code(), "KeyTooLongError");
    }

    #[test]
    fn internal_dir_is_refused_case_insensitively() {
        assert_eq!(err(".smbgate/x"), KeyError::Internal);
        assert_eq!(err(".SMBGATE/x"), KeyError::Internal);
        assert_eq!(err(".SmbGate"), KeyError::Internal);
        assert_eq!(err(".smbgate/"), KeyError::Internal);
        assert_eq!(err(".\u{17f}mbgate/x"), KeyError::Internal);
        // Only the first component, and only the exact name.
        assert_eq!(ok("x/.smbgate"), ["x", ".smbgate"]);
        assert_eq!(ok(".smbgate2/x"), [".smbgate2", "x"]);
        assert_eq!(ok(".smbgate./x"), [".smbgate\u{F029}", "x"]);
    }

    #[test]
    fn directory_markers() {
        let m = map_key("dir/").unwrap();
        assert_eq!(m, MappedKey { components: vec!["dir".into()], dir_marker: true });
        assert_eq!(SharePath::default().join_key(&m).as_str(), "dir");
        assert_eq!(key_from_components(&["dir"], true), "dir/");
        let m = map_key("a/b:c/").unwrap();
        assert_eq!(m.components, ["a", "b\u{F022}c"]);
        assert!(m.dir_marker);
        assert_eq!(SharePath::default().join_key(&m).as_str(), "a\\b\u{F022}c");
        assert_eq!(key_from_components(&["a", "b\u{F022}c"], true), "a/b:c/");
        assert_eq!(map_key("dot./").unwrap().components, ["dot\u{F029}"]);
    }

    #[test]
    fn smb_paths_use_backslashes() {
        let m = map_key("a/b\\c/d").unwrap();
        assert_eq!(SharePath::default().join_key(&m).as_str(), "a\\b\u{F026}c\\d");
    }

    #[test]
    fn errors_have_s3_codes_and_messages() {
        let all = [
            KeyError::Empty,
            KeyError::TooLong,
            KeyError::ComponentTooLong { component: "x".into() },
            KeyError::DotComponent,
            KeyError::EmptyComponent,
            KeyError::Internal,
            KeyError::ReservedChar,
            KeyError::NulChar,
        ];
        for e in &all {
            let expected = match e {
                KeyError::TooLong | KeyError::ComponentTooLong { .. } => "KeyTooLongError",
                _ => "InvalidArgument",
            };
            assert_eq!(e.s3_code(), expected);
            assert!(!e.to_string().is_empty());
        }
        let e = KeyError::ComponentTooLong { component: "a\u{1}b".into() };
        assert!(e.to_string().contains("\"a\\u{1}b\""), "{e}");
    }

    /// True when `name` is safe to send as one SMB name component.
    fn is_smb_safe(name: &str) -> bool {
        !name.is_empty()
            && name != "."
            && name != ".."
            && !name.chars().any(|c| c < '\u{20}' || "\"*:<>?\\|/".contains(c))
            && !name.ends_with(['.', ' '])
            && name.encode_utf16().count() <= MAX_COMPONENT_UTF16
    }

    /// Characters that exercise the mapping, mixed with arbitrary ones.
    fn component_char() -> impl Strategy<Value = char> {
        prop_oneof![
            3 => any::<char>(),
            2 => prop::sample::select(vec!['a', 'Z', '.', ' ', '"', '*', ':', '<', '>', '?', '\\', '|', '%', '+', '~']),
            1 => (1u32..0x20).prop_map(|b| char::from_u32(b).unwrap()),
            1 => prop::sample::select(vec!['é', 'ß', '\u{7f}', '\u{F000}', '\u{F02A}', '\u{FFFD}', '😀']),
        ]
        .prop_filter("not a separator, NUL or reserved", |c| *c != '/' && *c != '\0' && !RESERVED.contains(c))
    }

    fn component() -> impl Strategy<Value = String> {
        prop::collection::vec(component_char(), 1..12)
            .prop_map(|cs| cs.into_iter().collect::<String>())
            .prop_filter("not a dot component", |c| c != "." && c != "..")
    }

    /// Keys that must be accepted: valid components, optionally a marker.
    fn valid_key() -> impl Strategy<Value = String> {
        (prop::collection::vec(component(), 1..8), any::<bool>())
            .prop_filter("first component is not internal", |(cs, _)| !is_internal(&cs[0]))
            .prop_map(|(cs, marker)| {
                let mut key = cs.join("/");
                if marker {
                    key.push('/');
                }
                key
            })
    }

    /// Any string, biased toward separators, dots and reserved characters.
    fn any_key() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            prop::collection::vec(
                prop_oneof![
                    prop::sample::select(vec!['/', '.', ' ', ':', '\0', '\u{1}', '\u{F022}', '\u{F029}', 'S', 's']),
                    any::<char>(),
                ],
                0..24
            )
            .prop_map(|cs| cs.into_iter().collect()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn valid_keys_map_and_round_trip(key in valid_key()) {
            let m = map_key(&key).map_err(|e| TestCaseError::fail(format!("{key:?}: {e}")))?;
            prop_assert_eq!(m.dir_marker, key.ends_with('/'));
            let parts: Vec<&str> = m.components.iter().map(String::as_str).collect();
            prop_assert_eq!(key_from_components(&parts, m.dir_marker), key);
            for c in &m.components {
                prop_assert!(is_smb_safe(c), "unsafe component {:?}", c);
            }
        }

        #[test]
        fn any_key_is_refused_or_safe_and_reversible(key in any_key()) {
            if let Ok(m) = map_key(&key) {
                let parts: Vec<&str> = m.components.iter().map(String::as_str).collect();
                prop_assert_eq!(key_from_components(&parts, m.dir_marker), key.clone());
                prop_assert!(!is_internal(&decode_component(parts[0])));
                let path = key.strip_suffix('/').unwrap_or(&key);
                for part in path.split('/') {
                    prop_assert!(!part.is_empty() && part != "." && part != "..", "{:?} accepted", key);
                }
                for c in &m.components {
                    prop_assert!(is_smb_safe(c), "unsafe component {:?} from {:?}", c, key);
                }
            }
        }

        #[test]
        fn encode_is_injective(a in component(), b in component()) {
            prop_assert_eq!(decode_component(&encode_component(&a)), a.clone());
            if a != b {
                prop_assert_ne!(encode_component(&a), encode_component(&b));
            }
        }

        #[test]
        fn encode_is_injective_on_a_small_alphabet(
            a in "[a. :?\u{1}\\\\]{0,4}",
            b in "[a. :?\u{1}\\\\]{0,4}",
        ) {
            prop_assert_eq!(decode_component(&encode_component(&a)), a.clone());
            prop_assert_eq!(encode_component(&a) == encode_component(&b), a == b);
        }

        #[test]
        fn encoding_keeps_utf16_length(a in component()) {
            prop_assert_eq!(encode_component(&a).encode_utf16().count(), a.encode_utf16().count());
        }
    }
}
