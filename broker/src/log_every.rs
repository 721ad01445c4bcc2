//! A log line about an event that may come in floods (a refused connection, a
//! failed commit): written at most once per period, with how many times the
//! event happened since the last line, so that the flood cannot flood the log.
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct LogEvery {
    /// When the last line was written.
    last: Option<Instant>,
    /// Events since then.
    since: u64,
}

impl LogEvery {
    /// Counts one event; when a line is due (none in the last `period`), the
    /// count to write: this event and those since the last line.
    pub fn event(&mut self, period: Duration) -> Option<u64> {
        self.since += 1;
        if self.last.is_some_and(|at| at.elapsed() < period) {
            return None;
        }
        self.last = Some(Instant::now());
        Some(std::mem::take(&mut self.since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_at_most_once_per_period_with_the_count_since_the_last() {
        let mut log = LogEvery::default();
        assert_eq!(log.event(Duration::from_secs(60)), Some(1));
        assert_eq!(log.event(Duration::from_secs(60)), None);
        assert_eq!(log.event(Duration::from_secs(60)), None);
        assert_eq!(log.event(Duration::ZERO), Some(3));
        assert_eq!(log.event(Duration::ZERO), Some(1));
    }
}
