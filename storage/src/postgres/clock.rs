//! The database's clock, as this process keeps it: the time the nodes of a
//! cluster share, for message ids ordered across nodes (`ids.rs`) and for the
//! broker's due times.
//!
//! Read from the database when the store opens and at every heartbeat, and
//! counted on between readings by the monotonic clock, which a jump of this
//! machine's wall clock never moves. A reading is taken as of the moment its
//! answer arrives, so this process's time is behind the database's by that
//! round trip at most, never ahead: a scheduled message comes a few ms late
//! rather than early.
//!
//! Each reading is thus a lower bound, and the clock goes by the highest of
//! the last [`WINDOW`]: a reading whose answer was held up (a lossy link
//! retransmits for hundreds of ms) does not set this node's time, and so its
//! message ids, back behind the other nodes'. When the highest is older than
//! that, the highest of those since takes over, not merely the latest (which
//! may be one held up): the drift of the monotonic clock from the database's
//! has no time to add up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

/// How long a reading stands against a lower later one.
const WINDOW: Duration = Duration::from_secs(30);

/// What readings count from: one origin for every clock of the process.
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

/// The SQL expression of the database's time, ms since the Unix epoch:
/// `clock_timestamp()`, the time of the statement, not of its transaction.
/// Rounded down, as every step here is, so that the clock is never ahead.
pub(super) const DATABASE_MS: &str = "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The database's time, as of its best recent reading.
#[derive(Debug)]
pub struct DatabaseClock {
    /// The database's time at [`ORIGIN`], as the reading gone by puts it.
    at_origin: AtomicI64,
    /// The readings of the last [`WINDOW`] that may yet be the highest, each
    /// higher than every one after it (so the first is the one gone by):
    /// when taken, in ms since [`ORIGIN`], and what they put `at_origin` at.
    readings: Mutex<VecDeque<(i64, i64)>>,
}

impl DatabaseClock {
    /// A clock that read `database_ms` just now.
    pub(super) fn read(database_ms: i64) -> DatabaseClock {
        let clock = DatabaseClock {
            at_origin: AtomicI64::new(i64::MIN),
            readings: Mutex::new(VecDeque::new()),
        };
        clock.reread(database_ms);
        clock
    }

    /// Goes by a new reading, `database_ms`, taken just now, unless a higher
    /// one of the last [`WINDOW`] stands.
    pub(super) fn reread(&self, database_ms: i64) {
        self.reread_at(database_ms, ORIGIN.elapsed());
    }

    fn reread_at(&self, database_ms: i64, since_origin: Duration) {
        let reading = at_origin(database_ms, since_origin);
        let now = since_origin.as_millis() as i64;
        let mut readings = self.readings.lock().unwrap_or_else(|e| e.into_inner());
        while readings.back().is_some_and(|&(_, before)| before <= reading) {
            readings.pop_back();
        }
        readings.push_back((now, reading));
        while readings
            .front()
            .is_some_and(|&(taken, _)| taken + (WINDOW.as_millis() as i64) <= now)
        {
            readings.pop_front();
        }
        let (_, best) = readings
            .front()
            .expect("the reading just taken is within the window");
        self.at_origin.store(*best, Ordering::Relaxed);
    }

    /// The database's time now, ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        counted_on(self.at_origin.load(Ordering::Relaxed), ORIGIN.elapsed())
    }
}

/// The database's time at [`ORIGIN`], when it read `database_ms` `since_origin` after
/// (the ms since then rounded up, as [`counted_on`] rounds them down).
fn at_origin(database_ms: i64, since_origin: Duration) -> i64 {
    database_ms.max(0) - since_origin.as_micros().div_ceil(1000) as i64
}

/// The database's time `since_origin` after [`ORIGIN`].
fn counted_on(at_origin: i64, since_origin: Duration) -> u64 {
    (at_origin + since_origin.as_millis() as i64).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_counted_on_by_the_monotonic_clock() {
        let at = at_origin(1_700_000_000_000, Duration::from_millis(200));
        assert_eq!(counted_on(at, Duration::from_millis(200)), 1_700_000_000_000);
        assert_eq!(counted_on(at, Duration::from_millis(1_250)), 1_700_000_001_050);
        assert_eq!(
            counted_on(at_origin(5, Duration::from_secs(1)), Duration::ZERO),
            0
        );
        // Read 0.4 ms past a millisecond: that fraction is not counted twice.
        let at = at_origin(1_000, Duration::from_micros(200_400));
        assert_eq!(counted_on(at, Duration::from_micros(200_900)), 999);
        assert_eq!(counted_on(at, Duration::from_micros(201_000)), 1_000);
    }

    #[test]
    fn a_late_reading_does_not_set_the_clock_back_until_the_better_one_is_old() {
        let clock = DatabaseClock::read(0);
        clock.reread_at(10_000, Duration::from_secs(10));
        // Its answer came 500 ms late: it puts the database 500 ms behind.
        clock.reread_at(10_500, Duration::from_millis(11_000));
        assert_eq!(clock.at_origin.load(Ordering::Relaxed), 0);
        clock.reread_at(12_000, Duration::from_secs(12));
        assert_eq!(clock.at_origin.load(Ordering::Relaxed), 0, "as good: taken");
        clock.reread_at(41_500, Duration::from_secs(42));
        assert_eq!(
            clock.at_origin.load(Ordering::Relaxed),
            -500,
            "the best reading is 30 s old: the new one goes"
        );
    }

    /// `loss`, seed 32: the best reading aged out, the next one was held up
    /// 400 ms, and a node's ids fell that far behind the others'.
    #[test]
    fn once_the_best_reading_is_old_the_best_since_takes_over() {
        let clock = DatabaseClock::read(0);
        clock.reread_at(10_000, Duration::from_secs(10));
        // Less good by 1 ms.
        clock.reread_at(19_999, Duration::from_secs(20));
        // Held up 400 ms, as the best is 30 s old.
        clock.reread_at(40_600, Duration::from_secs(41));
        assert_eq!(clock.at_origin.load(Ordering::Relaxed), -1);
    }

    #[test]
    fn a_higher_reading_replaces_the_last() {
        let clock = DatabaseClock::read(1_000);
        let before = clock.now_ms();
        // Less a part of a millisecond, rounded down.
        assert!((999..1_000 + 60_000).contains(&before), "{before}");
        clock.reread(5_000_000);
        assert!(clock.now_ms() >= 4_999_999);
    }
}
