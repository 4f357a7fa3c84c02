//! The share operations the store's write, delete and lookup rules take,
//! as a trait: the creation lock (`take_key_lock`), the If-Match swap
//! (`swap`), the move of an object beside a directory of its name
//! (`beside`), the checked delete (`delete`) and where a GET finds a key
//! (`reads/find_stored`), the listing's directory reads
//! (`listings/dir_source`), the pruning after a delete (`delete`) and
//! CreateBucket and DeleteBucket (`buckets/bucket`), the gateway's small
//! files under `.smbgate/` (`buckets/state_files`, `buckets/delete_marks`)
//! the locks of event queues and watchers (`buckets/event_queue`), the
//! stride of a multipart upload (`uploads/stride`), the temp-file
//! sweep (`uploads/sweep`), a writer's warning to the object cache's
//! holders (`reads/coherence`), the case probe (`case`), a completed
//! upload's record (`uploads/record_fit`), a versions folder's read
//! (`versions/shards`) and a record rewritten under a read-only mark
//! (`writes/object_tags`) run on the live share ([`LiveShare`]) in the
//! gateway and, in their unit tests, on an in-memory share that
//! interleaves racing writers step by step (`memory_share`). Other store
//! code reaches the live share through the same methods. Each operation
//! means what the share layer's function of the same name means; the
//! in-memory share models what those rules rely on (sharing modes, rename
//! without and with replace, delete on close), the live one is those
//! functions.

use std::collections::HashSet;
use std::future::Future;

use super::listings::entry_lookups;
use super::meta::ObjectMeta;
use super::records::{FileKey, Records};
use super::share::{
    self, not_a_file, CreateResponse, DirEntry, FileTimes, Handle, KeyLock, KeyLocks, Pool, Result, TempFile, Tree,
};
use super::types::ObjectInfo;
use bytes::Bytes;

/// The share as the store's rules see it (see the module notes). Paths
/// are share-relative, `\`-separated.
pub(crate) trait ShareOps: Sync {
    /// An open file; it closes itself when dropped.
    type Handle: Send + Sync;

    /// A key's creation lock, held until released.
    type KeyLock: Send + Sync;

    /// A directory open for reading its entries.
    type DirReader: Send;

    /// A temp file written and still open, not yet published; dropped, it
    /// deletes itself.
    type Temp: Send;

    /// Takes the creation lock named `name` if nobody holds it: `None` if
    /// another writer holds it (`share::KeyLocks::try_take`).
    fn take_key_lock(&self, name: &str) -> impl Future<Output = Result<Option<Self::KeyLock>>> + Send;

    /// Gives `lock` back and waits for the share's answer.
    fn release_lock(&self, lock: Self::KeyLock) -> impl Future<Output = ()> + Send;

    /// Gives `lock` back without waiting for the answer.
    fn release_lock_soon(&self, lock: Self::KeyLock);

    /// Opens the file at `path` for DELETE sharing only READ, with its
    /// record: the lock of an If-Match swap (`share::open_to_replace`).
    fn open_to_replace(&self, path: &str) -> impl Future<Output = Result<(Self::Handle, Option<ObjectMeta>)>> + Send;

    /// Renames `lock` to `backup`, then `file` to `target`, neither
    /// replacing, in one round trip; each step's result
    /// (`share::swap_in`).
    fn swap_in(
        &self,
        lock: &Self::Handle,
        backup: &str,
        file: &Self::Handle,
        target: &str,
    ) -> impl Future<Output = Result<(Result<()>, Result<()>)>> + Send;

    /// Renames the open `file` to `target`, over an existing file only if
    /// `replace` (`share::rename`).
    fn rename(&self, file: &Self::Handle, target: &str, replace: bool) -> impl Future<Output = Result<()>> + Send;

    /// Closes `file`; a failure is the server's concern, not the caller's.
    fn close(&self, file: Self::Handle) -> impl Future<Output = ()> + Send;

    /// Closes `file` at once, without the caller waiting for the answer
    /// (a CLOSE that others wait for, sent now rather than with the
    /// connection's next request).
    fn close_soon(&self, file: Self::Handle);

    /// Marks `file` delete-on-close and closes it (`share::close_and_delete`).
    fn close_and_delete(&self, file: Self::Handle) -> impl Future<Output = Result<()>> + Send;

    /// Deletes the file still at the temp name `path` after it was marked
    /// delete-on-close there and closed, which another open can outlast
    /// (`share::remove_leftover`); a free name is the usual answer.
    fn remove_leftover(&self, path: &str) -> impl Future<Output = ()> + Send;

    /// Marks `file` delete-on-close, keeping it open (`share::delete_on_close`).
    fn delete_on_close(&self, file: &Self::Handle) -> impl Future<Output = Result<()>> + Send;

    /// Renames the file at `source` to `target` through a handle of its
    /// own, over an existing file only if `replace`
    /// (`share::rename_through_new_handle`).
    fn rename_path(&self, source: &str, target: &str, replace: bool) -> impl Future<Output = Result<()>> + Send;

    /// Makes the directory `path`, a plain one (`share::mkdir`): a bucket.
    ///
    /// Errors: Collision if the name is taken; not-found for a missing
    /// parent.
    fn make_dir(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// Every entry of the directory at `path` (`.` and `..` left out), in
    /// one go (`share::list_dir`): for rules that need all of a small
    /// directory, where a listing reads page by page ([`ShareOps::open_dir`]).
    ///
    /// Errors: the directory's open or read failed.
    fn list_dir(&self, path: &str) -> impl Future<Output = Result<Vec<DirEntry>>> + Send;

    /// Removes the empty directory at `path` (`share::delete`); it goes at
    /// its last close.
    ///
    /// Errors: NotEmpty while it has entries; not-found and sharing
    /// failures.
    fn delete_dir(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// Makes the directory `path`, marked as the gateway's own
    /// (`share::mkdir_own`). Collision if the name is taken.
    fn mkdir_own(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// True if `path` is a directory, false if a file (`share::stat`).
    fn is_directory(&self, path: &str) -> impl Future<Output = Result<bool>> + Send;

    /// True if the directory at `path` holds no entry (`share::is_empty_dir`).
    fn is_empty_dir(&self, path: &str) -> impl Future<Output = Result<bool>> + Send;

    /// True if `path` holds no file now: a directory, or a directory
    /// removed while a handle still holds it (`share::not_a_file`).
    fn holds_no_file(&self, path: &str) -> impl Future<Output = bool> + Send;

    /// Opens the file at `path` for DELETE with its record (and with
    /// `name` its on-disk name), sharing only READ if `exclusive`, else
    /// everything (`share::open_delete_with_meta`).
    fn open_delete_with_meta(
        &self,
        path: &str,
        name: bool,
        exclusive: bool,
    ) -> impl Future<Output = Result<(Self::Handle, Option<ObjectMeta>, Option<String>)>> + Send;

    /// Opens the file at `path` for DELETE sharing nothing
    /// (`share::open_for_delete`, exclusive).
    ///
    /// Errors: SharingViolation while any other open has it; not-found.
    fn open_alone_for_delete(&self, path: &str) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// True if the file `file` holds is being deleted (`share::is_going`).
    fn is_going(&self, file: &Self::Handle) -> impl Future<Output = Result<bool>> + Send;

    /// The object `file` holds at `path`, with its record `meta`
    /// ([`ObjectInfo::new`]).
    fn info(&self, file: &Self::Handle, meta: Option<ObjectMeta>, path: &str) -> ObjectInfo;

    /// The times of the file `file` holds, as its open answered them.
    fn opened_times(&self, file: &Self::Handle) -> FileTimes;

    /// What finds the record of the file `file` holds, once it is gone
    /// ([`FileKey::of`]); `None` where the record went with the file.
    fn record_key(&self, file: &Self::Handle) -> Option<FileKey>;

    /// Forgets the record `key` names ([`ShareOps::record_key`]), once its
    /// file was deleted or replaced: a sidecar (a record's own, or one an
    /// EA or stream record spilled to) goes; an EA went with the file.
    fn forget_record_of(&self, key: Option<FileKey>);

    /// True unless the creation lock named `lock` is seen free: while it
    /// is held, its key may be between the two renames of an If-Match swap
    /// (`share::KeyLocks::is_held`).
    fn is_locked(&self, lock: &str) -> impl Future<Output = bool> + Send;

    /// The times of what is at `path` (`share::stat`).
    fn times(&self, path: &str) -> impl Future<Output = Result<FileTimes>> + Send;

    /// What the CREATE says of `path`, and its record, the handle closed
    /// in the same round trip; a directory is refused (IsDirectory) if
    /// `file_only` (`share::stat_with_meta_and_name`).
    fn stat_with_meta(
        &self,
        path: &str,
        file_only: bool,
    ) -> impl Future<Output = Result<(CreateResponse, Option<ObjectMeta>)>> + Send;

    /// Opens the directory at `path` and reads its first page of entries
    /// (`share::DirReader::open`). Not-found errors for a missing
    /// directory or a file.
    fn open_dir(&self, path: &str) -> impl Future<Output = Result<Self::DirReader>> + Send;

    /// The times of `dir` as its open answered them, before any entry was
    /// read: a later [`ShareOps::times`] with the same times says nothing
    /// came or went, as far as the server's time resolution tells.
    fn dir_times(&self, dir: &Self::DirReader) -> FileTimes;

    /// The next page of `dir`'s entries (`.` and `..` left out), `None` at
    /// the end.
    fn next_entries(&self, dir: &mut Self::DirReader) -> impl Future<Output = Result<Option<Vec<DirEntry>>>> + Send;

    /// Closes `dir`.
    fn close_dir(&self, dir: Self::DirReader) -> impl Future<Output = Result<()>> + Send;

    /// True if a directory entry's EaSize tells whether the file has a
    /// record (`Records::shown_in_listings`).
    fn records_in_entries(&self) -> bool;

    /// The ids of the directories among `entries` of `dir` whose record
    /// says they are marker objects, where entries cannot tell
    /// (`entry_lookups::marker_dirs`).
    fn marker_dirs(&self, dir: &str, entries: &[DirEntry]) -> impl Future<Output = Result<HashSet<u64>>> + Send;

    /// Up to `max` bytes of the small file at `path`, read in one compound
    /// (`share::read_small`).
    ///
    /// Errors: not-found ones if there is none; the share's others.
    fn read_small(&self, path: &str, max: u32) -> impl Future<Output = Result<Bytes>> + Send;

    /// A new temp file at `temp` holding `body`, left open, with the byte
    /// count the server reports written (`share::create_temp_and_write`).
    ///
    /// Errors: the CREATE's or the WRITE's; nothing is left then.
    fn write_temp(&self, temp: &str, body: &[u8]) -> impl Future<Output = Result<(Self::Temp, u32)>> + Send;

    /// Renames `temp` to `target`, over a file there only if `replace`,
    /// and closes it (`share::publish_and_close`).
    ///
    /// Errors: the rename's (a collision without `replace`); the temp file
    /// is deleted then.
    fn publish_temp(&self, temp: Self::Temp, target: &str, replace: bool) -> impl Future<Output = Result<()>> + Send;

    /// Deletes a temp file that is not to be published
    /// (`share::TempFile::discard`).
    fn discard_temp(&self, temp: Self::Temp) -> impl Future<Output = ()> + Send;

    /// Writes `data` as the whole file at `path`, over any file there, in
    /// one compound; returns the times its CLOSE answered
    /// (`share::write_small`).
    ///
    /// Errors: PathNotFound if its folder is missing; the share's others.
    fn write_small(&self, path: &str, data: &[u8]) -> impl Future<Output = Result<FileTimes>> + Send;

    /// Makes the file `path` holding `data`, unless a file of that name
    /// exists: true if this call made it (`share::create_once`, one
    /// compound, which others can meet between its CREATE and its WRITE).
    ///
    /// Errors: PathNotFound if its folder is missing; the share's others.
    fn create_once(&self, path: &str, data: &[u8]) -> impl Future<Output = Result<bool>> + Send;

    /// Takes the creation lock at `path`: makes the file, sharing nothing
    /// and delete-on-close, so that it exists exactly while the handle is
    /// open (`share::create_lock`). `None` if the file exists, is going or
    /// open, or lost its name while it was made.
    ///
    /// Errors: the share's others.
    fn create_lock(&self, path: &str) -> impl Future<Output = Result<Option<Self::Handle>>> + Send;

    /// Writes `meta` as the record of the directory at `path`: a marker
    /// object's (`share::set_dir_ea`).
    ///
    /// Errors: not-found kinds if the directory or its folder is gone;
    /// AccessDenied (as Samba answers) while the directory is delete
    /// pending; a sharing violation while an open refuses writers.
    fn set_dir_record(&self, path: &str, meta: &ObjectMeta) -> impl Future<Output = Result<()>> + Send;

    /// Removes the file at `path` by name (`share::delete`).
    ///
    /// Errors: not-found ones if there is none; a sharing violation while
    /// an open refuses deleters.
    fn delete_file(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// A writer's warning to the object cache's holders of `path`
    /// (`share::open_breaking_leases`): an open for DELETE that breaks
    /// their leases and, kept, lets none come back. On another connection
    /// than the one that renames over `path` (Samba refuses a rename over
    /// a file its own connection holds open).
    ///
    /// Errors: not-found ones if nothing is at `path`; a sharing violation
    /// while another writer's warning or a DELETE open holds the file.
    fn open_breaking_leases(&self, path: &str) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// Whether a record of `len` bytes may be written at all
    /// (`Records::may_hold`); a larger one is not tried.
    fn may_hold_record(&self, len: usize) -> bool;

    /// Writes `meta` as the record of `file`, open at `path`
    /// (`share::set_eas`, however the share keeps records).
    ///
    /// Errors: NoRoom ([`share::ShareError::is_record_too_large`]) when
    /// the share has no room for it; the share's others.
    fn set_record(&self, file: &Self::Handle, path: &str, meta: &ObjectMeta)
        -> impl Future<Output = Result<()>> + Send;

    /// Writes `meta` again as the record of `file`, open at `path`, its
    /// LastWriteTime kept (`share::rewrite_records`).
    ///
    /// Errors: as [`ShareOps::set_record`]; the times' SET_INFO.
    fn rewrite_record(
        &self,
        file: &Self::Handle,
        path: &str,
        meta: &ObjectMeta,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Sets or clears the read-only mark of `file` (`share::set_read_only`).
    ///
    /// Errors: the share's.
    fn set_read_only(&self, file: &Self::Handle, on: bool) -> impl Future<Output = Result<()>> + Send;

    /// Breaks the leases of the holders of `path` at once, on this share's
    /// connection (`share::break_leases_after_change`); best effort.
    fn break_leases(&self, path: &str) -> impl Future<Output = ()> + Send;
}

/// The live share: one pooled connection, the root's records and its
/// keys' locks.
pub(crate) struct LiveShare<'a> {
    /// The connection the operations run on.
    pub tree: &'a Tree,
    /// Where the root keeps its records.
    pub records: &'a Records,
    /// The root's creation locks.
    pub key_locks: &'a KeyLocks,
    /// The pool a temp file's cleanup takes a connection from.
    pub pool: &'a Pool,
}

impl ShareOps for LiveShare<'_> {
    type Handle = Handle;
    type KeyLock = KeyLock;
    type DirReader = share::DirReader;
    type Temp = TempFile;

    fn take_key_lock(&self, name: &str) -> impl Future<Output = Result<Option<KeyLock>>> + Send {
        self.key_locks.try_take(self.tree, name)
    }

    fn release_lock(&self, lock: KeyLock) -> impl Future<Output = ()> + Send {
        lock.release()
    }

    fn release_lock_soon(&self, lock: KeyLock) {
        drop(lock); // its drop sends the UNLOCK in the background
    }

    fn open_to_replace(&self, path: &str) -> impl Future<Output = Result<(Handle, Option<ObjectMeta>)>> + Send {
        share::open_to_replace(self.tree, self.records, path)
    }

    fn swap_in(
        &self,
        lock: &Handle,
        backup: &str,
        file: &Handle,
        target: &str,
    ) -> impl Future<Output = Result<(Result<()>, Result<()>)>> + Send {
        share::swap_in(lock, backup, file, target)
    }

    fn rename(&self, file: &Handle, target: &str, replace: bool) -> impl Future<Output = Result<()>> + Send {
        share::rename(file, target, replace)
    }

    async fn close(&self, file: Handle) {
        let _ = file.close().await;
    }

    fn close_soon(&self, file: Handle) {
        tokio::spawn(async move {
            let _ = file.close().await;
        });
    }

    fn close_and_delete(&self, file: Handle) -> impl Future<Output = Result<()>> + Send {
        share::close_and_delete(file)
    }

    fn remove_leftover(&self, path: &str) -> impl Future<Output = ()> + Send {
        share::remove_leftover(self.tree, path)
    }

    fn delete_on_close(&self, file: &Handle) -> impl Future<Output = Result<()>> + Send {
        share::delete_on_close(file)
    }

    fn rename_path(&self, source: &str, target: &str, replace: bool) -> impl Future<Output = Result<()>> + Send {
        share::rename_through_new_handle(self.tree, source, target, replace)
    }

    fn make_dir(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        share::mkdir(self.tree, path)
    }

    fn list_dir(&self, path: &str) -> impl Future<Output = Result<Vec<DirEntry>>> + Send {
        share::list_dir(self.tree, path)
    }

    fn delete_dir(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        share::delete(self.tree, path, true)
    }

    fn mkdir_own(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        share::mkdir_own(self.tree, path)
    }

    async fn is_directory(&self, path: &str) -> Result<bool> {
        share::stat(self.tree, path).await.map(|t| t.is_directory())
    }

    fn is_empty_dir(&self, path: &str) -> impl Future<Output = Result<bool>> + Send {
        share::is_empty_dir(self.tree, path)
    }

    async fn holds_no_file(&self, path: &str) -> bool {
        share::stat(self.tree, path).await.is_ok_and(|t| not_a_file(&t))
    }

    fn open_delete_with_meta(
        &self,
        path: &str,
        name: bool,
        exclusive: bool,
    ) -> impl Future<Output = Result<(Handle, Option<ObjectMeta>, Option<String>)>> + Send {
        share::open_delete_with_meta(self.tree, self.records, path, name, exclusive)
    }

    fn open_alone_for_delete(&self, path: &str) -> impl Future<Output = Result<Handle>> + Send {
        share::open_for_delete(self.tree, path, true)
    }

    fn is_going(&self, file: &Handle) -> impl Future<Output = Result<bool>> + Send {
        share::is_going(file)
    }

    fn info(&self, file: &Handle, meta: Option<ObjectMeta>, path: &str) -> ObjectInfo {
        ObjectInfo::new(file.info(), meta, path)
    }

    fn opened_times(&self, file: &Handle) -> FileTimes {
        file.info().times
    }

    fn record_key(&self, file: &Handle) -> Option<FileKey> {
        FileKey::of(file.info())
    }

    fn forget_record_of(&self, key: Option<FileKey>) {
        self.records.forget(self.tree, key);
    }

    fn is_locked(&self, lock: &str) -> impl Future<Output = bool> + Send {
        self.key_locks.is_held(self.tree, lock)
    }

    fn times(&self, path: &str) -> impl Future<Output = Result<FileTimes>> + Send {
        share::stat(self.tree, path)
    }

    async fn stat_with_meta(&self, path: &str, file_only: bool) -> Result<(CreateResponse, Option<ObjectMeta>)> {
        let (created, meta, _) =
            share::stat_with_meta_and_name(self.tree, self.records, path, false, file_only).await?;
        Ok((created, meta))
    }

    fn open_dir(&self, path: &str) -> impl Future<Output = Result<share::DirReader>> + Send {
        share::DirReader::open(self.tree, path)
    }

    fn dir_times(&self, dir: &share::DirReader) -> FileTimes {
        dir.times()
    }

    fn next_entries(&self, dir: &mut share::DirReader) -> impl Future<Output = Result<Option<Vec<DirEntry>>>> + Send {
        dir.next_page()
    }

    fn close_dir(&self, dir: share::DirReader) -> impl Future<Output = Result<()>> + Send {
        dir.close()
    }

    fn records_in_entries(&self) -> bool {
        self.records.shown_in_listings()
    }

    fn marker_dirs(&self, dir: &str, entries: &[DirEntry]) -> impl Future<Output = Result<HashSet<u64>>> + Send {
        entry_lookups::marker_dirs(self.tree, self.records, dir, entries)
    }

    async fn read_small(&self, path: &str, max: u32) -> Result<Bytes> {
        share::read_small(self.tree, path, max).await.map(|(_, data)| data)
    }

    fn write_temp(&self, temp: &str, body: &[u8]) -> impl Future<Output = Result<(TempFile, u32)>> + Send {
        share::create_temp_and_write(self.pool, self.tree, self.records, temp, &[], body)
    }

    async fn publish_temp(&self, temp: TempFile, target: &str, replace: bool) -> Result<()> {
        let (e, temp) = match share::publish_and_close(temp, target, replace).await {
            Ok(()) => return Ok(()),
            Err(failed) => failed,
        };
        if let Some(t) = temp {
            t.discard().await;
        }
        Err(e)
    }

    fn discard_temp(&self, temp: TempFile) -> impl Future<Output = ()> + Send {
        temp.discard()
    }

    async fn write_small(&self, path: &str, data: &[u8]) -> Result<FileTimes> {
        share::write_small(self.tree, path, data).await.map(|closed| closed.times)
    }

    fn create_once(&self, path: &str, data: &[u8]) -> impl Future<Output = Result<bool>> + Send {
        share::create_once(self.tree, path, data)
    }

    fn create_lock(&self, path: &str) -> impl Future<Output = Result<Option<Handle>>> + Send {
        share::create_lock(self.tree, path)
    }

    fn delete_file(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        share::delete(self.tree, path, false)
    }

    fn set_dir_record(&self, path: &str, meta: &ObjectMeta) -> impl Future<Output = Result<()>> + Send {
        share::set_dir_ea(self.tree, self.records, path, meta.to_ea())
    }

    fn open_breaking_leases(&self, path: &str) -> impl Future<Output = Result<Handle>> + Send {
        share::open_breaking_leases(self.tree, path)
    }

    fn may_hold_record(&self, len: usize) -> bool {
        self.records.may_hold(len)
    }

    async fn set_record(&self, file: &Handle, path: &str, meta: &ObjectMeta) -> Result<()> {
        share::set_eas(file, self.records, path, &[meta.to_ea()]).await
    }

    async fn rewrite_record(&self, file: &Handle, path: &str, meta: &ObjectMeta) -> Result<()> {
        share::rewrite_records(file, self.records, path, &[meta.to_ea()]).await
    }

    fn set_read_only(&self, file: &Handle, on: bool) -> impl Future<Output = Result<()>> + Send {
        share::set_read_only(file, on)
    }

    fn break_leases(&self, path: &str) -> impl Future<Output = ()> + Send {
        share::break_leases_after_change(self.tree, path)
    }
}
