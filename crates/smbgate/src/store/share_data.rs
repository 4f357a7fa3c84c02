//! The share operations of the data path, as a trait beside
//! [`ShareLookups`]: files opened to read, write or copy, their bytes read
//! whole or copied by the server, temp files, a multipart upload's files
//! (its data file, the claims of its parts) and the named records they
//! carry (a part's, an upload's), what an object's lock or a bucket's
//! volume needs, and watches of directories' changes. Multipart uploads, server-side copies, a GET's body and the
//! lock of a version reach the share through it; the in-memory share implements it
//! with the bytes of its files (`memory_data.rs`). Each operation means
//! what the share layer's function of the same name means.

use std::future::Future;
use std::ops::Range;

use super::share::{self, DirWatch, FileTimes, FullEa, Handle, Result, ShareError, TempFile, WatchError};
use super::share_lookups::ShareLookups;
use super::share_ops::LiveShare;
use bytes::Bytes;

/// The data path of the share (see the module notes). Paths are
/// share-relative, `\`-separated; offsets and lengths are in bytes.
pub(crate) trait ShareData: ShareLookups {
    /// A range of a file being read, piece by piece, in order.
    type RangeReader: Send;

    /// A directory being watched for changes.
    type Watch: Send;

    /// Starts reading `range` of `file`, keeping up to `in_flight` bytes
    /// of READs outstanding (`share::read_range`); the pieces come from
    /// [`ShareData::next_piece`].
    ///
    /// Errors: the range overflows.
    fn read_range(&self, file: &Self::Handle, range: Range<u64>, in_flight: usize) -> Result<Self::RangeReader>;

    /// The next piece of `reader`, or `None` once its range (or the file)
    /// has ended.
    ///
    /// Errors: a READ's NTSTATUS; the reader is then finished.
    fn next_piece(&self, reader: &mut Self::RangeReader) -> impl Future<Output = Result<Option<Bytes>>> + Send;

    /// Opens `path` to read it, sharing everything (`share::open_read`).
    ///
    /// Errors: the CREATE's NTSTATUS.
    fn open_read(&self, path: &str) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// The times of the file `file` holds now (`share::query_times`).
    ///
    /// Errors: the QUERY_INFO's NTSTATUS (the open is gone).
    fn query_times(&self, file: &Self::Handle) -> impl Future<Output = Result<FileTimes>> + Send;

    /// Copies `len` bytes of `src` at `src_offset` to `dst` at
    /// `dst_offset` on the server (`share::copy_chunks`). Returns the bytes
    /// copied.
    ///
    /// Errors: the IOCTL's NTSTATUS.
    fn copy_chunks(
        &self,
        src: &Self::Handle,
        src_offset: u64,
        dst: &Self::Handle,
        dst_offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// Truncates or extends `file` to `size` bytes (`share::set_end_of_file`).
    ///
    /// Errors: the SET_INFO's NTSTATUS.
    fn set_end_of_file(&self, file: &Self::Handle, size: u64) -> impl Future<Output = Result<()>> + Send;

    /// Reads `len` bytes of `file` from its start, up to `in_flight`
    /// bytes at a time, handing each piece to `sink` in order
    /// (`share::read_all`). Returns the bytes read (fewer at the file's end).
    ///
    /// Errors: the READs' NTSTATUS.
    fn read_all(
        &self,
        file: &Self::Handle,
        len: u64,
        in_flight: usize,
        sink: impl FnMut(Bytes) + Send,
    ) -> impl Future<Output = Result<u64>> + Send;

    /// The bytes of `range` of `file`, read up to `in_flight` bytes at a
    /// time (`share::read_range_whole`). Returns them and their count.
    ///
    /// Errors: the READs' NTSTATUS.
    fn read_range_whole(
        &self,
        file: &Self::Handle,
        range: Range<u64>,
        in_flight: usize,
    ) -> impl Future<Output = Result<(Vec<Bytes>, u64)>> + Send;

    /// Creates the temp file `path`, open to be written and published
    /// (`share::create_temp`).
    ///
    /// Errors: the CREATE's NTSTATUS.
    fn create_temp(&self, path: &str) -> impl Future<Output = Result<Self::Temp>> + Send;

    /// Creates the temp file `path` with the records `records` and writes
    /// `body` into it, in one round trip (`share::create_temp_and_write`).
    /// Returns it and the bytes written.
    ///
    /// Errors: the CREATE's or WRITE's NTSTATUS (nothing left behind).
    fn write_temp_with_records(
        &self,
        path: &str,
        records: &[FullEa],
        body: &[u8],
    ) -> impl Future<Output = Result<(Self::Temp, u32)>> + Send;

    /// Renames the temp file `temp` to `target` (over a file there if
    /// `replace`) and closes it, in one round trip
    /// (`share::publish_and_close`).
    ///
    /// Errors: the rename's failure, with the temp file if it is still
    /// open to be published another way.
    fn publish_or_keep(
        &self,
        temp: Self::Temp,
        target: &str,
        replace: bool,
    ) -> impl Future<Output = std::result::Result<(), (ShareError, Option<Self::Temp>)>> + Send;

    /// Sets the records `records` (name and value; an empty value removes
    /// one) on `file` at `path` (`share::set_eas`).
    ///
    /// Errors: the SET_INFO's NTSTATUS; no room for them.
    fn set_records(
        &self,
        file: &Self::Handle,
        path: &str,
        records: &[FullEa],
    ) -> impl Future<Output = Result<()>> + Send;

    /// The records named `names` that `file` at `path` carries
    /// (`share::query_records`).
    ///
    /// Errors: the QUERY_INFO's NTSTATUS.
    fn query_records(
        &self,
        file: &Self::Handle,
        path: &str,
        names: &[&str],
    ) -> impl Future<Output = Result<Vec<FullEa>>> + Send;

    /// Makes the directory `path` with the records `records`
    /// (`share::create_dir_with_eas`): an upload's folder.
    ///
    /// Errors: a collision if the name is taken; the CREATE's NTSTATUS.
    fn create_dir_with_records(&self, path: &str, records: &[FullEa]) -> impl Future<Output = Result<()>> + Send;

    /// Removes the record of the directory at `path`, making it a plain
    /// folder (`share::set_dir_ea` with an empty value).
    ///
    /// Errors: not-found kinds if no directory is there.
    fn drop_dir_record(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// Creates the claim of a multipart part at `path`: a new empty file,
    /// read, written and deleted by its open, which others may read or
    /// delete but not write (`share::create_claim`).
    ///
    /// Errors: a collision if the part is claimed already; not-found kinds
    /// if the upload is gone.
    fn create_claim(&self, path: &str) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// Opens, or creates, a file of an upload's folder to write parts into
    /// it, shared with every other open (`share::open_upload_file`).
    ///
    /// Errors: not-found kinds if the upload is gone.
    fn open_upload_file(&self, path: &str) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// Opens an upload's data file to complete it in place, or with
    /// `create` makes it, sharing no writes (`share::open_data_file`).
    ///
    /// Errors: not-found kinds without `create` if it is gone.
    fn open_data_file(&self, path: &str, create: bool) -> impl Future<Output = Result<Self::Handle>> + Send;

    /// Clears the read-only mark of the file at `path`
    /// (`share::clear_read_only_at`): a locked version that may now go.
    ///
    /// Errors: the CREATE's or SET_INFO's NTSTATUS.
    fn clear_read_only_at(&self, path: &str) -> impl Future<Output = Result<()>> + Send;

    /// The volume holding `path`: its total and available bytes
    /// (`share::space`).
    ///
    /// Errors: the CREATE's or QUERY_INFO's NTSTATUS.
    fn space(&self, path: &str) -> impl Future<Output = Result<(u64, u64)>> + Send;

    /// Watches the directory at `path` for names coming and going and
    /// files changing in it (`share::watch_dir`, CHANGE_NOTIFY).
    ///
    /// Errors: [`WatchError::Unsupported`] where the server keeps no
    /// watches; [`WatchError::Failed`] for the rest.
    fn watch_dir(&self, path: &str) -> impl Future<Output = std::result::Result<Self::Watch, WatchError>> + Send;

    /// As [`ShareData::watch_dir`], for the whole tree under `path`
    /// (`share::watch_tree`).
    ///
    /// Errors: as [`ShareData::watch_dir`].
    fn watch_tree(&self, path: &str) -> impl Future<Output = std::result::Result<Self::Watch, WatchError>> + Send;
}

impl ShareData for LiveShare<'_> {
    type RangeReader = share::RangeReader;
    type Watch = DirWatch;

    fn read_range(&self, file: &Handle, range: Range<u64>, in_flight: usize) -> Result<share::RangeReader> {
        share::read_range(file, range, in_flight)
    }

    fn next_piece(&self, reader: &mut share::RangeReader) -> impl Future<Output = Result<Option<Bytes>>> + Send {
        reader.next()
    }

    fn open_read(&self, path: &str) -> impl Future<Output = Result<Handle>> + Send {
        share::open_read(self.tree, path)
    }

    fn query_times(&self, file: &Handle) -> impl Future<Output = Result<FileTimes>> + Send {
        share::query_times(file)
    }

    fn copy_chunks(
        &self,
        src: &Handle,
        src_offset: u64,
        dst: &Handle,
        dst_offset: u64,
        len: u64,
    ) -> impl Future<Output = Result<u64>> + Send {
        share::copy_chunks(self.tree, src, src_offset, dst, dst_offset, len)
    }

    fn set_end_of_file(&self, file: &Handle, size: u64) -> impl Future<Output = Result<()>> + Send {
        share::set_end_of_file(file, size)
    }

    fn read_all(
        &self,
        file: &Handle,
        len: u64,
        in_flight: usize,
        sink: impl FnMut(Bytes) + Send,
    ) -> impl Future<Output = Result<u64>> + Send {
        share::read_all(file, len, in_flight, sink)
    }

    fn read_range_whole(
        &self,
        file: &Handle,
        range: Range<u64>,
        in_flight: usize,
    ) -> impl Future<Output = Result<(Vec<Bytes>, u64)>> + Send {
        share::read_range_whole(file, range, in_flight)
    }

    fn create_temp(&self, path: &str) -> impl Future<Output = Result<TempFile>> + Send {
        share::create_temp(self.pool, self.tree, path, &[])
    }

    fn write_temp_with_records(
        &self,
        path: &str,
        records: &[FullEa],
        body: &[u8],
    ) -> impl Future<Output = Result<(TempFile, u32)>> + Send {
        share::create_temp_and_write(self.pool, self.tree, self.records, path, records, body)
    }

    fn publish_or_keep(
        &self,
        temp: TempFile,
        target: &str,
        replace: bool,
    ) -> impl Future<Output = std::result::Result<(), (ShareError, Option<TempFile>)>> + Send {
        share::publish_and_close(temp, target, replace)
    }

    fn set_records(&self, file: &Handle, path: &str, records: &[FullEa]) -> impl Future<Output = Result<()>> + Send {
        share::set_eas(file, self.records, path, records)
    }

    fn query_records(
        &self,
        file: &Handle,
        path: &str,
        names: &[&str],
    ) -> impl Future<Output = Result<Vec<FullEa>>> + Send {
        share::query_records(file, self.records, path, names)
    }

    fn create_dir_with_records(&self, path: &str, records: &[FullEa]) -> impl Future<Output = Result<()>> + Send {
        share::create_dir_with_eas(self.tree, self.records, path, records)
    }

    fn drop_dir_record(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        let drop = FullEa { name: super::meta::META_EA.into(), value: vec![] };
        share::set_dir_ea(self.tree, self.records, path, drop)
    }

    fn create_claim(&self, path: &str) -> impl Future<Output = Result<Handle>> + Send {
        share::create_claim(self.tree, path)
    }

    fn open_upload_file(&self, path: &str) -> impl Future<Output = Result<Handle>> + Send {
        share::open_upload_file(self.tree, path)
    }

    fn open_data_file(&self, path: &str, create: bool) -> impl Future<Output = Result<Handle>> + Send {
        share::open_data_file(self.tree, path, create)
    }

    fn clear_read_only_at(&self, path: &str) -> impl Future<Output = Result<()>> + Send {
        share::clear_read_only_at(self.tree, path)
    }

    fn space(&self, path: &str) -> impl Future<Output = Result<(u64, u64)>> + Send {
        share::space(self.tree, path)
    }

    fn watch_dir(&self, path: &str) -> impl Future<Output = std::result::Result<DirWatch, WatchError>> + Send {
        share::watch_dir(self.tree, path)
    }

    fn watch_tree(&self, path: &str) -> impl Future<Output = std::result::Result<DirWatch, WatchError>> + Send {
        share::watch_tree(self.tree, path)
    }
}
