//! A directory's entries held compactly, for the walk (issue 42, point 1).
//!
//! A listing of a million-entry directory must keep its sorted names
//! between pages, or every window costs one more full read of the
//! directory. One `String` and two `Option<String>`s per entry cost about
//! 150 bytes before the names themselves; here every name lives in one
//! arena and each entry is a fixed 32-byte record, so a million entries of
//! 20-byte names take about 52 MB. A file's derived ETag, the common case
//! on an EA share, is kept as the inputs it is computed from (its on-disk
//! id beside its size and time) and made only for the entries a page
//! returns.

use std::ops::Range;

use crate::store::meta::derived_etag;

/// One entry of a directory listing, names already decoded to S3 form (the caller maps SMB names
/// to key components).
///
/// A directory is `is_dir: true` with a plain `name`. A directory that is also a marker object
/// (the key `"<dir>/"`) is reported by its parent's listing with one more item,
/// `name: "<dir>/", is_dir: false`, which carries that object's size, time and ETag hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirItem {
    /// Decoded name; a marker object's name ends in `/`.
    pub name: String,
    /// True for a directory to walk.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// FILETIME.
    pub last_modified: u64,
    /// Caller-defined, passed through to the walk's `Listed::Object`.
    pub etag_hint: Option<String>,
}

/// An entry's ETag hint, as [`Names::push`] takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint<'a> {
    /// None: the page looks the ETag up.
    None,
    /// The derived ETag of a file with no record of ours, from its size,
    /// LastWriteTime and this on-disk id (`crate::store::meta::derived_etag`).
    Derived(u64),
    /// This ETag.
    Text(&'a str),
}

const DIR: u8 = 1;
const HINT_DERIVED: u8 = 2;
const HINT_TEXT: u8 = 4;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Where the name starts in the arena (bits 0..40), its length in
    /// bytes (40..56) and the flags (56..64).
    place: u64,
    /// For [`HINT_DERIVED`] the on-disk id; for [`HINT_TEXT`] the text's
    /// place in the arena (start << 16 | length).
    hint: u64,
    size: u64,
    last_modified: u64,
}

/// Names and hints start below this in the arena (1 TiB): the 40 bits
/// [`Entry::place`] gives the start.
const ARENA_LIMIT: usize = 1 << 40;

impl Entry {
    fn name(&self) -> Range<usize> {
        let at = (self.place & (ARENA_LIMIT as u64 - 1)) as usize;
        at..at + ((self.place >> 40) & 0xffff) as usize
    }

    fn flags(&self) -> u8 {
        (self.place >> 56) as u8
    }
}

/// One entry as the walk reads it, borrowed from its [`Names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// Decoded name; a directory's ends in `/`, as does a marker object's.
    pub name: &'a str,
    /// True for a directory to walk.
    pub is_dir: bool,
    /// Size in bytes.
    pub size: u64,
    /// LastWriteTime (FILETIME).
    pub last_modified: u64,
    hint: Hint<'a>,
}

impl<'a> Item<'a> {
    /// The ETag hint (see [`DirItem::etag_hint`]), made now if derived.
    pub fn etag_hint(&self) -> Option<String> {
        match self.hint {
            Hint::None => None,
            Hint::Derived(id) => Some(derived_etag(self.size, self.last_modified, id)),
            Hint::Text(t) => Some(t.to_owned()),
        }
    }

    /// The entry as an owned [`DirItem`] (its name as held, with its `/`).
    pub fn to_item(&self) -> DirItem {
        DirItem {
            name: self.name.to_owned(),
            is_dir: self.is_dir,
            size: self.size,
            last_modified: self.last_modified,
            etag_hint: self.etag_hint(),
        }
    }

    /// The ETag hint as held (see [`Item::etag_hint`]).
    pub fn hint(&self) -> Hint<'a> {
        self.hint
    }

    /// The order the walk lists in: by name, a marker before the directory
    /// of the same name.
    pub fn sort_key(&self) -> (&'a str, bool) {
        (self.name, self.is_dir)
    }
}

/// Directory entries in one arena: pushed in any order, then sorted in
/// place ([`Names::sort`]) into the walk's order.
#[derive(Debug, Default)]
pub struct Names {
    arena: String,
    entries: Vec<Entry>,
    /// Indices of the directories, ascending, once sorted: a page finds
    /// the directories it will enter without a look at every file.
    dirs: Vec<usize>,
    /// Directories among the entries (what `dirs` will hold once sorted).
    dir_count: usize,
}

/// Bytes a directory's place in [`Names::dirs_in`]'s index takes.
const DIR_INDEX: usize = std::mem::size_of::<usize>();

/// The longest name an entry holds, in bytes: far past what SMB carries
/// (255 UTF-16 units, at most 765 UTF-8 bytes, and a `/`).
pub const MAX_NAME: usize = u16::MAX as usize;

impl Names {
    /// No entries.
    pub fn new() -> Names {
        Names::default()
    }

    /// Adds an entry named `name` (a directory's with its `/` already);
    /// a name longer than [`MAX_NAME`] is dropped, as no key can have it.
    pub fn push(&mut self, name: &str, is_dir: bool, size: u64, last_modified: u64, hint: Hint<'_>) {
        if name.len() > MAX_NAME || self.arena.len() + name.len() + MAX_NAME >= ARENA_LIMIT {
            return;
        }
        let name_at = self.arena.len() as u64;
        self.arena.push_str(name);
        let (flags, hint) = match hint {
            Hint::None => (0, 0),
            Hint::Derived(id) => (HINT_DERIVED, id),
            Hint::Text(t) if t.len() <= MAX_NAME => {
                let at = self.arena.len() as u64;
                self.arena.push_str(t);
                (HINT_TEXT, at << 16 | t.len() as u64)
            }
            Hint::Text(_) => (0, 0),
        };
        let flags = flags | if is_dir { DIR } else { 0 };
        self.dir_count += usize::from(is_dir);
        let place = name_at | (name.len() as u64) << 40 | u64::from(flags) << 56;
        self.entries.push(Entry { place, hint, size, last_modified });
    }

    /// Adds `item` as it is (its name already prepared).
    pub fn push_item(&mut self, item: &DirItem) {
        let hint = item.etag_hint.as_deref().map_or(Hint::None, Hint::Text);
        self.push(&item.name, item.is_dir, item.size, item.last_modified, hint);
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn item(&self, e: &Entry) -> Item<'_> {
        let name = &self.arena[e.name()];
        let flags = e.flags();
        let hint = if flags & HINT_DERIVED != 0 {
            Hint::Derived(e.hint)
        } else if flags & HINT_TEXT != 0 {
            let at = (e.hint >> 16) as usize;
            Hint::Text(&self.arena[at..at + (e.hint & 0xffff) as usize])
        } else {
            Hint::None
        };
        Item { name, is_dir: flags & DIR != 0, size: e.size, last_modified: e.last_modified, hint }
    }

    /// Entry `i`. Panics if `i` is out of bounds, like slice indexing.
    pub fn get(&self, i: usize) -> Item<'_> {
        self.item(&self.entries[i])
    }

    /// The last entry, if any.
    pub fn last(&self) -> Option<Item<'_>> {
        self.entries.last().map(|e| self.item(e))
    }

    /// The entries in their order.
    pub fn iter(&self) -> impl Iterator<Item = Item<'_>> + '_ {
        self.entries.iter().map(|e| self.item(e))
    }

    /// The first index in `within` whose entry `pred` is false for, where
    /// `pred` holds for a prefix of `within` (as `slice::partition_point`).
    pub fn partition_point(&self, within: Range<usize>, mut pred: impl FnMut(Item<'_>) -> bool) -> usize {
        within.start + self.entries[within].partition_point(|e| pred(self.item(e)))
    }

    /// Sorts into the walk's order: by name, a marker before the directory
    /// of the same name.
    pub fn sort(&mut self) {
        let mut entries = std::mem::take(&mut self.entries);
        entries.sort_unstable_by(|a, b| self.item(a).sort_key().cmp(&self.item(b).sort_key()));
        self.entries = entries;
        self.index_dirs();
    }

    fn index_dirs(&mut self) {
        self.dirs = (0..self.entries.len()).filter(|&i| self.entries[i].flags() & DIR != 0).collect();
    }

    /// The indices of the directories within `range`, ascending (once
    /// sorted; empty before).
    pub fn dirs_in(&self, range: Range<usize>) -> &[usize] {
        let lo = self.dirs.partition_point(|&i| i < range.start);
        let hi = self.dirs.partition_point(|&i| i < range.end);
        &self.dirs[lo..hi.max(lo)]
    }

    /// Keeps the first `n` entries, and only their bytes in the arena.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.entries.len() {
            return;
        }
        self.entries.truncate(n);
        let mut kept = Names { arena: String::new(), entries: Vec::with_capacity(n), dirs: Vec::new(), dir_count: 0 };
        for e in &self.entries {
            let it = self.item(e);
            kept.push(it.name, it.is_dir, it.size, it.last_modified, it.hint);
        }
        kept.dirs = self.dirs.iter().copied().filter(|&i| i < n).collect();
        *self = kept;
    }

    /// Drops entry `i`'s ETag hint (the page looks its ETag up).
    pub fn clear_hint(&mut self, i: usize) {
        self.entries[i].place &= !(u64::from(HINT_DERIVED | HINT_TEXT) << 56);
    }

    /// Bytes this holds, about (what the listing cache charges).
    pub fn bytes(&self) -> usize {
        self.arena.capacity()
            + self.entries.capacity() * std::mem::size_of::<Entry>()
            + self.dirs.capacity() * std::mem::size_of::<usize>()
            + 64
    }

    /// Bytes the entries use (what [`Names::shrink`] leaves, bar 64).
    pub fn used_bytes(&self) -> usize {
        self.arena.len() + self.entries.len() * std::mem::size_of::<Entry>() + self.dir_count * DIR_INDEX
    }

    /// Bytes the first `n` entries would use once cut back to them (their
    /// names and hints as held).
    pub fn bytes_of_first(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        self.entries.iter().take(n).scan(0, |sum, e| {
            let hint = if e.flags() & HINT_TEXT != 0 { (e.hint & 0xffff) as usize } else { 0 };
            let dir = if e.flags() & DIR != 0 { DIR_INDEX } else { 0 };
            *sum += std::mem::size_of::<Entry>() + e.name().len() + hint + dir;
            Some(*sum)
        })
    }

    /// Gives back what the arena and the entries hold beyond what they use.
    pub fn shrink(&mut self) {
        self.arena.shrink_to_fit();
        self.entries.shrink_to_fit();
        self.dirs.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_sort_by_name_with_a_marker_before_its_directory() {
        let mut n = Names::new();
        n.push("b/", true, 0, 0, Hint::None);
        n.push("c", false, 3, 30, Hint::Text("\"t\""));
        n.push("a", false, 1, 10, Hint::Derived(7));
        n.push("b/", false, 0, 20, Hint::None);
        n.sort();
        let got: Vec<(&str, bool)> = n.iter().map(|i| i.sort_key()).collect();
        assert_eq!(got, [("a", false), ("b/", false), ("b/", true), ("c", false)]);
        assert_eq!(n.get(0).etag_hint(), Some(derived_etag(1, 10, 7)));
        assert_eq!(n.get(3).etag_hint().as_deref(), Some("\"t\""));
        assert_eq!(n.get(1).etag_hint(), None);
        assert_eq!(n.partition_point(0..4, |i| i.name < "b/"), 1);
        assert_eq!(n.dirs_in(0..4), [2]);
        assert_eq!(n.dirs_in(3..4), [] as [usize; 0]);
        assert_eq!(n.partition_point(2..4, |i| i.name < "c"), 3);
    }

    #[test]
    fn truncation_keeps_the_entries_and_drops_the_rest_of_the_arena() {
        let mut n = Names::new();
        for i in (0..1000).rev() {
            n.push(&format!("name-{i:04}"), false, i, i, Hint::Text("etag"));
        }
        n.sort();
        let before = n.arena.len();
        n.truncate(10);
        assert_eq!(n.len(), 10);
        assert!(n.arena.len() * 50 < before);
        assert_eq!(n.last().unwrap().name, "name-0009");
        assert_eq!(n.last().unwrap().etag_hint().as_deref(), Some("etag"));
        assert_eq!(n.get(3).to_item().size, 3);
    }

    #[test]
    fn a_million_entries_take_about_fifty_bytes_each() {
        let mut n = Names::new();
        for i in 0..1_000_000u64 {
            n.push(&format!("IMG_2026{i:08}.jpg"), false, i, i, Hint::Derived(i));
        }
        n.shrink();
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        let per_entry = n.bytes() / n.len();
        assert!(per_entry <= 52, "{per_entry} bytes per entry");
        assert_eq!(n.used_bytes(), n.bytes_of_first(usize::MAX).last().unwrap());
        // What the cache charges is what the window was cut to, directories
        // (and their index) included.
        let mut d = Names::new();
        for i in 0..1000u64 {
            d.push(&format!("d{i:04}/"), i % 2 == 0, 0, 0, Hint::None);
        }
        d.sort();
        d.shrink();
        assert_eq!(d.bytes(), d.used_bytes() + 64);
        assert_eq!(d.used_bytes(), d.bytes_of_first(usize::MAX).last().unwrap());
    }
}
