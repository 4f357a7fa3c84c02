//! S3 keys to SMB paths, and back.
//!
//! An S3 key is any UTF-8 string up to 1024 bytes; an SMB/NTFS name is not.
//! This module is the one place that decides how a key becomes a path on the
//! share (and how a name found on the share becomes a key again). It is pure:
//! no I/O, no configuration, so every rule here can be tested exhaustively.
//!
//! The rules:
//! - `/` separates components. A key ending in `/` is a directory marker.
//! - DOS device names (`CON`, `nul.txt`) get a private-use mark after their
//!   base, so Windows accepts them and Samba never shows an 8.3 alias.
//! - Characters that SMB or NTFS cannot hold are mapped reversibly into the
//!   Unicode private-use area, exactly as macOS (Services for Macintosh, "SFM")
//!   and Samba (`vfs_fruit` / `vfs_catia`) do, so files stay readable from Macs
//!   and Windows (see [`encode_component`] for the table and its sources).
//! - An object whose name is also a directory (`a/b` beside `a/b/c`, or a
//!   marker `a/b/` with a body) is kept beside that directory, under its
//!   name with [`BESIDE_MARK`] after it (see [`beside_name`]).
//! - Keys that cannot be mapped are refused with a [`KeyError`] before
//!   anything is written: empty keys and components, `.` and `..`, over-long
//!   keys or components, NUL, literal characters from our private-use range
//!   (which would make the mapping ambiguous), and the gateway's own
//!   [`INTERNAL_DIR`] as any component (a configured bucket keeps its state
//!   in a `.smbgate` of its own folder, wherever that lies).

use std::fmt;

/// Name of the directory that holds gateway state (temporary files, multipart
/// uploads). A key any of whose components equals it, compared
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
    /// A component names the gateway's [`INTERNAL_DIR`].
    Internal,
    /// The key contains a literal character in U+F001..=U+F02B, the range the
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
            KeyError::Internal => write!(f, "keys with a component {INTERNAL_DIR:?} are reserved by the gateway"),
            KeyError::ReservedChar => f.write_str(
                "the object key contains a character in U+F001..U+F02B, \
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
/// The characters [`decode_component`] maps back to ASCII.
const RESERVED: std::ops::RangeInclusive<char> = '\u{F001}'..='\u{F02A}';
/// Every character the mapping can produce: refused in keys.
const REFUSED: std::ops::RangeInclusive<char> = '\u{F001}'..='\u{F02B}';
/// Characters NTFS forbids anywhere in a name, in the order of their private
/// use code points: `PUNCT[i]` maps to U+F020 + i.
const PUNCT: [u8; 8] = *b"\"*:<>?\\|";
/// A space as the last character of a name.
const TRAILING_SPACE: char = pua(0x28);
/// A period as the last character of a name.
const TRAILING_PERIOD: char = pua(0x29);
/// Put after the base of a reserved device name (`CON.txt` →
/// `CON\u{F02A}.txt`), which Windows refuses and Samba shows only under an
/// 8.3 alias; decoding drops it. Ours, beyond the SFM table.
const DEVICE_MARK: char = pua(0x2A);
/// Put after the name of an object whose own name is a directory, because
/// other keys continue under it: the object `a/b` beside `a/b/c` is the file
/// `a\b\u{F02B}` beside the directory `a\b`, and a marker `a/b/` with a
/// body is `a\b\u{F02B}\u{F02B}`. No key maps to it ([`map_key`] refuses it
/// literally), and a directory listing shows the object beside its
/// directory, so a walk meets it in S3 order. Ours, beyond the SFM table.
pub const BESIDE_MARK: char = pua(0x2B);
/// The DOS device names, the part of a name before its first `.` compared
/// case-insensitively: Samba's list (`mangle_hash2.c`) plus Windows'
/// superscript-digit ports.
const DEVICE_NAMES: [&str; 28] = [
    "AUX",
    "CON",
    "NUL",
    "PRN",
    "COM1",
    "COM2",
    "COM3",
    "COM4",
    "COM5",
    "COM6",
    "COM7",
    "COM8",
    "COM9",
    "LPT1",
    "LPT2",
    "LPT3",
    "LPT4",
    "LPT5",
    "LPT6",
    "LPT7",
    "LPT8",
    "LPT9",
    "COM\u{B9}",
    "COM\u{B2}",
    "COM\u{B3}",
    "LPT\u{B9}",
    "LPT\u{B2}",
    "LPT\u{B3}",
];

/// `ENCODE[b]` is the private-use character for ASCII `b`, or `'\0'` when `b`
/// is stored as itself (the trailing space/period rule is applied separately).
const ENCODE: [char; 0x80] = build_encode();
/// `DECODE[u - 0xF000]` is the ASCII character for a private-use `u` in
/// U+F001..=U+F029; index 0 is unused ([`DEVICE_MARK`] decodes to nothing).
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
/// `"a. "` → `"a.\u{F028}"`). A DOS device name (`CON`, `nul.tar.gz`,
/// `Com1`, see [`DEVICE_NAMES`]) gets U+F02A after its base
/// (`"nul\u{F02A}.tar.gz"`). Everything else is kept. Every output character
/// is in the Basic Multilingual Plane exactly when its input was, so the
/// UTF-16 length grows only by the device mark.
///
/// This is injective on strings without characters in U+F001..=U+F02A, which
/// [`map_key`] refuses, and [`decode_component`] is its inverse there.
pub fn encode_component(c: &str) -> String {
    let mut out = String::with_capacity(c.len() + 4);
    let base = c.find('.').unwrap_or(c.len());
    let device = is_device_name(&c[..base]);
    let mut chars = c.char_indices().peekable();
    while let Some((at, ch)) = chars.next() {
        if device && at == base {
            out.push(DEVICE_MARK);
        }
        let last = chars.peek().is_none();
        out.push(match ch {
            ' ' if last => TRAILING_SPACE,
            '.' if last => TRAILING_PERIOD,
            _ if ch.is_ascii() && ENCODE[ch as usize] != '\0' => ENCODE[ch as usize],
            _ => ch,
        });
    }
    if device && base == c.len() {
        out.push(DEVICE_MARK);
    }
    out
}

/// True if `base` (a name's part before its first `.`) is a DOS device name.
fn is_device_name(base: &str) -> bool {
    DEVICE_NAMES
        .iter()
        .any(|d| d.chars().map(|c| c.to_ascii_uppercase()).eq(base.chars().map(|c| c.to_ascii_uppercase())))
}

/// Decodes a name found on the share into a key component: every character in
/// U+F001..=U+F029 becomes the ASCII character it stands for, wherever it is
/// (names made by Macs or by Samba's catia/fruit stay readable), and the
/// device mark U+F02A is dropped.
///
/// For names that [`encode_component`] produced this is the exact inverse. For
/// other names it can be lossy: a name with U+F028 in the middle decodes to a
/// space, which re-encodes to a space.
pub fn decode_component(n: &str) -> String {
    n.chars()
        .filter(|&ch| ch != DEVICE_MARK)
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
    if key.chars().any(|c| REFUSED.contains(&c)) {
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
    if path.split('/').any(is_internal) {
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

/// The name beside the directory `encoded` (an encoded component) under
/// which the object of the same name is kept: `encoded` and one
/// [`BESIDE_MARK`] for the object `…/name`, two for the marker `…/name/`
/// with a body.
pub fn beside_name(encoded: &str, marker: bool) -> String {
    let mut out = String::with_capacity(encoded.len() + 6);
    out.push_str(encoded);
    out.push(BESIDE_MARK);
    if marker {
        out.push(BESIDE_MARK);
    }
    out
}

/// What a name found on the share stores, from its [`BESIDE_MARK`]s: the
/// encoded name of the object and whether it is a marker (`…/name/`) kept
/// beside its directory. `None` for a plain name (no mark); a name whose
/// object part is empty or still holds a mark is no object's
/// (`Some(("", _))` is never returned).
pub fn split_beside(name: &str) -> Option<(&str, bool)> {
    let once = name.strip_suffix(BESIDE_MARK)?;
    let (stem, marker) = match once.strip_suffix(BESIDE_MARK) {
        Some(twice) => (twice, true),
        None => (once, false),
    };
    (!stem.is_empty() && !stem.contains(BESIDE_MARK)).then_some((stem, marker))
}

/// True if `name` has the shape of an 8.3 short name that a server made up
/// (`PROGRA~1`, Samba's `DN129I~K.TXT`): a base of at most 8 characters
/// with a `~` followed by upper-case letters or digits to its end, an
/// extension of at most 3, and no lower case. Samba lists a file whose
/// real name SMB cannot carry (a `:` in it, without `catia`) under such a
/// name only. A real name can have this shape too, so the shape only says
/// which names to check (see `listings/short_aliases.rs`).
pub fn looks_like_short_name(name: &str) -> bool {
    let (base, ext) = name.split_once('.').unwrap_or((name, ""));
    let Some((head, tail)) = base.rsplit_once('~') else { return false };
    let allowed = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || "_-!#$%&'()@^`{}".contains(c);
    base.len() <= 8
        && !head.is_empty()
        && !tail.is_empty()
        && tail.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && ext.len() <= 3
        && !ext.contains('.')
        && base.chars().chain(ext.chars()).all(|c| c == '~' || allowed(c))
}

/// True when `component` names [`INTERNAL_DIR`] on a case-insensitive share.
///
/// Compares under Unicode upper- and lower-casing rather than ASCII only, so
/// that a name a server might fold to `.SMBGATE` (for example with U+017F
/// LATIN SMALL LETTER LONG S, whose uppercase is `S`) is refused as well.
pub fn is_internal(component: &str) -> bool {
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

/// The S3 key of a name under a bucket's directory as a change
/// notification gives it (`\\`-separated components, relative to the
/// bucket): each component decoded, a leaf kept beside a directory of its
/// name read as its key (a marker as `key/`). `None` for a name no key
/// reaches: the gateway's own state (`.smbgate`), a beside-mark anywhere
/// else, or a name the mapping would not make again (another client's).
pub fn key_of_share_name(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split('\\').collect();
    let mut key = String::with_capacity(name.len());
    for (i, stored) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (stored, marker) = match split_beside(stored) {
            Some((stem, marker)) if last => (stem, marker),
            _ if stored.contains(BESIDE_MARK) => return None,
            _ => (*stored, false),
        };
        let decoded = decode_component(stored);
        if decoded.is_empty() || is_internal(&decoded) || encode_component(&decoded) != stored {
            return None;
        }
        if i > 0 {
            key.push('/');
        }
        key.push_str(&decoded);
        if marker {
            key.push('/');
        }
    }
    Some(key)
}

#[cfg(test)]
#[path = "keys_test.rs"]
mod tests;
