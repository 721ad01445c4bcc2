//! A queue served by another node (several brokers on one database): it stays
//! in the registry, so that routing and listings are the same on every node,
//! but holds nothing in memory and serves no consumer here.
//!
//! [`Queue::unload`] makes a queue away when this node gives up or loses its
//! lease: its consumers are dropped (their streams end, and the gRPC edge tells
//! them the queue moved), and its messages leave memory without a write: the
//! store has them, and the queue's new owner loads them. [`Queue::load`] makes
//! it served again when this node acquires the lease: the queue then holds its
//! whole content "on disk", as after a restart, and its depager counts and
//! reads the head (`tail.rs`, `engine/depage.rs`), with the delivery states as
//! stored. While away, what arrives for the queue is only stored.
use rebound_storage::MessageId;

use super::state::State;
use super::tail::Uncounted;
use super::{Entry, Queue};

impl Queue {
    /// Whether this node serves the queue.
    pub fn is_served(&self) -> bool {
        !self.lock().away
    }

    /// Which serving of the queue this is (one more at each [`Queue::load`]).
    pub fn serving(&self) -> u64 {
        self.lock().serving
    }

    /// Whether this node serves the queue under `serving` (see [`Queue::serving`]).
    pub fn is_serving(&self, serving: u64) -> bool {
        let st = self.lock();
        !st.away && st.serving == serving
    }

    /// Whether this node serves the queue, and did when `entry` was taken out
    /// of its memory.
    pub fn serves(&self, entry: &Entry) -> bool {
        self.lock().serves(entry)
    }

    /// Whether message `id` is in memory (ready, delivering or waiting).
    pub fn holds(&self, id: MessageId) -> bool {
        self.lock().entries.contains_key(&id)
    }

    /// Stops serving the queue here: consumers dropped, memory emptied.
    pub fn unload(&self) {
        let mut st = self.lock();
        st.away = true;
        st.consumers.clear();
        st.next_consumer = 0;
        st.entries.clear();
        st.ready.clear();
        st.scheduled.clear();
        st.expiring.clear();
        st.groups = Default::default();
        st.delivering = 0;
        st.cached = 0;
        st.scheduled_bytes = 0;
        st.far = Default::default();
        // Stored: the queue's next serving reads them.
        for (entry, ..) in st.behind_take.take().into_iter().flatten() {
            st.tail.abandoned(entry.id);
        }
        let bytes = st.bytes;
        st.shrink(bytes);
        st.tail.unloaded();
        drop(st);
        self.wake.notify_one();
        self.depage.notify_one();
    }

    /// Serves the queue here again, from what the store holds: every stored
    /// message of it is paged and not counted yet. The range to count has no
    /// upper end: another node's ids may be above those this node hands out
    /// (their clocks agree to a round trip).
    pub fn load(&self) {
        let mut st = self.lock();
        if st.closed || !st.away {
            return;
        }
        st.away = false;
        st.serving += 1;
        st.tail.uncounted = Some(Uncounted {
            counted_to: 0,
            horizon: MessageId::MAX,
        });
        drop(st);
        self.depage.notify_one();
    }
}

impl State {
    /// Whether the queue is served, under the serving `entry` was last in
    /// memory under (if it was).
    pub(super) fn serves(&self, entry: &Entry) -> bool {
        !self.away && entry.serving.is_none_or(|s| s == self.serving)
    }
}

#[cfg(test)]
mod tests {
    use rebound_storage::{MessageRecord, ScannedMessage};

    use super::*;
    use crate::queue::Entry;
    use crate::queue::paging_tests::queue;

    fn stored(id: MessageId) -> (Entry, u64) {
        let record = MessageRecord {
            message_id: id,
            ..Default::default()
        };
        (Entry::read_back(record, None).0, 0)
    }

    #[test]
    fn an_away_queue_holds_and_serves_nothing_and_comes_back_from_storage() {
        let queue = queue(10);
        queue.enqueue([stored(1), stored(2)], 0);
        let mut deliveries = queue.attach(1, 10, None).expect("attached");
        queue.unload();
        assert!(!queue.is_served());
        assert!(deliveries.try_recv().is_err(), "its consumer is gone");
        assert!(queue.attach(2, 10, None).is_none(), "nobody attaches here");
        queue.enqueue([stored(3)], 0);
        let snapshot = queue.snapshot();
        assert_eq!((snapshot.messages, snapshot.bytes), (0, 0));
        assert_eq!(queue.start_read(), None);

        queue.load();
        assert!(queue.is_served());
        assert_eq!(queue.to_count(), Some((0, MessageId::MAX)));
        // What the depager then reads is loaded.
        let read = (1..=3)
            .map(|id| ScannedMessage {
                record: MessageRecord {
                    message_id: id,
                    ..Default::default()
                },
                state: None,
            })
            .collect();
        assert_eq!(queue.start_read().map(|(after, ..)| after), Some(0));
        assert_eq!(queue.finish_read(read, 0), 3);
        assert_eq!(queue.snapshot().messages, 3);
    }

    /// What was taken out under one serving and comes back after the queue
    /// was unloaded and loaded again is of that serving: an ack whose commit
    /// the database refused late (the lease it was made under gone) must not
    /// put the message back, for the store has it, and the queue's next owner
    /// may have delivered and acked it meanwhile (`db-cut`, seed 32:
    /// `p1:1792` acked on one node, then delivered again by the node that
    /// had delivered it before the cut and served the queue again).
    #[test]
    fn what_was_taken_out_before_an_unload_does_not_come_back_after_a_load() {
        let queue = queue(10);
        queue.enqueue([stored(1), stored(2)], 0);
        let _consumer = queue.attach(1, 10, None).expect("attached");
        let (picks, ..) = queue.pick(0, true, &|_, _| true);
        let delivered: Vec<u64> = picks.iter().map(|p| p.delivery_id).collect();
        let (acked, _) = queue.take_delivered(1, &delivered);
        assert_eq!(acked.len(), 2, "taken out for an ack, whose commit is under way");
        queue.unload();
        queue.load();
        // The store no longer has 1 and 2 (another node served the queue meanwhile).
        queue.start_read().expect("a read");
        let scanned = ScannedMessage {
            record: MessageRecord {
                message_id: 3,
                ..Default::default()
            },
            state: None,
        };
        assert_eq!(queue.finish_read(vec![scanned], 0), 1);
        // The ack's commit is refused: its entries are of the serving before.
        assert!(queue.requeue(acked.into_iter().map(|e| (e, 0)), 0));
        assert!(!queue.holds(1) && !queue.holds(2), "back from an earlier serving");
        assert_eq!(queue.snapshot().messages, 1);
        // What this serving took out comes back.
        let _consumer = queue.attach(2, 10, None).expect("attached");
        let (picks, ..) = queue.pick(0, true, &|_, _| true);
        let (failed, _) = queue.take_delivered(2, &[picks[0].delivery_id]);
        queue.requeue(failed.into_iter().map(|e| (e, 0)), 0);
        assert!(queue.holds(3));
    }

    /// A count or read started before the queue went away and came back (a
    /// lease given up and taken again) was of another serving: what it brings
    /// back is dropped, and the queue is read again from the start.
    #[test]
    fn a_count_or_read_from_before_an_unload_is_dropped() {
        let queue = queue(10);
        queue.unload();
        queue.load();
        let counting = queue.start_count().expect("a range to count");
        let reading = queue.start_read().expect("a read");
        queue.unload();
        queue.load();
        queue.counted(&rebound_storage::QueueCount {
            messages: 0,
            bytes: 0,
            last: 0,
            more: false,
        });
        assert_eq!(queue.finish_read(Vec::new(), 0), 0);
        assert_eq!(queue.to_count(), Some(counting), "still to count");
        assert_eq!(queue.start_read(), Some(reading), "still to read");
    }
}
