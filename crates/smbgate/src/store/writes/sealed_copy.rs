//! Copies from or to an object sealed with an SSE-C key (`store::sse_c`):
//! the server cannot copy them byte for byte, since the copy is opened
//! under the source's key and sealed under its own (a new salt, or its
//! upload's). The source's range is read as a GET reads it and written as
//! a PUT writes its body.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::store::sse_c::CustomerKey;
use crate::store::types::{ObjectInfo, Opened, PutRequest, PutResult, Target};
use crate::store::{StoreError, StoreResult, Writes};

impl Writes {
    /// Copies `range` of the opened source `src` (`info`, opened under
    /// `source_key` where it is sealed) to `target` as a PUT of `put`
    /// (its record, checksums, conditions and SSE-C sealing).
    ///
    /// Errors: as [`Writes::put_to`]; a source that fails its check (or
    /// whose read fails) ends the copy with Smb (500), and nothing is
    /// published.
    pub(crate) async fn copy_through(
        &self,
        src: Opened,
        info: &ObjectInfo,
        range: Range<u64>,
        source_key: Option<&CustomerKey>,
        target: Target,
        put: PutRequest,
    ) -> StoreResult<PutResult> {
        let body = self.reads.body_of(src, info, range, source_key, None, None)?;
        let tree = self.root.tree().await?;
        let mut meta = put.meta.clone();
        // The copy is one object, whatever the source was.
        meta.parts.clear();
        meta.part_checksums.clear();
        meta.checksum_type = None;
        meta.checksums.clear();
        meta.sse_c = None;
        meta.upload_id = None;
        meta.version_id = None;
        meta.disk_id = None;
        match self.put_to(&tree, target, body, PutRequest { meta, ..put }, BTreeMap::new).await {
            // The body is the source, read here: its failure is the
            // gateway's (a damaged package, a lost connection), not a
            // client's.
            Err(StoreError::Body(m)) => Err(StoreError::Smb(format!("reading the source of the copy: {m}"))),
            other => other,
        }
    }
}
