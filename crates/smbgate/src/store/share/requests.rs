//! The SMB requests the share layer is made of: CREATE templates for each
//! kind of open, the record and name queries, and the related CLOSE that
//! ends a compound. Each template says why it asks for what it asks.

use super::Result;
use smb_client::connection::Response;
use smb_client::Error;
use smb_proto::create::{access, options, CloseRequest, CreateContext, CreateRequest, Disposition, FileId};
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
    CreateRequest::new_file(name, access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE).contexts(contexts)
}

/// An open of an existing file for DELETE (what a rename needs), sharing
/// `share_access` (0: exclusive, as a probe of other opens).
pub(crate) fn delete_req(name: &str, share_access: u32) -> CreateRequest<'_> {
    let open =
        CreateRequest::new_file(name, access::DELETE | access::FILE_READ_ATTRIBUTES).disposition(Disposition::Open);
    open.sharing(share_access)
}

/// A file in an upload's directory, read/write, sharing everything (parts
/// are written over several connections).
pub(crate) fn upload_file_req(name: &str, disposition: Disposition) -> CreateRequest<'_> {
    CreateRequest::new_file(name, access::GENERIC_WRITE | access::GENERIC_READ).disposition(disposition)
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
    rs.try_into()
        .map_err(|v: Vec<Response>| Error::Protocol(format!("{} answers to a compound of {N}", v.len())))
        .map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smb_proto::create::{attributes, oplock, share};

    /// (access, attributes, share, disposition, options, contexts) of a CREATE.
    fn fields(c: &CreateRequest<'_>) -> (u32, u32, u32, Disposition, u32, usize, u8) {
        (
            c.desired_access,
            c.file_attributes,
            c.share_access,
            c.disposition,
            c.options,
            c.contexts.len(),
            c.oplock_level,
        )
    }

    /// The templates ask exactly what the share layer relies on: a temp
    /// file shares everything (a published file's open handle must not
    /// block the next rename over it), a delete probe shares what it is
    /// told, upload files are files.
    #[test]
    fn the_templates_ask_for_what_the_share_layer_relies_on() {
        let rwd = access::GENERIC_READ | access::GENERIC_WRITE | access::DELETE;
        let nd = options::NON_DIRECTORY_FILE;
        assert_eq!(
            fields(&temp_req("t", &QFID)),
            (rwd, attributes::NORMAL, share::ALL, Disposition::Create, nd, 1, oplock::NONE)
        );
        let del = access::DELETE | access::FILE_READ_ATTRIBUTES;
        assert_eq!(fields(&delete_req("d", 0)), (del, attributes::NORMAL, 0, Disposition::Open, nd, 0, 0));
        let rw = access::GENERIC_WRITE | access::GENERIC_READ;
        let up = upload_file_req("u", Disposition::OpenIf);
        assert_eq!(fields(&up), (rw, attributes::NORMAL, share::ALL, Disposition::OpenIf, nd, 0, 0));
        let dir = CreateRequest::new_directory("x", access::FILE_LIST_DIRECTORY);
        let dir_fields = (access::FILE_LIST_DIRECTORY, attributes::DIRECTORY, share::ALL, Disposition::Create);
        assert_eq!(
            fields(&dir),
            (dir_fields.0, dir_fields.1, dir_fields.2, dir_fields.3, options::DIRECTORY_FILE, 0, 0)
        );
        let lock = CreateRequest::new_file("l", access::DELETE).sharing(0).options(options::DELETE_ON_CLOSE);
        assert_eq!(lock.options, nd | options::DELETE_ON_CLOSE, "options add up");
        assert_eq!(lock.share_access, 0);
        let open = CreateRequest::open("o", access::FILE_READ_ATTRIBUTES);
        assert_eq!(fields(&open), (access::FILE_READ_ATTRIBUTES, 0, share::ALL, Disposition::Open, 0, 0, 0));
    }
}
