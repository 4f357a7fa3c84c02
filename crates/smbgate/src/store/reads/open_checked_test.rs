//! The one open of a key ([`open_checked`]) on the in-memory share
//! (`memory_share`): what a GET, HEAD or record change finds, and the
//! checks that what opened is the key's object: the record names the key,
//! the on-disk name is the key's where the server matches other spellings
//! (another case, an 8.3 alias), and it is the kind of thing the key
//! names. The same answers are checked against smbd in
//! tests/e2e/test_case.py, tests/e2e/test_short_aliases.py and
//! tests/e2e/test_nested_keys.py.

use super::{check_exact_name, open_checked, Asked, ForRead, ForRecordChange, ForStat, OpenFor};
use crate::store::keys::map_key;
use crate::store::memory_share::{alone, MemoryShare, ALL, DELETE};
use crate::store::meta::ObjectMeta;
use crate::store::path::SharePath;
use crate::store::reads::find_stored::KeyPlaces;
use crate::store::share::Failure;
use crate::store::types::ObjectInfo;
use crate::store::StoreResult;

/// Opens `key` in the bucket `b` of `s` for what `how` says, on a share
/// that matches names without case if `case_insensitive`. Returns the
/// answer, the checked record and the object's info.
async fn open<K: OpenFor<MemoryShare>>(
    s: &MemoryShare,
    key: &str,
    case_insensitive: bool,
    how: K,
) -> StoreResult<(K::Answer, Option<ObjectMeta>, ObjectInfo)> {
    let mapped = map_key(key).expect("a valid key");
    let bucket = || SharePath::root("b");
    let lock = |p: &SharePath| p.as_str().to_lowercase();
    let places = KeyPlaces { own: bucket().join_key(&mapped), bucket: &bucket, lock: &lock };
    let asked = Asked { key, mapped: &mapped, bucket: &bucket, case_insensitive };
    let (answer, meta, info, _) = alone(s, open_checked(s, &places, &asked, how)).await?;
    Ok((answer, meta, info))
}

/// What a HEAD of `key` answers: the ETag, or the error's name.
async fn head(s: &MemoryShare, key: &str, case_insensitive: bool) -> Result<String, String> {
    open(s, key, case_insensitive, ForStat).await.map(|(_, _, info)| info.etag).map_err(|e| format!("{e:?}"))
}

fn nsk() -> Result<String, String> {
    Err("NoSuchKey".into())
}

fn record(key: &str, etag: &str) -> ObjectMeta {
    ObjectMeta { key: Some(key.to_string()), etag: etag.to_string(), ..Default::default() }
}

fn bucket() -> MemoryShare {
    let s = MemoryShare::default();
    s.mkdir("b");
    s
}

#[tokio::test(start_paused = true)]
async fn a_key_opens_with_its_record_for_a_get_a_head_and_a_record_change() {
    let s = bucket();
    s.put_record("b\\k", 10, record("k", "e1"));
    let ((_, _, data, _), meta, info) = open(&s, "k", false, ForRead(Some((0, 4)))).await.unwrap();
    assert_eq!((info.etag.as_str(), info.size, info.path.as_str()), ("e1", 10, "b\\k"));
    assert_eq!(meta.and_then(|m| m.key).as_deref(), Some("k"));
    assert_eq!(data.as_deref(), Some(&b""[..]), "the model's file holds no bytes");
    assert_eq!(head(&s, "k", false).await, Ok("e1".into()));
    let (_, meta, info) = open(&s, "k", false, ForRecordChange).await.unwrap();
    assert_eq!((meta.map(|m| m.etag), info.etag), (Some("e1".into()), "e1".into()));
    assert_eq!(head(&s, "nothing", false).await, nsk());
}

#[tokio::test(start_paused = true)]
async fn a_record_written_for_another_key_is_dropped_as_foreign() {
    let s = bucket();
    // Someone renamed the object of `other` to `k`.
    s.put_record("b\\k", 10, record("other", "e1"));
    let (_, meta, info) = open(&s, "k", false, ForStat).await.unwrap();
    assert!(meta.is_none(), "the record is not k's: {meta:?}");
    assert_ne!(info.etag, "e1", "the ETag is the file's own, derived one");
    assert_eq!(info.size, 10);
}

#[tokio::test(start_paused = true)]
async fn another_spelling_of_a_key_answers_no_such_key() {
    let s = bucket();
    s.put_record("b\\Key", 3, record("Key", "e1"));
    s.alias("b\\key", "b\\Key");
    // The record names `Key`: `key` is another key, whatever the share
    // matches.
    assert_eq!(head(&s, "key", false).await, nsk());
    assert_eq!(head(&s, "key", true).await, nsk());
    assert_eq!(head(&s, "Key", true).await, Ok("e1".into()));
}

#[tokio::test(start_paused = true)]
async fn a_file_without_a_record_is_judged_by_its_on_disk_name() {
    let s = bucket();
    s.put_sized("b\\Key", "", 5, &[]);
    s.alias("b\\key", "b\\Key");
    for how in [0, 1, 2] {
        let got = match how {
            0 => open(&s, "key", true, ForStat).await.map(|_| ()),
            1 => open(&s, "key", true, ForRead(None)).await.map(|_| ()),
            _ => open(&s, "key", true, ForRecordChange).await.map(|_| ()),
        };
        assert_eq!(format!("{:?}", got.unwrap_err()), "NoSuchKey", "open {how}");
    }
    assert_eq!(head(&s, "Key", true).await.map(|e| e.len()), Ok(34), "its own name opens, with a derived ETag");
    // On a share that matches names exactly no other spelling is asked
    // for; the model resolves it anyway, and nothing compares.
    assert!(head(&s, "key", false).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn an_8_3_alias_of_a_long_name_answers_no_such_key_on_any_share() {
    let s = bucket();
    s.put_sized("b\\longname.txt", "", 5, &[]);
    s.alias("b\\LONGNA~1.TXT", "b\\longname.txt");
    assert_eq!(head(&s, "LONGNA~1.TXT", false).await, nsk());
    assert!(head(&s, "longname.txt", false).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn without_a_name_from_the_open_the_names_are_looked_up() {
    let s = bucket();
    s.mkdir("b\\Dir");
    s.put_sized("b\\Dir\\x", "", 5, &[]);
    s.alias("b\\dir", "b\\Dir");
    let bucket = || SharePath::root("b");
    let check = |key: &'static str| {
        let s = &s;
        async move {
            let mapped = map_key(key).unwrap();
            alone(s, check_exact_name(s, (&bucket, true), &mapped, false, None)).await.map_err(|e| format!("{e:?}"))
        }
    };
    assert_eq!(check("dir/x").await, Err("NoSuchKey".into()), "a folder of the path in another case");
    assert_eq!(check("Dir/x").await, Ok(()));
    assert_eq!(check("Dir/y").await, Ok(()), "nothing there: the open's own answer decides");
}

#[tokio::test(start_paused = true)]
async fn a_key_opens_only_the_kind_of_thing_it_names() {
    let s = bucket();
    s.mkdir("b\\d");
    s.put_marker("b\\m", "em");
    s.put_sized("b\\f", "ef", 1, &[]);
    assert_eq!(head(&s, "d", false).await, nsk(), "a plain key on a directory");
    assert_eq!(head(&s, "m/", false).await, Ok("em".into()), "a marker key on its marker");
    assert_eq!(head(&s, "m", false).await, nsk(), "a plain key on a marker");
    assert!(head(&s, "d/", false).await.is_ok(), "an empty folder stands for its key");
    assert_eq!(head(&s, "f/", false).await, nsk(), "a marker key on a file");
}

#[tokio::test(start_paused = true)]
async fn a_record_change_holds_the_name_against_deletes_and_renames() {
    let s = bucket();
    s.put_record("b\\k", 10, record("k", "e1"));
    let (answer, ..) = open(&s, "k", false, ForRecordChange).await.unwrap();
    let refused = s.open_as("b\\k", DELETE, ALL).map(|_| ()).map_err(|e| e.failure());
    assert_eq!(refused, Err(Failure::SharingViolation));
    drop(answer);
    assert!(s.open_as("b\\k", DELETE, ALL).is_ok());
}
