//! The share operations of a GET's, HEAD's or record change's open of a
//! key, as a trait beside [`ShareOps`]: an open with the record (and a
//! first READ), a look that closes in the same round trip, an open held to
//! change the record, a cache holder's open under a lease, and the names
//! the server keeps for paths. The open's
//! rule (`reads/open_checked`: where the key is kept, whether what opened
//! is the key's) runs on the live share ([`LiveShare`]) in the gateway and
//! on the in-memory share in its unit tests (`memory_lookups.rs`). Each
//! operation means what the share layer's function of the same name
//! means.

use std::future::Future;

use super::meta::ObjectMeta;
use super::reads::object_cache::Holder;
use super::share::{self, CreateResponse, Handle, Held, HeldLook, Result};
use super::share_ops::{LiveShare, ShareOps};
use bytes::Bytes;

/// An open of a key's file, with its record and on-disk path.
pub(crate) type WithRecord<H> = (H, Option<ObjectMeta>, Option<String>);

/// A GET's open of a key's file, with its record, its first bytes and its
/// on-disk path.
pub(crate) type ReadOpen<H> = (H, Option<ObjectMeta>, Option<Bytes>, Option<String>);

/// The lookups of the share (see the module notes). Paths are
/// share-relative, `\`-separated; `name` asks for the on-disk path too
/// (`None` where the server gives none); `file_only` refuses a directory.
pub(crate) trait ShareLookups: ShareOps {
    /// A cache holder: an open of a file under a Read+Handle lease.
    type Held: Holder;

    /// Holds the file at `path` under a Read+Handle lease, reading in the
    /// same round trip its record, its first `read` bytes and with `name`
    /// its on-disk path (`share::hold_with_meta`). Returns `None` if the
    /// server granted less than Read+Handle.
    ///
    /// Errors: the CREATE's NTSTATUS (a sharing violation while a writer
    /// holds the file, a directory where a file was asked for).
    fn hold_with_meta(
        &self,
        path: &str,
        read: u32,
        name: bool,
    ) -> impl Future<Output = Result<Option<HeldLook<Self::Held>>>> + Send;

    /// The server's answer to the CREATE that opened `file`.
    fn created<'h>(&self, file: &'h Self::Handle) -> &'h CreateResponse;

    /// Opens `path` to read it, with its record and, with `read =
    /// (offset, length)`, its first bytes (`share::open_with_meta`).
    /// Returns the open, the record if it is this file's, the bytes read
    /// and the on-disk path.
    ///
    /// Errors: the CREATE's NTSTATUS.
    fn open_with_meta(
        &self,
        path: &str,
        read: Option<(u64, u32)>,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<ReadOpen<Self::Handle>>> + Send;

    /// What the server says of `path` and its record, the open closed in
    /// the same round trip (`share::stat_with_meta_and_name`).
    ///
    /// Errors: the CREATE's NTSTATUS.
    fn stat_with_meta_and_name(
        &self,
        path: &str,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<(CreateResponse, Option<ObjectMeta>, Option<String>)>> + Send;

    /// Opens `path` to change its record, sharing no delete, so that no
    /// other file can take the name while it is open
    /// (`share::open_to_update_record`).
    ///
    /// Errors: as [`ShareLookups::open_with_meta`]; a sharing violation
    /// while another client holds the file for delete or a rename.
    fn open_to_update_record(
        &self,
        path: &str,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<WithRecord<Self::Handle>>> + Send;

    /// For each path, the path the server keeps for it (the case and long
    /// names it has on disk), `None` where nothing is
    /// (`share::normalized_names`). One round trip.
    ///
    /// Errors: SMB failures other than a missing name.
    fn normalized_names(&self, paths: &[String]) -> impl Future<Output = Result<Vec<Option<String>>>> + Send;

    /// What the server says of `path` (`share::stat_created`): its CREATE
    /// answer, with the on-disk id, the open closed in the same round
    /// trip.
    ///
    /// Errors: the CREATE's NTSTATUS.
    fn stat_created(&self, path: &str) -> impl Future<Output = Result<CreateResponse>> + Send;
}

impl ShareLookups for LiveShare<'_> {
    type Held = Held;

    fn hold_with_meta(
        &self,
        path: &str,
        read: u32,
        name: bool,
    ) -> impl Future<Output = Result<Option<HeldLook>>> + Send {
        share::hold_with_meta(self.tree, self.records, path, read, name)
    }

    fn created<'h>(&self, file: &'h Handle) -> &'h CreateResponse {
        file.info()
    }

    fn open_with_meta(
        &self,
        path: &str,
        read: Option<(u64, u32)>,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<ReadOpen<Handle>>> + Send {
        share::open_with_meta(self.tree, self.records, path, read, name, file_only)
    }

    fn stat_with_meta_and_name(
        &self,
        path: &str,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<(CreateResponse, Option<ObjectMeta>, Option<String>)>> + Send {
        share::stat_with_meta_and_name(self.tree, self.records, path, name, file_only)
    }

    fn open_to_update_record(
        &self,
        path: &str,
        name: bool,
        file_only: bool,
    ) -> impl Future<Output = Result<WithRecord<Handle>>> + Send {
        share::open_to_update_record(self.tree, self.records, path, name, file_only)
    }

    fn normalized_names(&self, paths: &[String]) -> impl Future<Output = Result<Vec<Option<String>>>> + Send {
        share::normalized_names(self.tree, paths)
    }

    fn stat_created(&self, path: &str) -> impl Future<Output = Result<CreateResponse>> + Send {
        share::stat_created(self.tree, path)
    }
}
