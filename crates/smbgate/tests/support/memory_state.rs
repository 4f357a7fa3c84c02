//! The in-memory share's model of names, files and opens (see
//! `memory_share.rs`): what an SMB server keeps of them, and how a
//! delete-on-close is decided, as Samba decides it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::meta::ObjectMeta;
use super::share::{failing_with, CreateResponse, DirEntry, Failure, FileTimes, Result, OWN_DIR_MARK};
use smb_proto::create::{CreateResponseContext, FileId};
use smb_proto::create_flags::attributes;

/// Access and sharing bits (one layout for both, as in a CREATE).
pub(crate) const READ: u8 = 1;
/// Write access, or sharing with writers.
pub(crate) const WRITE: u8 = 2;
/// Delete (and rename) access, or sharing with deleters.
pub(crate) const DELETE: u8 = 4;
/// Sharing with everyone.
pub(crate) const ALL: u8 = READ | WRITE | DELETE;

/// A file or directory.
pub(crate) struct Node {
    pub(crate) dir: bool,
    /// The ETag its record holds ("" for a file without a record).
    pub(crate) etag: String,
    /// A directory with a marker record (the object `name/`).
    pub(crate) marker: bool,
    /// A directory the gateway made for keys (`mkdir_own`).
    pub(crate) own: bool,
    /// Bytes, and the sizes of its parts (none for a single PUT).
    pub(crate) size: u64,
    pub(crate) parts: Vec<u64>,
    /// What it holds, for the small files that are read whole.
    pub(crate) data: Vec<u8>,
    /// A directory's ChangeTime: set anew whenever a name in it comes or
    /// goes.
    pub(crate) change: u64,
    /// Its LastWriteTime (FILETIME); 0 unless a test sets it.
    pub(crate) written: u64,
    /// The name its delete-on-close was set under, by the open that set
    /// it (Samba keeps it by the hash of that name).
    pub(crate) delete_at: Option<String>,
    /// A whole record written through an open (`set_record`), which then
    /// stands for `etag`, `marker` and `parts`.
    pub(crate) meta: Option<ObjectMeta>,
    /// FILE_ATTRIBUTE_READONLY (a locked version's mark).
    pub(crate) read_only: bool,
    /// Records other than the object's, by name (a part's, an upload's).
    pub(crate) named: HashMap<String, Vec<u8>>,
}

impl Node {
    pub(crate) fn new(dir: bool, etag: &str) -> Node {
        Node {
            dir,
            etag: etag.to_string(),
            marker: false,
            own: false,
            size: 0,
            parts: Vec::new(),
            data: Vec::new(),
            change: 0,
            written: 0,
            delete_at: None,
            meta: None,
            read_only: false,
            named: HashMap::new(),
        }
    }

    /// Its record, as an open reads it.
    pub(crate) fn record(&self) -> Option<ObjectMeta> {
        if let Some(meta) = &self.meta {
            return Some(meta.clone());
        }
        let parts = self.parts.clone();
        (self.marker || !self.etag.is_empty()).then(|| ObjectMeta {
            etag: self.etag.clone(),
            marker: self.marker,
            parts,
            ..Default::default()
        })
    }

    /// Its times as a look at its name answers them: a directory removed
    /// while an open still holds it (delete pending) answers with no
    /// attributes at all, as Samba does, so it is neither a directory
    /// nor a file.
    pub(crate) fn stat_times(&self) -> FileTimes {
        match self.dir && self.delete_at.is_some() {
            true => FileTimes { attributes: 0, ..self.times() },
            false => self.times(),
        }
    }

    /// Its times, as an open reads them.
    pub(crate) fn times(&self) -> FileTimes {
        let attributes = match (self.dir, self.read_only) {
            (true, _) => attributes::DIRECTORY,
            (false, true) => attributes::READONLY,
            (false, false) => attributes::NORMAL,
        };
        let creation = if self.own { OWN_DIR_MARK } else { 0 };
        let (change, last_write) = (self.change, self.written);
        FileTimes { creation, change, last_write, end_of_file: self.size, attributes, ..Default::default() }
    }
}

/// An open of a [`Node`], with its access and sharing.
pub(crate) struct Open {
    pub(crate) node: u64,
    pub(crate) access: u8,
    pub(crate) sharing: u8,
    pub(crate) delete_on_close: bool,
    /// The name it knows its file by: where it opened it, or where its own
    /// rename moved it. An open another smbd process made learns of a
    /// rename only after the request it is in, so an open inside one
    /// compound (a look: CREATE, QUERY_INFO, CLOSE) keeps the old name.
    pub(crate) name: String,
    pub(crate) in_compound: bool,
    /// A cache holder's Read+Handle lease: false once broken.
    pub(crate) lease: Option<Arc<AtomicBool>>,
}

/// Everything the share holds: names, files, opens and creation locks.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) names: HashMap<String, u64>,
    pub(crate) nodes: HashMap<u64, Node>,
    pub(crate) opens: HashMap<u64, Open>,
    /// Creation locks held now, by name.
    pub(crate) locks: HashSet<String>,
    pub(crate) next: u64,
    /// The last ChangeTime given.
    pub(crate) clock: u64,
    /// The most bytes of record a file can keep (`None`: no limit).
    pub(crate) record_room: Option<usize>,
    /// Other spellings the server resolves to a name: another case, an
    /// 8.3 alias (path asked → path kept).
    pub(crate) aliases: HashMap<String, String>,
}

/// What a CREATE of `node` answers: `times`, and its on-disk id.
pub(crate) fn created_of(node: u64, times: FileTimes) -> CreateResponse {
    let file_id = FileId { persistent: node, volatile: 0 };
    let contexts = vec![CreateResponseContext::OnDiskId { disk_file_id: node, volume_id: 0 }];
    CreateResponse { oplock_level: 0, create_action: 0, times, file_id, contexts }
}

impl State {
    /// The name the server resolves `path` to: an alias of it or of one of
    /// its folders replaced by the path kept, else `path` itself.
    pub(crate) fn kept_name(&self, path: &str) -> String {
        for (alias, kept) in &self.aliases {
            if path == alias {
                return kept.clone();
            }
            if let Some(rest) = path.strip_prefix(alias.as_str()).and_then(|r| r.strip_prefix('\\')) {
                return format!("{kept}\\{rest}");
            }
        }
        path.to_string()
    }

    pub(crate) fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Binds `path` to `node`, as a change of its directory.
    pub(crate) fn bind(&mut self, path: &str, node: u64) {
        self.names.insert(path.to_string(), node);
        self.touch_parent_of(path);
    }

    /// Unbinds every name of `node`, as a change of their directories.
    pub(crate) fn unbind(&mut self, node: u64) {
        let gone: Vec<String> = self.names.iter().filter(|(_, n)| **n == node).map(|(p, _)| p.clone()).collect();
        for path in gone {
            self.names.remove(&path);
            self.touch_parent_of(&path);
        }
    }

    pub(crate) fn touch_parent_of(&mut self, path: &str) {
        let Some((parent, _)) = path.rsplit_once('\\') else { return };
        self.clock += 1;
        let clock = self.clock;
        if let Some(n) = self.names.get(parent).and_then(|id| self.nodes.get_mut(id)) {
            n.change = clock;
        }
    }

    /// The entries of the directory at `path`, as a directory read lists
    /// them.
    pub(crate) fn entries(&self, path: &str) -> Vec<DirEntry> {
        let inside = format!("{path}\\");
        let mut out: Vec<DirEntry> = self
            .names
            .iter()
            .filter_map(|(name, id)| Some((name.strip_prefix(&inside)?, id)))
            .filter(|(leaf, _)| !leaf.contains('\\'))
            .map(|(leaf, id)| {
                let n = &self.nodes[id];
                let ea_size = if n.record().is_some() { 64 } else { 0 };
                DirEntry { name: leaf.to_string(), times: n.times(), ea_size, file_id: *id }
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The file the open `open` holds.
    ///
    /// Errors: Other for an open that is closed.
    pub(crate) fn node_of(&mut self, open: u64) -> Result<&mut Node> {
        let node = self.opens.get(&open).ok_or_else(|| failing_with(Failure::Other))?.node;
        Ok(self.nodes.get_mut(&node).expect("an open's node"))
    }

    /// Writes `meta` as the record of the file the open `open` holds.
    ///
    /// Errors: NoRoom over [`State::record_room`]; Other for an open that
    /// is closed.
    pub(crate) fn write_record(&mut self, open: u64, meta: &ObjectMeta) -> Result<()> {
        if self.record_room.is_some_and(|room| meta.record_len() > room) {
            return Err(failing_with(Failure::NoRoom));
        }
        self.node_of(open)?.meta = Some(meta.clone());
        Ok(())
    }

    /// An open of the file at `path` with `access`, sharing `sharing`.
    pub(crate) fn open(&mut self, path: &str, access: u8, sharing: u8, dir_ok: bool) -> Result<u64> {
        let node = *self.names.get(path).ok_or_else(|| failing_with(Failure::NameNotFound))?;
        let n = &self.nodes[&node];
        if n.delete_at.as_deref() == Some(path) {
            return Err(failing_with(Failure::DeletePending));
        }
        if n.dir && !dir_ok {
            return Err(failing_with(Failure::IsDirectory));
        }
        if access & (WRITE | DELETE) != 0 {
            self.break_leases(node);
        }
        let conflict = self
            .opens
            .values()
            .filter(|o| o.node == node)
            .any(|o| access & !o.sharing != 0 || o.access & !sharing != 0);
        if conflict {
            return Err(failing_with(Failure::SharingViolation));
        }
        let id = self.id();
        let name = path.to_string();
        let open = Open { node, access, sharing, delete_on_close: false, name, in_compound: false, lease: None };
        self.opens.insert(id, open);
        Ok(id)
    }

    /// Breaks the leases held on `node`: an open that would write, rename
    /// or delete it breaks Read+Handle, and a holder closes before it
    /// acknowledges (`OnBreak::CloseFirst`), so that open goes on.
    pub(crate) fn break_leases(&mut self, node: u64) {
        let held: Vec<u64> =
            self.opens.iter().filter(|(_, o)| o.node == node && o.lease.is_some()).map(|(id, _)| *id).collect();
        for id in held {
            if let Some(lease) = self.opens.get(&id).and_then(|o| o.lease.as_ref()) {
                lease.store(false, Ordering::SeqCst);
            }
            self.close(id);
        }
    }

    /// [`State::open`] for an open that one compound makes and closes
    /// (a look), which a rename meanwhile leaves with the old name.
    pub(crate) fn open_in_compound(&mut self, path: &str, access: u8, sharing: u8, dir_ok: bool) -> Result<u64> {
        let id = self.open(path, access, sharing, dir_ok)?;
        self.opens.get_mut(&id).expect("just opened").in_compound = true;
        Ok(id)
    }

    /// Renames the file `open` holds to `target`, as SMB2 SET_INFO's
    /// FileRenameInformation does.
    ///
    /// Errors: PathNotFound (DeletePending) if `target`'s folder is
    /// missing (going); Collision over a name without `replace`; and,
    /// with `replace`, AccessDenied over a directory or over a file another
    /// open holds.
    pub(crate) fn rename(&mut self, open: u64, target: &str, replace: bool) -> Result<()> {
        let node = self.opens.get(&open).ok_or_else(|| failing_with(Failure::Other))?.node;
        self.check_parent(target)?;
        if let Some(&there) = self.names.get(target) {
            if there == node {
                return Ok(());
            }
            if !replace {
                return Err(failing_with(Failure::Collision));
            }
            // Samba refuses it over a file its own process has open; a
            // look of one compound in that process cannot be open across
            // it, and one in another smbd process refuses nothing.
            if self.nodes[&there].dir || self.opens.values().any(|o| o.node == there && !o.in_compound) {
                return Err(failing_with(Failure::AccessDenied));
            }
            self.nodes.remove(&there);
        }
        self.unbind(node);
        self.bind(target, node);
        for (id, o) in self.opens.iter_mut().filter(|(_, o)| o.node == node) {
            if *id == open || !o.in_compound {
                o.name = target.to_string();
            }
        }
        Ok(())
    }

    /// Whether a name can be made at `path`: its folder is a directory
    /// (a top-level name always can).
    ///
    /// Errors: PathNotFound if the folder is missing or a file (as Samba
    /// answers both); DeletePending while the folder goes.
    pub(crate) fn check_parent(&self, path: &str) -> Result<()> {
        let Some((dir, _)) = path.rsplit_once('\\') else { return Ok(()) };
        match self.names.get(dir).map(|id| &self.nodes[id]) {
            Some(n) if n.dir && n.delete_at.is_some() => Err(failing_with(Failure::DeletePending)),
            Some(n) if n.dir => Ok(()),
            _ => Err(failing_with(Failure::PathNotFound)),
        }
    }

    /// A new file at `path`, open for writing in one compound.
    ///
    /// Errors: Collision if the name is taken; PathNotFound if its folder
    /// is missing.
    pub(crate) fn write_new(&mut self, path: &str, data: &[u8]) -> Result<u64> {
        self.make_new(path, Node { data: data.to_vec(), size: data.len() as u64, ..Node::new(false, "") })?;
        self.open_in_compound(path, WRITE, ALL, false)
    }

    /// `node` as a new name at `path`, as a CREATE that may not open an
    /// existing one makes it.
    ///
    /// Errors: Collision if the name is taken; as [`State::check_parent`].
    pub(crate) fn make_new(&mut self, path: &str, node: Node) -> Result<()> {
        if self.names.contains_key(path) {
            return Err(failing_with(Failure::Collision));
        }
        self.check_parent(path)?;
        let id = self.id();
        self.nodes.insert(id, node);
        self.bind(path, id);
        Ok(())
    }

    /// `data` as the whole of the file `open` has, written now; returns
    /// its times, as a CLOSE answers them.
    pub(crate) fn write_open(&mut self, open: u64, data: &[u8]) -> FileTimes {
        let Some(n) = self.opens.get(&open).and_then(|o| self.nodes.get_mut(&o.node)) else {
            self.close(open);
            return FileTimes::default();
        };
        (n.data, n.size, n.written) = (data.to_vec(), data.len() as u64, super::versions::filetime_now());
        let times = n.times();
        self.close(open);
        times
    }

    /// The first half of a creation lock's CREATE: a new file at `path`
    /// with no open yet (Samba makes the file before it records the open).
    ///
    /// Errors: Collision if the name is taken; DeletePending while its
    /// file goes; as [`State::check_parent`].
    pub(crate) fn make_unopened(&mut self, path: &str) -> Result<u64> {
        self.check_parent(path)?;
        if let Some(node) = self.names.get(path) {
            let pending = self.nodes[node].delete_at.as_deref() == Some(path);
            return Err(failing_with(if pending { Failure::DeletePending } else { Failure::Collision }));
        }
        let node = self.id();
        self.nodes.insert(node, Node::new(false, ""));
        self.bind(path, node);
        Ok(node)
    }

    /// The second half: the lock's open of `node`, made as `name` (DELETE,
    /// sharing nothing, delete-on-close), and whether the file still has a
    /// name; `None` if another open took the file meanwhile.
    pub(crate) fn open_lock(&mut self, node: u64, name: &str) -> Option<(u64, bool)> {
        if self.opens.values().any(|o| o.node == node) {
            return None;
        }
        let id = self.id();
        let name = name.to_string();
        let open =
            Open { node, access: DELETE, sharing: 0, delete_on_close: true, name, in_compound: false, lease: None };
        self.opens.insert(id, open);
        Some((id, self.names.values().any(|n| *n == node)))
    }

    /// Marks `open` delete-on-close and closes it.
    pub(crate) fn close_deleting(&mut self, open: u64) {
        if let Some(o) = self.opens.get_mut(&open) {
            o.delete_on_close = true;
        }
        self.close(open);
    }

    /// Closes `open`. The last open of a file deletes it if its
    /// delete-on-close was set under the name this open knows it by;
    /// otherwise the mark goes with it and the file stays.
    pub(crate) fn close(&mut self, open: u64) {
        let Some(o) = self.opens.remove(&open) else { return };
        let last = !self.opens.values().any(|x| x.node == o.node);
        let Some(n) = self.nodes.get_mut(&o.node) else { return };
        if o.delete_on_close {
            n.delete_at = Some(o.name.clone());
        }
        if !last {
            return;
        }
        if n.delete_at.as_deref() == Some(o.name.as_str()) {
            self.nodes.remove(&o.node);
            self.unbind(o.node);
        } else {
            n.delete_at = None;
        }
    }
}
