//! Bucket versioning on plain files.
//!
//! The current version of a key stays the plain file at the key's path, so
//! people on the share see what S3 clients see. Older versions and delete
//! markers live under `.smbgate/versions/<bucket>/`, in a folder per key
//! that mirrors the key's path: `<components…>/.smbgate/`. No key
//! component can be `.smbgate` (see `keys`), so the versions of `a` and
//! the folder of the key `a/b` never meet. A key with many versions has
//! them split into shards, subfolders of that folder ([`shards`]).
//!
//! A stored version is named `<age>.<version id>`, a delete marker
//! `<age>.<version id>.marker`; `<age>` is 16 hex digits of `u64::MAX`
//! minus the time (FILETIME, by the storing gateway's clock) the version
//! stopped being current or the marker was made, so a folder in name
//! order is newest first. A new version moves the old file there by rename, never by
//! copying bytes.
//!
//! Version IDs ([`new_version_id`]) are 16 hex digits of `u64::MAX` minus
//! the gateway's time in 100 ns units, then 8 random hex digits: newest
//! first, opaque, URL-safe and unique across instances without
//! coordination. `null` is the version of an object written while
//! versioning was off or suspended. A file someone put on the share is a
//! version whose ID comes from what the file is ([`version_of`]).

pub mod aside;
pub mod list;
pub mod lock;
pub mod lock_config;
pub mod removal;
pub mod shards;
pub mod status;
pub mod version_reads;

use super::keys::{MappedKey, INTERNAL_DIR};
use super::path::SharePath;
use super::types::ObjectInfo;
use super::Root;

pub use status::{StatusCache, Versioning};

/// The version ID of objects written while versioning was off or
/// suspended.
pub const NULL_VERSION: &str = "null";

/// The suffix of a stored delete marker's name.
const MARKER_SUFFIX: &str = ".marker";

/// A new version ID: newest sorts first (see the module docs).
pub fn new_version_id() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let ticks = (now.as_nanos() / 100) as u64;
    format!("{:016x}{:08x}", u64::MAX - ticks, rand::random::<u32>())
}

/// The version ID of the object `info`: its record's; `null` for a record
/// written without one; for a file someone else put on the share, one made
/// from its derived ETag (size, LastWriteTime, file id), which stays the
/// same while the file does.
pub fn version_of(info: &ObjectInfo) -> String {
    match (&info.meta.version_id, info.meta.etag.is_empty()) {
        (_, true) => format!("s{}", info.etag.get(..23).unwrap_or(&info.etag)),
        (Some(id), false) => id.clone(),
        (None, false) => NULL_VERSION.to_string(),
    }
}

/// True if `id` could be a version ID this gateway gives (URL-safe, short):
/// anything else names no version.
pub fn plausible_version_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// A stored version's or delete marker's file name, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredName {
    /// When it stopped being the current version, or for a delete marker
    /// when it was made (FILETIME, by the clock of the gateway that stored
    /// it: the key's versions change one at a time, under its creation
    /// lock, so one clock orders them).
    pub stored_at: u64,
    /// Its version ID.
    pub version_id: String,
    /// True for a delete marker.
    pub marker: bool,
}

impl StoredName {
    /// The file name (see the module docs).
    pub fn name(&self) -> String {
        let suffix = if self.marker { MARKER_SUFFIX } else { "" };
        format!("{:016x}.{}{suffix}", u64::MAX - self.stored_at, self.version_id)
    }

    /// Parses a name [`StoredName::name`] made; `None` for any other.
    pub fn parse(name: &str) -> Option<StoredName> {
        let (age, rest) = name.split_once('.')?;
        if age.len() != 16 {
            return None;
        }
        let age = u64::from_str_radix(age, 16).ok()?;
        let (id, marker) = match rest.strip_suffix(MARKER_SUFFIX) {
            Some(id) => (id, true),
            None => (rest, false),
        };
        plausible_version_id(id).then(|| StoredName { stored_at: u64::MAX - age, version_id: id.to_string(), marker })
    }
}

/// The FILETIME (100 ns since 1601) of now, by the gateway's clock.
pub fn filetime_now() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (now.as_nanos() / 100) as u64 + 116_444_736_000_000_000
}

impl Root {
    /// The folder of `bucket`'s stored versions (`.smbgate/versions/<bucket>`).
    pub fn versions_root(&self, bucket: &str) -> SharePath {
        self.internal("versions").join(bucket)
    }

    /// The folder holding the stored versions of `mapped` in `bucket`.
    pub fn versions_dir(&self, bucket: &str, mapped: &MappedKey) -> SharePath {
        self.versions_root(bucket).join_key(mapped).join(INTERNAL_DIR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_sort_newest_first_and_parse_back() {
        let old = StoredName { stored_at: 100, version_id: new_version_id(), marker: false };
        let new = StoredName { stored_at: 200, version_id: NULL_VERSION.into(), marker: true };
        assert!(new.name() < old.name());
        assert_eq!(StoredName::parse(&old.name()), Some(old.clone()));
        assert_eq!(StoredName::parse(&new.name()), Some(new.clone()));
        assert!(new.name().ends_with(".null.marker"), "{}", new.name());
        for other in ["x", "0000.abc", "000000000000000g.abc", "0000000000000000.", "0000000000000000.a/b"] {
            assert_eq!(StoredName::parse(other), None, "{other}");
        }
    }

    #[test]
    fn version_ids_are_url_safe_and_later_ones_sort_first() {
        let a = new_version_id();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_version_id();
        assert_eq!(a.len(), 24);
        assert!(b < a, "{b} !< {a}");
        assert!(plausible_version_id(&a));
        assert!(!plausible_version_id("../x"));
    }
}
