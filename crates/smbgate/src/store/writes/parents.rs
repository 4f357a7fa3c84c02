//! The directories a key's path needs (mkdir -p), made before its file is
//! renamed into place: each is made unless it is one, and an object named
//! like one moves beside it (`beside`). A rule over [`ShareOps`], so that
//! it runs against the in-memory share too (`parents_test.rs`).

use crate::store::beside::displace_on;
use crate::store::path::SharePath;
use crate::store::share::{is_not_found, Failure};
use crate::store::share_ops::ShareOps;
use crate::store::{StoreError, StoreResult};

/// How often [`make_dir_on`] tries while the name comes and goes.
const MAKE_DIR_TRIES: usize = 8;

/// Makes `dirs` in order (each the parent of the next), those already
/// there left as they are; an object at one moves beside it, under the
/// creation lock `lock_of` names. A directory removed behind the walk (a
/// delete pruning the folders it emptied) is made again: the walk starts
/// over, a few times.
///
/// Errors: Conflict if a folder on the way stands but refuses a name in it
/// (a link the server hides); NoSuchBucket if the first one's parent (the
/// bucket) is gone; Busy if an object in the way could not move, or a name
/// keeps changing; SMB errors.
pub(crate) async fn make_parents_on<S: ShareOps>(
    s: &S,
    dirs: &[SharePath],
    lock_of: impl Fn(&SharePath) -> String,
) -> StoreResult<()> {
    'walk: for _ in 0..MAKE_DIR_TRIES {
        for (i, dir) in dirs.iter().enumerate() {
            if make_dir_on(s, dir, &lock_of(dir)).await? {
                continue;
            }
            // Its folder refused it: gone since (made again), or standing
            // and refusing the name.
            let folder = dir.split_leaf().map(|(f, _)| f);
            let stands = match &folder {
                Some(f) => s.times(f).await.is_ok_and(|t| t.is_directory()),
                None => true,
            };
            match (stands, i) {
                (true, _) => return Err(StoreError::Conflict("a prefix of the key is an existing object".into())),
                (false, 0) => return Err(StoreError::NoSuchBucket),
                (false, _) => continue 'walk,
            }
        }
        return Ok(());
    }
    Err(StoreError::Busy("a prefix of the key keeps changing; retry the request".into()))
}

/// Makes the directory `path` unless it is one: an object there moves
/// beside it ([`displace_on`], under the lock `lock`). A name that comes
/// and goes between the mkdir and the look at it (another writer moving
/// the object beside) is tried again, a few times. Returns false if its
/// folder refused it as missing (PathNotFound).
///
/// Errors: Busy; SMB errors.
async fn make_dir_on<S: ShareOps>(s: &S, path: &SharePath, lock: &str) -> StoreResult<bool> {
    for _ in 0..MAKE_DIR_TRIES {
        match s.mkdir_own(path).await {
            Ok(()) => return Ok(true),
            Err(e) if e.failure() == Failure::Collision => match s.times(path).await {
                Ok(t) if t.is_directory() => return Ok(true),
                // A prefix of the key is an object: it moves beside.
                Ok(_) => return displace_on(s, path, &path.beside(false), lock).await.map(|()| true),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            },
            Err(e) if e.failure() == Failure::PathNotFound => return Ok(false),
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Busy("a prefix of the key keeps changing; retry the request".into()))
}

#[cfg(test)]
#[path = "parents_test.rs"]
mod tests;
