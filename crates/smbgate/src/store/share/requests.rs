//! The SMB requests the share layer is made of: CREATE templates for each
//! kind of open, the record and name queries, and the related CLOSE that
//! ends a compound. Each template says why it asks for what it asks.

use smb_client::connection::Response;
use smb_client::{Error, Result};
use smb_proto::create::{
    access, attributes, options, share, CloseRequest, CreateContext, CreateRequest, Disposition, FileId,
};
use smb_proto::info::{class, info_type};
use smb_proto::query::QueryInfoRequest;

/// The QFid context: the CREATE answer carries the on-disk file id, which
/// derived ETags and generation checks use.
pub(crate) static QFID: [CreateContext<'static>; 1] = [CreateContext::QueryOnDiskId];

/// An open for reading an existing file or directory. Shares read, write
/// and delete, so renames and deletes by others never wait on a reader.
pub(crate) fn read_req(name: &str) -> CreateRequest<'_> {
    CreateRequest { contexts: &QFID, ..smb_client::tree::read_open(name, &[]) }
}

/// [`read_req`], and with `file_only` refused for a directory
/// (STATUS_FILE_IS_A_DIRECTORY) without a handle ever being made: a handle
/// on a directory keeps it, once removed, delete-pending until it closes,
/// and such a directory opens on Samba as an empty file with made-up
/// attributes (see `beside`).
pub(crate) fn lookup_req(name: &str, file_only: bool) -> CreateRequest<'_> {
    let req = read_req(name);
    match file_only {
        true => CreateRequest { options: req.options | options::NON_DIRECTORY_FILE, ..req },
        false => req,
    }
}

/// A new temporary file, read/write/delete, sharing everything: share-delete
/// so that once renamed into place the still-open file does not block the
/// next writer's rename over it; share-write so that a large body can be
/// written over several connections (`store::spread`).
pub(crate) fn temp_req<'a>(name: &'a str, contexts: &'a [CreateContext<'a>]) -> CreateRequest<'a> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition: Disposition::Create,
        options: options::NON_DIRECTORY_FILE,
        contexts,
    }
}

/// An open of an existing file for DELETE (what a rename needs), sharing
/// `share_access` (0: exclusive, as a probe of other opens).
pub(crate) fn delete_req(name: &str, share_access: u32) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::DELETE | access::FILE_READ_ATTRIBUTES,
        file_attributes: attributes::NORMAL,
        share_access,
        disposition: Disposition::Open,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

/// A file in an upload's directory, read/write, sharing everything (parts
/// are written over several connections).
pub(crate) fn upload_file_req(name: &str, disposition: Disposition) -> CreateRequest<'_> {
    CreateRequest {
        name,
        oplock_level: 0,
        desired_access: access::GENERIC_WRITE | access::GENERIC_READ,
        file_attributes: attributes::NORMAL,
        share_access: share::ALL,
        disposition,
        options: options::NON_DIRECTORY_FILE,
        contexts: &[],
    }
}

/// QUERY_INFO of our metadata EA on the related handle.
pub(crate) fn meta_query<'a>(names: &'a [&'a str]) -> QueryInfoRequest<'a> {
    QueryInfoRequest {
        info_type: info_type::FILE,
        class: class::FILE_FULL_EA_INFORMATION,
        output_buffer_length: 65536,
        ea_names: names,
        additional_information: 0,
        file_id: FileId::RELATED,
    }
}

pub(crate) const CLOSE_RELATED: CloseRequest = CloseRequest { file_id: FileId::RELATED, post_query: false };

/// QUERY_INFO(FileNormalizedNameInformation) on the related handle: the
/// path as it is on disk (its case), for exact-name checks.
pub(crate) const NAME_QUERY: QueryInfoRequest<'static> = QueryInfoRequest {
    info_type: info_type::FILE,
    class: class::FILE_NORMALIZED_NAME_INFORMATION,
    output_buffer_length: 4096,
    ea_names: &[],
    additional_information: 0,
    file_id: FileId::RELATED,
};

/// The `n` responses of a compound, in order.
pub(crate) fn take<const N: usize>(rs: Vec<Response>) -> Result<[Response; N]> {
    rs.try_into().map_err(|v: Vec<Response>| Error::Protocol(format!("{} answers to a compound of {N}", v.len())))
}
