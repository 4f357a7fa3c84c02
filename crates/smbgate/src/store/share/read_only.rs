//! The read-only attribute (FILE_ATTRIBUTE_READONLY, MS-FSCC 2.6) that
//! keeps a locked version on the share: a server that keeps DOS
//! attributes (Samba by default, Windows) refuses to delete such a file
//! (STATUS_CANNOT_DELETE) or to open it for writing, to anyone, until the
//! attribute is cleared. A rename still moves it.

use smb_proto::create::{access, attributes, share, CreateRequest, Disposition, FileId};
use smb_proto::info::SetFileInfo;
use smb_proto::query::SetInfoRequest;

use super::requests::{take, CLOSE_RELATED};
use super::{query_times, Handle, Result, Tree};

/// `attrs` with the read-only bit set (`on`) or cleared; a file keeps at
/// least FILE_ATTRIBUTE_NORMAL, which may not go with any other bit.
fn with_read_only(attrs: u32, on: bool) -> u32 {
    let attrs = match on {
        true => (attrs | attributes::READONLY) & !attributes::NORMAL,
        false => attrs & !attributes::READONLY,
    };
    if attrs == 0 {
        attributes::NORMAL
    } else {
        attrs
    }
}

/// The FileBasicInformation that changes only the attributes to `attrs`
/// (zero times are left as they are).
fn attributes_only(attrs: u32) -> SetFileInfo<'static> {
    SetFileInfo::Basic { creation: 0, last_access: 0, last_write: 0, change: 0, attributes: attrs }
}

/// Sets or clears the read-only attribute of the file `handle` holds
/// (opened with FILE_WRITE_ATTRIBUTES), leaving its other attributes and
/// its times as they are.
///
/// Errors: the QUERY_INFO's or SET_INFO's NTSTATUS.
pub async fn set_read_only(handle: &Handle, on: bool) -> Result<()> {
    let now = query_times(handle).await?.attributes;
    let want = with_read_only(now, on);
    if want == now {
        return Ok(());
    }
    handle.smb().tree().set_info(handle.smb().id(), attributes_only(want)).await.map_err(Into::into)
}

/// Clears the read-only attribute of the file at `path` (CREATE for
/// FILE_WRITE_ATTRIBUTES + SET_INFO + CLOSE in one round trip), so that
/// it can be deleted. Its other attributes become FILE_ATTRIBUTE_NORMAL:
/// the gateway's own version files carry none that matter.
///
/// Errors: the CREATE's or SET_INFO's NTSTATUS.
pub async fn clear_read_only_at(tree: &Tree, path: &str) -> Result<()> {
    let name = smb_client::tree::smb_path(path);
    let open = CreateRequest::new_file(&name, access::FILE_READ_ATTRIBUTES | access::FILE_WRITE_ATTRIBUTES)
        .disposition(Disposition::Open)
        .sharing(share::ALL);
    let set = SetInfoRequest { file_id: FileId::RELATED, info: attributes_only(attributes::NORMAL) };
    let [created, set, _closed] = take(tree.smb().compound(&[&open, &set, &CLOSE_RELATED]).await?)?;
    created.ok_or_status(&[])?;
    set.ok_or_status(&[])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bit_goes_on_and_off_and_a_file_keeps_an_attribute() {
        assert_eq!(with_read_only(attributes::NORMAL, true), attributes::READONLY);
        assert_eq!(with_read_only(attributes::ARCHIVE, true), attributes::ARCHIVE | attributes::READONLY);
        assert_eq!(with_read_only(attributes::READONLY, false), attributes::NORMAL);
        assert_eq!(with_read_only(attributes::READONLY | attributes::ARCHIVE, false), attributes::ARCHIVE);
    }
}
