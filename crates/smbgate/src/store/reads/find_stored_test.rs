//! A GET against the in-memory share (`memory_share`): where it finds a
//! key ([`find_stored`]) and what it then answers ([`ReadPlan::decide`]:
//! conditions, range, part bounds), alone and racing writers interleaved
//! one share operation at a time over many seeded interleavings. The same
//! races run against smbd in tests/e2e/test_conditional_writes.py and
//! tests/e2e/test_nested_keys.py.

use super::find_stored::{find_stored, KeyPlaces};
use super::read_plan::{ByteRange, ReadPlan, ReadRequest};
use crate::store::beside::displace_on;
use crate::store::conditions::{Conditions, EtagCondition};
use crate::store::folders::Found;
use crate::store::keys::map_key;
use crate::store::memory_share::{alone, race, MemoryShare};
use crate::store::path::SharePath;
use crate::store::share_ops::ShareOps;
use crate::store::writes::swap::tests::{if_match, Racer, KEY, LOCK};
use crate::store::{StoreError, StoreResult};

/// Interleavings tried per race.
const SEEDS: u64 = 300;

/// What a GET answered: the ETag, where it was found, and the bytes to
/// send.
type Got = StoreResult<(String, Found, ReadPlan)>;

/// A GET of `key` in the bucket `b`: found as `Reads::open_stored` finds
/// it (the key's creation lock is [`LOCK`], as the writers of
/// `swap::tests` take it), then decided for `req`. The checks of what was
/// found (`Reads::checked`: the record's key, the exact name) and the
/// live `ObjectInfo` are not modelled: the ETag is the record's.
async fn get(s: &MemoryShare, key: &str, req: &ReadRequest) -> Got {
    let mapped = map_key(key).expect("a valid key");
    let places = KeyPlaces {
        own: SharePath::root("b").join_key(&mapped),
        bucket: &|| SharePath::root("b"),
        lock: &|path| {
            assert_eq!(path.as_str(), SharePath::root("b").join_key(&mapped).as_str(), "the own path's lock");
            LOCK.to_string()
        },
    };
    let open = |p: SharePath, file_only| async move { s.open_to_read(&p, file_only).await };
    let marker = |(_, times, meta): &(_, _, Option<crate::store::meta::ObjectMeta>)| {
        (*times, meta.as_ref().is_some_and(|m| m.marker))
    };
    let ((file, _, meta), path, found) = find_stored(s, &places, &mapped, open, marker).await?;
    let info = s.info(&file, meta, &path);
    let plan = ReadPlan::decide(&info, req)?;
    Ok((info.etag, found, plan))
}

/// [`get`] with nothing racing it.
async fn get_alone(s: &MemoryShare, key: &str, req: &ReadRequest) -> Got {
    alone(s, get(s, key, req)).await
}

/// `got`, its error as text (`StoreError` has no `PartialEq`).
fn shown(got: Got) -> Result<(String, Found, ReadPlan), String> {
    got.map_err(|e| format!("{e:?}"))
}

/// The ETag and place of a whole-object answer.
fn whole(etag: &str, found: Found, size: u64) -> Result<(String, Found, ReadPlan), String> {
    Ok((etag.to_string(), found, ReadPlan { range: 0..size, partial: false }))
}

fn if_match_etag(etag: &str) -> ReadRequest {
    let conditions = Conditions { if_match: Some(EtagCondition::parse(&format!("\"{etag}\""))), ..Default::default() };
    ReadRequest { conditions, ..Default::default() }
}

fn errs(got: Got) -> String {
    format!("{:?}", got.map(|_| ()).unwrap_err())
}

#[tokio::test(start_paused = true)]
async fn a_key_is_found_at_its_path_or_beside_the_directory_there() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_sized(KEY, "v1", 10, &[]);
    let any = ReadRequest::default();
    assert_eq!(shown(get_alone(&s, "k", &any).await), whole("v1", Found::Own, 10));
    // Keys under `d/` made `d` a directory; the object `d` is kept beside.
    s.mkdir("b\\d");
    s.put("b\\d\\x", "vx");
    s.put_sized(SharePath::root("b\\d").beside(false).as_str(), "vd", 3, &[]);
    assert_eq!(shown(get_alone(&s, "d", &any).await), whole("vd", Found::Beside, 3));
    assert_eq!(shown(get_alone(&s, "d/x", &any).await), whole("vx", Found::Own, 0));
    // A directory is no object `d/` without a marker record, and with one
    // it is.
    assert_eq!(errs(get_alone(&s, "d/", &any).await), "NoSuchKey");
    s.put_marker("b\\m", "vm");
    assert_eq!(shown(get_alone(&s, "m/", &any).await), whole("vm", Found::Own, 0));
    assert_eq!(errs(get_alone(&s, "m", &any).await), "NoSuchKey", "the marker is `m/`, not `m`");
    assert_eq!(errs(get_alone(&s, "nothing", &any).await), "NoSuchKey");
    // No bucket: NoSuchBucket, not NoSuchKey.
    let empty = MemoryShare::default();
    assert_eq!(errs(get_alone(&empty, "k", &any).await), "NoSuchBucket");
}

#[tokio::test(start_paused = true)]
async fn an_empty_folder_someone_made_is_the_object_ending_in_a_slash() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.mkdir("b\\f");
    let any = ReadRequest::default();
    // (The model gives it no ETag; the live GET derives one.)
    assert_eq!(shown(get_alone(&s, "f/", &any).await), whole("", Found::Folder, 0));
    // Once something is in it, it is only a prefix again.
    s.put("b\\f\\y", "vy");
    assert_eq!(errs(get_alone(&s, "f/", &any).await), "NoSuchKey");
    // A directory the gateway made for keys never is such an object.
    alone(&s, s.mkdir_own("b\\o")).await.expect("the gateway makes its folder");
    assert_eq!(errs(get_alone(&s, "o/", &any).await), "NoSuchKey");
}

#[tokio::test(start_paused = true)]
async fn a_found_object_answers_its_conditions_range_and_parts() {
    let s = MemoryShare::default();
    s.mkdir("b");
    s.put_sized(KEY, "v1", 12, &[5, 5, 2]);
    let plan = |got: Got| got.map(|(_, _, p)| (p.range, p.partial)).map_err(|e| format!("{e:?}"));
    let part = |n| ReadRequest { part_number: Some(n), ..Default::default() };
    assert_eq!(plan(get_alone(&s, "k", &part(2)).await), Ok((5..10, true)));
    assert_eq!(
        plan(get_alone(&s, "k", &part(4)).await),
        Err("InvalidPart(\"the object has no part 4: it has 3 part(s)\")".into())
    );
    let suffix = ReadRequest { range: Some(ByteRange::Suffix { length: 3 }), ..Default::default() };
    assert_eq!(plan(get_alone(&s, "k", &suffix).await), Ok((9..12, true)));
    let past = ReadRequest { range: Some(ByteRange::FromTo { first: 12, last: None }), ..Default::default() };
    assert_eq!(plan(get_alone(&s, "k", &past).await), Err("RangeNotSatisfiable { size: 12 }".into()));
    // The conditions come first: a 412 even where the range would be a 416.
    let refused = ReadRequest { range: past.range, ..if_match_etag("v0") };
    assert_eq!(plan(get_alone(&s, "k", &refused).await), Err("PreconditionFailed".into()));
    let not_modified = ReadRequest {
        conditions: Conditions { if_none_match: Some(EtagCondition::parse("\"v1\"")), ..Default::default() },
        ..Default::default()
    };
    assert_eq!(plan(get_alone(&s, "k", &not_modified).await), Err("NotModified { etag: \"v1\" }".into()));
}

/// A GET racing `writer`, over every seed: each answer `check`ed, which
/// names its outcome. Every one of `outcomes` must come up in some seed, so
/// that the race did reach each side of the writer's steps.
async fn race_a_get(
    setup: impl Fn(&MemoryShare),
    writer: impl for<'a> Fn(&'a MemoryShare) -> Racer<'a>,
    req: ReadRequest,
    outcomes: &[&str],
    check: impl Fn(u64, &Got) -> &'static str,
) {
    let mut seen_outcomes = std::collections::BTreeSet::new();
    for seed in 0..SEEDS {
        let s = MemoryShare::default();
        s.mkdir("b");
        setup(&s);
        let (wrote, got) = race(&s, seed, writer(&s), get(&s, "k", &req)).await;
        assert!(wrote.is_ok(), "seed {seed}: the writer failed: {wrote:?}");
        seen_outcomes.insert(check(seed, &got));
        assert_eq!(s.open_count(), 0, "seed {seed}");
    }
    assert_eq!(seen_outcomes.into_iter().collect::<Vec<_>>(), outcomes, "the outcomes over {SEEDS} seeds");
}

#[tokio::test(start_paused = true)]
async fn a_get_racing_an_if_match_swap_finds_the_old_version_or_the_new() {
    // The swap renames the old version aside and the new one in: between
    // the two the key is nowhere, under the key's creation lock.
    let setup = |s: &MemoryShare| {
        s.mkdir("b");
        s.mkdir("tmp");
        s.put(KEY, "v1");
    };
    race_a_get(
        setup,
        |s| if_match(s, "tmp\\a", "v2", "v1"),
        ReadRequest::default(),
        &["v1", "v2"],
        |seed, got| match got.as_ref().map(|(etag, found, _)| (etag.as_str(), *found)) {
            Ok(("v1", Found::Own)) => "v1",
            Ok(("v2", Found::Own)) => "v2",
            _ => panic!("seed {seed}: {got:?}"),
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_conditional_get_racing_an_if_match_swap_is_a_200_or_a_412() {
    let setup = |s: &MemoryShare| {
        s.mkdir("b");
        s.mkdir("tmp");
        s.put(KEY, "v1");
    };
    race_a_get(
        setup,
        |s| if_match(s, "tmp\\a", "v2", "v1"),
        if_match_etag("v1"),
        &["200", "412"],
        |seed, got| match got {
            Ok((etag, ..)) if etag == "v1" => "200",
            Err(StoreError::PreconditionFailed) => "412",
            _ => panic!("seed {seed}: {got:?}"),
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_get_racing_a_move_beside_a_new_directory_finds_the_object() {
    // A PUT of `k/x` makes `k` a directory: the object `k` moves beside it
    // first, under the key's creation lock.
    fn displace(s: &MemoryShare) -> Racer<'_> {
        Box::pin(async move { displace_on(s, KEY, SharePath::root(KEY).beside(false).as_str(), LOCK).await })
    }
    let setup = |s: &MemoryShare| {
        s.mkdir("b");
        s.mkdir("tmp");
        s.put(KEY, "v1");
    };
    race_a_get(setup, displace, ReadRequest::default(), &["beside", "own"], |seed, got| {
        match got.as_ref().map(|(etag, found, _)| (etag.as_str(), *found)) {
            Ok(("v1", Found::Own)) => "own",
            Ok(("v1", Found::Beside)) => "beside",
            _ => panic!("seed {seed}: {got:?}"),
        }
    })
    .await;
}
