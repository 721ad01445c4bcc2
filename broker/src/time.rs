//! Wall-clock time as the broker stores it: milliseconds since the Unix epoch.
//!
//! Due times of scheduled redeliveries and expirations are absolute wall-clock times
//! because they are stored and must still mean the same after a restart.
//!
//! The nodes of a cluster share those times, so they go by one clock, the
//! database's ([`follow_database`]; `rebound_storage`'s `postgres/clock.rs`
//! keeps it, read at every heartbeat and counted on by the monotonic clock), so
//! a jump of a node's own wall clock never makes it release a scheduled message
//! early. A single broker goes by its own wall clock.
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rebound_storage::DatabaseClock;

/// The database's clock, once this process joins a cluster.
static DATABASE: OnceLock<Arc<DatabaseClock>> = OnceLock::new();

pub fn now_ms() -> u64 {
    match DATABASE.get() {
        Some(clock) => clock.now_ms(),
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
    }
}

/// From now on, goes by the database's clock (a process joins one cluster,
/// so a second call changes nothing).
pub fn follow_database(clock: Arc<DatabaseClock>) {
    let _ = DATABASE.set(clock);
}
