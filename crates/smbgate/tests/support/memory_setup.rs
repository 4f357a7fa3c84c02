//! What a test of the in-memory share (`memory_share.rs`) puts on it
//! before a race, and what it reads of it after: files with records,
//! directories, markers, and the names, bytes and opens there now. None
//! of these is gated.

use std::sync::atomic::Ordering;

use super::memory_share::MemoryShare;
use super::memory_state::Node;
use super::meta::ObjectMeta;

impl MemoryShare {
    /// Puts a file at `path` whose record holds `etag`.
    pub(crate) fn put(&self, path: &str, etag: &str) {
        self.add(path, false, etag);
    }

    /// Makes a directory at `path`.
    pub(crate) fn mkdir(&self, path: &str) {
        self.add(path, true, "");
    }

    /// Puts a file at `path` of `size` bytes, made of `parts` (none for a
    /// single PUT), whose record holds `etag` ("" for none: a file someone
    /// else put there).
    pub(crate) fn put_sized(&self, path: &str, etag: &str, size: u64, parts: &[u64]) {
        self.insert(path, Node { size, parts: parts.to_vec(), ..Node::new(false, etag) });
    }

    /// Puts a file at `path` without a record, last written at `written`
    /// (FILETIME): a temp file of a writer.
    pub(crate) fn put_written(&self, path: &str, written: u64) {
        self.insert(path, Node { written, ..Node::new(false, "") });
    }

    /// Makes a directory at `path` with a marker record holding `etag`:
    /// the object `name/`.
    pub(crate) fn put_marker(&self, path: &str, etag: &str) {
        self.insert(path, Node { marker: true, ..Node::new(true, etag) });
    }

    /// Puts a file at `path` holding `data`, without a record.
    pub(crate) fn put_bytes(&self, path: &str, data: &[u8]) {
        self.insert(path, Node { data: data.to_vec(), size: data.len() as u64, ..Node::new(false, "") });
    }

    /// Puts a file at `path` of `size` bytes whose record is `meta`.
    pub(crate) fn put_record(&self, path: &str, size: u64, meta: ObjectMeta) {
        self.insert(path, Node { size, meta: Some(meta), ..Node::new(false, "") });
    }

    /// Makes `alias` another spelling of the name `kept` (another case on
    /// a case-insensitive share, or an 8.3 alias): a lookup of `alias`
    /// finds the file at `kept` and names it so.
    pub(crate) fn alias(&self, alias: &str, kept: &str) {
        self.state.lock().unwrap().aliases.insert(alias.to_string(), kept.to_string());
    }

    fn add(&self, path: &str, dir: bool, etag: &str) {
        self.insert(path, Node::new(dir, etag));
    }

    pub(super) fn insert(&self, path: &str, node: Node) {
        let mut s = self.state.lock().unwrap();
        let id = s.id();
        s.nodes.insert(id, node);
        s.bind(path, id);
    }

    /// The bytes of the file at `path` now; `None` if no file is there.
    pub(crate) fn data_at(&self, path: &str) -> Option<Vec<u8>> {
        let s = self.state.lock().unwrap();
        let n = &s.nodes[s.names.get(path)?];
        (!n.dir).then(|| n.data.clone())
    }

    /// The ETag of the file at `path` now; `None` if no file is there.
    pub(crate) fn etag_at(&self, path: &str) -> Option<String> {
        let s = self.state.lock().unwrap();
        let n = &s.nodes[s.names.get(path)?];
        (!n.dir).then(|| n.etag.clone())
    }

    /// The record of what is at `path` now, as an open reads it.
    pub(crate) fn record_at(&self, path: &str) -> Option<ObjectMeta> {
        let s = self.state.lock().unwrap();
        s.nodes[s.names.get(path)?].record()
    }

    /// True if the file at `path` is marked read-only now.
    pub(crate) fn read_only_at(&self, path: &str) -> bool {
        let s = self.state.lock().unwrap();
        s.names.get(path).is_some_and(|n| s.nodes[n].read_only)
    }

    /// Lets each file keep at most `bytes` of record, as an EA on ext4
    /// keeps about 4 KiB: a larger one is refused for no room.
    pub(crate) fn limit_records(&self, bytes: usize) {
        self.state.lock().unwrap().record_room = Some(bytes);
    }

    /// Every name bound now, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.state.lock().unwrap().names.keys().cloned().collect();
        v.sort();
        v
    }

    /// How many directories were opened for reading so far.
    pub(crate) fn dir_reads(&self) -> usize {
        self.dir_reads.load(Ordering::SeqCst)
    }

    /// How many opens are held now.
    pub(crate) fn open_count(&self) -> usize {
        self.state.lock().unwrap().opens.len()
    }
}
