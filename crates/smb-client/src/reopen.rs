//! What it takes to open a file again after its handle's connection was
//! lost: kept by the [`crate::file::Handle`] of a durable open and used by
//! [`crate::tree::Tree::reopen`] (see `durable`). Apart from both, so that a
//! handle can carry it without depending on the durable-open logic.

use smb_proto::create::{oplock, CreateContext, CreateRequest, Disposition, FileId};

use crate::connection::WeakConnection;

/// What it takes to open a file again after its handle's connection was
/// lost: the open's parameters, its durable CreateGuid if the server
/// granted one, and the file's on-disk id. From [`crate::file::Handle::reopen_info`].
#[derive(Clone)]
pub struct Reopen {
    pub(crate) name: String,
    pub(crate) desired_access: u32,
    pub(crate) share_access: u32,
    pub(crate) file_attributes: u32,
    pub(crate) options: u32,
    pub(crate) file_id: FileId,
    /// The CreateGuid, if the handle was granted durability.
    pub(crate) durable: Option<[u8; 16]>,
    pub(crate) on_disk_id: Option<u64>,
    /// The connection the handle lives on, to read the oplock it still
    /// holds there; weak, so it never keeps a dead connection alive.
    pub(crate) was_on: WeakConnection,
}

impl std::fmt::Debug for Reopen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reopen")
            .field("name", &self.name)
            .field("file_id", &self.file_id)
            .field("durable", &self.durable.is_some())
            .field("on_disk_id", &self.on_disk_id)
            .finish()
    }
}

impl Reopen {
    /// The share-relative path the file was opened at.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The on-disk file id the first open reported (QFid), if it did; a
    /// reclaimed handle's own answer carries none.
    pub fn on_disk_id(&self) -> Option<u64> {
        self.on_disk_id
    }

    /// True if the server can still hold the handle after a disconnect:
    /// it was granted durability and its batch oplock was never broken.
    pub fn may_be_reclaimed(&self) -> bool {
        self.durable.is_some() && self.was_on.oplock_level(self.file_id) == Some(oplock::BATCH)
    }

    pub(crate) fn request<'a>(&'a self, contexts: &'a [CreateContext<'a>]) -> CreateRequest<'a> {
        CreateRequest {
            name: &self.name,
            oplock_level: oplock::BATCH,
            desired_access: self.desired_access,
            file_attributes: self.file_attributes,
            share_access: self.share_access,
            disposition: Disposition::Open,
            options: self.options,
            contexts,
        }
    }
}
