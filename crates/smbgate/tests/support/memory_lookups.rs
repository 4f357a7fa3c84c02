//! The in-memory share's lookups (`memory_share.rs`): a GET's, HEAD's and
//! record change's opens of a key with its record, a cache holder's open
//! under a lease, and the names the server keeps for paths, where another
//! spelling (another case, an 8.3 alias: `MemoryShare::alias`) finds the
//! file kept under its own name and is named so.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bytes::Bytes;

use super::memory_share::{MemHandle, MemHeld, MemoryShare};
use super::memory_state::{created_of, ALL, READ, WRITE};
use super::meta::ObjectMeta;
use super::share::{failing_with, CreateResponse, Failure, HeldLook, Result};
use super::share_lookups::{ReadOpen, ShareLookups, WithRecord};

impl MemoryShare {
    /// A GET's open of `path` ([`ShareLookups::open_with_meta`] without a
    /// read or a name). Returns the handle, its times and its record.
    ///
    /// Errors: as an open on the share (not found, a directory where only a
    /// file may open, delete pending, sharing violation).
    pub(crate) async fn open_to_read(
        &self,
        path: &str,
        file_only: bool,
    ) -> Result<(MemHandle, super::share::FileTimes, Option<ObjectMeta>)> {
        let (file, record, ..) = self.open_with_meta(path, None, false, file_only).await?;
        let times = file.created.times;
        Ok((file, times, record))
    }

    /// A cache holder's open of `path` (`share::hold_with_meta`): reading,
    /// sharing only READ, under a Read+Handle lease that an open to write
    /// or delete the file breaks; not gated.
    ///
    /// Errors: as an open on the share.
    pub(crate) fn hold(&self, path: &str) -> Result<MemHeld> {
        let mut s = self.state.lock().unwrap();
        let id = s.open(path, READ, READ, false)?;
        let lease = Arc::new(AtomicBool::new(true));
        s.opens.get_mut(&id).expect("just opened").lease = Some(lease.clone());
        drop(s);
        let handle = self.handle(id);
        let created = handle.created.clone();
        Ok(MemHeld { _handle: handle, lease, created })
    }

    /// Opens the name `path` resolves to with `access`, sharing
    /// `sharing` (`op`, a step), reading `read = (offset, length)` of it
    /// in the same step. Returns the open, its record, the bytes read
    /// (none of a directory: its READ fails) and the name it opened.
    async fn open_kept(
        &self,
        op: &'static str,
        path: &str,
        (access, sharing): (u8, u8),
        file_only: bool,
        read: Option<(u64, u32)>,
    ) -> Result<(MemHandle, Option<ObjectMeta>, Option<Bytes>, String)> {
        self.gate.step(op).await;
        let mut s = self.state.lock().unwrap();
        let kept = s.kept_name(path);
        let id = s.open(&kept, access, sharing, !file_only)?;
        let node = &s.nodes[&s.opens[&id].node];
        let data = read.filter(|_| !node.dir).map(|(offset, len)| {
            let start = (offset as usize).min(node.data.len());
            Bytes::copy_from_slice(&node.data[start..(start + len as usize).min(node.data.len())])
        });
        let record = node.record();
        drop(s);
        Ok((self.handle(id), record, data, kept))
    }
}

impl ShareLookups for MemoryShare {
    type Held = MemHeld;

    async fn hold_with_meta(&self, path: &str, read: u32, name: bool) -> Result<Option<HeldLook<MemHeld>>> {
        self.gate.step("hold_with_meta").await;
        let kept = self.state.lock().unwrap().kept_name(path);
        let held = self.hold(&kept)?;
        let s = self.state.lock().unwrap();
        let node = s.nodes.get(&held.created.file_id.persistent).ok_or_else(|| failing_with(Failure::NameNotFound))?;
        let meta = node.record();
        let data = (read > 0).then(|| Bytes::copy_from_slice(&node.data[..node.data.len().min(read as usize)]));
        drop(s);
        Ok(Some(HeldLook { held, meta, data, on_disk: name.then_some(kept) }))
    }

    fn created<'h>(&self, file: &'h MemHandle) -> &'h CreateResponse {
        &file.created
    }

    async fn open_with_meta(
        &self,
        path: &str,
        read: Option<(u64, u32)>,
        name: bool,
        file_only: bool,
    ) -> Result<ReadOpen<MemHandle>> {
        let (file, record, data, kept) = self.open_kept("open_with_meta", path, (READ, ALL), file_only, read).await?;
        Ok((file, record, data, name.then_some(kept)))
    }

    async fn stat_with_meta_and_name(
        &self,
        path: &str,
        name: bool,
        file_only: bool,
    ) -> Result<(CreateResponse, Option<ObjectMeta>, Option<String>)> {
        let kept = self.state.lock().unwrap().kept_name(path);
        let (times, node, record) = self.look("stat_with_meta_and_name", &kept, !file_only).await?;
        Ok((created_of(node, times), record, name.then_some(kept)))
    }

    async fn open_to_update_record(&self, path: &str, name: bool, file_only: bool) -> Result<WithRecord<MemHandle>> {
        // Writing a record or attributes is no data access: only the
        // sharing (no delete) matters to others.
        let (file, record, _, kept) =
            self.open_kept("open_to_update_record", path, (READ, READ | WRITE), file_only, None).await?;
        Ok((file, record, name.then_some(kept)))
    }

    async fn normalized_names(&self, paths: &[String]) -> Result<Vec<Option<String>>> {
        self.gate.step("normalized_names").await;
        let s = self.state.lock().unwrap();
        let kept = paths.iter().map(|p| s.kept_name(p)).map(|k| s.names.contains_key(&k).then_some(k));
        Ok(kept.collect())
    }

    async fn stat_created(&self, path: &str) -> Result<CreateResponse> {
        let kept = self.state.lock().unwrap().kept_name(path);
        let (times, node, _) = self.look("stat_created", &kept, true).await?;
        Ok(created_of(node, times))
    }
}
