//! Records through an open handle (EAs, named streams or a sidecar), and
//! the startup probe of what records a share can hold.

use super::Result;
use super::{Handle, Tree};
use smb_client::Error;
use smb_proto::create::{options, CreateContext, CreateRequest, CreateResponse};
use smb_proto::info::{FullEa, SetFileInfo};
use smb_proto::NtStatus;

use super::records::{FileKey, Kind, Records};
use super::requests::{take, temp_req, CLOSE_RELATED};
use super::spill;
use crate::store::meta::{ObjectMeta, META_EA};

/// Longest record value an EA can carry, in bytes (its length is 16 bits
/// on the wire, MS-FSCC 2.4.15).
pub const MAX_EA_VALUE: usize = u16::MAX as usize;

/// Sets (or, with empty values, removes) records on the open `handle` of
/// the file at `path`, which nobody else writes (a temp file, a part claim,
/// an upload's data file): its EAs, its named streams, or its sidecar.
///
/// A record over [`spill::SPILL_OVER`] bytes goes to a sidecar first, its
/// stub to the EA or stream (see `spill`).
///
/// Errors: the SET_INFO's NTSTATUS, or the stream or sidecar write's; a
/// handle opened without the QFid context cannot have a sidecar; an EA
/// value over 65,535 bytes (an EA's length is 16 bits on the wire) is
/// refused before anything is sent, never cut ([`MAX_EA_VALUE`]).
pub async fn set_eas(handle: &Handle, rec: &Records, path: &str, eas: &[FullEa]) -> Result<()> {
    if rec.in_sidecars() {
        return rec.write_sidecar(&handle.tree(), handle_key(handle)?, eas).await;
    }
    // A record too large for an EA or stream goes to a sidecar first;
    // without an on-disk id to name one, the EA or stream is tried whole.
    let split = handle_key(handle).ok().and_then(|key| Some((key, spill::split(eas)?)));
    let eas = match &split {
        Some((key, (kept, spilled))) => {
            spill::write(rec, &handle.tree(), *key, spilled).await?;
            &kept[..]
        }
        None => eas,
    };
    if rec.in_streams() {
        return rec.write_streams(&handle.tree(), path, eas, true).await;
    }
    if let Some(big) = eas.iter().find(|e| e.value.len() > MAX_EA_VALUE) {
        let why = format!("record {} of {} bytes: an EA holds {MAX_EA_VALUE}", big.name, big.value.len());
        return Err(Error::InvalidArgument(why).into());
    }
    handle.smb().tree().set_info(handle.smb().id(), SetFileInfo::FullEa(eas)).await.map_err(Into::into)
}

/// Replaces the records of an object open to change them (see
/// `open_to_update_record`), then puts its LastWriteTime back to what the
/// open saw: a record in a named stream is a write to the file on some
/// servers (Samba's streams_xattr), and tags may not change an object's
/// Last-Modified, nor the derived ETag of a file someone else put there.
/// The CreationTime the open saw is set too: a sidecar is keyed by it, and
/// Samba reports a file it did not create (no stored DOS attributes) as
/// created at the earliest of its access, write and change times, which a
/// read on the share moves; set once, Samba stores it.
///
/// Errors: as [`set_eas`]; the SET_INFO of the times.
pub async fn rewrite_records(handle: &Handle, rec: &Records, path: &str, eas: &[FullEa]) -> Result<()> {
    set_eas(handle, rec, path, eas).await?;
    let times = &handle.info().times;
    let keep = SetFileInfo::Basic {
        creation: times.creation,
        last_access: 0,
        last_write: times.last_write,
        change: 0,
        attributes: 0,
    };
    handle.smb().tree().set_info(handle.smb().id(), keep).await.map_err(Into::into)
}

/// The sidecar key of an open file: from its CREATE's answer, or, for a
/// reclaimed durable handle (whose answer has no QFid), the first open's id.
///
/// Errors: no on-disk id is known.
pub(crate) fn handle_key(handle: &Handle) -> Result<FileKey> {
    let id = handle.info().on_disk_id().or_else(|| handle.smb().reopen_info().and_then(|r| r.on_disk_id()));
    id.map(|id| FileKey { id, created: handle.info().times.creation })
        .ok_or_else(|| Error::Protocol("the server sent no on-disk file id for a sidecar record".into()))
        .map_err(Into::into)
}

/// The records named `names` of the open `handle` of the file at `path`:
/// QUERY_INFO of its EAs, its named streams, or its sidecar (every record
/// it holds); a spilled record is read from its sidecar.
///
/// Errors: the QUERY_INFO's NTSTATUS, or the stream or sidecar read's.
pub async fn query_records(handle: &Handle, rec: &Records, path: &str, names: &[&str]) -> Result<Vec<FullEa>> {
    let found = match rec.kind() {
        Kind::Ea => handle.smb().tree().query_eas(handle.smb().id(), names).await?,
        Kind::Stream => {
            let mut out = Vec::new();
            for name in names {
                if let Some(value) = rec.read_stream(&handle.tree(), path, name).await? {
                    out.push(FullEa { name: name.to_string(), value: value.to_vec() });
                }
            }
            out
        }
        Kind::Sidecar => {
            return match handle_key(handle) {
                Ok(key) => rec.read_sidecar(&handle.tree(), key).await,
                Err(_) => Ok(Vec::new()),
            }
        }
    };
    spill::unspill(rec, &handle.tree(), || handle_key(handle), found).await
}

// Here rather than in `records`, which stays below the spill (`spill`
// builds on it), like the other reads that meet a stub.
impl Records {
    /// The record of the file or directory at `path` (whose on-disk id
    /// and creation time are `key`, from its directory entry): read from
    /// its stream or sidecar, or with an open where it is an EA.
    ///
    /// Errors: the read's SMB failures; not-found ones where `path` is gone.
    pub async fn read_of(&self, tree: &Tree, path: &str, key: FileKey) -> Result<Option<ObjectMeta>> {
        Ok(match self.kind() {
            Kind::Ea => super::stat_with_meta(tree, self, path).await?.1,
            Kind::Stream => match self.read_stream(tree, path, META_EA).await?.and_then(|b| ObjectMeta::from_ea(&b)) {
                Some(meta) => Some(spill::unspill_meta(self, tree, Some(key), meta).await?),
                None => None,
            },
            Kind::Sidecar => ObjectMeta::from_eas(&self.read_sidecar(tree, key).await?),
        })
    }
}

/// What the share can hold records in, asked the way a PUT uses them:
/// CREATE of a new file `path` carrying an EA (EaBuffer context) and the
/// QFid context, delete-on-close, then CLOSE, in one round trip; if the
/// server answers STATUS_EAS_NOT_SUPPORTED (Samba with `ea support = no`,
/// Azure Files, some NAS), the same without the EA. Returns whether EAs are
/// stored, and whether the CREATE reports on-disk file ids.
///
/// Errors: any other failing status.
pub async fn probe_record_support(tree: &Tree, path: &str) -> Result<(bool, bool)> {
    let eas = [FullEa { name: "smbgate.probe".into(), value: b"1".to_vec() }];
    let ctx = [CreateContext::EaBuffer(&eas), CreateContext::QueryOnDiskId];
    for with_ea in [true, false] {
        let create = CreateRequest {
            options: options::NON_DIRECTORY_FILE | options::DELETE_ON_CLOSE,
            ..temp_req(path, if with_ea { &ctx[..] } else { &ctx[1..] })
        };
        let [created, _closed] = take(tree.smb().compound(&[&create, &CLOSE_RELATED]).await?)?;
        match created.ok_or_status(&[]) {
            Ok(r) => return Ok((with_ea, r.body(CreateResponse::decode)?.on_disk_id().is_some())),
            Err(e) if with_ea && e.status() == Some(NtStatus::STATUS_EAS_NOT_SUPPORTED) => {}
            Err(e) => return Err(e.into()),
        }
    }
    unreachable!("the second probe returns")
}
