//! An in-memory share for the store rules' unit tests (writes, deletes,
//! a GET's lookup, the object cache's coherence, a listing's directory
//! reads), racing one share operation at a time.
//!
//! It models what those rules rely on, as an SMB server does them: names
//! bound to files, opens with access and sharing modes (a conflicting open
//! is a sharing violation), delete on close (the name stays taken, delete
//! pending, until the last open closes; it takes only if that open knows
//! the file by the name the delete was set under, and a look of one
//! compound keeps the name it opened across a rename: `memory_state.rs`
//! holds that model), a rename that without replace
//! meets a collision and with replace is refused over a file someone holds
//! open, a directory where a file was asked for, keys' creation locks held
//! by one taker at a time until released or dropped (as a byte-range lock
//! goes with its open), a cache holder's Read+Handle lease that an open to
//! write or delete the file breaks (the holder closing first; a rename
//! over the file breaks none), a directory removed while an open holds it
//! that answers a look with no attributes until it goes (as Samba does),
//! records with an ETag, parts and a marker flag, the bytes of small
//! files read whole,
//! directories the gateway made (marked by their CreationTime), and
//! directory reads page by page in name order (see [`MemDir`]), whose
//! ChangeTime moves whenever a name in them comes or goes (a server's
//! coarse times, which can miss a change, failure class 30's open case,
//! are not modelled).
//! It is a model, in addition to the tests against smbd, never instead.
//! What a test puts on it and reads of it is in `memory_setup.rs`.
//!
//! Every operation first waits at the share's [`Gate`]; [`interleave`] lets
//! one waiting operation through at a time, chosen by a seeded generator,
//! so that a seed names one interleaving and a failing one can be replayed
//! (`steps.rs`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub(crate) use super::steps::{alone, interleave, race};
use super::steps::{Gate, Gated};

use super::memory_state::{created_of, Node, State};
pub(crate) use super::memory_state::{ALL, DELETE, READ, WRITE};
use super::meta::ObjectMeta;
use super::reads::object_cache::Holder;
use super::records::FileKey;
use super::share::{failing_with, not_a_file, CreateResponse, DirEntry, Failure, FileTimes, Result};
use super::share_ops::ShareOps;
use super::types::ObjectInfo;

/// The in-memory share.
#[derive(Default, Clone)]
pub(crate) struct MemoryShare {
    pub(super) state: Arc<Mutex<State>>,
    pub(super) gate: Arc<Gate>,
    /// Directories opened for reading so far.
    pub(super) dir_reads: Arc<AtomicUsize>,
}

/// A directory of a [`MemoryShare`] open for reading. Each page is read
/// from the directory as it is then: the next two names after the last
/// one given, in name order. (Samba on ext4 gives names in hash order,
/// where a rename can move a name behind the read: that case is failure
/// class 33's open one, not modelled.)
pub(crate) struct MemDir {
    path: String,
    /// The last name given.
    after: Option<String>,
    times: FileTimes,
}

/// An open file of a [`MemoryShare`]; closed when dropped.
pub(crate) struct MemHandle {
    pub(super) id: u64,
    state: Arc<Mutex<State>>,
    /// What its CREATE answered.
    pub(super) created: CreateResponse,
}

impl Drop for MemHandle {
    fn drop(&mut self) {
        self.state.lock().unwrap().close(self.id);
    }
}

/// A cache holder of a [`MemoryShare`] ([`MemoryShare::hold`]).
pub(crate) struct MemHeld {
    pub(super) _handle: MemHandle,
    pub(super) lease: Arc<AtomicBool>,
    pub(super) created: CreateResponse,
}

impl Holder for MemHeld {
    fn created(&self) -> &CreateResponse {
        &self.created
    }
    fn holds(&self) -> bool {
        self.lease.load(Ordering::SeqCst)
    }
}

/// A creation lock of a [`MemoryShare`]; released when dropped.
pub(crate) struct MemLock {
    name: String,
    state: Arc<Mutex<State>>,
}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.state.lock().unwrap().locks.remove(&self.name);
    }
}

impl MemoryShare {
    /// A new file at `path` (a writer's verified temp file), open for
    /// writing and delete, sharing everything; not gated.
    pub(crate) fn create_temp(&self, path: &str, etag: &str) -> MemHandle {
        self.put(path, etag);
        let id = self.state.lock().unwrap().open(path, WRITE | DELETE, ALL, false).expect("a fresh temp file opens");
        self.handle(id)
    }

    /// Opens the file at `path` with `access`, sharing `sharing` (as
    /// another client would: a GET reads sharing READ and DELETE); not
    /// gated.
    ///
    /// Errors: as an open on the share (not found, sharing violation).
    pub(crate) fn open_as(&self, path: &str, access: u8, sharing: u8) -> Result<MemHandle> {
        let id = self.state.lock().unwrap().open(path, access, sharing, false)?;
        Ok(self.handle(id))
    }

    /// A look at `path` (`op`, a step): an open of attributes only, which
    /// no sharing mode refuses, made and closed by one compound, so that
    /// others' steps can come between its open and its CLOSE, and a rename
    /// meanwhile leaves it with the old name; a directory opens too if
    /// `dir_ok`. Returns the times, the file's id and its record. A
    /// directory removed while others hold it answers with no attributes,
    /// without an open.
    pub(super) async fn look(
        &self,
        op: &'static str,
        path: &str,
        dir_ok: bool,
    ) -> Result<(FileTimes, u64, Option<ObjectMeta>)> {
        self.gate.step(op).await;
        let (id, looked) = {
            let mut s = self.state.lock().unwrap();
            let node = *s.names.get(path).ok_or_else(|| failing_with(Failure::NameNotFound))?;
            let n = &s.nodes[&node];
            let looked = (n.stat_times(), node, n.record());
            if dir_ok && looked.0.attributes == 0 {
                return Ok(looked);
            }
            (s.open_in_compound(path, 0, ALL, dir_ok)?, looked)
        };
        self.gate.step("look_close").await;
        self.state.lock().unwrap().close(id);
        Ok(looked)
    }

    /// The handle of the open `id`; the state must not be locked. (A
    /// creation lock's open may have lost its file already.)
    pub(super) fn handle(&self, id: u64) -> MemHandle {
        let created = {
            let s = self.state.lock().unwrap();
            let node = s.opens.get(&id).map_or(0, |o| o.node);
            created_of(node, s.nodes.get(&node).map(Node::times).unwrap_or_default())
        };
        MemHandle { id, state: self.state.clone(), created }
    }
}

impl ShareOps for MemoryShare {
    type Handle = MemHandle;
    type KeyLock = MemLock;
    type DirReader = MemDir;
    type Temp = MemHandle;

    async fn take_key_lock(&self, name: &str) -> Result<Option<MemLock>> {
        self.gate.step("take_key_lock").await;
        let taken = self.state.lock().unwrap().locks.insert(name.to_string());
        Ok(taken.then(|| MemLock { name: name.to_string(), state: self.state.clone() }))
    }

    async fn release_lock(&self, lock: MemLock) {
        self.gate.step("release_lock").await;
        drop(lock);
    }

    fn release_lock_soon(&self, lock: MemLock) {
        drop(lock);
    }

    async fn open_to_replace(&self, path: &str) -> Result<(MemHandle, Option<ObjectMeta>)> {
        self.gate.step("open_to_replace").await;
        let mut s = self.state.lock().unwrap();
        let id = s.open(path, DELETE, READ, false)?;
        let etag = s.nodes[&s.opens[&id].node].etag.clone();
        drop(s);
        Ok((self.handle(id), Some(ObjectMeta { etag, ..Default::default() })))
    }

    async fn swap_in(
        &self,
        lock: &MemHandle,
        backup: &str,
        file: &MemHandle,
        target: &str,
    ) -> Result<(Result<()>, Result<()>)> {
        // One compound, but two steps: another smbd process can act
        // between them.
        self.gate.step("swap_away").await;
        let away = self.state.lock().unwrap().rename(lock.id, backup, false);
        self.gate.step("swap_into").await;
        let into = self.state.lock().unwrap().rename(file.id, target, false);
        Ok((away, into))
    }

    async fn rename(&self, file: &MemHandle, target: &str, replace: bool) -> Result<()> {
        self.gate.step("rename").await;
        self.state.lock().unwrap().rename(file.id, target, replace)
    }

    fn close_soon(&self, file: MemHandle) {
        drop(file);
    }

    async fn close(&self, file: MemHandle) {
        self.gate.step("close").await;
        drop(file);
    }

    async fn close_and_delete(&self, file: MemHandle) -> Result<()> {
        self.gate.step("close_and_delete").await;
        if let Some(o) = self.state.lock().unwrap().opens.get_mut(&file.id) {
            o.delete_on_close = true;
        }
        drop(file);
        Ok(())
    }

    async fn remove_leftover(&self, path: &str) {
        // The live share tries again in the background while the file is
        // delete pending; here each try is a step of its own, in line, so
        // that a test sees where they end.
        for _ in 0..64 {
            self.gate.step("remove_leftover").await;
            let mut s = self.state.lock().unwrap();
            match s.open(path, DELETE, ALL, false) {
                Ok(id) => {
                    s.close_deleting(id);
                    return;
                }
                Err(e) if e.failure() == Failure::DeletePending => drop(s),
                Err(_) => return,
            }
        }
    }

    async fn delete_on_close(&self, file: &MemHandle) -> Result<()> {
        self.gate.step("delete_on_close").await;
        if let Some(o) = self.state.lock().unwrap().opens.get_mut(&file.id) {
            o.delete_on_close = true;
        }
        Ok(())
    }

    async fn rename_path(&self, source: &str, target: &str, replace: bool) -> Result<()> {
        self.gate.step("rename_path").await;
        let mut s = self.state.lock().unwrap();
        let open = s.open(source, DELETE, ALL, false)?;
        let renamed = s.rename(open, target, replace);
        s.close(open);
        renamed
    }

    async fn make_dir(&self, path: &str) -> Result<()> {
        self.gate.step("make_dir").await;
        self.state.lock().unwrap().make_new(path, Node::new(true, ""))
    }

    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        self.gate.step("list_dir").await;
        let s = self.state.lock().unwrap();
        match s.names.get(path).map(|id| s.nodes[id].dir) {
            Some(true) => Ok(s.entries(path)),
            _ => Err(failing_with(Failure::NameNotFound)),
        }
    }

    async fn delete_dir(&self, path: &str) -> Result<()> {
        self.gate.step("delete_dir").await;
        let mut s = self.state.lock().unwrap();
        let id = s.open(path, DELETE, ALL, true)?;
        let failure = match s.nodes[&s.opens[&id].node].dir {
            false => Some(Failure::NotADirectory),
            true if !s.entries(path).is_empty() => Some(Failure::NotEmpty),
            true => None,
        };
        match failure {
            None => s.close_deleting(id),
            Some(_) => s.close(id),
        }
        failure.map_or(Ok(()), |f| Err(failing_with(f)))
    }

    async fn mkdir_own(&self, path: &str) -> Result<()> {
        self.gate.step("mkdir").await;
        self.state.lock().unwrap().make_new(path, Node { own: true, ..Node::new(true, "") })
    }

    async fn is_directory(&self, path: &str) -> Result<bool> {
        self.look("stat", path, true).await.map(|(t, _, _)| t.is_directory())
    }

    async fn is_empty_dir(&self, path: &str) -> Result<bool> {
        self.gate.step("is_empty_dir").await;
        let s = self.state.lock().unwrap();
        let node = s.names.get(path).ok_or_else(|| failing_with(Failure::NameNotFound))?;
        if !s.nodes[node].dir {
            return Err(failing_with(Failure::NameNotFound));
        }
        Ok(s.entries(path).is_empty())
    }

    async fn holds_no_file(&self, path: &str) -> bool {
        self.look("holds_no_file", path, true).await.is_ok_and(|(t, _, _)| not_a_file(&t))
    }

    async fn open_delete_with_meta(
        &self,
        path: &str,
        _name: bool,
        exclusive: bool,
    ) -> Result<(MemHandle, Option<ObjectMeta>, Option<String>)> {
        self.gate.step("open_delete_with_meta").await;
        let mut s = self.state.lock().unwrap();
        let id = s.open(path, DELETE, if exclusive { READ } else { ALL }, false)?;
        let etag = s.nodes[&s.opens[&id].node].etag.clone();
        drop(s);
        Ok((self.handle(id), Some(ObjectMeta { etag, ..Default::default() }), None))
    }

    async fn set_dir_record(&self, path: &str, meta: &ObjectMeta) -> Result<()> {
        self.gate.step("set_dir_record").await;
        let mut s = self.state.lock().unwrap();
        let node = *s.names.get(path).ok_or_else(|| failing_with(Failure::NameNotFound))?;
        if s.nodes[&node].delete_at.is_some() {
            return Err(failing_with(Failure::AccessDenied));
        }
        let id = s.open(path, WRITE, ALL, true)?;
        let n = s.nodes.get_mut(&node).expect("open");
        (n.marker, n.etag) = (meta.marker, meta.etag.clone());
        s.close(id);
        Ok(())
    }

    async fn open_alone_for_delete(&self, path: &str) -> Result<MemHandle> {
        self.gate.step("open_alone_for_delete").await;
        let id = self.state.lock().unwrap().open(path, DELETE, 0, false)?;
        Ok(self.handle(id))
    }

    async fn is_going(&self, file: &MemHandle) -> Result<bool> {
        self.gate.step("is_going").await;
        let s = self.state.lock().unwrap();
        let node = s.opens.get(&file.id).map(|o| o.node);
        Ok(node.and_then(|n| s.nodes.get(&n)).is_none_or(|n| n.delete_at.is_some()))
    }

    fn info(&self, file: &MemHandle, meta: Option<ObjectMeta>, path: &str) -> ObjectInfo {
        let s = self.state.lock().unwrap();
        let size = s.opens.get(&file.id).and_then(|o| s.nodes.get(&o.node)).map_or(0, |n| n.size);
        let meta = meta.unwrap_or_default();
        ObjectInfo { size, last_modified: 0, etag: meta.etag.clone(), meta, path: path.to_string(), disk_id: None }
    }

    fn opened_times(&self, file: &MemHandle) -> FileTimes {
        let s = self.state.lock().unwrap();
        s.opens.get(&file.id).and_then(|o| s.nodes.get(&o.node)).map(|n| n.times()).unwrap_or_default()
    }

    fn record_key(&self, _file: &MemHandle) -> Option<FileKey> {
        None
    }

    fn forget_record_of(&self, _key: Option<FileKey>) {}

    async fn is_locked(&self, lock: &str) -> bool {
        self.gate.step("is_locked").await;
        self.state.lock().unwrap().locks.contains(lock)
    }

    async fn times(&self, path: &str) -> Result<FileTimes> {
        self.look("stat", path, true).await.map(|(t, _, _)| t)
    }

    async fn stat_with_meta(&self, path: &str, file_only: bool) -> Result<(CreateResponse, Option<ObjectMeta>)> {
        let (times, node, record) = self.look("stat_with_meta", path, !file_only).await?;
        Ok((created_of(node, times), record))
    }

    async fn open_dir(&self, path: &str) -> Result<MemDir> {
        self.gate.step("open_dir").await;
        self.dir_reads.fetch_add(1, Ordering::SeqCst);
        let s = self.state.lock().unwrap();
        let node = s.names.get(path).map(|id| &s.nodes[id]).filter(|n| n.dir);
        let times = node.ok_or_else(|| failing_with(Failure::NameNotFound))?.times();
        Ok(MemDir { path: path.to_string(), after: None, times })
    }

    fn dir_times(&self, dir: &MemDir) -> FileTimes {
        dir.times
    }

    async fn next_entries(&self, dir: &mut MemDir) -> Result<Option<Vec<DirEntry>>> {
        self.gate.step("next_entries").await;
        let entries = self.state.lock().unwrap().entries(&dir.path);
        let after = |e: &&DirEntry| dir.after.as_ref().is_none_or(|a| e.name > *a);
        let page: Vec<DirEntry> = entries.iter().filter(after).take(2).cloned().collect();
        dir.after = page.last().map(|e| e.name.clone()).or(dir.after.take());
        Ok((!page.is_empty()).then_some(page))
    }

    async fn close_dir(&self, _dir: MemDir) -> Result<()> {
        Ok(())
    }

    fn records_in_entries(&self) -> bool {
        true // records are EAs here: an entry's EaSize tells
    }

    async fn marker_dirs(&self, _dir: &str, _entries: &[DirEntry]) -> Result<HashSet<u64>> {
        Ok(HashSet::new())
    }

    async fn read_small(&self, path: &str, max: u32) -> Result<bytes::Bytes> {
        self.gate.step("read_small").await;
        let (id, mut data) = {
            let mut s = self.state.lock().unwrap();
            let id = s.open_in_compound(path, READ, ALL, false)?;
            (id, s.nodes[&s.opens[&id].node].data.clone())
        };
        self.gate.step("read_small_close").await;
        self.state.lock().unwrap().close(id);
        data.truncate(max as usize);
        Ok(data.into())
    }

    async fn write_temp(&self, temp: &str, body: &[u8]) -> Result<(MemHandle, u32)> {
        self.gate.step("write_temp").await;
        let node = Node { data: body.to_vec(), size: body.len() as u64, ..Node::new(false, "") };
        self.insert(temp, node);
        let id = self.state.lock().unwrap().open(temp, WRITE | DELETE, ALL, false)?;
        Ok((self.handle(id), body.len() as u32))
    }

    async fn publish_temp(&self, temp: MemHandle, target: &str, replace: bool) -> Result<()> {
        self.gate.step("publish_temp").await;
        let mut s = self.state.lock().unwrap();
        s.rename(temp.id, target, replace).inspect_err(|_| s.close_deleting(temp.id))
    }

    async fn discard_temp(&self, temp: MemHandle) {
        self.gate.step("discard_temp").await;
        self.state.lock().unwrap().close_deleting(temp.id);
    }

    async fn write_small(&self, path: &str, data: &[u8]) -> Result<FileTimes> {
        self.gate.step("write_small").await;
        let mut s = self.state.lock().unwrap();
        let id = match s.write_new(path, data) {
            Err(e) if e.failure() == Failure::Collision => s.open(path, WRITE, ALL, false)?,
            made => made?,
        };
        Ok(s.write_open(id, data))
    }

    async fn create_once(&self, path: &str, data: &[u8]) -> Result<bool> {
        // CREATE, then WRITE in the same compound: another smbd process
        // can read the file empty between them.
        self.gate.step("create_once").await;
        let id = match self.state.lock().unwrap().write_new(path, &[]) {
            Err(e) if e.failure() == Failure::Collision => return Ok(false),
            made => made?,
        };
        self.gate.step("create_once_write").await;
        self.state.lock().unwrap().write_open(id, data);
        Ok(true)
    }

    async fn create_lock(&self, path: &str) -> Result<Option<MemHandle>> {
        // Samba makes the file, then records the open: another opener can
        // come between the two.
        self.gate.step("create_lock").await;
        let node = match self.state.lock().unwrap().make_unopened(path) {
            Err(e) if matches!(e.failure(), Failure::Collision | Failure::DeletePending) => return Ok(None),
            made => made?,
        };
        self.gate.step("create_lock_open").await;
        let Some((id, named)) = self.state.lock().unwrap().open_lock(node, path) else { return Ok(None) };
        // A lock that lost its name is closed, which deletes nothing.
        Ok(Some(self.handle(id)).filter(|_| named))
    }

    async fn delete_file(&self, path: &str) -> Result<()> {
        // CREATE (sharing everything), SET_INFO, CLOSE in one compound:
        // another smbd process can open the file between them.
        self.gate.step("delete_file").await;
        let id = self.state.lock().unwrap().open_in_compound(path, DELETE, ALL, false)?;
        self.gate.step("delete_file_close").await;
        self.state.lock().unwrap().close_deleting(id);
        Ok(())
    }

    async fn open_breaking_leases(&self, path: &str) -> Result<MemHandle> {
        self.gate.step("open_breaking_leases").await;
        let id = self.state.lock().unwrap().open(path, DELETE, READ | WRITE, false)?;
        Ok(self.handle(id))
    }

    fn may_hold_record(&self, _len: usize) -> bool {
        true
    }

    async fn set_record(&self, file: &MemHandle, _path: &str, meta: &ObjectMeta) -> Result<()> {
        self.gate.step("set_record").await;
        self.state.lock().unwrap().write_record(file.id, meta)
    }

    // Its LastWriteTime is never moved here, so this is `set_record`.
    async fn rewrite_record(&self, file: &MemHandle, _path: &str, meta: &ObjectMeta) -> Result<()> {
        self.gate.step("rewrite_record").await;
        self.state.lock().unwrap().write_record(file.id, meta)
    }

    async fn set_read_only(&self, file: &MemHandle, on: bool) -> Result<()> {
        self.gate.step("set_read_only").await;
        self.state.lock().unwrap().node_of(file.id)?.read_only = on;
        Ok(())
    }

    async fn break_leases(&self, path: &str) {
        self.gate.step("break_leases").await;
        let mut s = self.state.lock().unwrap();
        if let Some(&node) = s.names.get(path) {
            s.break_leases(node);
        }
    }
}

impl Gated for MemoryShare {
    fn gate(&self) -> &Gate {
        &self.gate
    }
}
