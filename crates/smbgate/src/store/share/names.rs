//! Operations on a name that the store makes without holding a handle:
//! stat, make a directory, remove, list a directory, read or write a small
//! file whole, and the server-side copy between two open files. They are
//! here, not called on the tree by the rules above, so that every open,
//! rename and delete the gateway makes passes through the share layer
//! (what a cache of open files must see).

use super::Result;
use super::{Handle, Tree};
use bytes::Bytes;
use smb_proto::create::{CloseResponse, CreateResponse};
use smb_proto::info::{DirEntry, FileTimes};

/// CREATE + CLOSE of `path`: its times, size and attributes.
///
/// Errors: the CREATE's NTSTATUS (see [`super::Failure`]).
pub async fn stat(tree: &Tree, path: &str) -> Result<FileTimes> {
    tree.smb().stat(path).await.map_err(Into::into)
}

/// Makes the directory `path`; its parent must exist.
///
/// Errors: [`super::Failure::Collision`] if the name is taken,
/// [`super::Failure::PathNotFound`] if the parent is missing.
pub async fn mkdir(tree: &Tree, path: &str) -> Result<()> {
    tree.smb().mkdir(path).await.map_err(Into::into)
}

/// Removes the file, or with `directory` the empty directory, at `path`.
///
/// Errors: [`super::Failure::NotEmpty`] for a directory with entries;
/// not-found and sharing failures as the server answers them.
pub async fn delete(tree: &Tree, path: &str, directory: bool) -> Result<()> {
    tree.smb().delete(path, directory).await.map_err(Into::into)
}

/// The entries of the directory `path`, `.` and `..` left out.
///
/// Errors: the CREATE's or QUERY_DIRECTORY's NTSTATUS.
pub async fn list_dir(tree: &Tree, path: &str) -> Result<Vec<DirEntry>> {
    tree.smb().list_dir(path).await.map_err(Into::into)
}

/// Whether the directory `path` is empty, in one round trip however
/// many entries it holds.
///
/// Errors: not-found ones (a file there: STATUS_NOT_A_DIRECTORY), and the
/// server's other refusals.
pub async fn is_empty_dir(tree: &Tree, path: &str) -> Result<bool> {
    tree.smb().is_empty_dir(path).await.map_err(Into::into)
}

/// A directory read one QUERY_DIRECTORY answer at a time, so that a
/// listing keeps only what it needs of a large directory.
pub struct DirReader(smb_client::dir_reader::DirReader);

impl DirReader {
    /// Opens the directory `path` and reads its first page, in one round
    /// trip.
    ///
    /// Errors: the CREATE's NTSTATUS (not-found ones for a missing
    /// directory or a file).
    pub async fn open(tree: &Tree, path: &str) -> Result<DirReader> {
        Ok(DirReader(smb_client::dir_reader::DirReader::open(tree.smb(), path).await?))
    }

    /// The directory's times as its open answered them, before any entry
    /// was read (a later [`stat`] with the same times says nothing
    /// changed in it).
    pub fn times(&self) -> FileTimes {
        self.0.times()
    }

    /// The next page of entries (`.` and `..` left out), or `None` at the
    /// end.
    ///
    /// Errors: the QUERY_DIRECTORY's NTSTATUS, an answer that does not
    /// decode.
    pub async fn next_page(&mut self) -> Result<Option<Vec<DirEntry>>> {
        self.0.next_page().await.map_err(Into::into)
    }

    /// Closes the directory.
    ///
    /// Errors: the CLOSE's NTSTATUS or a connection error.
    pub async fn close(self) -> Result<()> {
        self.0.close().await.map_err(Into::into)
    }
}

/// CREATE + READ + CLOSE of the small file at `path`: what its open
/// answered and up to `max_len` bytes of it.
///
/// Errors: the CREATE's or READ's NTSTATUS.
pub async fn read_small(tree: &Tree, path: &str, max_len: u32) -> Result<(CreateResponse, Bytes)> {
    tree.smb().read_small(path, max_len).await.map_err(Into::into)
}

/// CREATE (over any file there) + WRITE + CLOSE: `data` as the whole file
/// at `path`. Returns what the CLOSE answered (its times).
///
/// Errors: the NTSTATUS of a step.
pub async fn write_small(tree: &Tree, path: &str, data: &[u8]) -> Result<CloseResponse> {
    tree.smb().write_small(path, data, &[]).await.map_err(Into::into)
}

/// Server-side copy (FSCTL_SRV_COPYCHUNK_WRITE) of `len` bytes from `src`
/// at `src_offset` to `dst` at `dst_offset`, both open on `tree`'s
/// connection. Returns the bytes the server reports copied.
///
/// Errors: the IOCTL's NTSTATUS.
pub async fn copy_chunks(
    tree: &Tree,
    src: &Handle,
    src_offset: u64,
    dst: &Handle,
    dst_offset: u64,
    len: u64,
) -> Result<u64> {
    tree.smb().copy_chunks(src.smb().id(), src_offset, dst.smb().id(), dst_offset, len).await.map_err(Into::into)
}
