//! Opens that the object cache (`store::object_cache`) is built on: a file
//! held with a Read+Handle lease (MS-SMB2 2.2.13.2.10, 3.3.5.9.11) while
//! its metadata and small bytes are served from memory, and the open that
//! warns every holder, on every instance, before the file is renamed over.
//!
//! What Samba breaks and what it does not is measured in `docs/leases.md`:
//! a rename over a file or a delete of its name breaks no lease held
//! elsewhere, but an open whose access the holder's sharing refuses does.
//! So a holder shares only READ, and every writer opens the current file
//! for DELETE first ([`warn_holders`]); the holder's connection then closes
//! the handle and acknowledges ([`OnBreak::CloseFirst`]), and the writer's
//! open goes on.

use bytes::Bytes;
use smb_client::lease::{Lease, OnBreak};
use smb_client::{Handle, Tree};
use smb_proto::create::{access, options, share, CreateResponse};
use smb_proto::lease::state;

use super::requests::{delete_req, Create, CLOSE_RELATED, QFID};
use super::Result;

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
        self.lease.state() & HOLD == HOLD && self.handle.is_open() && !self.handle.tree().conn().is_poisoned()
    }
}

/// Opens the file at `path` to hold it: read data, attributes and EAs,
/// sharing only READ, not a directory, with a Read+Handle lease whose
/// Handle break closes the handle before it is acknowledged. Returns
/// `None` (the handle closed) if the server granted less than
/// Read+Handle.
///
/// Errors: the CREATE's NTSTATUS (not-found statuses,
/// STATUS_SHARING_VIOLATION while a writer holds the file for DELETE or
/// writing, STATUS_FILE_IS_A_DIRECTORY).
pub async fn hold(tree: &Tree, path: &str) -> Result<Option<Held>> {
    let req = Create::open(path, access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::FILE_READ_EA)
        .sharing(share::READ)
        .options(options::NON_DIRECTORY_FILE)
        .contexts(&QFID)
        .build();
    let (handle, lease) = tree.open_leased(&req, HOLD, OnBreak::CloseFirst).await?;
    if lease.state() & HOLD != HOLD {
        let _ = handle.close().await;
        return Ok(None);
    }
    Ok(Some(Held { handle, lease }))
}

/// Reads the first `len` bytes of a held file in one READ (`len` at most
/// the connection's largest READ). Returns them, fewer if the file is
/// shorter.
///
/// Errors: the READ's NTSTATUS (the handle was closed by a break).
pub async fn read_held(held: &Held, len: u32) -> Result<Bytes> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    let tree = held.handle.tree();
    Ok(tree.read(held.handle.id(), 0, len.min(tree.max_read())).await?)
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
pub async fn warn_holders(tree: &Tree, path: &str) -> Result<Handle> {
    Ok(tree.open(&delete_req(path, share::READ | share::WRITE)).await?)
}

/// A warning like [`warn_holders`] for a change already made in place (a
/// record rewritten), sharing everything, closed in the same compound: a
/// holder that read the file before the change loses its lease before
/// this returns. Best effort: a file that is gone or held for DELETE has
/// no holders to warn.
pub async fn warn_holders_after(tree: &Tree, path: &str) {
    let _ = tree.compound(&[&delete_req(path, share::ALL), &CLOSE_RELATED]).await;
}
