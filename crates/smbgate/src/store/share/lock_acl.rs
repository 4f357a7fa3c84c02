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

use smb_proto::create::{access, options, share, CreateRequest, Disposition, FileId};
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

/// The ACEs a lock puts at the front of a DACL, in the order they are
/// judged: the gateway's rights come before the DENY that would take
/// them, and the owner keeps only READ_CONTROL of its own.
fn lock_aces(own: &Sid) -> [Ace; 3] {
    [
        Ace::access(ace_type::ACCESS_ALLOWED, LOCK_MASK, own),
        Ace::access(ace_type::ACCESS_DENIED, LOCK_MASK, &Sid::everyone()),
        Ace::access(ace_type::ACCESS_ALLOWED, access::READ_CONTROL, &Sid::owner_rights()),
    ]
}

/// `dacl` with the lock's ACEs at its front (`on`) or with none of them.
pub fn with_lock_aces(dacl: &[Ace], own: &Sid, on: bool) -> Vec<Ace> {
    let ours = lock_aces(own);
    let rest = dacl.iter().filter(|a| !ours.contains(a)).cloned();
    match on {
        true => ours.iter().cloned().chain(rest).collect(),
        false => rest.collect(),
    }
}

/// True if `dacl` begins with the lock's ACEs.
fn has_lock_aces(dacl: &[Ace], own: &Sid) -> bool {
    dacl.starts_with(&lock_aces(own))
}

/// The gateway's side of the lock's ACEs for one identity: its account's
/// SID, learned once from a file it creates, and whether the share was
/// seen to drop the ACEs (said once in the log).
#[derive(Default)]
pub struct LockAcl {
    /// `None` inside: the share answers no owner, so keeps no ACLs.
    own: tokio::sync::OnceCell<Option<Sid>>,
    dropped_said: AtomicBool,
}

impl LockAcl {
    /// Puts the lock's ACEs on the file at `path` (`on`) or takes them off.
    /// `probe` names a fresh temp file for learning the gateway's SID the
    /// first time. Returns false if the share keeps no such DACL (said at
    /// INFO the first time).
    ///
    /// Errors: the CREATE's, QUERY_INFO's or SET_INFO's NTSTATUS (for
    /// example ACCESS_DENIED for a file whose DACL the gateway may not
    /// change).
    pub async fn set(&self, tree: &Tree, path: &str, on: bool, probe: impl FnOnce() -> String) -> Result<bool> {
        let own = self.own.get_or_try_init(|| own_sid(tree, probe())).await?;
        let Some(own) = own else { return Ok(self.dropped(false)) };
        let name = smb_client::tree::smb_path(path);
        let open = CreateRequest::new_file(&name, access::READ_CONTROL | access::WRITE_DAC)
            .disposition(Disposition::Open)
            .sharing(share::ALL);
        let dacl_query = security_query(security_information::DACL);
        let [created, queried, _] = take(tree.smb().compound(&[&open, &dacl_query, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        let now = descriptor_of(queried)?;
        let aces = now.dacl.clone().unwrap_or_default();
        let want = with_lock_aces(&aces, own, on);
        if want == aces {
            return Ok(true);
        }
        let encoded = SecurityDescriptor { dacl: Some(want), ..now }.encode_dacl();
        let set = SetInfoRequest { file_id: FileId::RELATED, info: SetFileInfo::Dacl(&encoded) };
        let [created, set, queried, _] = take(tree.smb().compound(&[&open, &set, &dacl_query, &CLOSE_RELATED]).await?)?;
        created.ok_or_status(&[])?;
        set.ok_or_status(&[])?;
        let after = descriptor_of(queried)?;
        Ok(self.dropped(has_lock_aces(after.dacl.as_deref().unwrap_or_default(), own) == on))
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

/// The owner of a file the gateway creates at `probe` (and deletes at
/// once): the SID the server gives the gateway's account. `None` if the
/// share answers no security descriptor.
///
/// Errors: the CREATE's NTSTATUS; the QUERY_INFO's, but for the ones of a
/// server without security descriptors.
async fn own_sid(tree: &Tree, probe: String) -> Result<Option<Sid>> {
    let name = smb_client::tree::smb_path(&probe);
    let create = CreateRequest::new_file(&name, access::DELETE | access::READ_CONTROL)
        .disposition(Disposition::Create)
        .options(options::DELETE_ON_CLOSE);
    let [created, queried, _] =
        take(tree.smb().compound(&[&create, &security_query(security_information::OWNER), &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    let none = [NtStatus::STATUS_NOT_SUPPORTED, NtStatus::STATUS_INVALID_INFO_CLASS, NtStatus::STATUS_ACCESS_DENIED];
    if none.contains(&queried.status()) {
        return Ok(None);
    }
    Ok(descriptor_of(queried)?.owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_aces_go_first_once_and_come_off_alone() {
        let own = Sid { authority: 5, sub_authorities: vec![21, 7, 1000] };
        let theirs = vec![
            Ace::access(ace_type::ACCESS_ALLOWED, 0x001f_01ff, &own),
            Ace::access(ace_type::ACCESS_ALLOWED, 0x0012_00a9, &Sid::everyone()),
        ];
        let on = with_lock_aces(&theirs, &own, true);
        assert_eq!(on.len(), 5);
        assert!(has_lock_aces(&on, &own));
        assert_eq!(on[1].mask_and_sid(), Some((0x000d_0116, Sid::everyone())));
        assert_eq!(on[1].ace_type, ace_type::ACCESS_DENIED);
        assert_eq!(with_lock_aces(&on, &own, true), on);
        assert_eq!(with_lock_aces(&on, &own, false), theirs);
        assert!(!has_lock_aces(&theirs, &own));
    }
}
