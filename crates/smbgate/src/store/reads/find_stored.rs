//! Where a GET or HEAD finds a key's object, over any [`ShareOps`]: at its
//! own path, beside the directory there (`beside`), or, for a key ending
//! in `/`, as an empty folder someone made (`folders`); looked for again
//! while a writer holds the key's creation lock, so that readers see the
//! old version or the new, never a 404 in between. The gateway runs it on
//! the live share (`Reads::open_stored`); its unit tests run it on the
//! in-memory share, racing writers one share operation at a time
//! (`find_stored_test.rs`).

use crate::store::beside::{nothing_beside, stands_for};
use crate::store::folders::{stands_as_folder, Found};
use crate::store::keys::MappedKey;
use crate::store::path::SharePath;
use crate::store::root::bucket_is_there;
use crate::store::share::{is_not_found, is_unholdable_name, not_a_file, Failure, FileTimes, ShareError};
use crate::store::share_ops::ShareOps;
use crate::store::{backoff, retry_sharing, StoreError, StoreResult};

/// Where a key's object may be, and what guards it. The bucket's path and
/// the lock's name are made only once the key is not at its own path.
pub(in crate::store) struct KeyPlaces<'a> {
    /// The key's own path (share-relative); beside it is
    /// [`SharePath::beside`].
    pub own: SharePath,
    /// The bucket's directory (share-relative).
    pub bucket: &'a (dyn Fn() -> SharePath + Sync),
    /// The name of the creation lock of the key at a path
    /// (`Root::lock_name`).
    pub lock: &'a (dyn Fn(&SharePath) -> String + Sync),
}

/// Runs `open` (a GET's or HEAD's share operation, given a path and
/// whether only a file may open there) where `mapped` is kept
/// (`places`). `kind` says of what opened its times and whether it has
/// a marker record (see [`stands_for`]). Returns what opened, its path,
/// and where that is ([`Found`]).
///
/// The own path is opened alone first: one round trip for most reads.
/// If it holds no object, the next round trip looks beside it, asks
/// whether the key's creation lock is held, and, after a first miss, opens
/// the own path once more and checks the bucket. A second open finds a
/// version that other clients renamed in meanwhile (seen about once in
/// 20,000 reads under 16 writers; failure class 13), and a missing key
/// costs no more round trips than the bucket check already did. The lock
/// is held while an If-Match swap renames the old version aside and the
/// new one in (failure class 25), and while an object moves beside its
/// directory or back (`beside`): two steps between which the key is in
/// neither place. While it is held, the search is tried again
/// ([`backoff::KEY_IN_MOTION`]: after 5, 10, 20, 40 and 80 ms).
///
/// Errors: NoSuchBucket, NoSuchKey, or `open`'s other errors.
pub(in crate::store) async fn find_stored<S, T, F, Fut>(
    s: &S,
    places: &KeyPlaces<'_>,
    mapped: &MappedKey,
    open: F,
    kind: impl Fn(&T) -> (FileTimes, bool),
) -> StoreResult<(T, SharePath, Found)>
where
    S: ShareOps,
    F: Fn(SharePath, bool) -> Fut,
    Fut: std::future::Future<Output = Result<T, ShareError>>,
{
    let path = &places.own;
    let beside = path.beside(mapped.dir_marker);
    // A plain key's own path is opened as a file only: a directory there
    // answers STATUS_FILE_IS_A_DIRECTORY, and no handle on it keeps it
    // delete-pending if it is removed meanwhile (see `beside`).
    let open_own = || retry_sharing(|| open(path.clone(), !mapped.dir_marker));
    let stands = |r: &T| {
        let (times, marker) = kind(r);
        stands_for(not_a_file(&times), marker, mapped)
    };
    let mut own = open_own().await;
    let mut first_miss = true;
    let mut motion = backoff::KEY_IN_MOTION.start();
    loop {
        let missing = match own {
            Ok(r) if stands(&r) => return Ok((r, path.clone(), Found::Own)),
            Ok(_) => false, // a directory: the object, if any, is beside it
            Err(e) if is_not_found(&e) => true,
            Err(e) if e.failure() == Failure::IsDirectory => false,
            // A name the server cannot hold (over its name length, say) is
            // no object of its.
            Err(e) if is_unholdable_name(&e) => {
                bucket_is_there(s, &(places.bucket)()).await?;
                return Err(StoreError::NoSuchKey);
            }
            Err(e) => return Err(e.into()),
        };
        // Beside first, the own path again last, so an object that moves
        // back between the two is seen at one of them; and the key's lock
        // is looked at (answered) before the own path is opened again: a
        // swap that let go of the lock before the look has its new
        // version in place by then.
        let check_bucket = missing && first_miss;
        let lock = (places.lock)(path);
        let (aside, locked, in_bucket) =
            tokio::join!(retry_sharing(|| open(beside.clone(), true)), s.is_locked(&lock), async {
                match check_bucket {
                    true => bucket_is_there(s, &(places.bucket)()).await,
                    false => Ok(()),
                }
            });
        let retried = open_own().await;
        in_bucket?;
        first_miss = false;
        match aside {
            Ok(r) if !not_a_file(&kind(&r).0) => return Ok((r, beside, Found::Beside)),
            Err(e) if !nothing_beside(&e) => return Err(e.into()),
            _ => {}
        }
        match retried {
            Ok(r) if stands(&r) => {
                tracing::debug!(bucket = %(places.bucket)(), "a key not found by its first look was found by a later one");
                return Ok((r, path.clone(), Found::Own));
            }
            // Nothing beside, and a directory without a marker record: an
            // empty folder someone made is the object.
            Ok(r)
                if {
                    let (times, marker) = kind(&r);
                    stands_as_folder(s, mapped, &times, marker, path).await?
                } =>
            {
                return Ok((r, path.clone(), Found::Folder));
            }
            Err(e) if !is_not_found(&e) && e.failure() != Failure::IsDirectory => return Err(e.into()),
            _ => {}
        }
        if !locked || !motion.wait().await {
            return Err(StoreError::NoSuchKey);
        }
        own = open_own().await;
    }
}
