//! Records too large for an EA or a stream: ext4 keeps about 4 KiB of
//! extended attributes per file in all (Samba's own among them), and
//! `streams_xattr` keeps streams in them too, while S3 allows an object
//! 2 KB of user metadata beside 10 tags of up to 384 bytes. Such a record
//! goes to a sidecar file under `.smbgate\meta`, named after the file's
//! on-disk id as on a share without EAs (see `records`), written before
//! its stub; the EA or stream keeps the stub. Every read that hands a
//! record above this layer reads the sidecar when it meets a stub (one
//! round trip more, for such objects only). An object record's stub keeps
//! everything but the user metadata, tags, Content-* headers and the
//! parts' checksums, so that an object whose sidecar went keeps its ETag,
//! size, checksums, version and lock.
//!
//! Known limits: a sidecar is replaced before its stub is written, so a
//! record rewrite whose stub write then fails still takes effect; and
//! only a DELETE (or replacement) the gateway makes after it met a spill
//! removes the sidecar on an EA or stream share, so overwrites by others
//! and some of the gateway's own paths leave small sidecars behind, which
//! never describe another file (see `records`).

use smb_proto::info::FullEa;

use super::records::{FileKey, Records};
use super::{Result, Tree};
use crate::store::meta::{ObjectMeta, META_EA};

/// Records over this many bytes spill: under what ext4 leaves of its 4 KiB
/// once Samba's DOS attributes (and an `acl_xattr` ACL) are in.
pub const SPILL_OVER: usize = 3000;

/// What stands in the EA or stream for a spilled record other than an
/// object record.
const STUB: &[u8] = br#"{"spilled":true}"#;

/// The stub of the object record `meta`; without the part sizes too if
/// they would keep it over [`SPILL_OVER`] (a `partNumber` GET then reads
/// the sidecar, as every read does).
fn stub_of(meta: &ObjectMeta) -> Vec<u8> {
    let mut stub = meta.stub();
    if stub.record_len() > SPILL_OVER {
        stub.parts.clear();
    }
    stub.to_ea().value
}

/// True if `value` is the stub of a spilled record: [`STUB`], or an
/// object record's, whose JSON ends with the `spilled` field (the last one
/// `ObjectMeta` writes). No JSON is parsed for a record that is none.
fn is_stub(value: &[u8]) -> bool {
    value == STUB || value.ends_with(br#""spilled":true}"#)
}

/// `eas` split into what the EAs or streams get (stubs in place of records
/// over [`SPILL_OVER`]) and what goes to the sidecar; `None` (nothing
/// copied) if nothing spills.
pub(super) fn split(eas: &[FullEa]) -> Option<(Vec<FullEa>, Vec<FullEa>)> {
    if eas.iter().all(|e| e.value.len() <= SPILL_OVER) {
        return None;
    }
    let mut kept = Vec::with_capacity(eas.len());
    let mut spilled = Vec::new();
    for ea in eas {
        if ea.value.len() <= SPILL_OVER {
            kept.push(ea.clone());
            continue;
        }
        let stub = match ea.name.eq_ignore_ascii_case(META_EA) {
            true => ObjectMeta::from_ea(&ea.value).map(|m| stub_of(&m)),
            false => None,
        };
        kept.push(FullEa { name: ea.name.clone(), value: stub.unwrap_or_else(|| STUB.to_vec()) });
        spilled.push(ea.clone());
    }
    Some((kept, spilled))
}

/// Writes the sidecar of `spilled` (see [`split`]) for the file `key`
/// names: before the stubs, so that nobody meets a stub without its
/// record.
///
/// Errors: the sidecar write's.
pub(super) async fn write(rec: &Records, tree: &Tree, key: FileKey, spilled: &[FullEa]) -> Result<()> {
    rec.saw_spill();
    rec.write_sidecar(tree, key, spilled).await
}

/// `meta` itself, or, for a stub, the record from the sidecar of the file
/// `key` names. A stub whose sidecar is gone or names another file is
/// taken as the record (said at WARN): its ETag, size and checksums still
/// hold, and it is no longer marked spilled, so that a copy or a record
/// rewritten from it is not taken for a stub.
///
/// Errors: the sidecar read's.
pub(crate) async fn unspill_meta(
    rec: &Records,
    tree: &Tree,
    key: Option<FileKey>,
    meta: ObjectMeta,
) -> Result<ObjectMeta> {
    if !meta.spilled {
        return Ok(meta);
    }
    rec.saw_spill();
    let found = match key {
        Some(key) => ObjectMeta::from_eas(&rec.read_sidecar(tree, key).await?),
        None => None,
    };
    match found {
        Some(full) if full.etag == meta.etag && full.size == meta.size => Ok(full),
        _ => {
            tracing::warn!(key = meta.key.as_deref().unwrap_or(""), "a spilled record's sidecar is missing");
            Ok(ObjectMeta { spilled: false, ..meta })
        }
    }
}

/// `eas` with each stub replaced by its record from the sidecar of the
/// file `key` names (read once, only if there is a stub).
///
/// Errors: the sidecar read's; no on-disk id for a file with a stub.
pub(super) async fn unspill(
    rec: &Records,
    tree: &Tree,
    key: impl FnOnce() -> Result<FileKey>,
    mut eas: Vec<FullEa>,
) -> Result<Vec<FullEa>> {
    if !eas.iter().any(|e| is_stub(&e.value)) {
        return Ok(eas);
    }
    rec.saw_spill();
    let full = rec.read_sidecar(tree, key()?).await?;
    for ea in eas.iter_mut().filter(|e| is_stub(&e.value)) {
        if let Some(f) = full.iter().find(|f| f.name.eq_ignore_ascii_case(&ea.name)) {
            ea.value = f.value.clone();
        }
    }
    Ok(eas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_records_over_the_limit_spill_and_an_object_keeps_its_essentials() {
        let mut meta = ObjectMeta { etag: "e".into(), size: 3, key: Some("k".into()), ..Default::default() };
        meta.user.insert("m".into(), "v".repeat(SPILL_OVER));
        meta.tags.push(("t".into(), "x".into()));
        let small = FullEa { name: "smbgate.upload".into(), value: b"{}".to_vec() };
        let big = FullEa { name: "smbgate.part".into(), value: vec![b' '; SPILL_OVER + 1] };
        assert_eq!(split(std::slice::from_ref(&small)), None);
        let (kept, spilled) = split(&[meta.to_ea(), small.clone(), big.clone()]).unwrap();
        assert_eq!(spilled, vec![meta.to_ea(), big]);
        assert_eq!(kept[1], small);
        assert_eq!(kept[2].value, STUB);
        let stub = ObjectMeta::from_ea(&kept[0].value).unwrap();
        assert!(stub.spilled && stub.user.is_empty() && stub.tags.is_empty());
        assert_eq!((stub.etag.as_str(), stub.size, stub.key.as_deref()), ("e", 3, Some("k")));
        assert!(is_stub(&kept[0].value) && is_stub(STUB) && !is_stub(&small.value));
    }
}
