//! Opens that the object cache (`store::object_cache`) is built on: a file
//! held with a Read+Handle lease (MS-SMB2 2.2.13.2.10, 3.3.5.9.11) while
//! its metadata and small bytes are served from memory, and the open that
//! warns every holder, on every instance, before the file is renamed over.
//!
//! What Samba breaks and what it does not is measured in `docs/leases.md`:
//! a rename over a file or a delete of its name breaks no lease held
//! elsewhere, but an open whose access the holder's sharing refuses does.
//! So a holder shares only READ, and every writer opens the current file
//! for DELETE first ([`open_breaking_leases`]); the holder's connection then closes
//! the handle and acknowledges ([`OnBreak::CloseFirst`]), and the writer's
//! open goes on.

use super::{Handle, Tree};
use bytes::Bytes;
use smb_client::lease::{Lease, OnBreak};
use smb_proto::create::{access, options, share, CreateRequest, CreateResponse, FileId};
use smb_proto::io::{ReadRequest, ReadResponse};
use smb_proto::lease::state;
use smb_proto::{NtStatus, Request};

use super::lookup::{decode_meta, decode_name};
use super::records::{FileKey, Records};
use super::requests::{delete_req, meta_query, CLOSE_RELATED, NAME_QUERY, QFID};
use super::spill::unspill_meta;
use super::Result;
use crate::store::meta::{ObjectMeta, META_EA};

/// What a cache holder needs of its lease: Read (no one writes the file)
/// and Handle (no one renames it, deletes it or opens it for writing
/// without the holder closing first).
pub const HOLD: u32 = state::READ | state::HANDLE;

/// A file held open with a Read+Handle lease, sharing only READ.
pub struct Held {
    /// The open; closed by its connection when the lease loses Handle.
    pub handle: Handle,
    /// What the lease still allows.
    pub lease: Lease,
}

impl Held {
    /// What the CREATE answered (times, size, on-disk id).
    pub fn created(&self) -> &CreateResponse {
        self.handle.info()
    }

    /// True while the lease allows Read+Handle caching, the handle is
    /// open and its connection is up: what the holder saw is still what
    /// the file is.
    pub fn holds(&self) -> bool {
        self.lease.state() & HOLD == HOLD
            && self.handle.smb().is_open()
            && !self.handle.smb().tree().conn().is_poisoned()
    }
}

/// The CREATE of a holder of `path`: read data, attributes and EAs,
/// sharing only READ, not a directory, with the on-disk id.
fn hold_req(path: &str) -> CreateRequest<'_> {
    CreateRequest::open(path, access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA)
        .sharing(share::READ)
        .options(options::NON_DIRECTORY_FILE)
        .contexts(&QFID)
}

/// A holder from an open that asked for [`HOLD`]; `None` (the handle
/// closed) if the server granted less.
async fn held(handle: Handle, lease: Lease) -> Option<Held> {
    if lease.state() & HOLD != HOLD {
        let _ = handle.close().await;
        return None;
    }
    Some(Held { handle, lease })
}

/// What [`hold_with_meta`] found of the file it holds (`H`: the holder,
/// [`Held`] on the live share).
pub struct HeldLook<H = Held> {
    /// The holder (its CREATE answer is what the file was when held).
    pub held: H,
    /// Our record (EA), if it is there and written for this file.
    pub meta: Option<ObjectMeta>,
    /// The file's first bytes, up to the length asked (fewer if it is
    /// shorter); `None` if the READ failed.
    pub data: Option<Bytes>,
    /// The on-disk path, if asked and the server gave it.
    pub on_disk: Option<String>,
}

/// Holds the file at `path` ([`hold_req`]) with a Read+Handle lease whose
/// Handle break closes the handle before it is acknowledged and, in the
/// same compound on the held handle, reads our record (an EA), its first
/// `read` bytes (none if 0; at most the connection's largest READ) and,
/// with `name`, its on-disk path: one round trip. What the compound read is what the file
/// is while the lease holds, since the lease was granted before any of it
/// was read. Only for records kept in EAs. Returns `None` (closed) if the
/// server granted less than Read+Handle.
///
/// Errors: the CREATE's NTSTATUS (not-found statuses,
/// STATUS_SHARING_VIOLATION while a writer holds the file for DELETE or
/// writing, STATUS_FILE_IS_A_DIRECTORY); an answer that does not decode.
pub async fn hold_with_meta(tree: &Tree, rec: &Records, path: &str, read: u32, name: bool) -> Result<Option<HeldLook>> {
    let req = hold_req(path);
    let leased = tree.smb().lease_request(&req, HOLD, OnBreak::CloseFirst);
    let names = [META_EA];
    let q = meta_query(&names);
    let r = ReadRequest { file_id: FileId::RELATED, length: read.min(tree.max_read()), offset: 0, minimum_count: 0 };
    let answers = {
        let create = leased.request();
        let mut chain: Vec<&dyn Request> = vec![&create, &q];
        if read > 0 {
            chain.push(&r);
        }
        if name {
            chain.push(&NAME_QUERY);
        }
        tree.smb().compound(&chain).await?
    };
    let mut rs = answers.into_iter();
    let handle = smb_client::Handle::from_response(tree.smb(), rs.next().expect("one answer per request"))?;
    let (handle, lease) = leased.opened(handle).await?;
    let handle = Handle::of(handle);
    let Some(held) = held(handle, lease).await else { return Ok(None) };
    let meta = match rs.next().and_then(|a| decode_meta(&a, held.created())) {
        Some(meta) => Some(unspill_meta(rec, tree, FileKey::of(held.created()), meta).await?),
        None => None,
    };
    let data = match (read > 0).then(|| rs.next()).flatten() {
        Some(a) if a.status() == NtStatus::STATUS_SUCCESS => {
            let data = a.body(ReadResponse::decode)?.data;
            smb_client::tree::check_read_len(data.len(), r.length)?;
            Some(data)
        }
        Some(a) if a.status() == NtStatus::STATUS_END_OF_FILE => Some(Bytes::new()),
        _ => None,
    };
    let on_disk = match rs.next() {
        Some(a) if name => decode_name(&a)?,
        _ => None,
    };
    Ok(Some(HeldLook { held, meta, data, on_disk }))
}

/// Warns every holder of the file at `path` (on any connection, of any
/// instance) that it is about to be replaced or removed: opens it for
/// DELETE and read attributes, sharing READ and WRITE only. A holder's
/// sharing refuses that open, so the server breaks each holder's Handle
/// caching and waits for the holder to close. The open is also exclusive
/// among warnings (neither shares DELETE with the other): while it is
/// held, no holder comes back and no other warned writer replaces the
/// file, so the file a writer renames over is the one it warned about.
/// Keep it until the rename is done.
///
/// The open must not be on the connection that renames over `path`:
/// Samba refuses a rename over a file open in the same connection.
///
/// Errors: the CREATE's NTSTATUS: not-found statuses when nothing is at
/// `path` (the writer must then publish without replacing, so that it
/// cannot replace a file that appears meanwhile unwarned),
/// STATUS_SHARING_VIOLATION while another writer warns or holds the file
/// for DELETE, STATUS_FILE_IS_A_DIRECTORY.
pub async fn open_breaking_leases(tree: &Tree, path: &str) -> Result<Handle> {
    Ok(tree.open(&delete_req(path, share::READ | share::WRITE)).await?)
}

/// A warning like [`open_breaking_leases`] for a change already made in place (a
/// record rewritten), sharing everything, closed in the same compound: a
/// holder that read the file before the change loses its lease before
/// this returns. Best effort: a file that is gone or held for DELETE has
/// no holders to warn.
pub async fn break_leases_after_change(tree: &Tree, path: &str) {
    let _ = tree.smb().compound(&[&delete_req(path, share::ALL), &CLOSE_RELATED]).await;
}
