//! A directory too large for one window, spilled to local disk as sorted
//! runs while it is read, so that its later windows come from the runs
//! rather than from another full read of the directory (issue 42, point 1).
//!
//! SMB hands out a directory in the server's order and a window keeps the
//! smallest names ([`super::dir_window`]): without a spill, a directory of
//! N entries listed in windows of W costs N / W full reads. Here every
//! entry the window lets go (the page needs it, but later) is written to
//! a run instead: entries gather in memory, [`RUN_ENTRIES`] at a time,
//! and are sorted and appended to a file in the temporary directory
//! (`TMPDIR`, else `/tmp`), unlinked as soon as it is made so that nothing
//! outlives the process. A later window is the merge of the runs from its
//! start name on, read until it holds as much as a window may. Each run
//! keeps every [`INDEX_EVERY`]th name in memory, to start near the name.
//!
//! The runs of all listings share one budget of bytes on disk
//! (`--list-spill-size`); a read that would pass it stops spilling, and
//! its later windows read the directory again, as without a spill. So
//! does a read whose run cannot be written.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::names::{Hint, Names};
use super::walk::{DirItem, Needed};

/// Entries gathered in memory before they are sorted and written as a run
/// (about 4 MiB of 32-byte records and their names).
pub const RUN_ENTRIES: usize = 1 << 16;

/// A run keeps the name and place of every this many records in memory.
const INDEX_EVERY: usize = 256;

/// Bytes read from a run at a time while merging.
const READ_CHUNK: usize = 64 << 10;

/// The bytes on local disk all spilled runs may hold together; clones
/// share it.
#[derive(Debug, Clone)]
pub struct SpillBudget {
    limit: u64,
    held: Arc<AtomicU64>,
}

impl SpillBudget {
    /// A budget of `limit` bytes (0: never spill).
    pub fn new(limit: u64) -> SpillBudget {
        SpillBudget { limit, held: Arc::default() }
    }

    /// True if spilling is on at all.
    pub fn enabled(&self) -> bool {
        self.limit > 0
    }

    fn take(&self, n: u64) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_add(n).filter(|&t| t <= self.limit))
            .is_ok()
    }

    fn give(&self, n: u64) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }

    /// Bytes held now (for tests and metrics).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Acquire)
    }
}

/// One sorted run: its unlinked file, and every [`INDEX_EVERY`]th record's
/// name and offset.
#[derive(Debug)]
struct Run {
    file: File,
    len: u64,
    index: Vec<(String, u64)>,
}

/// Gathers the entries a window lets go, writing them out in sorted runs.
pub struct SpillWriter {
    budget: SpillBudget,
    gathered: Names,
    runs: Vec<Run>,
    held: u64,
    /// A run could not be written, or the budget was spent: no spill.
    failed: bool,
}

impl SpillWriter {
    /// A writer charging its runs to `budget`.
    pub fn new(budget: SpillBudget) -> SpillWriter {
        SpillWriter { budget, gathered: Names::new(), runs: Vec::new(), held: 0, failed: false }
    }

    /// Adds one entry (its name prepared: a directory's with its `/`).
    pub fn push(&mut self, name: &str, is_dir: bool, size: u64, last_modified: u64, hint: Hint<'_>) {
        if self.failed {
            return;
        }
        self.gathered.push(name, is_dir, size, last_modified, hint);
        if self.gathered.len() >= RUN_ENTRIES {
            self.write_run();
        }
    }

    /// Sorts what is gathered and appends it to a new run file.
    fn write_run(&mut self) {
        let mut names = std::mem::take(&mut self.gathered);
        if names.is_empty() || self.failed {
            return;
        }
        // Sorting and writing take a few milliseconds a run: off the
        // runtime's worker where it has others to run its tasks.
        let budget = &self.budget;
        let mut write = move || {
            names.sort();
            write_run(&names, budget)
        };
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        let written = if multi_thread { tokio::task::block_in_place(write) } else { write() };
        match written {
            Ok(run) => {
                self.held += run.len;
                self.runs.push(run);
            }
            Err(e) => {
                tracing::debug!(error = %e, "a listing's spill stopped; its later windows read the directory again");
                self.failed = true;
            }
        }
    }

    /// The runs, once every entry let go is in them; `None` if spilling
    /// failed or nothing was let go. `read_for` is what the window was
    /// read for, `after` its last name (every later name needed is in the
    /// runs), `beside` the objects kept beside their directories (merged
    /// into every window, as into the first).
    pub fn finish(mut self, read_for: &Needed, after: String, beside: Vec<DirItem>) -> Option<SpillRuns> {
        self.write_run();
        if self.failed || self.runs.is_empty() {
            return None;
        }
        let runs = std::mem::take(&mut self.runs);
        let held = std::mem::take(&mut self.held);
        let read_at = std::time::Instant::now();
        Some(SpillRuns {
            runs: std::sync::Mutex::new(runs),
            held: AtomicU64::new(held),
            budget: self.budget.clone(),
            read_for: read_for.clone(),
            after,
            beside,
            read_at,
        })
    }
}

impl Drop for SpillWriter {
    fn drop(&mut self) {
        self.budget.give(self.held);
    }
}

/// Appends `names` (sorted) to a new unlinked file in the temporary
/// directory, charged to `budget`.
fn write_run(names: &Names, budget: &SpillBudget) -> std::io::Result<Run> {
    let mut bytes = Vec::with_capacity(names.used_bytes());
    let mut index = Vec::with_capacity(names.len() / INDEX_EVERY + 1);
    for (i, it) in names.iter().enumerate() {
        if i % INDEX_EVERY == 0 {
            index.push((it.name.to_owned(), bytes.len() as u64));
        }
        encode(&mut bytes, it.name, it.is_dir, it.size, it.last_modified, it.hint());
    }
    if !budget.take(bytes.len() as u64) {
        return Err(std::io::Error::other("--list-spill-size is spent"));
    }
    let written = (|| {
        let path =
            std::env::temp_dir().join(format!("smbgate-spill-{}-{:016x}", std::process::id(), rand::random::<u64>()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        // Unlinked at once: the open file is all there is, and it goes
        // with the process however it ends.
        if let Err(e) = std::fs::remove_file(&path) {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        (&file).write_all(&bytes)?;
        Ok(file)
    })();
    match written {
        Ok(file) => Ok(Run { file, len: bytes.len() as u64, index }),
        Err(e) => {
            budget.give(bytes.len() as u64);
            Err(e)
        }
    }
}

const FLAG_DIR: u8 = 1;
const HINT_DERIVED: u8 = 2;
const HINT_TEXT: u8 = 4;

/// One record: name length (u16) and name, flags, size, LastWriteTime,
/// then a derived hint's id (u64) or a text hint's length (u16) and text.
fn encode(out: &mut Vec<u8>, name: &str, is_dir: bool, size: u64, last_modified: u64, hint: Hint<'_>) {
    let (kind, text) = match hint {
        Hint::None => (0, None),
        Hint::Derived(_) => (HINT_DERIVED, None),
        Hint::Text(t) => (HINT_TEXT, Some(t)),
    };
    out.extend_from_slice(&(name.len() as u16).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.push(kind | if is_dir { FLAG_DIR } else { 0 });
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&last_modified.to_le_bytes());
    match (hint, text) {
        (Hint::Derived(id), _) => out.extend_from_slice(&id.to_le_bytes()),
        (_, Some(t)) => {
            out.extend_from_slice(&(t.len() as u16).to_le_bytes());
            out.extend_from_slice(t.as_bytes());
        }
        _ => {}
    }
}

/// An entry read back from a run (its name prepared: a directory's with
/// its `/`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Record {
    /// The name.
    pub name: String,
    /// True for a directory to walk.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
    hint: RecordHint,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum RecordHint {
    None,
    Derived(u64),
    Text(String),
}

impl Record {
    /// The ETag hint as stored.
    pub fn hint(&self) -> Hint<'_> {
        match &self.hint {
            RecordHint::None => Hint::None,
            RecordHint::Derived(id) => Hint::Derived(*id),
            RecordHint::Text(t) => Hint::Text(t),
        }
    }
}

/// Decodes the record at the start of `b`, with its length; `None` if `b`
/// holds less than a whole record.
fn decode(b: &[u8]) -> Option<(Record, usize)> {
    let u16_at = |at: usize| b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]]) as usize);
    let u64_at = |at: usize| b.get(at..at + 8).map(|s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])));
    let n = u16_at(0)?;
    let name = std::str::from_utf8(b.get(2..2 + n)?).ok()?.to_owned();
    let mut at = 2 + n;
    let flags = *b.get(at)?;
    let (size, last_modified) = (u64_at(at + 1)?, u64_at(at + 9)?);
    at += 17;
    let hint = if flags & HINT_DERIVED != 0 {
        at += 8;
        RecordHint::Derived(u64_at(at - 8)?)
    } else if flags & HINT_TEXT != 0 {
        let t = u16_at(at)?;
        let text = std::str::from_utf8(b.get(at + 2..at + 2 + t)?).ok()?.to_owned();
        at += 2 + t;
        RecordHint::Text(text)
    } else {
        RecordHint::None
    };
    Some((Record { name, is_dir: flags & FLAG_DIR != 0, size, last_modified, hint }, at))
}

/// Reads one run's records in order from an offset.
struct Cursor<'a> {
    run: &'a Run,
    at: u64,
    buf: Vec<u8>,
    used: usize,
}

impl<'a> Cursor<'a> {
    /// At `run`'s first record whose name is not below `from`, and that
    /// record (`None`: there is none).
    fn from(run: &'a Run, from: &str) -> std::io::Result<(Cursor<'a>, Option<Record>)> {
        let i = run.index.partition_point(|(n, _)| n.as_str() < from).saturating_sub(1);
        let at = run.index.get(i).map_or(run.len, |(_, at)| *at);
        let mut c = Cursor { run, at, buf: Vec::new(), used: 0 };
        while let Some(r) = c.next()? {
            if r.name.as_str() >= from {
                return Ok((c, Some(r)));
            }
        }
        Ok((c, None))
    }

    /// The next record, `None` at the run's end.
    ///
    /// Errors: the file could not be read, or ends inside a record.
    fn next(&mut self) -> std::io::Result<Option<Record>> {
        loop {
            if let Some((r, n)) = decode(&self.buf[self.used..]) {
                self.used += n;
                return Ok(Some(r));
            }
            let start = self.at + self.used as u64;
            let partial = self.buf.len() - self.used;
            if start + partial as u64 >= self.run.len {
                return match partial {
                    0 => Ok(None),
                    _ => Err(std::io::Error::other("a spilled run ends inside a record")),
                };
            }
            // Keep the partial record, and read the next chunk after it.
            self.buf.drain(..self.used);
            self.at = start;
            self.used = 0;
            let want = READ_CHUNK.max(partial * 2).min((self.run.len - start) as usize);
            self.buf.resize(want, 0);
            self.run.file.read_exact_at(&mut self.buf[partial..], start + partial as u64)?;
        }
    }
}

/// A directory's spilled entries: every name its first window's read
/// needed after that window's last one.
#[derive(Debug)]
pub struct SpillRuns {
    /// Empty once expired ([`SpillRuns::expire_after`]).
    runs: std::sync::Mutex<Vec<Run>>,
    held: AtomicU64,
    budget: SpillBudget,
    read_for: Needed,
    after: String,
    beside: Vec<DirItem>,
    read_at: std::time::Instant,
}

impl Drop for SpillRuns {
    fn drop(&mut self) {
        self.budget.give(self.held.swap(0, Ordering::AcqRel));
    }
}

impl SpillRuns {
    /// When the directory was read (about): a window made from the runs
    /// is as old as they are.
    pub fn read_at(&self) -> std::time::Instant {
        self.read_at
    }

    /// Lets the runs go `after` from now if nothing has dropped them by
    /// then (a listing cache nobody uses again keeps its entries), so that
    /// they give back their disk: a window asked of them then is `None`.
    pub fn expire_after(runs: &Arc<SpillRuns>, after: std::time::Duration) {
        let weak = Arc::downgrade(runs);
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            if let Some(runs) = weak.upgrade() {
                drop(std::mem::take(&mut *runs.runs.lock().unwrap_or_else(|p| p.into_inner())));
                runs.budget.give(runs.held.swap(0, Ordering::AcqRel));
            }
        });
    }

    /// True if the runs hold every name `needed` needs: it needs no more
    /// than they were read for, and only names past the first window's.
    pub fn serves(&self, needed: &Needed) -> bool {
        needed.within.starts_with(self.read_for.within.as_str())
            && self.read_for.from <= needed.from
            && self.after.as_str() <= needed.from.as_str()
    }

    /// Visits the runs' records in name order, from the first whose name
    /// is not below `from`, while `visit` answers true. False: the runs are
    /// gone (expired), and nothing was visited.
    ///
    /// Errors: a run could not be read back.
    pub fn visit_from(&self, from: &str, mut visit: impl FnMut(&Record) -> bool) -> std::io::Result<bool> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        if runs.is_empty() {
            return Ok(false);
        }
        let mut cursors = Vec::with_capacity(runs.len());
        let mut heads = BinaryHeap::new();
        for run in runs.iter() {
            let (c, first) = Cursor::from(run, from)?;
            // A record orders by its name first, then is_dir, and no two
            // runs hold one (name, is_dir): the heap needs no key of its own.
            if let Some(r) = first {
                heads.push(Reverse((r, cursors.len())));
            }
            cursors.push(c);
        }
        while let Some(Reverse((r, i))) = heads.pop() {
            if !visit(&r) {
                break;
            }
            if let Some(next) = cursors[i].next()? {
                heads.push(Reverse((next, i)));
            }
        }
        Ok(true)
    }

    /// The objects kept beside their directories, found by the read (merged
    /// into every window, as into the first).
    pub fn beside(&self) -> &[DirItem] {
        &self.beside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_with_every_kind_of_hint() {
        let mut b = Vec::new();
        encode(&mut b, "a/", true, 0, 1, Hint::None);
        encode(&mut b, "é.txt", false, 5, 6, Hint::Derived(77));
        encode(&mut b, "c", false, 8, 9, Hint::Text("etag"));
        let (r1, n1) = decode(&b).unwrap();
        let (r2, n2) = decode(&b[n1..]).unwrap();
        let (r3, n3) = decode(&b[n1 + n2..]).unwrap();
        assert_eq!(n1 + n2 + n3, b.len());
        assert_eq!((r1.name.as_str(), r1.is_dir, r1.hint), ("a/", true, RecordHint::None));
        assert_eq!((r2.name.as_str(), r2.size, r2.hint), ("é.txt", 5, RecordHint::Derived(77)));
        assert_eq!((r3.name.as_str(), r3.last_modified, r3.hint), ("c", 9, RecordHint::Text("etag".into())));
        assert!(decode(&b[..n1 - 1]).is_none(), "a partial record is not one");
    }
}
