//! S3 semantics on an SMB share: buckets are the top-level directories of
//! the share root, objects are plain files, metadata lives in one EA per
//! file, writes are published by renaming a verified temporary file, and
//! multipart state lives on the share. Nothing here is kept in memory that
//! another gateway instance would need.

pub mod bucket;
pub mod budget;
pub mod error;
pub mod keys;
pub mod list;
pub mod listing;
pub mod meta;
pub mod multipart;
pub mod object;
mod publish;
mod spread;

use std::time::Duration;

use bytes::Bytes;
use smb_client::{Pool, Tree};
use smb_proto::create::{CloseRequest, CreateResponse, FileId};
use smb_proto::info::{class, decode_full_ea, info_type};
use smb_proto::query::{OutputBuffer, QueryInfoRequest};
use smb_proto::NtStatus;

pub use budget::Budget;
pub use error::{StoreError, StoreResult};
use meta::{ObjectMeta, META_EA};

/// Tuning for the data path.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bytes kept in flight per pipelined stream.
    pub in_flight: usize,
    /// Split-streaming segment size in bytes.
    pub segment_size: u64,
    /// Segments fetched ahead for large GETs (1 = no split streaming).
    pub prefetch: usize,
    /// Connections one large PUT or UploadPart body is spread over (1 = one
    /// connection).
    pub put_parallel: usize,
    /// Bytes all GETs together may read ahead of their clients (READs in
    /// flight plus segments fetched ahead); see `crate::stream`.
    pub read_ahead_budget: u64,
    /// Bytes all PUT and UploadPart bodies together may have in flight to
    /// the server (WRITEs sent, not yet acknowledged).
    pub write_behind_budget: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            in_flight: 64 << 20,
            segment_size: 8 << 20,
            prefetch: 4,
            put_parallel: 4,
            read_ahead_budget: 512 << 20,
            write_behind_budget: 512 << 20,
        }
    }
}

/// The store over one share root.
#[derive(Clone)]
pub struct Store {
    pool: Pool,
    /// Share-relative path of the root (`\`-separated, may be empty).
    root: String,
    opts: StoreOptions,
    /// The share matches names case-insensitively (Windows, Samba's
    /// default): keys differing only in case must be refused, not merged.
    case_insensitive: bool,
    /// Recent directory listings for paging.
    dir_cache: std::sync::Arc<listing::DirCache>,
    /// GET read-ahead, all GETs together.
    read_ahead: Budget,
    /// PUT write-behind, all bodies together.
    write_behind: Budget,
}

/// Directory under the root holding gateway state.
pub const INTERNAL: &str = keys::INTERNAL_DIR;

impl Store {
    /// A store on `pool`, rooted at `root` inside the share. Creates the
    /// internal directories if needed.
    ///
    /// Errors: the root does not exist or is not accessible.
    pub async fn open(pool: Pool, root: &str, opts: StoreOptions) -> StoreResult<Store> {
        let (read_ahead, write_behind) = (opts.read_ahead_budget, opts.write_behind_budget);
        let mut store = Store {
            pool,
            root: root.trim_matches('\\').to_string(),
            opts,
            case_insensitive: true,
            dir_cache: Default::default(),
            read_ahead: Budget::new(read_ahead),
            write_behind: Budget::new(write_behind),
        };
        let tree = store.tree().await?;
        let root_times = tree.stat(&store.root).await.map_err(|e| {
            if error::is_not_found(&e) {
                StoreError::InvalidArgument(format!("share path {:?} does not exist", store.root))
            } else {
                e.into()
            }
        })?;
        if !root_times.is_directory() {
            return Err(StoreError::InvalidArgument(format!("share path {:?} is not a directory", store.root)));
        }
        for d in [INTERNAL.to_string(), format!("{INTERNAL}\\tmp"), format!("{INTERNAL}\\uploads")] {
            match tree.mkdir(&store.path(&d)).await {
                Ok(()) => {}
                Err(e) if e.status() == Some(NtStatus::STATUS_OBJECT_NAME_COLLISION) => {}
                Err(e) => return Err(e.into()),
            }
        }
        store.case_insensitive = store.probe_case_insensitive(&tree).await?;
        tracing::info!(case_insensitive = store.case_insensitive, "store opened");
        let cleaner = store.clone();
        tokio::spawn(async move { cleaner.clean_temp_loop().await });
        Ok(store)
    }

    /// Creates `CaseProbe-*` and opens it as lower case.
    async fn probe_case_insensitive(&self, tree: &Tree) -> StoreResult<bool> {
        let name = format!("CaseProbe-{:016x}", rand::random::<u64>());
        let path = self.path(&format!("{INTERNAL}\\tmp\\{name}"));
        tree.write_small(&path, b"", &[]).await?;
        let lower = self.path(&format!("{INTERNAL}\\tmp\\{}", name.to_lowercase()));
        let insensitive = tree.stat(&lower).await.is_ok();
        let _ = tree.delete(&path, false).await;
        Ok(insensitive)
    }

    /// Removes temporary files older than a day (by the server's clock)
    /// left by crashed instances, at startup and then hourly. Files still
    /// being written are open without share-delete, so they survive
    /// (BUG-CLASSES 16).
    async fn clean_temp_loop(self) {
        const GRACE_100NS: u64 = 24 * 3600 * 10_000_000;
        loop {
            if let Ok(tree) = self.tree().await {
                let dir = self.path(&format!("{INTERNAL}\\tmp"));
                // "Now" on the server: the LastWriteTime of a file made now.
                let probe = format!("{dir}\\clock-{:016x}", rand::random::<u64>());
                if let Ok(c) = tree.write_small(&probe, b"", &[]).await {
                    let now = c.times.last_write;
                    let _ = tree.delete(&probe, false).await;
                    if let Ok(entries) = tree.list_dir(&dir).await {
                        for e in entries {
                            if !e.times.is_directory() && e.times.last_write + GRACE_100NS < now {
                                let _ = tree.delete(&format!("{dir}\\{}", e.name), false).await;
                            }
                        }
                    }
                }
            }
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }

    /// Refuses a key whose path differs only in case from names already on
    /// a case-insensitive share (they would silently merge). One batch of
    /// CREATE+QUERY_DIRECTORY(name)+CLOSE compounds, one per component.
    pub async fn check_case(&self, tree: &Tree, bucket: &str, key: &keys::MappedKey) -> StoreResult<()> {
        if !self.case_insensitive {
            return Ok(());
        }
        match self.case_mismatch(tree, bucket, &key.components).await? {
            None => Ok(()),
            Some((want, other)) => Err(StoreError::Conflict(format!(
                "the share is case-insensitive and {:?} already exists as {:?}; keys differing only in case cannot both be stored",
                keys::decode_component(&want),
                keys::decode_component(&other)
            ))),
        }
    }

    /// The first of the (encoded) path components under `bucket` that
    /// exists on the share with a different case, as `(ours, theirs)`.
    /// Stops at the first component that does not exist.
    pub async fn case_mismatch(
        &self,
        tree: &Tree,
        bucket: &str,
        components: &[String],
    ) -> StoreResult<Option<(String, String)>> {
        use smb_proto::info::{decode_file_name_information, info_type};
        if components.is_empty() {
            return Ok(None);
        }
        // The path of every prefix of the key, deepest last. Each is opened
        // and asked for its normalized (on-disk) name, all in one batch; an
        // existing name costs a lookup, not a directory scan.
        let mut paths = Vec::with_capacity(components.len());
        let mut p = self.bucket_path(bucket);
        for c in components {
            p.push('\\');
            p.push_str(c);
            paths.push(p.clone());
        }
        let opens: Vec<smb_proto::create::CreateRequest<'_>> = paths
            .iter()
            .map(|path| smb_proto::create::CreateRequest {
                name: path,
                oplock_level: 0,
                desired_access: smb_proto::create::access::FILE_READ_ATTRIBUTES,
                file_attributes: 0,
                share_access: smb_proto::create::share::ALL,
                disposition: smb_proto::create::Disposition::Open,
                options: 0,
                contexts: &[],
            })
            .collect();
        let query = QueryInfoRequest {
            info_type: info_type::FILE,
            class: class::FILE_NORMALIZED_NAME_INFORMATION,
            output_buffer_length: 4096,
            ea_names: &[],
            additional_information: 0,
            file_id: FileId::RELATED,
        };
        let close = CloseRequest { file_id: FileId::RELATED, post_query: false };
        let chains: Vec<[&dyn smb_proto::Request; 3]> =
            opens.iter().map(|o| [o as &dyn smb_proto::Request, &query, &close]).collect();
        let refs: Vec<&[&dyn smb_proto::Request]> = chains.iter().map(|c| &c[..]).collect();
        let results = tree.compounds(&refs).await?;
        // The deepest prefix that exists tells everything above it too.
        for (chain, path) in results.iter().zip(&paths).rev() {
            if chain[0].status() != NtStatus::STATUS_SUCCESS || chain[1].status() != NtStatus::STATUS_SUCCESS {
                continue;
            }
            let buf = OutputBuffer::decode(&chain[1].msg).map_err(smb_client::Error::from)?.0;
            let on_disk = decode_file_name_information(&buf).map_err(smb_client::Error::from)?;
            let on_disk = on_disk.trim_start_matches('\\');
            if on_disk == path {
                return Ok(None);
            }
            let ours = path.split('\\').collect::<Vec<_>>();
            let theirs = on_disk.split('\\').collect::<Vec<_>>();
            for (a, b) in ours.iter().zip(&theirs) {
                if a != b {
                    return Ok(Some((a.to_string(), b.to_string())));
                }
            }
            return Ok(None);
        }
        Ok(None)
    }

    /// True if the share matches names case-insensitively.
    pub fn case_insensitive(&self) -> bool {
        self.case_insensitive
    }

    /// Tuning in effect.
    pub fn options(&self) -> &StoreOptions {
        &self.opts
    }

    /// The GET read-ahead budget (see `crate::stream`).
    pub fn read_ahead(&self) -> &Budget {
        &self.read_ahead
    }

    /// The PUT write-behind budget (see `store::spread`).
    pub fn write_behind(&self) -> &Budget {
        &self.write_behind
    }

    /// Bytes one stream may keep in flight, in bytes: the configured
    /// `in_flight`, or less while the pool backs off after losing
    /// connections under load (BUG-CLASSES 7, [`Pool::in_flight_budget`]).
    pub fn in_flight(&self) -> usize {
        self.opts.in_flight.min(self.pool.in_flight_budget())
    }

    /// The connection pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// A pooled tree (least loaded).
    pub async fn tree(&self) -> StoreResult<Tree> {
        Ok(self.pool.get().await?)
    }

    /// Share-relative path of `rel` (a `\`-separated path under the root).
    pub fn path(&self, rel: &str) -> String {
        match (self.root.is_empty(), rel.is_empty()) {
            (true, _) => rel.to_string(),
            (false, true) => self.root.clone(),
            (false, false) => format!("{}\\{}", self.root, rel),
        }
    }

    /// Share-relative path of a bucket directory.
    pub fn bucket_path(&self, bucket: &str) -> String {
        self.path(bucket)
    }

    /// Forgets cached listings of the directories `key` lives in (after a
    /// write or delete through this instance).
    pub fn forget_listing(&self, bucket: &str, key: &keys::MappedKey) {
        let mut p = self.bucket_path(bucket);
        self.dir_cache.forget(&p);
        for c in &key.components {
            p.push('\\');
            p.push_str(c);
            self.dir_cache.forget(&p);
        }
    }

    /// Share-relative path of an object's file (or marker directory).
    pub fn object_path(&self, bucket: &str, key: &keys::MappedKey) -> String {
        format!("{}\\{}", self.bucket_path(bucket), keys::smb_path(key))
    }

    /// A fresh temporary file path under `.smbgate\tmp`.
    pub fn temp_path(&self) -> String {
        self.path(&format!("{INTERNAL}\\tmp\\{:032x}", rand::random::<u128>()))
    }

    /// Fails with NoSuchBucket unless `bucket` is an existing directory.
    pub async fn check_bucket(&self, tree: &Tree, bucket: &str) -> StoreResult<()> {
        match tree.stat(&self.bucket_path(bucket)).await {
            Ok(t) if t.is_directory() => Ok(()),
            Ok(_) => Err(StoreError::NoSuchBucket),
            Err(e) if error::is_not_found(&e) => Err(StoreError::NoSuchBucket),
            Err(e) => Err(e.into()),
        }
    }
}

/// Retries `f` while the server reports a sharing violation, with backoff
/// (BUG-CLASSES 12): another client's open blocks ours only briefly.
pub async fn retry_sharing<T, F, Fut>(f: F) -> Result<T, smb_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, smb_client::Error>>,
{
    retry_while(&[NtStatus::STATUS_SHARING_VIOLATION], 10, Duration::from_millis(5), Duration::from_millis(500), f)
        .await
}

/// Like [`retry_sharing`], for a rename over a file that another handle
/// holds open: Samba refuses it with STATUS_ACCESS_DENIED while a
/// concurrent writer or reader has it open (BUG-CLASSES 13), so that is
/// retried too, with bounded backoff (about 1.5 s in all).
pub async fn retry_busy<T, F, Fut>(f: F) -> Result<T, smb_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, smb_client::Error>>,
{
    let busy = [NtStatus::STATUS_SHARING_VIOLATION, NtStatus::STATUS_ACCESS_DENIED];
    retry_while(&busy, 12, Duration::from_millis(2), Duration::from_millis(250), f).await
}

/// Calls `f` up to `retries + 1` times while it fails with one of
/// `statuses`, sleeping `delay` (doubling up to `cap`) in between.
async fn retry_while<T, F, Fut>(
    statuses: &[NtStatus],
    retries: usize,
    mut delay: Duration,
    cap: Duration,
    mut f: F,
) -> Result<T, smb_client::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, smb_client::Error>>,
{
    for _ in 0..retries {
        match f().await {
            Err(e) if e.status().is_some_and(|s| statuses.contains(&s)) => {
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(cap);
            }
            r => return r,
        }
    }
    f().await
}

/// An open file plus what the CREATE and the metadata EA said about it.
pub struct Opened {
    /// The tree (and so the connection) holding the handle.
    pub tree: Tree,
    /// The handle.
    pub file_id: FileId,
    /// CREATE response (times, size, attributes, on-disk id).
    pub create: CreateResponse,
    /// Our metadata record, if present and still matching the file.
    pub meta: Option<ObjectMeta>,
}

/// CREATE + QUERY_INFO(our EA) [+ READ] [+ CLOSE] in one round trip.
/// With `read = Some((offset, length))` the first bytes come back too (an
/// empty buffer at end of file); with `close`, the handle is closed in the
/// same compound.
pub async fn open_with_meta(
    tree: &Tree,
    create: &smb_proto::create::CreateRequest<'_>,
    read: Option<(u64, u32)>,
    close: bool,
) -> Result<(CreateResponse, Option<ObjectMeta>, Option<Bytes>), smb_client::Error> {
    let names = [META_EA];
    let q = QueryInfoRequest {
        info_type: info_type::FILE,
        class: class::FILE_FULL_EA_INFORMATION,
        output_buffer_length: 65536,
        ea_names: &names,
        additional_information: 0,
        file_id: FileId::RELATED,
    };
    let r = read.map(|(offset, length)| smb_proto::io::ReadRequest {
        file_id: FileId::RELATED,
        length: length.min(tree.max_read()),
        offset,
        minimum_count: 0,
    });
    let c = CloseRequest { file_id: FileId::RELATED, post_query: false };
    let mut chain: Vec<&dyn smb_proto::Request> = vec![create, &q];
    if let Some(r) = &r {
        chain.push(r);
    }
    if close {
        chain.push(&c);
    }
    let rs = tree.compound(&chain).await?;
    let cr = rs[0].clone().ok_or_status(&[])?;
    let created = CreateResponse::decode(&cr.msg).map_err(smb_client::Error::from)?;
    let meta = match rs[1].status() {
        NtStatus::STATUS_SUCCESS => {
            let buf: Bytes = OutputBuffer::decode(&rs[1].msg).map_err(smb_client::Error::from)?.0;
            decode_full_ea(&buf).ok().and_then(|eas| ObjectMeta::from_eas(&eas))
        }
        _ => None,
    };
    let meta = meta.filter(|m| m.matches(created.times.end_of_file, created.on_disk_id()));
    let data = match (&r, rs.get(2)) {
        (Some(_), Some(resp)) if resp.status() == NtStatus::STATUS_SUCCESS => {
            Some(smb_proto::io::ReadResponse::decode(&resp.msg).map_err(smb_client::Error::from)?.data)
        }
        (Some(_), Some(resp)) if resp.status() == NtStatus::STATUS_END_OF_FILE => Some(Bytes::new()),
        _ => None,
    };
    Ok((created, meta, data))
}
