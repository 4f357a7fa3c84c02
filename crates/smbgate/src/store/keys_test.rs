//! Tests of `keys.rs`.
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
fn short_name_shapes() {
    for alias in ["DN129I~K.TXT", "PROGRA~1", "PROGR~12", "A~1", "MY_DOC~2.HTM"] {
        assert!(looks_like_short_name(alias), "{alias}");
    }
    for name in
        ["report.txt", "ok~1.txt", "PROGRA~12", "LONGNAME~1.TXT", "~1.TXT", "ABC~.TXT", "A~1.HTML", "A~1.B.C", "AB C~1"]
    {
        assert!(!looks_like_short_name(name), "{name}");
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
    // Just outside the range: kept. The device mark is dropped.
    assert_eq!(decode_component("\u{F000}\u{F02B}"), "\u{F000}\u{F02B}");
    assert_eq!(decode_component("a\u{F02A}b"), "ab");
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
    assert_eq!(err("x\u{F02A}"), KeyError::ReservedChar);
    assert_eq!(err("x\u{F02B}"), KeyError::ReservedChar);
    assert_eq!(ok("\u{F000}\u{F02C}"), ["\u{F000}\u{F02C}"]);
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
    // Anywhere in the key: a configured bucket's folder may lie below.
    assert_eq!(err("alpha/.smbgate/uploads/x/part-00001"), KeyError::Internal);
    assert_eq!(err("a/b/.SMBGATE"), KeyError::Internal);
    assert_eq!(err("a/.smbgate/"), KeyError::Internal);
    assert!(map_key("a/.smbgate2/x").is_ok() && map_key("a/x.smbgate").is_ok());
    // Only the exact name.
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
        && !is_device(name)
}

/// A DOS device name as Windows and Samba's mangling see one: the part
/// before the first `.`, case-insensitively.
fn is_device(name: &str) -> bool {
    let base = name.split('.').next().unwrap_or_default().to_ascii_uppercase();
    ["AUX", "CON", "NUL", "PRN"].contains(&base.as_str())
        || (base.len() == 4
            && (base.starts_with("COM") || base.starts_with("LPT"))
            && matches!(base.as_bytes()[3], b'1'..=b'9'))
        || ["COM\u{B9}", "COM\u{B2}", "COM\u{B3}", "LPT\u{B9}", "LPT\u{B2}", "LPT\u{B3}"].contains(&base.as_str())
}

#[test]
fn device_names_get_a_mark_after_their_base_and_round_trip() {
    for (key, name) in [
        ("CON", "CON\u{F02A}"),
        ("con.txt", "con\u{F02A}.txt"),
        ("nul.tar.gz", "nul\u{F02A}.tar.gz"),
        ("Com1", "Com1\u{F02A}"),
        ("LPT9.log", "LPT9\u{F02A}.log"),
        ("aux.", "aux\u{F02A}\u{F029}"),
        ("prn:x", "prn:x"),
        ("COM\u{B9}", "COM\u{B9}\u{F02A}"),
    ] {
        let want = if key == "prn:x" { "prn\u{F022}x".to_string() } else { name.to_string() };
        assert_eq!(ok(key), [want.as_str()], "{key}");
        assert_eq!(decode_component(&want), key);
    }
    // Not device names: longer bases, COM0, a device name later in the name.
    for key in ["CONSOLE", "com10", "COM0", "lpt", "x.con", "null.txt", "con x.txt"] {
        assert_eq!(ok(key), [key], "{key}");
    }
    assert_eq!(ok("dir/AUX/x"), ["dir", "AUX\u{F02A}", "x"]);
}

/// Characters that exercise the mapping, mixed with arbitrary ones.
fn component_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        2 => prop::sample::select(vec!['a', 'Z', '.', ' ', '"', '*', ':', '<', '>', '?', '\\', '|', '%', '+', '~']),
        1 => (1u32..0x20).prop_map(|b| char::from_u32(b).unwrap()),
        1 => prop::sample::select(vec!['é', 'ß', '\u{7f}', '\u{F000}', '\u{F02A}', '\u{F02B}', '\u{FFFD}', '😀']),
    ]
    .prop_filter("not a separator, NUL or reserved", |c| *c != '/' && *c != '\0' && !REFUSED.contains(c))
}

fn component() -> impl Strategy<Value = String> {
    prop::collection::vec(component_char(), 1..12)
        .prop_map(|cs| cs.into_iter().collect::<String>())
        .prop_filter("not a dot component", |c| c != "." && c != "..")
}

/// Keys that must be accepted: valid components, optionally a marker.
fn valid_key() -> impl Strategy<Value = String> {
    (prop::collection::vec(component(), 1..8), any::<bool>())
        .prop_filter("no component is internal", |(cs, _)| !cs.iter().any(|c| is_internal(c)))
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
            prop_assert!(!parts.iter().any(|p| is_internal(&decode_component(p))));
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
    fn encoding_keeps_utf16_length_but_for_the_device_mark(a in component()) {
        let e = encode_component(&a);
        let marks = e.matches('\u{F02A}').count();
        prop_assert_eq!(marks, usize::from(is_device(&a)));
        prop_assert_eq!(e.encode_utf16().count(), a.encode_utf16().count() + marks);
    }

    #[test]
    fn encode_is_injective_among_device_like_names(
        a in "(con|CoN|nul|com1|Lpt9|aux|prn|x)[.a ]{0,3}",
        b in "(con|CoN|nul|com1|Lpt9|aux|prn|x)[.a ]{0,3}",
    ) {
        prop_assert_eq!(decode_component(&encode_component(&a)), a.clone());
        prop_assert_eq!(encode_component(&a) == encode_component(&b), a == b);
        prop_assert!(!is_device(&encode_component(&a)), "{:?} still a device name", a);
    }
}

#[test]
fn objects_beside_their_directory() {
    assert_eq!(beside_name("bar", false), "bar\u{F02B}");
    assert_eq!(beside_name("bar", true), "bar\u{F02B}\u{F02B}");
    assert_eq!(split_beside("bar\u{F02B}"), Some(("bar", false)));
    assert_eq!(split_beside("bar\u{F02B}\u{F02B}"), Some(("bar", true)));
    // A device name keeps its own mark: `CON` beside the directory `CON`.
    let con = encode_component("CON");
    assert_eq!(split_beside(&beside_name(&con, false)), Some((con.as_str(), false)));
    assert_eq!(split_beside("bar"), None);
    // No object: an empty stem, a third mark, a mark inside.
    assert_eq!(split_beside("\u{F02B}"), None);
    assert_eq!(split_beside("\u{F02B}\u{F02B}"), None);
    assert_eq!(split_beside("bar\u{F02B}\u{F02B}\u{F02B}"), None);
    assert_eq!(split_beside("b\u{F02B}ar\u{F02B}"), None);
}

proptest! {
    #[test]
    fn no_key_maps_to_a_beside_name(key in valid_key()) {
        let m = map_key(&key).unwrap();
        for c in &m.components {
            prop_assert!(!c.contains(BESIDE_MARK), "{:?} holds the beside mark", c);
            let beside = beside_name(c, m.dir_marker);
            prop_assert_eq!(split_beside(&beside), Some((c.as_str(), m.dir_marker)));
        }
    }
}

#[test]
fn names_in_change_notifications_map_back_to_keys() {
    let m = map_key("dir/a b?.txt").unwrap();
    assert_eq!(key_of_share_name(&m.components.join("\\")).as_deref(), Some("dir/a b?.txt"));
    assert_eq!(key_of_share_name(".smbgate\\tmp\\x"), None);
    assert_eq!(key_of_share_name("d\\.SMBGATE"), None);
    let beside = format!("photo{BESIDE_MARK}");
    assert_eq!(key_of_share_name(&format!("a\\{beside}")).as_deref(), Some("a/photo"));
    assert_eq!(key_of_share_name(&format!("{beside}\\b")), None);
    // A trailing space is a name the mapping never makes (it encodes it).
    assert_eq!(key_of_share_name("dir\\name "), None);
}
