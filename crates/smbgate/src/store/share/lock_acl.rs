//! The ACEs that hold a locked version's file against people on the
//! share: at the front of its DACL, an ALLOW for the gateway's own
//! account, a DENY for Everyone, and an OWNER RIGHTS entry (MS-DTYP
//! 2.4.2.4) that takes from the file's owner the right to rewrite the
//! DACL it has without asking. So nobody but the gateway may delete,
//! write, change the attributes (the read-only mark, see `read_only`)
//! or the ACL of the file, while its other ACEs still say who reads it.
//!
//! A server keeps and enforces such a DACL only where it stores Windows
//! security descriptors (Windows; Samba with `vfs_acl_xattr`). Samba
//! mapping ACLs onto POSIX ones answers a SET_INFO with success and
//! drops the DENY, so every change is read back in the same compound.

use std::sync::atomic::{AtomicBool, Ordering};

use smb_proto::create::{access, share, CreateRequest, Disposition, FileId};
use smb_proto::info::{info_type, SetFileInfo};
use smb_proto::query::{OutputBuffer, QueryInfoRequest, SetInfoRequest};
use smb_proto::security::{ace_type, security_information, Ace, SecurityDescriptor, Sid};
use smb_proto::status::NtStatus;

use super::requests::{take, CLOSE_RELATED};
use super::{Result, Tree};

/// What the lock denies everyone but the gateway: DELETE, writing data,
/// EAs and attributes, and changing the ACL or the owner.
pub const LOCK_MASK: u32 = access::DELETE
    | access::FILE_WRITE_DATA
    | access::FILE_APPEND_DATA
    | access::FILE_WRITE_EA
    | access::FILE_WRITE_ATTRIBUTES
    | access::WRITE_DAC
    | access::WRITE_OWNER;

/// FILE_ALL_ACCESS: what a file without a DACL gives everyone.
const ALL_ACCESS: u32 = 0x001f_01ff;

/// The ACEs a lock puts at the front of a DACL, in the order they are
/// judged: the rights of the gateway's accounts (`allowed`: each SMB
/// identity it serves that has met a lock) come before the DENY that
/// would take them, and the owner keeps only READ_CONTROL of its own.
fn lock_aces(allowed: &[Sid]) -> Vec<Ace> {
    let mut aces: Vec<Ace> = allowed.iter().map(|sid| Ace::access(ace_type::ACCESS_ALLOWED, LOCK_MASK, sid)).collect();
    aces.push(Ace::access(ace_type::ACCESS_DENIED, LOCK_MASK, &Sid::everyone()));
    aces.push(Ace::access(ace_type::ACCESS_ALLOWED, access::READ_CONTROL, &Sid::owner_rights()));
    aces
}

/// True for an ACE of the lock's shape (any account's ALLOW of exactly
/// [`LOCK_MASK`] included), so that lifting a lock takes off the entries
/// of identities other than the one lifting it.
fn is_lock_ace(ace: &Ace) -> bool {
    if ace.flags != 0 {
        return false;
    }
    match (ace.ace_type, ace.mask_and_sid()) {
        (ace_type::ACCESS_ALLOWED, Some((LOCK_MASK, _))) => true,
        (ace_type::ACCESS_DENIED, Some((LOCK_MASK, sid))) => sid == Sid::everyone(),
        (ace_type::ACCESS_ALLOWED, Some((access::READ_CONTROL, sid))) => sid == Sid::owner_rights(),
        _ => false,
    }
}

/// The DACL `dacl` (`None`: none, which gives everyone everything, kept
/// so as an explicit ALLOW) with the lock's ACEs for `allowed` at its
/// front (`on`), or with no ACE of the lock's shape.
pub fn with_lock_aces(dacl: Option<&[Ace]>, allowed: &[Sid], on: bool) -> Vec<Ace> {
    let rest: Vec<Ace> = match dacl {
        Some(aces) => aces.iter().filter(|a| !is_lock_ace(a)).cloned().collect(),
        None => vec![Ace::access(ace_type::ACCESS_ALLOWED, ALL_ACCESS, &Sid::everyone())],
    };
    match on {
        true => lock_aces(allowed).into_iter().chain(rest).collect(),
        false => rest,
    }
}

/// True if `dacl` begins with the lock's ACEs for `allowed`.
fn has_lock_aces(dacl: &[Ace], allowed: &[Sid]) -> bool {
    dacl.starts_with(&lock_aces(allowed))
}

/// The gateway's side of the lock's ACEs for one SMB identity: its
/// account's SID, learned once from a file it creates and checked to
/// keep the rights the lock leaves it; the SIDs of every identity of this
/// process learned so far, all allowed by each lock; and whether the share
/// was seen to drop the ACEs (said once in the log).
#[derive(Default)]
pub struct LockAcl {
    /// `None` inside: the share keeps no ACLs, or the owner of the
    /// gateway's files is not an account the lock can leave its rights.
    own: tokio::sync::OnceCell<Option<Sid>>,
    /// Shared by the identities of one process.
    known: std::sync::Arc<std::sync::Mutex<Vec<Sid>>>,
    dropped_said: AtomicBool,
}

impl LockAcl {
    /// The lock's ACEs for another SMB identity of the same process.
    pub fn for_another_identity(&self) -> LockAcl {
        LockAcl { known: self.known.clone(), ..Default::default() }
    }

    /// Puts the lock's ACEs on the file at `path` (`on`) or takes them off.
    /// `probe` names a fresh temp file for learning the gateway's SID the
    /// first time. Returns false if the share keeps no such DACL (said at
    /// INFO the first time).
    ///
    /// Errors: the CREATE's, QUERY_INFO's or SET_INFO's NTSTATUS (for
    /// example ACCESS_DENIED for a file whose DACL the gateway may not
    /// change); InvalidArgument for a DACL too large to write back.
    pub async fn set(&self, tree: &Tree, path: &str, on: bool, probe: impl FnOnce() -> String) -> Result<bool> {
        let own = self.own.get_or_try_init(|| own_sid(tree, probe(), &self.known)).await?;
        let Some(own) = own else { return Ok(self.dropped(false)) };
        let allowed = self.allowed(own);
        let name = smb_client::tree::smb_path(path);
        let look =
            CreateRequest::new_file(&name, access::READ_CONTROL).disposition(Disposition::Open).sharing(share::ALL);
        let dacl_query = security_query(security_information::DACL);
        let [created, queried, _] = take(tree.smb().compound(&[&look, &dacl_query, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        let now = descriptor_of(queried)?;
        let want = with_lock_aces(now.dacl.as_deref(), &allowed, on);
        if now.dacl.as_ref() == Some(&want) {
            return Ok(true);
        }
        let encoded = SecurityDescriptor { dacl: Some(want), ..now }.encode_dacl().ok_or_else(too_large)?;
        let change = CreateRequest { desired_access: access::READ_CONTROL | access::WRITE_DAC, ..look };
        let set = SetInfoRequest { file_id: FileId::RELATED, info: SetFileInfo::Dacl(&encoded) };
        let [created, set, queried, _] =
            take(tree.smb().compound(&[&change, &set, &dacl_query, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        set.ok_or_status(&[])?;
        let after = descriptor_of(queried)?;
        let aces = after.dacl.as_deref().unwrap_or_default();
        Ok(self.dropped(match on {
            true => has_lock_aces(aces, &allowed),
            false => !aces.iter().any(is_lock_ace),
        }))
    }

    /// The accounts a lock set now allows: `own` and every other identity
    /// of this process known so far.
    fn allowed(&self, own: &Sid) -> Vec<Sid> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        let mut allowed = vec![own.clone()];
        allowed.extend(known.iter().filter(|s| *s != own).cloned());
        allowed
    }

    /// `kept`, saying the first time it is false that the share does not
    /// keep the lock's ACEs.
    fn dropped(&self, kept: bool) -> bool {
        if !kept && !self.dropped_said.swap(true, Ordering::Relaxed) {
            tracing::info!(
                "the share keeps no Windows ACLs (on Samba: vfs_acl_xattr), so locked versions are held on \
                 the share by their read-only mark alone"
            );
        }
        kept
    }
}

fn too_large() -> super::ShareError {
    smb_client::Error::InvalidArgument("a DACL too large to write back with the lock's entries".into()).into()
}

/// The security descriptor a security QUERY_INFO answered.
///
/// Errors: its NTSTATUS; a descriptor that does not decode.
fn descriptor_of(answer: smb_client::connection::Response) -> Result<SecurityDescriptor> {
    Ok(answer.ok_or_status(&[])?.body(|m| SecurityDescriptor::decode(&OutputBuffer::decode(m)?.0))?)
}

/// QUERY_INFO of the related handle's security descriptor parts `parts`.
fn security_query(parts: u32) -> QueryInfoRequest<'static> {
    QueryInfoRequest {
        info_type: info_type::SECURITY,
        class: 0,
        output_buffer_length: 65536,
        ea_names: &[],
        additional_information: parts,
        file_id: FileId::RELATED,
    }
}

/// The SID of the gateway's account for this identity: the owner of a
/// file it creates at `probe`, once a lock on that file is seen to leave
/// the gateway its rights (a share that gives new files another owner,
/// Samba's `inherit owner` say, would lock the gateway out); the file is
/// deleted after. `None`, said at WARN, where the owner fails that, and
/// `None` where the share answers no security descriptor. A SID found is
/// added to `known`.
///
/// Errors: the CREATE's NTSTATUS; the QUERY_INFO's, but for the ones of a
/// server without security descriptors.
async fn own_sid(tree: &Tree, probe: String, known: &std::sync::Mutex<Vec<Sid>>) -> Result<Option<Sid>> {
    let name = smb_client::tree::smb_path(&probe);
    let create = CreateRequest::new_file(&name, access::DELETE | access::READ_CONTROL | access::WRITE_DAC);
    let handle = tree.open(&create).await?;
    let id = handle.smb().id();
    let query =
        QueryInfoRequest { file_id: id, ..security_query(security_information::OWNER | security_information::DACL) };
    let found = async {
        let [queried] = take(tree.smb().compound(&[&query]).await?)?;
        let none =
            [NtStatus::STATUS_NOT_SUPPORTED, NtStatus::STATUS_INVALID_INFO_CLASS, NtStatus::STATUS_ACCESS_DENIED];
        if none.contains(&queried.status()) {
            return Ok(None);
        }
        let sd = descriptor_of(queried)?;
        let Some(owner) = sd.owner.clone() else { return Ok(None) };
        // The lock on the probe itself, then an open asking for what the
        // lock leaves the gateway.
        let dacl = with_lock_aces(sd.dacl.as_deref(), std::slice::from_ref(&owner), true);
        let encoded = SecurityDescriptor { dacl: Some(dacl), ..sd }.encode_dacl().ok_or_else(too_large)?;
        let [set] =
            take(tree.smb().compound(&[&SetInfoRequest { file_id: id, info: SetFileInfo::Dacl(&encoded) }]).await?)?;
        if set.ok_or_status(&[]).is_err() {
            return Ok(None);
        }
        let open = CreateRequest::new_file(&name, LOCK_MASK).disposition(Disposition::Open).sharing(share::ALL);
        let [reopened, _] = take(tree.smb().compound(&[&open, &CLOSE_RELATED]).await?)?;
        if reopened.status() != NtStatus::STATUS_SUCCESS {
            tracing::warn!(
                owner = %owner,
                status = ?reopened.status(),
                "the owner of the gateway's new files is not an account a lock can leave its rights, so locked \
                 versions are held on the share by their read-only mark alone"
            );
            return Ok(None);
        }
        Ok::<_, super::ShareError>(Some(owner))
    }
    .await;
    // The open made before the DACL changed keeps its DELETE.
    let _ = super::close_and_delete(handle).await;
    let found = found?;
    if let Some(sid) = &found {
        let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
        if !known.contains(sid) {
            known.push(sid.clone());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_aces_go_first_once_and_come_off_alone() {
        let own = Sid { authority: 5, sub_authorities: vec![21, 7, 1000] };
        let other = Sid { authority: 5, sub_authorities: vec![21, 7, 1001] };
        let theirs = vec![
            Ace::access(ace_type::ACCESS_ALLOWED, 0x001f_01ff, &own),
            Ace::access(ace_type::ACCESS_ALLOWED, 0x0012_00a9, &Sid::everyone()),
        ];
        let on = with_lock_aces(Some(&theirs), &[own.clone(), other.clone()], true);
        assert_eq!(on.len(), 6);
        assert!(has_lock_aces(&on, &[own.clone(), other.clone()]));
        assert_eq!(on[2].mask_and_sid(), Some((0x000d_0116, Sid::everyone())));
        assert_eq!(on[2].ace_type, ace_type::ACCESS_DENIED);
        // Set again by one identity: its entry first, the other's goes.
        let again = with_lock_aces(Some(&on), std::slice::from_ref(&own), true);
        assert_eq!(again.len(), 5);
        // Lifted by either, every entry of the lock's shape comes off.
        assert_eq!(with_lock_aces(Some(&on), std::slice::from_ref(&other), false), theirs);
        assert!(!has_lock_aces(&theirs, std::slice::from_ref(&own)));
    }

    #[test]
    fn a_file_without_a_dacl_stays_open_to_everyone_under_the_lock() {
        let own = Sid { authority: 5, sub_authorities: vec![21, 7, 1000] };
        let on = with_lock_aces(None, std::slice::from_ref(&own), true);
        let everyone_all = Ace::access(ace_type::ACCESS_ALLOWED, ALL_ACCESS, &Sid::everyone());
        assert_eq!(on.last(), Some(&everyone_all));
        assert_eq!(with_lock_aces(Some(&on), std::slice::from_ref(&own), false), vec![everyone_all]);
    }
}
