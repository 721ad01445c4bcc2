//! Message ids ordered by the time they become due: the data structure of
//! scheduled delivery.
//!
//! Artemis's `ScheduledDeliveryHandlerImpl` is, here, two parts: a queue keeps its
//! messages waiting for a delayed redelivery in a [`Timeline`], out of its
//! deliverable set, so they never block the messages behind them; and the queue's
//! dispatcher (`engine/dispatch.rs`) sleeps until [`Timeline::next_due`] and then
//! moves what [`Timeline::pop_due`] returns back to ready. Waiting costs no CPU. A
//! second timeline per queue orders messages by expiration time.
use std::collections::BTreeSet;

use rebound_storage::MessageId;

/// Message ids ordered by a due time (ms since the Unix epoch), earliest first.
#[derive(Debug, Default)]
pub struct Timeline {
    by_due: BTreeSet<(u64, MessageId)>,
    inserted: u64,
}

impl Timeline {
    pub fn insert(&mut self, due_ms: u64, id: MessageId) {
        self.by_due.insert((due_ms, id));
        self.inserted += 1;
    }

    /// How many inserts it has had.
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    pub fn remove(&mut self, due_ms: u64, id: MessageId) {
        self.by_due.remove(&(due_ms, id));
    }

    /// The earliest due time, if any message is waiting.
    pub fn next_due(&self) -> Option<u64> {
        self.by_due.first().map(|&(due, _)| due)
    }

    /// Removes and returns, in due order, every id due at or before `now_ms`.
    pub fn pop_due(&mut self, now_ms: u64) -> Vec<MessageId> {
        let mut due = Vec::new();
        while let Some(&(at, id)) = self.by_due.first() {
            if at > now_ms {
                break;
            }
            self.by_due.pop_first();
            due.push(id);
        }
        due
    }

    /// Every entry (due time, id), latest first.
    pub fn latest(&self) -> impl Iterator<Item = (u64, MessageId)> + '_ {
        self.by_due.iter().rev().copied()
    }

    pub fn len(&self) -> usize {
        self.by_due.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_due.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_due.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_only_what_is_due_in_time_order() {
        let mut t = Timeline::default();
        t.insert(300, 1);
        t.insert(100, 2);
        t.insert(200, 3);
        t.insert(200, 4);
        assert_eq!(t.next_due(), Some(100));
        assert_eq!(t.pop_due(200), vec![2, 3, 4]);
        assert_eq!(t.next_due(), Some(300));
        assert_eq!(t.pop_due(299), Vec::<u64>::new());
        t.remove(300, 1);
        assert_eq!(t.next_due(), None);
        assert!(t.is_empty());
    }

    #[test]
    fn due_at_u64_max_does_not_overflow() {
        let mut t = Timeline::default();
        t.insert(u64::MAX, 7);
        assert_eq!(t.pop_due(u64::MAX), vec![7]);
    }
}
