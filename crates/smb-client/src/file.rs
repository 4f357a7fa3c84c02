//! An open file or directory that closes itself (failure class 26).
//!
//! A [`Handle`] owns one FileId on the connection that opened it. Close it
//! with [`Handle::close`] to learn the CLOSE's answer. Otherwise dropping
//! it (an early return, an error between two steps, a request future
//! dropped because the client hung up) queues the CLOSE on the
//! connection's reaper, without blocking.

use smb_proto::create::{
    access, options, share, CloseRequest, CloseResponse, CreateRequest, CreateResponse, Disposition, FileId,
};
use smb_proto::info::{class, decode_dir_entries, DirEntry, FileTimes};
use smb_proto::query::{OutputBuffer, QueryDirectoryRequest};
use smb_proto::NtStatus;

use crate::connection::Response;
use crate::dir_reader::DirReader;
use crate::error::Result;
use crate::reopen::Reopen;
use crate::tree::{smb_path, Tree};

/// An open handle on one tree; closes itself on drop.
pub struct Handle {
    tree: Tree,
    create: CreateResponse,
    /// False once closed (or closed by a compound that held it).
    open: bool,
    /// How to open it again after its connection is lost; set for handles
    /// opened with [`Tree::open_durable`].
    reopen: Option<Box<Reopen>>,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle").field("file_id", &self.create.file_id).field("open", &self.open).finish()
    }
}

impl Handle {
    /// Takes ownership of the handle a CREATE answer opened on `tree`.
    ///
    /// Errors: the CREATE failed ([`crate::Error::Status`] with its
    /// NTSTATUS) or its answer does not decode.
    pub fn from_response(tree: &Tree, r: Response) -> Result<Handle> {
        let create = r.into_create()?;
        Ok(Handle { tree: tree.clone(), create, open: true, reopen: None })
    }

    /// A handle that [`Tree::reopen`] can open again on another connection.
    pub(crate) fn with_reopen(mut self, reopen: Reopen) -> Handle {
        self.reopen = Some(Box::new(reopen));
        self
    }

    /// What [`Tree::reopen`] needs to open this file again after this
    /// handle's connection is lost; `None` unless it was opened with
    /// [`Tree::open_durable`] (or reopened).
    pub fn reopen_info(&self) -> Option<Reopen> {
        self.reopen.as_deref().cloned()
    }

    /// The FileId, for requests on this handle.
    pub fn id(&self) -> FileId {
        self.create.file_id
    }

    /// What the CREATE answered: times, size, attributes, contexts.
    pub fn info(&self) -> &CreateResponse {
        &self.create
    }

    /// The tree, and so the connection, the handle lives on.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// CLOSE with post-query attributes (MS-SMB2 2.2.15), awaited. If this
    /// future is dropped before the answer, the reaper closes the handle
    /// again (a second CLOSE of a closed FileId only fails).
    ///
    /// Errors: the CLOSE's NTSTATUS, or a connection error (the server then
    /// closes the handle with the session).
    pub async fn close(mut self) -> Result<CloseResponse> {
        let r = self.tree.close(self.create.file_id).await;
        self.open = false;
        if r.is_ok() {
            self.release_oplock();
        }
        r
    }

    /// The handle was closed by a compound that also held a CLOSE of it
    /// (`FileId::RELATED`) or by the server: forget it without a CLOSE.
    pub fn closed_elsewhere(mut self) {
        self.open = false;
        self.release_oplock();
    }

    /// Forgets the oplock a durable open recorded on its connection (only
    /// those record one, so other handles skip the connection's lock).
    fn release_oplock(&self) {
        if self.reopen.is_some() {
            self.tree.conn().inner.oplocks.release(self.create.file_id);
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.open {
            // On a lost connection the oplock held is what a reopen needs
            // to know (durable::Reopen::may_be_reclaimed): keep it.
            if !self.tree.conn().is_poisoned() {
                self.release_oplock();
            }
            self.tree.conn().close_later(self.tree.tree_id(), self.create.file_id, self.tree.is_encrypted());
        }
    }
}

/// The operations of a tree that hold a [`Handle`]: an open that closes
/// itself, and directory reads whose handle closes itself if the read is
/// abandoned between pages.
impl Tree {
    /// CREATE (MS-SMB2 2.2.13) returning a [`Handle`] that closes itself
    /// when dropped.
    ///
    /// Errors: as [`Tree::create`].
    pub async fn open(&self, req: &CreateRequest<'_>) -> Result<Handle> {
        Handle::from_response(self, self.call(req).await?)
    }

    /// Lists a directory with QUERY_DIRECTORY (FileIdFullDirectoryInformation),
    /// `.` and `..` excluded. The first page comes in the same round trip as
    /// the CREATE; later pages reuse the handle (resumable enumeration).
    pub async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>> {
        Ok(self.list_dir_timed(path).await?.1)
    }

    /// [`Tree::list_dir`], with the directory's own times as its CREATE
    /// answered them, before any entry was read: a later [`Tree::stat`]
    /// whose LastWriteTime and ChangeTime are the same says that no entry
    /// was added, removed or renamed since (as far as the server's
    /// timestamp resolution can tell).
    pub async fn list_dir_timed(&self, path: &str) -> Result<(FileTimes, Vec<DirEntry>)> {
        let mut reader = DirReader::open(self, path).await?;
        let times = reader.times();
        let mut entries = Vec::new();
        // Dropping the reader on an error closes its handle later.
        while let Some(page) = reader.next_page().await? {
            entries.extend(page);
        }
        reader.close().await?;
        Ok((times, entries))
    }

    /// Whether the directory `path` holds no entry but `.` and `..`:
    /// CREATE + one QUERY_DIRECTORY page of at most 4 KiB + CLOSE, in one
    /// round trip, so the answer costs the same for a directory of a
    /// million entries. 4 KiB holds `.`, `..` and at least one entry of
    /// the longest name (255 UTF-16 units), so a page with nothing else
    /// means nothing else exists.
    ///
    /// Errors: the CREATE's NTSTATUS (STATUS_NOT_A_DIRECTORY for a file,
    /// the not-found ones) or the QUERY_DIRECTORY's.
    pub async fn is_empty_dir(&self, path: &str) -> Result<bool> {
        let name = smb_path(path);
        let open = list_open(&name);
        let q = list_query(4096);
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        let rs = self.compound(&[&open, &q, &close]).await?;
        let mut rs = rs.into_iter();
        let (created, page) = (rs.next().expect("three responses"), rs.next().expect("three responses"));
        created.ok_or_status(&[])?;
        if page.status() == NtStatus::STATUS_NO_MORE_FILES {
            return Ok(true);
        }
        let mut others = false;
        page.ok_or_status(&[])?
            .body(|m| decode_dir_entries(&OutputBuffer::decode(m)?.0, |e| others |= e.name != "." && e.name != ".."))?;
        Ok(!others)
    }
}

/// The CREATE that opens the directory `name` to list it.
pub(crate) fn list_open(name: &str) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::FILE_LIST_DIRECTORY | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
        file_attributes: 0,
        share_access: share::ALL,
        disposition: Disposition::Open,
        options: options::DIRECTORY_FILE,
        contexts: &[],
    }
}

/// The first QUERY_DIRECTORY page of every entry, on the handle the CREATE
/// before it opened, of at most `output_buffer_length` bytes.
pub(crate) fn list_query(output_buffer_length: u32) -> QueryDirectoryRequest<'static> {
    QueryDirectoryRequest {
        class: class::FILE_ID_FULL_DIRECTORY_INFORMATION,
        flags: 0,
        file_id: FileId::RELATED,
        pattern: "*",
        output_buffer_length,
    }
}
