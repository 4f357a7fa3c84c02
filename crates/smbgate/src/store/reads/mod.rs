//! HEAD and GET ([`Reads`](super::Reads)), from the cache to the streamed
//! body. A GET runs, in order: `read_plan` (`Reads::get_object`: the cache,
//! then the open), `object_open` (one compound: CREATE, record, first
//! READ; the key looked for where it is kept, `find_stored`, and checked), `read_plan`
//! again (conditions, range and part bounds decided from what opened), and
//! `stream` (the body: reads on the GET's own handle, and for a large range
//! ordered segments fetched ahead on pooled connections). `object_cache`
//! and `coherence` keep HEADs and small GETs in memory while the server's
//! lease says the file is unchanged, and `cache_watches` tells it of changes
//! no lease reports (their state: `watch_table`); `prefetch_depth` adapts how far ahead
//! a large GET fetches. `sealed` reads objects stored with their client's
//! key (SSE-C).

pub mod cache_watches;
pub(super) mod coherence;
pub(super) mod find_stored;
#[cfg(test)]
mod find_stored_test;
pub mod object_cache;
pub(super) mod object_open;
pub(super) mod open_checked;
pub mod prefetch_depth;
pub mod read_plan;
pub(crate) mod sealed;
pub mod stream;
pub mod watch_table;
