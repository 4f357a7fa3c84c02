//! The directories a key's path needs (mkdir -p), made before its file is
//! renamed into place: each is made unless it is one, and an object named
//! like one moves beside it (`beside`). A rule over [`ShareOps`], so that
//! it runs against the in-memory share too (`parents_test.rs`).

use crate::store::beside::displace_on;
use crate::store::keys::MappedKey;
use crate::store::path::SharePath;
use crate::store::share::{is_not_found, not_a_file, Failure};
use crate::store::share_ops::ShareOps;
use crate::store::{backoff, StoreError, StoreResult};

/// How often [`make_dir_on`] tries while the name comes and goes.
const MAKE_DIR_TRIES: usize = 8;

/// What [`make_dir_on`] found.
enum Made {
    /// The directory stands.
    Yes,
    /// Its folder refused it as missing (PathNotFound, or NameNotFound
    /// when the folder went during the mkdir).
    FolderRefused,
    /// It is a directory removed while a handle holds it: it goes at its
    /// last close (Samba answers a look at it with no attributes).
    Going,
}

/// The directories under `bucket` that `mapped` needs: all its
/// components but the last, and the last too if `own` (an empty marker is
/// its own directory; a file, a marker's body included, needs only its
/// parents). Outermost first.
pub(crate) fn key_folders(bucket: &SharePath, mapped: &MappedKey, own: bool) -> Vec<SharePath> {
    let n = if own { mapped.components.len() } else { mapped.components.len() - 1 };
    let mut dirs = bucket.ancestors_of(mapped);
    dirs.truncate(n);
    dirs
}

/// Makes `dirs` in order (each the parent of the next), those already
/// there left as they are; an object at one moves beside it, under the
/// creation lock `lock_of` names. A directory removed behind the walk (a
/// delete pruning the folders it emptied), or going as the walk meets it,
/// is made again: the walk starts over ([`backoff::FOLDER_GOING`]).
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
    let mut backoff = backoff::FOLDER_GOING.start();
    // The folder that last refused a directory in it as missing.
    let mut refused: Option<SharePath>;
    'walk: loop {
        for dir in dirs {
            match make_dir_on(s, dir, &lock_of(dir)).await? {
                Made::Yes => continue,
                Made::Going => refused = None,
                Made::FolderRefused => refused = dir.split_leaf().map(|(f, _)| f),
            }
            // Gone since (a delete pruned it; another writer may make it
            // again before any look): the walk starts over.
            match backoff.wait().await {
                true => continue 'walk,
                false => break 'walk,
            }
        }
        return Ok(());
    }
    // Refused every time: a folder that stands refuses the name (a link
    // the server hides); the bucket gone; or pruned every time.
    let Some(folder) = refused else {
        return Err(StoreError::Busy("a prefix of the key keeps changing; retry the request".into()));
    };
    match s.times(&folder).await {
        Ok(t) if t.is_directory() => Err(StoreError::Conflict("a prefix of the key is an existing object".into())),
        _ if dirs.first().and_then(|d| d.split_leaf()).is_some_and(|(bucket, _)| bucket == folder) => {
            Err(StoreError::NoSuchBucket)
        }
        _ => Err(StoreError::Busy("a prefix of the key keeps changing; retry the request".into())),
    }
}

/// Makes the directory `path` unless it is one: an object there moves
/// beside it ([`displace_on`], under the lock `lock`). A name that comes
/// and goes between the mkdir and the look at it (another writer moving
/// the object beside) is tried again, a few times.
///
/// Errors: Busy; SMB errors.
async fn make_dir_on<S: ShareOps>(s: &S, path: &SharePath, lock: &str) -> StoreResult<Made> {
    for _ in 0..MAKE_DIR_TRIES {
        match s.mkdir_own(path).await {
            Ok(()) => return Ok(Made::Yes),
            Err(e) if e.failure() == Failure::Collision => match s.times(path).await {
                Ok(t) if t.is_directory() => return Ok(Made::Yes),
                Ok(t) if not_a_file(&t) => return Ok(Made::Going),
                // A prefix of the key is an object: it moves beside.
                Ok(_) => return displace_on(s, path, &path.beside(false), lock).await.map(|()| Made::Yes),
                Err(e) if is_not_found(&e) => {}
                Err(e) if e.failure() == Failure::DeletePending => return Ok(Made::Going),
                Err(e) => return Err(e.into()),
            },
            // Samba answers either when the folder went during the mkdir.
            Err(e) if is_not_found(&e) => return Ok(Made::FolderRefused),
            Err(e) if e.failure() == Failure::DeletePending => return Ok(Made::Going),
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Busy("a prefix of the key keeps changing; retry the request".into()))
}

#[cfg(test)]
#[path = "parents_test.rs"]
mod tests;
