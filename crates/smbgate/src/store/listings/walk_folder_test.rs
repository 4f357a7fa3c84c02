//! Tests of `walk.rs` with empty folders: directories with nothing in them,
//! which the key-built `MemTree` of `walk_test.rs` cannot hold.
use super::*;

/// A root holding the empty directories `dirs` and then the file `f`.
struct EmptyDirs(&'static [&'static str]);

impl DirSource for EmptyDirs {
    type Error = ();
    async fn list(&self, path: &[String], _needed: &Needed) -> Result<Option<Window>, ()> {
        Ok(Some(Window::whole(prepare(match path {
            [] => self.0.iter().map(|d| item(d, true, "")).chain([item("f", false, "f")]).collect(),
            _ => Vec::new(),
        }))))
    }
}

#[test]
fn a_page_that_stops_at_an_empty_folder_lists_it_first() {
    // The marker of a page cut short by max_dirs is the directory's key; an
    // empty folder there is the object of that very key, so the page must
    // list it before it stops, or no page ever does.
    let mut r = req("", None, None, 10);
    r.max_dirs = Some(1);
    let mut got = Vec::new();
    for _ in 0..5 {
        let page = futures::executor::block_on(list(&EmptyDirs(&["e1", "e2"]), &r)).unwrap();
        got.extend(page.entries.iter().map(|e| e.name().to_owned()));
        if !page.is_truncated {
            break;
        }
        r.start_after = page.next_marker;
    }
    assert_eq!(got, ["e1/", "e2/", "f"]);
}

#[test]
fn empty_directories() {
    let src = EmptyDirs(&["empty"]);
    let flat = futures::executor::block_on(list(&src, &req("", None, None, 10))).unwrap();
    assert_eq!(names(&flat), ["empty/", "f"], "offered as a folder object");
    let under = futures::executor::block_on(list(&src, &req("empty/", None, None, 10))).unwrap();
    assert_eq!(names(&under), ["empty/"], "the prefix naming it");
    let after = futures::executor::block_on(list(&src, &req("", None, Some("empty/"), 10))).unwrap();
    assert_eq!(names(&after), ["f"], "not at or before start_after");
    let slash = futures::executor::block_on(list(&src, &req("", Some("/"), None, 10))).unwrap();
    assert_eq!(names(&slash), ["empty/", "f"], "shown as a folder, unwalked");
}
