//! The share layer: the only code in the gateway that builds SMB requests.
//!
//! Everything above it (the S3 rules in `store/`) works with typed
//! operations and [`Handle`]s. Three rules hold here, so that no caller can
//! leak a handle or publish unchecked data (failure class 26):
//! - Every open returns a [`Handle`], which closes itself when dropped, also
//!   when a request future is dropped mid-flight (see `smb_client::file`).
//! - A temporary file is a [`TempFile`]: dropped unpublished, it deletes
//!   its file.
//! - A compound is one named function that returns typed results; a failure
//!   of any step is an error of that step.

// Connecting a pool or a session, which the rest of smbgate may not do
// (crates/smbgate/clippy.toml).
#![allow(clippy::disallowed_methods)]

pub(crate) mod backoff;
mod connect;
mod connections;
mod dirs;
mod failure;
mod handles;
mod key_locks;
pub mod lane;
mod leased;
mod lock_acl;
mod lookup;
mod names;
mod own_files;
mod read_only;
mod reads;
mod record_io;
pub mod records;
mod replace;
mod requests;
mod seal;
mod space;
mod spill;
mod temp;
mod watch;

pub use connect::{connect_pool, dfs_referral, session_terms};
pub use connections::{connection, connection_of, idle_connection, other_connections, spare_connection};
pub use dirs::{create_dir_with_eas, is_own_dir, mkdir_own, set_dir_ea, OWN_DIR_MARK};
use failure::SmbFailure;

// The share's vocabulary, as the store names it. The store holds these
// (a connection, an open file, what a CREATE or a directory answered) and
// hands them back to the operations here; the pool, the connection and the
// open file are this layer's own types (`seal`), whose SMB calls only this
// module can make.
pub(crate) use failure::count_smb_error;
#[cfg(test)]
pub use failure::{failing_status, failing_with};
pub use failure::{
    is_bad_path, is_busy, is_not_found, is_unholdable_name, not_found, sharing_violation, smb_error_counts, Failure,
    Result, ShareError,
};
pub use handles::{is_going, not_a_file, query_times};
pub use key_locks::{KeyLock, KeyLocks};
pub use leased::{break_leases_after_change, hold_with_meta, open_breaking_leases, Held, HeldLook};
pub use lock_acl::LockAcl;
pub(crate) use lookup::stat_created;
pub use lookup::{
    normalized_names, open_read, open_to_update_record, open_with_meta, stat_key, stat_with_meta,
    stat_with_meta_and_name,
};
pub use names::{copy_chunks, delete, is_empty_dir, list_dir, mkdir, read_small, stat, write_small, DirReader};
pub use own_files::{
    create_claim, create_lock, create_once, open_data_file, open_lane, open_upload_file, set_end_of_file,
};
pub use read_only::{clear_read_only_at, set_read_only};
pub use reads::{read_all, read_range, read_range_whole, RangeReader};
pub use record_io::{probe_record_support, query_records, rewrite_records, set_eas, MAX_EA_VALUE};
pub use replace::{
    close_and_delete, delete_on_close, open_delete_with_meta, open_for_delete, open_to_replace, rename,
    rename_through_new_handle, swap_in,
};
pub use seal::{Handle, Pool, Tree};
pub use smb_proto::create::CreateResponse;
pub use smb_proto::info::{DirEntry, FileTimes, FullEa};
pub use space::space;
pub(crate) use temp::remove_leftover;
pub use temp::{create_temp, create_temp_and_write, finish_cleanups, publish_and_close, reopen, TempFile};
pub use watch::{watch_dir, watch_tree, Action, Change, DirWatch, Notified, WatchError};
