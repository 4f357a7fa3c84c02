//! GET and HEAD of objects stored with their client's key (SSE-C, see
//! `store::sse_c`): the key a read must bring, and the body made from the
//! stored packages of the range it asks for.

use bytes::{Bytes, BytesMut};

use super::stream::{object_stream, BodyStream};
use crate::store::sse_c::{CustomerKey, Damaged, Opener};
use crate::store::types::{ObjectInfo, Opened};
use crate::store::{Reads, StoreError, StoreResult};

/// Checks the SSE-C key a read of `info` brought (`key`), as AWS does.
///
/// Errors: InvalidRequest (400) for a key to an object stored without one,
/// or none to an object stored with one; Refused (403 AccessDenied) for
/// another key than the object's.
pub(crate) fn check_customer_key(info: &ObjectInfo, key: Option<&CustomerKey>) -> StoreResult<()> {
    match (&info.meta.sse_c, key) {
        (None, None) => Ok(()),
        (None, Some(_)) => {
            Err(StoreError::InvalidRequest("The encryption parameters are not applicable to this object.".into()))
        }
        (Some(_), None) => Err(StoreError::InvalidRequest(
            "The object was stored using a form of Server Side Encryption. The correct parameters must be provided to \
             retrieve the object."
                .into(),
        )),
        (Some(r), Some(k)) if r.key_md5 == k.key_md5() => Ok(()),
        (Some(_), Some(_)) => Err(StoreError::Refused("the SSE-C key given is not the key the object was stored with")),
    }
}

fn damaged(e: Damaged) -> StoreError {
    StoreError::Damaged(e.to_string())
}

impl Reads {
    /// The body of `range` (bytes of the object, as a [`super::read_plan::ReadPlan`]
    /// decides them) of the object `info` opened as `opened`, with
    /// `data` read with the open at `read` (offset, length) of the file;
    /// for an SSE-C object, the packages of the range opened under `key`
    /// (checked already by [`check_customer_key`]).
    ///
    /// Errors: Damaged, for an SSE-C object read whole with the open that
    /// fails its check (a larger one ends its body in an error instead).
    pub(crate) fn body_of(
        &self,
        opened: Opened,
        info: &ObjectInfo,
        range: std::ops::Range<u64>,
        key: Option<&CustomerKey>,
        data: Option<Bytes>,
        read: Option<(u64, u32)>,
    ) -> StoreResult<BodyStream> {
        let (Some(record), Some(key)) = (&info.meta.sse_c, key) else {
            let first = data.filter(|_| read.is_some_and(|(off, _)| off == range.start));
            return Ok(object_stream(self.clone(), Some(opened), info.clone(), range, first));
        };
        let (mut opener, stored) = Opener::new(key, record, range.clone());
        let first = data.filter(|_| read.is_some_and(|(off, _)| off == stored.start));
        let stored_len = (stored.end - stored.start) as usize;
        // Read whole with the open: opened now, so that a damaged object
        // is an error answer rather than a cut body.
        if let Some(all) = first.as_ref().filter(|f| f.len() >= stored_len) {
            let pieces = opener.push(&all[..stored_len]).map_err(damaged)?;
            opener.finish().map_err(damaged)?;
            let mut plain = BytesMut::with_capacity((range.end - range.start) as usize);
            pieces.iter().for_each(|p| plain.extend_from_slice(p));
            return Ok(object_stream(self.clone(), None, info.clone(), range, Some(plain.freeze())));
        }
        let on_disk = ObjectInfo { size: info.stored_size(), ..info.clone() };
        Ok(object_stream(self.clone(), Some(opened), on_disk, stored, first).opened_with(opener, &info.path))
    }
}
