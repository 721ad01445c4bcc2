//! An inbox take under way (several brokers on one database): the queue's
//! node is taking the messages other nodes stored for it
//! (`engine/cluster/serving.rs`), and the database deleted their inbox rows
//! before its answer comes back. A send of this node committed meanwhile
//! finds no inbox rows to join (`rebound_storage::postgres`'s inbox), though
//! it may have been sent after them; enqueued at once, it would be delivered
//! before them (`loss`, seed 32: `p3:8972` 210 ms before `p3:8969`, the take's
//! answer held up by a lost packet). So new arrivals wait behind the take,
//! and are enqueued right after what it brought.
use super::{Arrival, Entry, Queue};

/// An inbox take of a queue; the arrivals it held back go in when it is
/// done or dropped.
pub struct Taking<'a> {
    queue: &'a Queue,
}

impl Queue {
    /// An inbox take starts: new arrivals wait until it is done. One at a
    /// time (the caller holds [`Queue::tail`]).
    pub fn taking_inbox(&self) -> Taking<'_> {
        self.lock().behind_take = Some(Vec::new());
        Taking { queue: self }
    }
}

impl Taking<'_> {
    /// The take brought `entries`: they go in, then the arrivals that waited
    /// for them (but for those it brought too).
    pub fn took(self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) {
        let waited = self.queue.lock().behind_take.take();
        self.queue.enqueue(entries, now_ms);
        self.release(waited, now_ms);
    }

    fn release(&self, waited: Option<Vec<(Entry, u64, Arrival)>>, now_ms: u64) {
        for (entry, due_ms, arrival) in waited.into_iter().flatten() {
            if !self.queue.holds(entry.id) {
                self.queue.add([(entry, due_ms)], now_ms, arrival);
            }
        }
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        let waited = self.queue.lock().behind_take.take();
        self.release(waited, crate::time::now_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::paging_tests::{arrival as stored, queue};

    fn delivered_in_order(queue: &Queue) -> Vec<u64> {
        let _consumer = queue.attach(1, 10, None).expect("attached");
        let (picks, ..) = queue.pick(0, false, &|_, _| true);
        picks.iter().map(|p| p.entry.id).collect()
    }

    #[test]
    fn a_send_committed_while_an_inbox_take_is_under_way_comes_after_what_the_take_brings() {
        let queue = queue(10);
        let taking = queue.taking_inbox();
        queue.arriving([5]);
        queue.enqueue([stored(5)], 0);
        assert!(!queue.holds(5), "waits for the take");
        taking.took([stored(3)], 0);
        assert_eq!(delivered_in_order(&queue), [3, 5]);
    }

    #[test]
    fn a_take_that_fails_lets_what_waited_go_in() {
        let queue = queue(10);
        let taking = queue.taking_inbox();
        queue.enqueue([stored(5)], 0);
        drop(taking);
        assert_eq!(delivered_in_order(&queue), [5]);
    }

    #[test]
    fn what_waited_and_the_take_brought_too_goes_in_once() {
        let queue = queue(10);
        let taking = queue.taking_inbox();
        queue.enqueue([stored(5)], 0);
        taking.took([stored(5)], 0);
        let snapshot = queue.snapshot();
        assert_eq!((snapshot.messages, snapshot.bytes), (1, stored(5).0.size));
    }

    #[test]
    fn an_unload_leaves_what_waited_to_the_store() {
        let queue = queue(10);
        let taking = queue.taking_inbox();
        queue.arriving([5]);
        queue.enqueue([stored(5)], 0);
        queue.unload();
        assert!(!queue.is_arriving(5), "the next serving may read it");
        drop(taking);
        assert!(!queue.holds(5));
    }
}
