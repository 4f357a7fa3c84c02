//! Windows of a large directory: the part of a directory's listing a page
//! needs, from a name on and at most so many entries, chosen while the
//! directory is read so that a listing never holds a whole directory of a
//! million entries (issue 23, point 3).
//!
//! SMB hands out a directory's entries in the server's order, S3 lists in
//! key order, so a window costs one full read of the directory: it keeps
//! the `cap + 1` smallest names at or after `from`, held compactly
//! ([`super::names`]), so that a window can hold a whole directory of a
//! million entries in about 60 MB and page through it after one read. The
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

use std::sync::Arc;

use super::names::{Hint, Names};
use super::spill_runs::{SpillBudget, SpillRuns, SpillWriter};
use super::walk::{prepared_item, valid_parts, DirItem, Needed, Window};

/// Builds a [`Window`] from a directory's entries in any order, holding at
/// most `cap + 1` of them in at most `max_bytes`, and half as much again
/// between cuts: entries are kept as they come and, once that many are
/// held, sorted and cut back to the smallest that fit.
pub struct WindowBuilder {
    from: String,
    /// What every kept name starts with (the prefix's rest).
    within: String,
    cap: usize,
    max_bytes: usize,
    names: Names,
    /// An entry the page needs was let go: the window is not the whole
    /// rest of the directory.
    dropped: bool,
    /// Once cut back: the largest entry kept, (name, is_dir). An entry at
    /// or after it cannot be among the `cap + 1` smallest.
    bound: Option<(String, bool)>,
    /// A directory's name with its `/`, without an allocation per entry.
    scratch: String,
    /// Where the entries let go are written, for the later windows
    /// ([`super::spill_runs`]); `None`: they are dropped.
    spill: Option<SpillWriter>,
}

impl WindowBuilder {
    /// A window of at most `cap` entries of the names `needed`, held in
    /// at most `max_bytes` (as [`Names::used_bytes`] counts them); at
    /// least 2 entries are kept, so that a window can end past its start.
    /// `usize::MAX` for both: the whole rest of the directory.
    pub fn new(needed: &Needed, cap: usize, max_bytes: usize) -> WindowBuilder {
        let Needed { from, within } = needed.clone();
        WindowBuilder {
            from,
            within,
            cap: cap.max(2),
            max_bytes,
            names: Names::new(),
            dropped: false,
            bound: None,
            scratch: String::new(),
            spill: None,
        }
    }

    /// This builder, writing what it lets go to runs charged to `budget`
    /// (see [`WindowBuilder::finish_spilled`]).
    pub fn spilling(mut self, budget: SpillBudget) -> WindowBuilder {
        self.spill = budget.enabled().then(|| SpillWriter::new(budget));
        self
    }

    /// Offers one entry as the source decoded it (a directory's name
    /// without its `/`); entries no key can name and those not needed are
    /// dropped.
    pub fn push(&mut self, item: DirItem) {
        let hint = item.etag_hint.as_deref().map_or(Hint::None, Hint::Text);
        self.push_entry(&item.name, item.is_dir, item.size, item.last_modified, hint);
    }

    /// [`WindowBuilder::push`] from the entry's parts (`name` as decoded,
    /// a directory's without its `/`).
    pub fn push_entry(&mut self, name: &str, is_dir: bool, size: u64, last_modified: u64, hint: Hint<'_>) {
        if !valid_parts(name, is_dir) {
            return;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let name = if is_dir {
            scratch.clear();
            scratch.push_str(name);
            scratch.push('/');
            scratch.as_str()
        } else {
            name
        };
        self.push_prepared(name, is_dir, size, last_modified, hint);
        self.scratch = scratch;
    }

    /// [`WindowBuilder::push_entry`] of a name already prepared (a
    /// directory's with its `/`), as a spilled run holds it.
    pub fn push_prepared(&mut self, name: &str, is_dir: bool, size: u64, last_modified: u64, hint: Hint<'_>) {
        if self.needs(name) {
            if self.bound.as_ref().is_none_or(|(b, d)| (name, is_dir) < (b.as_str(), *d)) {
                self.names.push(name, is_dir, size, last_modified, hint);
            } else {
                self.dropped = true;
                if let Some(spill) = &mut self.spill {
                    spill.push(name, is_dir, size, last_modified, hint);
                }
            }
        }
        let over = |n: usize, max: usize| n > max.saturating_add(max / 2).saturating_add(2);
        if over(self.names.len(), self.cap) || over(self.names.used_bytes(), self.max_bytes) {
            self.cut_back();
        }
    }

    /// Bytes the entries held now use ([`Names::used_bytes`]).
    pub fn used_bytes(&self) -> usize {
        self.names.used_bytes()
    }

    /// Entries held now.
    pub fn held(&self) -> usize {
        self.names.len()
    }

    /// Says that needed entries follow those pushed (a source that stops
    /// early): the window is not the whole rest.
    pub fn more_follow(&mut self) {
        self.dropped = true;
    }

    /// Writes entries `from..` of those held to the spill, if any.
    fn spill_from(&mut self, from: usize) {
        if let Some(spill) = &mut self.spill {
            for i in from..self.names.len() {
                let it = self.names.get(i);
                spill.push(it.name, it.is_dir, it.size, it.last_modified, it.hint());
            }
        }
    }

    /// Holds the window to about `max` bytes from here on (it is cut back
    /// to two thirds of it, so that half as much again before the next cut
    /// stays within `max`), if that is less than it was allowed.
    pub fn limit_bytes(&mut self, max: usize) {
        let cut_to = max / 3 * 2;
        if cut_to < self.max_bytes {
            self.max_bytes = cut_to;
            if self.names.used_bytes() > cut_to {
                self.cut_back();
            }
        }
    }

    /// Keeps only the smallest entries held: at most `cap + 1`, within
    /// `max_bytes`, at least 2.
    fn cut_back(&mut self) {
        self.names.sort();
        let cap = self.cap.saturating_add(1);
        let fit = self.names.bytes_of_first(cap).take_while(|&b| b <= self.max_bytes).count();
        let keep = fit.max(2);
        if keep < self.names.len() {
            self.dropped = true;
            self.spill_from(keep);
            self.names.truncate(keep);
            self.bound = self.names.last().map(|l| (l.name.to_owned(), l.is_dir));
        }
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
    pub fn finish(self, extra: Vec<DirItem>) -> Option<Window> {
        self.finish_spilled(extra).0
    }

    /// [`WindowBuilder::finish`], and for a builder made
    /// [`WindowBuilder::spilling`] whose window is not the whole rest, the
    /// runs holding every needed name after it (`None` if spilling failed
    /// or nothing was let go).
    pub fn finish_spilled(mut self, extra: Vec<DirItem>) -> (Option<Window>, Option<SpillRuns>) {
        self.cut_back();
        // Past a cut (or at `cap + 1` entries), the last entry kept only
        // shows what follows the one before it: the window ends before it.
        let complete = !self.dropped && self.names.len() <= self.cap;
        if !complete {
            let Some(end) = self.window_end() else { return (None, None) };
            // The runs hold the window's last name too: a page from it
            // finds it there, as it would in a read of the share.
            self.spill_from(end);
            self.names.truncate(end + 1);
        }
        let spill = match (self.spill.take(), complete, self.names.last()) {
            (Some(spill), false, Some(last)) => {
                let needed = Needed { from: self.from.clone(), within: self.within.clone() };
                spill.finish(&needed, last.name.to_owned(), extra.clone())
            }
            _ => None,
        };
        (Some(self.window_with(extra, complete)), spill)
    }

    /// The window of `needed` made from the runs a read spilled (see
    /// [`SpillRuns::serves`]) as from the share: at most `cap` entries in
    /// `max_bytes`. `None`: the runs are gone, or no window can end among
    /// them (read the share).
    ///
    /// Errors: a run could not be read back.
    pub fn from_runs(
        runs: &SpillRuns,
        needed: &Needed,
        cap: usize,
        max_bytes: usize,
    ) -> std::io::Result<Option<Window>> {
        let mut window = WindowBuilder::new(needed, cap, max_bytes);
        let mut more = false;
        let found = runs.visit_from(&needed.from, |r| {
            // Past the names under the prefix: none of the rest is needed.
            if r.name.as_str() > needed.within.as_str() && !r.name.starts_with(needed.within.as_str()) {
                return false;
            }
            // Sorted input: once more than a window's worth came in, what
            // follows would be cut anyway.
            if window.held() > cap.saturating_add(1) || window.used_bytes() > max_bytes {
                more = true;
                return false;
            }
            window.push_prepared(&r.name, r.is_dir, r.size, r.last_modified, r.hint());
            true
        })?;
        if !found {
            return Ok(None);
        }
        if more {
            window.more_follow();
        }
        Ok(window.finish(runs.beside().to_vec()))
    }

    /// Where a window that is not the whole rest ends: its last entry that
    /// is a plain file past `from` not followed by its own directory.
    fn window_end(&self) -> Option<usize> {
        let items = &self.names;
        (0..items.len().saturating_sub(1)).rev().find(|&i| {
            let (it, next) = (items.get(i), items.get(i + 1));
            // A marker's directory comes right after it, same name.
            let its_directory_follows = next.is_dir && next.name == it.name;
            !it.is_dir && !its_directory_follows && it.name > self.from.as_str()
        })
    }

    /// The window of the entries held (cut to its end), with `extra` merged
    /// in (see [`WindowBuilder::finish`]).
    fn window_with(mut self, extra: Vec<DirItem>, complete: bool) -> Window {
        let mut items = std::mem::take(&mut self.names);
        let last = items.last().map(|l| l.name.to_owned());
        let mut added = Vec::new();
        for e in extra.into_iter().filter_map(prepared_item) {
            if !self.needs(&e.name) || (!complete && last.as_deref().is_some_and(|l| e.name.as_str() > l)) {
                continue;
            }
            // Sorted: the plain entry of that name, if any, is here.
            let at = items.partition_point(0..items.len(), |i| i.sort_key() < (e.name.as_str(), false));
            if at < items.len() && items.get(at).sort_key() == (e.name.as_str(), false) {
                items.clear_hint(at);
            } else {
                added.push(e);
            }
        }
        if !added.is_empty() {
            for e in &added {
                items.push_item(e);
            }
            items.sort();
        }
        items.shrink();
        Window { items: Arc::new(items), complete }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::listings::spill_runs::RUN_ENTRIES;

    fn file(name: &str) -> DirItem {
        DirItem { name: name.into(), is_dir: false, size: 1, last_modified: 2, etag_hint: Some("e".into()) }
    }
    fn dir(name: &str) -> DirItem {
        DirItem { name: name.into(), is_dir: true, size: 0, last_modified: 0, etag_hint: None }
    }
    fn names(w: &Window) -> Vec<&str> {
        w.items.iter().map(|i| i.name).collect()
    }
    fn build(from: &str, cap: usize, items: &[DirItem]) -> Option<Window> {
        let mut b = WindowBuilder::new(&Needed { from: from.into(), within: String::new() }, cap, usize::MAX);
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
        let mut b = WindowBuilder::new(&Needed { from: "m".into(), within: "m".into() }, 2, usize::MAX);
        for i in items.iter().rev() {
            b.push(i.clone());
        }
        let w = b.finish(vec![file("n0"), file("m0")]).unwrap();
        assert_eq!(names(&w), ["m0", "m1", "m2"]);
        assert!(w.complete);
    }

    #[test]
    fn a_window_holds_what_fits_its_bytes_and_the_next_one_goes_on() {
        // 100 entries of 32 + 4 bytes each: 400 bytes hold 11 of them.
        let items: Vec<DirItem> = (0..100).map(|i| DirItem { etag_hint: None, ..file(&format!("f{i:03}")) }).collect();
        let (mut from, mut seen) = (String::new(), Vec::new());
        loop {
            let mut b = WindowBuilder::new(&Needed { from: from.clone(), within: String::new() }, usize::MAX, 400);
            for i in items.iter().rev() {
                b.push(i.clone());
            }
            let w = b.finish(Vec::new()).unwrap();
            assert!(w.items.len() <= 11 && w.items.used_bytes() <= 400, "{} entries", w.items.len());
            // Each window starts at the last name of the one before.
            seen.extend(w.items.iter().map(|i| i.name.to_owned()).filter(|n| *n > from));
            if w.complete {
                break;
            }
            from = w.items.last().unwrap().name.to_owned();
        }
        assert_eq!(seen, items.iter().map(|i| i.name.clone()).collect::<Vec<_>>());
    }

    #[test]
    fn extras_merge_by_name_within_the_window() {
        let mut b = WindowBuilder::new(&Needed::default(), 2, usize::MAX);
        for i in [file("a"), file("c"), file("e")] {
            b.push(i);
        }
        let w = b.finish(vec![file("b"), file("c"), file("z")]).unwrap();
        assert_eq!(names(&w), ["a", "b", "c"], "z waits for its window");
        assert_eq!(w.items.get(2).etag_hint(), None, "two entries of one name: the lookup decides");
        assert!(!w.complete);
    }

    fn spilled_file(name: &str) -> DirItem {
        DirItem { name: name.into(), is_dir: false, size: 7, last_modified: 9, etag_hint: Some(format!("e-{name}")) }
    }

    #[test]
    fn a_spilled_directory_pages_through_every_name_once_in_order() {
        // More than one run, in an order unlike key order, with a marker
        // and its directory of the same name among them.
        let mut items: Vec<DirItem> =
            (0..(RUN_ENTRIES * 2 + 500)).map(|i| spilled_file(&format!("f{:07}", (i * 7919) % 200_000))).collect();
        items.sort_by(|a, b| a.name.cmp(&b.name));
        items.dedup_by(|a, b| a.name == b.name);
        items.push(spilled_file("m/"));
        items.push(DirItem { name: "m".into(), is_dir: true, size: 0, last_modified: 0, etag_hint: None });
        let budget = SpillBudget::new(1 << 30);
        let cap = 10_000;
        let mut first = WindowBuilder::new(&Needed::default(), cap, usize::MAX).spilling(budget.clone());
        for i in items.iter().rev() {
            first.push(i.clone());
        }
        let (w, spill) = first.finish_spilled(Vec::new());
        let (w, spill) = (w.unwrap(), spill.expect("spilled"));
        assert!(budget.held() > 0);
        let mut seen: Vec<String> = w.items.iter().map(|i| i.name.to_owned()).collect();
        let mut from = seen.last().unwrap().clone();
        let first_window = w;
        let mut windows = 1;
        loop {
            let needed = Needed { from: from.clone(), within: String::new() };
            assert!(spill.serves(&needed));
            let w = WindowBuilder::from_runs(&spill, &needed, cap, usize::MAX).unwrap().unwrap();
            seen.extend(w.items.iter().map(|i| i.name.to_owned()).filter(|n| *n > from));
            windows += 1;
            if w.complete {
                break;
            }
            from = w.items.last().unwrap().name.to_owned();
        }
        // Every entry once (the marker "m/" and its directory are two).
        let mut want: Vec<String> =
            items.iter().map(|i| if i.is_dir { format!("{}/", i.name) } else { i.name.clone() }).collect();
        want.sort();
        assert_eq!(seen, want);
        assert!(windows >= items.len() / cap, "{windows} windows");
        // A page that starts at the first window's last name, under it as a
        // prefix, finds that name in the runs, as in a read of the share.
        let first_last = first_window.items.last().unwrap().name.to_owned();
        let at = Needed { from: first_last.clone(), within: first_last.clone() };
        assert!(spill.serves(&at));
        let w = WindowBuilder::from_runs(&spill, &at, cap, usize::MAX).unwrap().unwrap();
        assert_eq!((w.items.get(0).name, w.items.len(), w.complete), (first_last.as_str(), 1, true));
        let late = seen[seen.len() - 10].clone();
        let hint =
            WindowBuilder::from_runs(&spill, &Needed { from: late.clone(), within: String::new() }, 2, usize::MAX)
                .unwrap()
                .unwrap();
        assert_eq!(hint.items.get(0).etag_hint(), Some(format!("e-{late}")), "hints come back as stored");
        drop(spill);
        assert_eq!(budget.held(), 0, "the runs' bytes go back with them");
    }

    #[test]
    fn a_spent_budget_stops_the_spill() {
        let budget = SpillBudget::new(1000);
        let mut first = WindowBuilder::new(&Needed::default(), 10, usize::MAX).spilling(budget.clone());
        for i in 0..(RUN_ENTRIES + 10) {
            first.push(spilled_file(&format!("f{i:07}")));
        }
        let (w, spill) = first.finish_spilled(Vec::new());
        assert!(w.is_some() && spill.is_none());
        assert_eq!(budget.held(), 0);
    }
}
