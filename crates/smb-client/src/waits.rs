//! Every fixed wait of the client that is not a setting, in one place, each
//! named for what it waits for and saying why that long. The settings
//! (`ClientConfig`, `PoolConfig`) hold the rest: request timeouts, the
//! pool's acquire timeout and echo interval.

use std::time::Duration;

/// How often [`crate::Pool::get`] looks again for a healthy connection
/// while every one is broken, until the pool's acquire timeout: short
/// against a reconnect (one logon), long enough not to spin.
pub const POOL_GET_POLL: Duration = Duration::from_millis(50);

/// The first pause before a broken pool slot tries to connect again; each
/// failure doubles it up to [`RECONNECT_CAP`], so a server that is
/// restarting is found within seconds and one that is down is not hammered.
pub const RECONNECT_FIRST: Duration = Duration::from_millis(100);

/// The longest pause between reconnects of a pool slot.
pub const RECONNECT_CAP: Duration = Duration::from_secs(5);

/// The pause after a server refused a connection for having too many
/// sessions (STATUS_TOO_MANY_SESSIONS): sessions go only as clients log
/// off or time out, which takes far longer than [`RECONNECT_CAP`].
pub const TOO_MANY_SESSIONS_PAUSE: Duration = Duration::from_secs(30);

/// The pause after a failed renewal of a session before its Kerberos ticket
/// ends: the KDC or the server may be briefly away, and the old session
/// still works meanwhile.
pub const RENEW_RETRY: Duration = Duration::from_secs(5);

/// After the pool's spare connection could not be made, how long callers
/// go without it rather than each try to connect again
/// ([`crate::pool::Pool::spare`]).
pub const SPARE_RETRY: Duration = Duration::from_secs(10);

/// How often the pool's maintenance looks at its slots (broken ones to
/// replace, sessions due for renewal, the echo interval).
pub const MAINTAIN_TICK: Duration = Duration::from_secs(1);

/// How long an idle connection's ECHO may take before the connection is
/// taken for dead and replaced.
pub const ECHO_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a durable reclaim that finds nothing is tried again: the old
/// connection's server process may not have released the open yet.
pub const RECLAIM_WAIT: Duration = Duration::from_secs(2);

/// The pause between the tries of a durable reclaim within
/// [`RECLAIM_WAIT`].
pub const RECLAIM_RETRY: Duration = Duration::from_millis(100);
