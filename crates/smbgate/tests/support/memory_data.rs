//! The in-memory share's data path (`memory_share.rs`): files opened to
//! read, write or copy, with their bytes (a copy by the server extends
//! its target with zeros up to the offset, as a sparse write does), temp
//! files, an upload's folder, data file and part claims, the named
//! records files carry (the object's own record among them) and
//! read-only marks. Its volume is 1 TiB with half of it free. Not
//! modelled: the access rights of the handles a copy uses, and a copy's
//! change of LastWriteTime. It keeps no change notifications: a watch is
//! refused as by a server without them.

use std::ops::Range;

use bytes::Bytes;

use super::memory_share::{MemHandle, MemoryShare};
use super::memory_state::{Node, ALL, DELETE, READ, WRITE};
use super::meta::{ObjectMeta, META_EA};
use super::share::{failing_status, failing_with, Failure, FileTimes, FullEa, Result, ShareError, WatchError};
use super::share_data::ShareData;
use super::share_ops::ShareOps;
use smb_proto::{Command, NtStatus};

/// The volume's size and what is free of it, in bytes.
const VOLUME: (u64, u64) = (1 << 40, 1 << 39);

impl MemoryShare {
    /// Runs `f` on the file `file` holds.
    ///
    /// Errors: Other if the open is gone.
    fn with_node<T>(&self, file: &MemHandle, f: impl FnOnce(&mut Node) -> T) -> Result<T> {
        let mut s = self.state.lock().unwrap();
        let node = s.opens.get(&file.id).map(|o| o.node).ok_or_else(|| failing_with(Failure::Other))?;
        Ok(f(s.nodes.get_mut(&node).ok_or_else(|| failing_with(Failure::Other))?))
    }

    /// Opens the file at `path` with `access`, sharing `sharing`, made
    /// first (empty) if `create` and nothing is there (`op`, a step).
    async fn open_or_make(
        &self,
        op: &'static str,
        path: &str,
        create: bool,
        access: u8,
        sharing: u8,
    ) -> Result<MemHandle> {
        self.gate.step(op).await;
        let mut s = self.state.lock().unwrap();
        if create && !s.names.contains_key(path) {
            s.make_new(path, Node::new(false, ""))?;
        }
        let id = s.open(path, access, sharing, false)?;
        drop(s);
        Ok(self.handle(id))
    }

    /// The bytes of `range` of the file `file` holds (cut at its end).
    fn bytes_of(&self, file: &MemHandle, range: Range<u64>) -> Result<Vec<u8>> {
        self.with_node(file, |n| {
            let end = (range.end as usize).min(n.data.len());
            n.data[(range.start as usize).min(end)..end].to_vec()
        })
    }
}

impl ShareData for MemoryShare {
    type RangeReader = std::collections::VecDeque<Bytes>;
    type Watch = ();

    fn read_range(&self, file: &MemHandle, range: Range<u64>, in_flight: usize) -> Result<Self::RangeReader> {
        let data = self.bytes_of(file, range)?;
        Ok(data.chunks(in_flight.max(1)).map(Bytes::copy_from_slice).collect())
    }

    async fn next_piece(&self, reader: &mut Self::RangeReader) -> Result<Option<Bytes>> {
        self.gate.step("next_piece").await;
        Ok(reader.pop_front())
    }

    async fn open_read(&self, path: &str) -> Result<MemHandle> {
        self.gate.step("open_read").await;
        let id = self.state.lock().unwrap().open(path, READ, ALL, true)?;
        Ok(self.handle(id))
    }

    async fn query_times(&self, file: &MemHandle) -> Result<FileTimes> {
        self.gate.step("query_times").await;
        self.with_node(file, |n| n.times())
    }

    async fn copy_chunks(
        &self,
        src: &MemHandle,
        src_offset: u64,
        dst: &MemHandle,
        dst_offset: u64,
        len: u64,
    ) -> Result<u64> {
        self.gate.step("copy_chunks").await;
        let data = self.bytes_of(src, src_offset..src_offset + len)?;
        if (data.len() as u64) < len {
            // The client copies chunk by chunk until all is copied; a
            // source range past the end of the file fails the IOCTL.
            return Err(failing_status(Command::Ioctl, NtStatus::STATUS_INVALID_VIEW_SIZE));
        }
        self.with_node(dst, |n| {
            let end = dst_offset as usize + data.len();
            if n.data.len() < end {
                n.data.resize(end, 0);
            }
            n.data[dst_offset as usize..end].copy_from_slice(&data);
            n.size = n.data.len() as u64;
            data.len() as u64
        })
    }

    async fn set_end_of_file(&self, file: &MemHandle, size: u64) -> Result<()> {
        self.gate.step("set_end_of_file").await;
        self.with_node(file, |n| {
            n.data.resize(size as usize, 0);
            n.size = size;
        })
    }

    async fn read_all(
        &self,
        file: &MemHandle,
        len: u64,
        in_flight: usize,
        mut sink: impl FnMut(Bytes) + Send,
    ) -> Result<u64> {
        self.gate.step("read_all").await;
        let data = self.bytes_of(file, 0..len)?;
        for piece in data.chunks(in_flight.max(1)) {
            sink(Bytes::copy_from_slice(piece));
        }
        Ok(data.len() as u64)
    }

    async fn read_range_whole(
        &self,
        file: &MemHandle,
        range: Range<u64>,
        _in_flight: usize,
    ) -> Result<(Vec<Bytes>, u64)> {
        self.gate.step("read_range_whole").await;
        let data = self.bytes_of(file, range)?;
        let n = data.len() as u64;
        Ok((vec![Bytes::from(data)], n))
    }

    async fn create_temp(&self, path: &str) -> Result<MemHandle> {
        self.write_temp(path, &[]).await.map(|(temp, _)| temp)
    }

    async fn write_temp_with_records(&self, path: &str, records: &[FullEa], body: &[u8]) -> Result<(MemHandle, u32)> {
        let (temp, n) = self.write_temp(path, body).await?;
        set_named(self, &temp, records)?;
        Ok((temp, n))
    }

    async fn publish_or_keep(
        &self,
        temp: MemHandle,
        target: &str,
        replace: bool,
    ) -> std::result::Result<(), (ShareError, Option<MemHandle>)> {
        match self.rename(&temp, target, replace).await {
            Ok(()) => {
                self.close(temp).await;
                Ok(())
            }
            Err(e) => Err((e, Some(temp))),
        }
    }

    async fn set_records(&self, file: &MemHandle, _path: &str, records: &[FullEa]) -> Result<()> {
        self.gate.step("set_records").await;
        set_named(self, file, records)
    }

    async fn query_records(&self, file: &MemHandle, _path: &str, names: &[&str]) -> Result<Vec<FullEa>> {
        self.gate.step("query_records").await;
        self.with_node(file, |n| {
            let of = |name: &str| match name {
                META_EA => n.record().map(|m| m.to_ea().value),
                _ => n.named.get(name).cloned(),
            };
            names.iter().filter_map(|name| of(name).map(|value| FullEa { name: name.to_string(), value })).collect()
        })
    }

    async fn create_dir_with_records(&self, path: &str, records: &[FullEa]) -> Result<()> {
        self.gate.step("create_dir_with_records").await;
        let named = records.iter().map(|r| (r.name.clone(), r.value.clone())).collect();
        self.state.lock().unwrap().make_new(path, Node { named, ..Node::new(true, "") })
    }

    async fn drop_dir_record(&self, path: &str) -> Result<()> {
        self.gate.step("drop_dir_record").await;
        let mut s = self.state.lock().unwrap();
        let node = s.names.get(path).copied().ok_or_else(|| failing_with(Failure::NameNotFound))?;
        let n = s.nodes.get_mut(&node).filter(|n| n.dir).ok_or_else(|| failing_with(Failure::NotADirectory))?;
        (n.marker, n.meta) = (false, None);
        n.etag.clear();
        Ok(())
    }

    async fn create_claim(&self, path: &str) -> Result<MemHandle> {
        self.gate.step("create_claim").await;
        let mut s = self.state.lock().unwrap();
        s.make_new(path, Node::new(false, ""))?;
        let id = s.open(path, READ | WRITE | DELETE, READ | DELETE, false)?;
        drop(s);
        Ok(self.handle(id))
    }

    fn open_upload_file(&self, path: &str) -> impl std::future::Future<Output = Result<MemHandle>> + Send {
        self.open_or_make("open_upload_file", path, true, READ | WRITE, ALL)
    }

    fn open_data_file(&self, path: &str, create: bool) -> impl std::future::Future<Output = Result<MemHandle>> + Send {
        self.open_or_make("open_data_file", path, create, READ | WRITE | DELETE, READ | DELETE)
    }

    async fn clear_read_only_at(&self, path: &str) -> Result<()> {
        self.gate.step("clear_read_only_at").await;
        let mut s = self.state.lock().unwrap();
        let node = s.names.get(path).copied().ok_or_else(|| failing_with(Failure::NameNotFound))?;
        s.nodes.get_mut(&node).expect("a named node").read_only = false;
        Ok(())
    }

    async fn space(&self, path: &str) -> Result<(u64, u64)> {
        self.times(path).await.map(|_| VOLUME)
    }

    async fn watch_dir(&self, _path: &str) -> std::result::Result<(), WatchError> {
        Err(no_watches())
    }

    async fn watch_tree(&self, _path: &str) -> std::result::Result<(), WatchError> {
        Err(no_watches())
    }
}

/// What a server that keeps no change notifications answers a watch.
fn no_watches() -> WatchError {
    WatchError::Unsupported(failing_status(Command::ChangeNotify, NtStatus::STATUS_NOT_SUPPORTED))
}

/// Sets `records` on the file `file` holds: the object's record (an empty
/// value removes it; one larger than the share's room for records is
/// refused, nothing set) or another named one.
///
/// Errors: NoRoom; Other if the open is gone.
fn set_named(share: &MemoryShare, file: &MemHandle, records: &[FullEa]) -> Result<()> {
    let room = share.state.lock().unwrap().record_room;
    if records.iter().any(|r| r.name == META_EA && room.is_some_and(|room| r.value.len() > room)) {
        return Err(failing_with(Failure::NoRoom));
    }
    share.with_node(file, |n| {
        for r in records {
            match (r.name.as_str(), r.value.is_empty()) {
                (META_EA, true) => n.meta = None,
                (META_EA, false) => n.meta = ObjectMeta::from_ea(&r.value),
                (_, true) => drop(n.named.remove(&r.name)),
                (_, false) => drop(n.named.insert(r.name.clone(), r.value.clone())),
            }
        }
    })
}
