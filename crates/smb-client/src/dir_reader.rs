//! Directory reads: one QUERY_DIRECTORY answer at a time ([`DirReader`]),
//! so that a caller that keeps only some entries (a window of a large
//! directory) never holds the whole directory; a whole directory; and
//! whether one is empty, in one round trip. Every directory handle closes
//! itself if the read is abandoned between pages.

use smb_proto::create::{access, options, CloseRequest, CreateRequest, FileId};
use smb_proto::info::{class, decode_dir_entries, DirEntry, FileTimes};
use smb_proto::query::{OutputBuffer, QueryDirectoryRequest};
use smb_proto::NtStatus;

use crate::connection::Response;
use crate::error::Result;
use crate::file::Handle;
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

/// Whole-directory reads (on a [`DirReader`]), and the emptiness check.
impl Tree {
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
fn list_open(name: &str) -> CreateRequest<'_> {
    CreateRequest::open(name, access::FILE_LIST_DIRECTORY | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE)
        .options(options::DIRECTORY_FILE)
}

/// The first QUERY_DIRECTORY page of every entry, on the handle the CREATE
/// before it opened, of at most `output_buffer_length` bytes.
fn list_query(output_buffer_length: u32) -> QueryDirectoryRequest<'static> {
    QueryDirectoryRequest {
        class: class::FILE_ID_FULL_DIRECTORY_INFORMATION,
        flags: 0,
        file_id: FileId::RELATED,
        pattern: "*",
        output_buffer_length,
    }
}
