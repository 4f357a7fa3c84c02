//! Directories the gateway makes: those it makes for keys (marked as its
//! own, so that it prunes only those), and those that carry a record:
//! markers (`photos/`) and their records, on every kind of record store.

use super::Result;
use super::Tree;
use smb_proto::create::{access, options, CreateContext, CreateRequest, CreateResponse, FileId};
use smb_proto::info::{FileTimes, FullEa, SetFileInfo};
use smb_proto::query::SetInfoRequest;

use super::lookup::key_of;
use super::records::{Kind, Records};
use super::requests::{take, CLOSE_RELATED, QFID};
use super::spill;

/// The sub-second part of the CreationTime (FILETIME, 100 ns units) of
/// the directories the gateway makes for keys: 0.765432 s. A folder
/// someone made on the share has it by chance once in about a hundred
/// thousand (a server that keeps creation times to the microsecond) to ten
/// million; a server that keeps them coarser loses the mark, and then the
/// gateway leaves its own empty directories in place rather than remove
/// anyone's.
pub const OWN_DIR_MARK: u64 = 7_654_320;

/// True if `times` are those of a directory the gateway made for keys
/// (see [`mkdir_own`]).
pub fn is_own_dir(times: &FileTimes) -> bool {
    times.is_directory() && times.creation % 10_000_000 == OWN_DIR_MARK
}

/// Makes the directory `path` for keys, marked as the gateway's own by its
/// CreationTime ([`OWN_DIR_MARK`]): CREATE + SET_INFO(basic) + CLOSE in
/// one round trip. A server that refuses the time still gets the directory
/// (unmarked).
///
/// Errors: the CREATE's NTSTATUS, as [`super::mkdir`]'s.
pub async fn mkdir_own(tree: &Tree, path: &str) -> Result<()> {
    let create = CreateRequest::new_directory(path, access::FILE_WRITE_ATTRIBUTES | access::SYNCHRONIZE);
    let since_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let creation = (since_unix.as_secs() + 11_644_473_600) * 10_000_000 + OWN_DIR_MARK;
    let mark = SetInfoRequest {
        file_id: FileId::RELATED,
        info: SetFileInfo::Basic { creation, last_access: 0, last_write: 0, change: 0, attributes: 0 },
    };
    let [created, marked, _closed] = take(tree.smb().compound(&[&create, &mark, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    if let Err(e) = marked.ok_or_status(&[]) {
        tracing::debug!(error = %e, path, "a directory made for keys could not be marked as the gateway's own");
    }
    Ok(())
}

/// Creates a directory with `eas` as its records: set by the CREATE itself
/// (CREATE + CLOSE), or, on a share without EAs, written to its sidecar
/// once the CREATE has told its on-disk id.
///
/// Errors: STATUS_OBJECT_NAME_COLLISION, STATUS_OBJECT_PATH_NOT_FOUND; the
/// sidecar's write.
pub async fn create_dir_with_eas(tree: &Tree, rec: &Records, path: &str, eas: &[FullEa]) -> Result<()> {
    // A record too large for an EA or stream is set after the CREATE, by
    // `set_dir_ea`: its sidecar, named after the directory's id, first,
    // then the stub, so that nobody meets a stub without its record.
    let spills = !rec.in_sidecars() && eas.iter().any(|e| e.value.len() > spill::SPILL_OVER);
    let ctx = [CreateContext::EaBuffer(eas), CreateContext::QueryOnDiskId];
    let access = access::FILE_LIST_DIRECTORY | access::FILE_WRITE_EA | access::SYNCHRONIZE;
    let contexts = if rec.in_eas() && !spills { &ctx[..1] } else { &ctx[1..] };
    let req = CreateRequest::new_directory(path, access).contexts(contexts);
    let [created, _closed] = take(tree.smb().compound(&[&req, &CLOSE_RELATED]).await?)?;
    let created = created.ok_or_status(&[])?.body(CreateResponse::decode)?;
    if spills {
        for ea in eas {
            if let Err(e) = set_dir_ea(tree, rec, path, ea.clone()).await {
                // Not left without its record.
                let _ = super::delete(tree, path, true).await;
                return Err(e);
            }
        }
        return Ok(());
    }
    match rec.kind() {
        Kind::Ea => {}
        Kind::Stream => rec.write_streams(tree, path, eas, true).await?,
        Kind::Sidecar => rec.write_sidecar(tree, key_of(&created)?, eas).await?,
    }
    Ok(())
}

/// Sets (or, with an empty value, removes) one record on a directory:
/// CREATE(directory, write EA) + SET_INFO(`ea`) + CLOSE, or, on a share
/// without EAs, CREATE + CLOSE (which fails on a file: STATUS_NOT_A_DIRECTORY)
/// and then its stream or sidecar.
///
/// Errors: the first failing step's NTSTATUS.
pub async fn set_dir_ea(tree: &Tree, rec: &Records, path: &str, ea: FullEa) -> Result<()> {
    let open = CreateRequest::open(path, access::FILE_WRITE_EA | access::FILE_READ_ATTRIBUTES)
        .options(options::DIRECTORY_FILE)
        .contexts(&QFID);
    let ea = match !rec.in_sidecars() && ea.value.len() > spill::SPILL_OVER {
        // Too large for an EA or stream: the sidecar, named after the
        // directory's id, first, then its stub.
        true => {
            let look = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..open };
            let [created, _closed] = take(tree.smb().compound(&[&look, &CLOSE_RELATED]).await?)?;
            let created = created.ok_or_status(&[])?.body(CreateResponse::decode)?;
            // Without an on-disk id there is no sidecar: the EA is tried
            // whole, as before spills.
            match (spill::split(std::slice::from_ref(&ea)), key_of(&created)) {
                (Some((kept, spilled)), Ok(key)) => {
                    spill::write(rec, tree, key, &spilled).await?;
                    kept.into_iter().next().unwrap_or(ea)
                }
                _ => ea,
            }
        }
        false => ea,
    };
    let eas = [ea];
    if rec.in_streams() {
        // A stream is written by name: make sure the name is a directory's,
        // or a marker's record would replace a file's own.
        let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..open };
        let [created, _closed] = take(tree.smb().compound(&[&open, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        return rec.write_streams(tree, path, &eas, false).await;
    }
    if !rec.in_eas() {
        let open = CreateRequest { desired_access: access::FILE_READ_ATTRIBUTES, ..open };
        let [created, _closed] = take(tree.smb().compound(&[&open, &CLOSE_RELATED]).await?)?;
        let created = created.ok_or_status(&[])?.body(CreateResponse::decode)?;
        return rec.write_sidecar(tree, key_of(&created)?, &eas).await;
    }
    let set = SetInfoRequest { file_id: FileId::RELATED, info: SetFileInfo::FullEa(&eas) };
    let [created, set, _closed] = take(tree.smb().compound(&[&open, &set, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    set.ok_or_status(&[])?;
    Ok(())
}
