//! Share-relative paths (`\`-separated, as MS-SMB2 2.2.13 names files),
//! built only from the store root, bucket names and mapped key components.
//! This is the one place that joins components, so nothing else can build
//! a path that escapes its bucket.

use std::fmt;

use super::keys::MappedKey;

/// A path relative to the share (no leading `\`; empty is the share root).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SharePath(String);

/// What [`SharePath::join`] puts in place of a component that could leave
/// its directory: wildcards, which MS-FSCC 2.1.5 forbids in a name, so
/// every CREATE of a path holding it fails.
pub const REFUSED_COMPONENT: &str = "<refused?>";

/// Whether `c` names one entry of a directory: no separator, stream
/// separator or NUL, and not `.` or `..`.
fn is_one_component(c: &str) -> bool {
    c != "." && c != ".." && !c.contains(['\\', '/', ':', '\0'])
}

impl SharePath {
    /// The store root inside the share (`a\b`, or empty for the share root).
    pub fn root(root: &str) -> SharePath {
        SharePath(root.trim_matches('\\').to_string())
    }

    /// This path with one more component (already SMB-safe: a bucket name,
    /// an encoded key component, or an internal name).
    ///
    /// A component that could leave its directory (`\`, `/`, `:`, NUL,
    /// `.`, `..`) is a bug above: tests stop on it, and a release build
    /// puts [`REFUSED_COMPONENT`] in its place, a name no SMB server opens
    /// or creates (STATUS_OBJECT_NAME_INVALID), so the request fails
    /// rather than reach another bucket or the gateway's own state.
    pub fn join(&self, component: &str) -> SharePath {
        let component = match is_one_component(component) {
            true => component,
            false => {
                debug_assert!(false, "not one share path component: {component:?}");
                tracing::error!(component, "refused a share path component that could leave its directory");
                REFUSED_COMPONENT
            }
        };
        if self.0.is_empty() {
            SharePath(component.to_string())
        } else {
            SharePath(format!("{}\\{component}", self.0))
        }
    }

    /// This path followed by every encoded component of `key`.
    pub fn join_key(&self, key: &MappedKey) -> SharePath {
        key.components.iter().fold(self.clone(), |p, c| p.join(c))
    }

    /// This path followed by each prefix of `key`'s components, shortest
    /// first: for `a/b/c` under `bucket`, `bucket\a`, `bucket\a\b`,
    /// `bucket\a\b\c`.
    pub fn ancestors_of(&self, key: &MappedKey) -> Vec<SharePath> {
        let mut p = self.clone();
        key.components
            .iter()
            .map(|c| {
                p = p.join(c);
                p.clone()
            })
            .collect()
    }

    /// The path beside this one (a directory's) where the object of the
    /// same name is kept: the last component with
    /// [`keys::BESIDE_MARK`](super::keys::BESIDE_MARK) after it, once for
    /// the object `…/name`, twice (`marker`) for the marker `…/name/` with
    /// a body. The share root has no such path: it is returned unchanged.
    pub fn beside(&self, marker: bool) -> SharePath {
        match self.split_leaf() {
            Some((parent, leaf)) => parent.join(&super::keys::beside_name(leaf, marker)),
            None => self.clone(),
        }
    }

    /// The parent and the last component; `None` for an empty path.
    pub fn split_leaf(&self) -> Option<(SharePath, &str)> {
        if self.0.is_empty() {
            return None;
        }
        Some(match self.0.rsplit_once('\\') {
            Some((parent, leaf)) => (SharePath(parent.to_string()), leaf),
            None => (SharePath::default(), self.0.as_str()),
        })
    }

    /// The last component (empty for the share root).
    pub fn leaf(&self) -> &str {
        self.split_leaf().map_or("", |(_, l)| l)
    }

    /// The path as the server is sent it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for SharePath {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SharePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::keys::map_key;

    #[test]
    fn only_one_component_may_be_joined() {
        for bad in ["..", ".", "a\\b", "a/b", "f:stream", "nul\0", "\\"] {
            assert!(!is_one_component(bad), "{bad:?}");
        }
        for good in ["bucket", "a.b", "..a", "a..", "", "\u{f03a}"] {
            assert!(is_one_component(good), "{good:?}");
        }
        assert!(REFUSED_COMPONENT.contains(['<', '?']), "wildcards: no server opens it");
    }

    #[test]
    fn joins_and_splits() {
        let root = SharePath::root("\\data\\s3\\");
        assert_eq!(root.as_str(), "data\\s3");
        let b = root.join("bkt");
        let k = map_key("a/b?/c").unwrap();
        assert_eq!(b.join_key(&k).as_str(), "data\\s3\\bkt\\a\\b\u{f025}\\c");
        let anc: Vec<String> = b.ancestors_of(&k).iter().map(|p| p.to_string()).collect();
        assert_eq!(anc, ["data\\s3\\bkt\\a", "data\\s3\\bkt\\a\\b\u{f025}", "data\\s3\\bkt\\a\\b\u{f025}\\c"]);
        let full = b.join_key(&k);
        let (parent, leaf) = full.split_leaf().unwrap();
        assert_eq!((parent.as_str(), leaf), ("data\\s3\\bkt\\a\\b\u{f025}", "c"));
        assert_eq!(SharePath::root("").join("x").as_str(), "x");
        assert_eq!(SharePath::root("").split_leaf(), None);
        assert_eq!(full.beside(false).as_str(), "data\\s3\\bkt\\a\\b\u{f025}\\c\u{f02b}");
        assert_eq!(full.beside(true).as_str(), "data\\s3\\bkt\\a\\b\u{f025}\\c\u{f02b}\u{f02b}");
    }
}
