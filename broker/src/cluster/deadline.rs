//! The local side of a lease: until when this node may serve its queues, by
//! its own monotonic clock, without having heard from the database.
//!
//! A renewal (or acquisition) sets the lease's expiry to the database's
//! `now()` plus the lease, and the database reads its clock after this node
//! sent the statement. So "sent at + lease", on this node's clock, is never
//! later than the expiry the database recorded, whatever the network delay;
//! the node stops serving a margin before that (clocks run at slightly
//! different rates, and stopping takes a moment), so it has stopped before
//! another node can take the lease. Nodes never compare wall clocks.
use std::time::{Duration, Instant};

/// How far before the lease runs out (by the local clock) the node stops
/// serving: a quarter of the lease. With a heartbeat every third of the
/// lease, two heartbeats in a row may fail before the node stops.
pub fn margin(lease: Duration) -> Duration {
    lease / 4
}

/// Until when the node may serve, from the last renewal that succeeded.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    lease: Duration,
    until: Option<Instant>,
}

impl Deadline {
    /// No renewal yet: nothing may be served.
    pub fn new(lease: Duration) -> Deadline {
        Deadline { lease, until: None }
    }

    /// A renewal sent at `sent_at` succeeded.
    pub fn renewed(&mut self, sent_at: Instant) {
        let until = sent_at + self.lease - margin(self.lease);
        self.until = Some(self.until.map_or(until, |u| u.max(until)));
    }

    /// Whether the node may still serve at `now`.
    pub fn holds(&self, now: Instant) -> bool {
        self.until.is_some_and(|until| now < until)
    }

    /// The instant it stops holding, if it holds at all.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }

    /// Forgets every renewal (the node stopped serving).
    pub fn lapse(&mut self) {
        self.until = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_holds_until_a_margin_before_it_runs_out_from_when_the_renewal_was_sent() {
        let lease = Duration::from_secs(8);
        let start = Instant::now();
        let mut deadline = Deadline::new(lease);
        assert!(!deadline.holds(start), "not before the first renewal");
        deadline.renewed(start);
        assert!(deadline.holds(start + Duration::from_millis(5999)));
        assert!(
            !deadline.holds(start + Duration::from_secs(6)),
            "2 s (a quarter) early"
        );
        // A renewal whose answer came late does not shorten what a later one gave.
        deadline.renewed(start + Duration::from_secs(2));
        deadline.renewed(start + Duration::from_secs(1));
        assert!(deadline.holds(start + Duration::from_millis(7999)));
        deadline.lapse();
        assert!(!deadline.holds(start));
    }
}
