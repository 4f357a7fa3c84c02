//! A directory read one QUERY_DIRECTORY answer at a time, so that a caller
//! that keeps only some entries (a window of a large directory) never holds
//! the whole directory.

use smb_proto::info::{decode_dir_entries, DirEntry, FileTimes};
use smb_proto::query::{OutputBuffer, QueryDirectoryRequest};
use smb_proto::NtStatus;

use crate::connection::Response;
use crate::error::Result;
use crate::file::{list_open, list_query, Handle};
use crate::tree::{smb_path, Tree};

/// An open enumeration of one directory (MS-SMB2 3.2.4.17): the handle,
/// the directory's own times as the CREATE answered them, and the answer
/// not yet handed out. The handle closes itself if the reader is dropped
/// part-way (failure class 26).
pub struct DirReader {
    dir: Option<Handle>,
    times: FileTimes,
    query: QueryDirectoryRequest<'static>,
    /// The first answer, which came in the CREATE's compound.
    first: Option<Response>,
}

impl DirReader {
    /// Opens `path` and reads its first page, in one round trip (CREATE +
    /// QUERY_DIRECTORY of FileIdFullDirectoryInformation, pages of at most
    /// the negotiated MaxTransactSize or 1 MiB).
    ///
    /// Errors: the CREATE's NTSTATUS (not-found ones, STATUS_NOT_A_DIRECTORY).
    pub async fn open(tree: &Tree, path: &str) -> Result<DirReader> {
        let name = smb_path(path);
        let open = list_open(&name);
        let query = list_query(tree.session().negotiated.max_transact_size.min(1 << 20));
        let mut rs = tree.compound(&[&open, &query]).await?.into_iter();
        let dir = Handle::from_response(tree, rs.next().expect("two responses"))?;
        let times = dir.info().times;
        let query = QueryDirectoryRequest { file_id: dir.id(), ..query };
        Ok(DirReader { dir: Some(dir), times, query, first: rs.next() })
    }

    /// The directory's times as its CREATE answered them, before any entry
    /// was read: a later stat with the same LastWriteTime and ChangeTime
    /// says no entry came or went since.
    pub fn times(&self) -> FileTimes {
        self.times
    }

    /// The next page of entries, `.` and `..` left out (a page may be
    /// empty), or `None` once STATUS_NO_MORE_FILES ends the enumeration.
    ///
    /// Errors: the QUERY_DIRECTORY's NTSTATUS, an answer that does not
    /// decode (entries that overlap or run past the buffer).
    pub async fn next_page(&mut self) -> Result<Option<Vec<DirEntry>>> {
        let Some(dir) = &self.dir else { return Ok(None) };
        let page = match self.first.take() {
            Some(first) => first,
            None => dir.tree().call(&self.query).await?,
        };
        if page.status() == NtStatus::STATUS_NO_MORE_FILES {
            return Ok(None);
        }
        let mut entries = Vec::new();
        page.ok_or_status(&[])?.body(|m| {
            decode_dir_entries(&OutputBuffer::decode(m)?.0, |e| {
                if e.name != "." && e.name != ".." {
                    entries.push(e);
                }
            })
        })?;
        Ok(Some(entries))
    }

    /// Closes the directory handle and awaits the CLOSE.
    ///
    /// Errors: the CLOSE's NTSTATUS or a connection error.
    pub async fn close(mut self) -> Result<()> {
        match self.dir.take() {
            Some(dir) => dir.close().await.map(drop),
            None => Ok(()),
        }
    }
}
