//! Wall-clock time as the broker stores it: milliseconds since the Unix epoch.
//!
//! Due times of scheduled redeliveries and expirations are absolute wall-clock times
//! because they are stored and must still mean the same after a restart.
//!
//! The nodes of a cluster share those times, so they go by one clock, the
//! database's ([`follow_database`], at every heartbeat): between two readings a node
//! counts on from the last one by its monotonic clock, so a jump of its own wall
//! clock never makes it release a scheduled message early. A single broker goes
//! by its own wall clock.
use std::sync::LazyLock;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What the database's time readings count from.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The database's time at [`ORIGIN`], as the last reading puts it; [`OWN`]
/// until a reading comes (a single broker never has one).
static DATABASE_AT_ORIGIN: AtomicI64 = AtomicI64::new(OWN);

const OWN: i64 = i64::MIN;

pub fn now_ms() -> u64 {
    match DATABASE_AT_ORIGIN.load(Ordering::Relaxed) {
        OWN => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        at_origin => counted_on(at_origin, ORIGIN.elapsed()),
    }
}

/// From now on, goes by the database's clock, taken to read `database_ms` now:
/// the reading was made a moment ago, so this node's time is behind the
/// database's by that moment at most, never ahead, and a scheduled message
/// comes a few ms late rather than early.
pub fn follow_database(database_ms: u64) {
    let at_origin = database_at_origin(database_ms, ORIGIN.elapsed());
    DATABASE_AT_ORIGIN.store(at_origin, Ordering::Relaxed);
}

/// The database's time at [`ORIGIN`], when it read `database_ms` `since_origin` after.
fn database_at_origin(database_ms: u64, since_origin: Duration) -> i64 {
    database_ms as i64 - since_origin.as_millis() as i64
}

/// The database's time `since_origin` after [`ORIGIN`].
fn counted_on(at_origin: i64, since_origin: Duration) -> u64 {
    (at_origin + since_origin.as_millis() as i64).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_s_reading_is_counted_on_by_the_monotonic_clock() {
        let at_origin = database_at_origin(1_700_000_000_000, Duration::from_millis(200));
        assert_eq!(
            counted_on(at_origin, Duration::from_millis(200)),
            1_700_000_000_000
        );
        assert_eq!(
            counted_on(at_origin, Duration::from_millis(1_250)),
            1_700_000_001_050
        );
        assert_eq!(
            counted_on(database_at_origin(5, Duration::from_secs(1)), Duration::ZERO),
            0
        );
    }
}
