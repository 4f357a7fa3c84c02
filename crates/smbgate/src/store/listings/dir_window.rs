//! Windows of a large directory: the part of a directory's listing a page
//! needs, from a name on and at most so many entries, chosen while the
//! directory is read so that a listing never holds a whole directory of a
//! million entries (issue 23, point 3).
//!
//! SMB hands out a directory's entries in the server's order, S3 lists in
//! key order, so a window costs one full read of the directory: it keeps
//! the `cap + 1` smallest names at or after `from` in a bounded heap. The
//! walk ([`super::walk`]) lists what the window holds and, when it reaches
//! the end of a window that is not the directory's last, ends its page
//! there, truncated, with the window's last name as the marker; the next
//! page reads the window after it.
//!
//! A window ends only where a marker can resume: after a plain file (or a
//! marker object whose directory does not follow). A directory at the end
//! would need a marker past every key below it, which no key can name. A
//! window that cannot end anywhere past `from` (its `cap` entries are all
//! directories) is not made: the caller reads without a cap.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::walk::{prepared_item, DirItem, Needed, Window};

/// An item ordered as [`super::walk::prepare`] sorts: by name, a marker
/// before the directory of the same name.
struct Ranked(DirItem);

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.name.cmp(&other.0.name).then(self.0.is_dir.cmp(&other.0.is_dir))
    }
}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}

/// Builds a [`Window`] from a directory's entries in any order, holding at
/// most `cap + 1` of them at a time.
pub struct WindowBuilder {
    from: String,
    /// What every kept name starts with (the prefix's rest).
    within: String,
    cap: usize,
    /// The smallest entries so far, the largest on top.
    heap: BinaryHeap<Ranked>,
}

impl WindowBuilder {
    /// A window of at most `cap` entries (at least 2 are kept, so that a
    /// window can end past its start) of the names `needed`.
    /// `usize::MAX`: the whole rest of the directory.
    pub fn new(needed: &Needed, cap: usize) -> WindowBuilder {
        let Needed { from, within } = needed.clone();
        WindowBuilder { from, within, cap: cap.max(2), heap: BinaryHeap::new() }
    }

    /// Offers one entry as the source decoded it (a directory's name
    /// without its `/`); entries no key can name and those not needed are
    /// dropped.
    pub fn push(&mut self, item: DirItem) {
        let Some(item) = prepared_item(item) else { return };
        if !self.needs(&item.name) {
            return;
        }
        let item = Ranked(item);
        if self.heap.len() > self.cap {
            // Full: keep it only if it sorts before the largest kept.
            match self.heap.peek() {
                Some(top) if item < *top => {
                    self.heap.pop();
                }
                _ => return,
            }
        }
        self.heap.push(item);
    }

    /// Whether the page needs the (prepared) name.
    fn needs(&self, name: &str) -> bool {
        name >= self.from.as_str() && name.starts_with(self.within.as_str())
    }

    /// The window, with `extra` entries (objects kept beside their
    /// directory, `crate::store::beside`) merged in: where a plain non-directory
    /// entry has the same name, it stays and loses its ETag hint (the
    /// lookup decides which answers); extras past the window's end wait
    /// for the window that holds them.
    ///
    /// `None`: no end past `from` can be found among the kept entries;
    /// read again with a cap of `usize::MAX`.
    pub fn finish(mut self, extra: Vec<DirItem>) -> Option<Window> {
        let heap = std::mem::take(&mut self.heap);
        let mut items: Vec<DirItem> = heap.into_sorted_vec().into_iter().map(|r| r.0).collect();
        let complete = items.len() <= self.cap;
        if !complete {
            let end = (0..self.cap).rev().find(|&i| {
                let (it, next) = (&items[i], &items[i + 1]);
                // A marker's directory comes right after it, same name.
                let its_directory_follows = next.is_dir && next.name == it.name;
                !it.is_dir && !its_directory_follows && it.name > self.from
            })?;
            items.truncate(end + 1);
        }
        let last = items.last().map(|l| l.name.clone());
        let mut added = false;
        for e in extra.into_iter().filter_map(prepared_item) {
            if !self.needs(&e.name) || (!complete && last.as_deref().is_some_and(|l| e.name.as_str() > l)) {
                continue;
            }
            match items.iter_mut().find(|i| !i.is_dir && i.name == e.name) {
                Some(plain) => plain.etag_hint = None,
                None => {
                    items.push(e);
                    added = true;
                }
            }
        }
        if added {
            items.sort_by(|a, b| a.name.cmp(&b.name).then(a.is_dir.cmp(&b.is_dir)));
        }
        Some(Window { items: items.into(), complete })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str) -> DirItem {
        DirItem { name: name.into(), is_dir: false, size: 1, last_modified: 2, etag_hint: Some("e".into()) }
    }
    fn dir(name: &str) -> DirItem {
        DirItem { name: name.into(), is_dir: true, size: 0, last_modified: 0, etag_hint: None }
    }
    fn names(w: &Window) -> Vec<&str> {
        w.items.iter().map(|i| i.name.as_str()).collect()
    }
    fn build(from: &str, cap: usize, items: &[DirItem]) -> Option<Window> {
        let mut b = WindowBuilder::new(&Needed { from: from.into(), within: String::new() }, cap);
        // Any order: the server's.
        for i in items.iter().rev() {
            b.push(i.clone());
        }
        b.finish(Vec::new())
    }

    #[test]
    fn a_window_holds_the_smallest_names_from_its_start() {
        let items: Vec<DirItem> = (0..10).map(|i| file(&format!("f{i}"))).collect();
        let w = build("f3", 4, &items).unwrap();
        assert_eq!(names(&w), ["f3", "f4", "f5", "f6"]);
        assert!(!w.complete);
        let w = build("f7", 4, &items).unwrap();
        assert_eq!(names(&w), ["f7", "f8", "f9"]);
        assert!(w.complete);
        assert!(build("", usize::MAX, &items).unwrap().complete);
    }

    #[test]
    fn a_window_never_ends_on_a_directory_or_between_a_marker_and_its_directory() {
        // Sorted: a, b/ (marker), b/ (dir), c/ (dir), d
        let items = [file("a"), file("b/"), dir("b"), dir("c"), file("d")];
        let w = build("", 3, &items).unwrap();
        assert_eq!(names(&w), ["a"], "cut back to the last file");
        assert!(!w.complete);
        let w = build("", 4, &items).unwrap();
        assert_eq!(names(&w), ["a"]);
        // Nothing past `from` to end on: read without a cap.
        assert!(build("b/", 2, &items).is_none());
        let w = build("b/", usize::MAX, &items).unwrap();
        assert_eq!(names(&w), ["b/", "b/", "c/", "d"]);
        assert!(w.complete);
    }

    #[test]
    fn a_window_resumes_past_its_start_name() {
        let items = [file("a"), file("b"), file("c")];
        // From "a" with room for two: must end past "a".
        let w = build("a", 2, &items).unwrap();
        assert_eq!(names(&w), ["a", "b"]);
        assert!(w.serves("a", "a") && !w.serves("a", "b") && !w.serves("b", "b"));
    }

    #[test]
    fn a_window_holds_only_names_under_the_prefix() {
        // Names past the prefix would fill the window and make it end
        // "incomplete", costing the listing one more, empty, page.
        let items = [file("m1"), file("m2"), file("n1"), file("n2")];
        let mut b = WindowBuilder::new(&Needed { from: "m".into(), within: "m".into() }, 2);
        for i in items.iter().rev() {
            b.push(i.clone());
        }
        let w = b.finish(vec![file("n0"), file("m0")]).unwrap();
        assert_eq!(names(&w), ["m0", "m1", "m2"]);
        assert!(w.complete);
    }

    #[test]
    fn extras_merge_by_name_within_the_window() {
        let mut b = WindowBuilder::new(&Needed::default(), 2);
        for i in [file("a"), file("c"), file("e")] {
            b.push(i);
        }
        let w = b.finish(vec![file("b"), file("c"), file("z")]).unwrap();
        assert_eq!(names(&w), ["a", "b", "c"], "z waits for its window");
        assert_eq!(w.items[2].etag_hint, None, "two entries of one name: the lookup decides");
        assert!(!w.complete);
    }
}
