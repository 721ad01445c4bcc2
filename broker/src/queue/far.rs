//! Scheduled messages due far ahead wait on disk, not in memory.
//!
//! A queue's timeline (`State::scheduled`) is not bounded by the head's limits
//! (`tail.rs`): a message waiting for a later delivery must never hold back the
//! ones behind it. So without more, a million messages scheduled for tomorrow,
//! or redeliveries delayed by hours during an outage, would cost a million
//! entries in memory. Instead, once the timeline holds more than the head's
//! message bound (`max-read-page-messages`), the depager (`engine/depage.rs`)
//! moves the latest-due half out: they are indexed in the store by when they
//! are due, one batch per move ([`rebound_storage::Op::PutDues`], a write per
//! batch rather than per message), and leave memory, counted here as *far*.
//! Their records, and when each is due, are in the store already. Shortly before
//! the earliest far message is due ([`LOOKAHEAD_MS`]), the depager loads its
//! batch back, whole.
//!
//! Only stored messages go far, and not a redelivery of a group (it holds its
//! group's place; a scheduled send joins its group only when it is due), and
//! never one due within twice the lookahead, so that
//! what was just loaded is not moved out again, nor one that expires before
//! it is due, so that it expires on time (the expiry sweep looks at memory).
//!
//! The invariant, with the tail's cursor: a far message has an id up to the
//! cursor and is not in memory, and is in a batch of the index. A batch may
//! name more than the far messages (one removed while far); such an entry is
//! dropped with its batch. What a queue's index holds when the queue starts
//! being served here (start-up, or a lease taken over) is of an earlier
//! serving, whose far messages the depager reads again in id order and moves
//! out again: the depager deletes those batches before it moves any.
use rebound_storage::{Due, MessageId};

use super::{Entry, Queue};

/// How long before the earliest far message is due it is loaded back.
pub const LOOKAHEAD_MS: u64 = 2_000;

/// Whether a message due at `at_ms` is due late enough to go far: not within
/// twice the lookahead, so that what was just loaded back stays.
fn due_far_ahead(at_ms: u64, now_ms: u64) -> bool {
    at_ms > now_ms + 2 * LOOKAHEAD_MS
}

/// The far messages of a queue.
#[derive(Debug, Default)]
pub(super) struct Far {
    pub(super) count: u64,
    pub(super) bytes: u64,
    /// No far message is due before this entry of the index.
    first: Option<Due>,
    /// Whether the index holds only batches of this serving (`far.rs`'s docs).
    index_ours: bool,
    /// When a move found nothing it could move, the timeline's count of
    /// inserts then: it is looked at again only after half a bound more, so
    /// that a timeline of messages that must stay is not walked per arrival.
    stuck_at: Option<u64>,
}

impl Queue {
    /// Moves the latest-due half of the timeline out of memory if it holds
    /// more than the head's message bound: the entries taken, with when they
    /// are due, to index in the store. Only with [`Queue::tail`] held.
    pub fn move_far(&self, now_ms: u64) -> Vec<(Due, Entry)> {
        let mut st = self.lock();
        if st.closed || st.away || !st.wants_far(now_ms) {
            return Vec::new();
        }
        let len = st.scheduled.len() as u64;
        let keep = st.tail.limit.messages / 2;
        let cursor = st.tail.cursor;
        let victims: Vec<Due> = st
            .scheduled
            .latest()
            .take_while(|&(at_ms, _)| due_far_ahead(at_ms, now_ms))
            .filter(|&(at_ms, id)| {
                st.entries.get(&id).is_some_and(|slot| {
                    let entry = &slot.entry;
                    let expires_first = entry.expiration_ms != 0 && entry.expiration_ms <= at_ms;
                    let holds_group_place = entry
                        .group
                        .as_ref()
                        .is_some_and(|g| entry.delivery_count > 0 || st.groups.is_front(g, id));
                    entry.stored && !holds_group_place && !expires_first && id <= cursor
                })
            })
            .take((len - keep) as usize)
            .map(|(at_ms, id)| Due { at_ms, id })
            .collect();
        st.far.stuck_at = victims.is_empty().then(|| st.scheduled.inserted());
        let mut moved = Vec::with_capacity(victims.len());
        for due in victims {
            let entry = st.take(due.id).expect("an entry of the timeline");
            // Still the queue's: its bytes stay counted.
            st.grow(entry.size);
            st.far.count += 1;
            st.far.bytes += entry.size;
            st.far.first = Some(st.far.first.map_or(due, |first| first.min(due)));
            moved.push((due, entry));
        }
        moved
    }

    /// Their index entries could not be written: they come back to memory.
    pub fn far_failed(&self, moved: Vec<(Due, Entry)>, now_ms: u64) {
        let mut st = self.lock();
        for (due, entry) in moved {
            st.far.count -= 1;
            st.far.bytes -= entry.size;
            if !st.closed && !st.away {
                st.insert(entry, due.at_ms, now_ms);
            }
        }
    }

    /// Whether the due-time index may hold batches of an earlier serving, for
    /// the depager to delete; from then on it holds only this serving's
    /// (unless [`Queue::index_not_cleared`] says the delete failed).
    pub fn take_index_to_clear(&self) -> bool {
        !std::mem::replace(&mut self.lock().far.index_ours, true)
    }

    /// Deleting the earlier batches failed: to do again.
    pub fn index_not_cleared(&self) {
        self.lock().far.index_ours = false;
    }

    /// When the depager should load far messages back (ms since the epoch),
    /// if any are far.
    pub fn far_wake_ms(&self) -> Option<u64> {
        let st = self.lock();
        let first = st.far.first.filter(|_| st.far.count > 0)?;
        Some(first.at_ms.saturating_sub(LOOKAHEAD_MS))
    }

    /// Whether `id`, a message stored for this queue, is a far message (far
    /// ones are not named in memory: a stored message with an id up to the
    /// cursor that memory does not hold is far).
    pub fn is_far(&self, id: MessageId) -> bool {
        self.lock().holds_far(id)
    }

    /// Loads far messages back (read from storage with when they are due),
    /// `next` being the first index entry after those read. Only with
    /// [`Queue::tail`] held, from entries [`Queue::is_far`] said were far.
    pub fn load_far(&self, loaded: Vec<(Entry, u64)>, next: Option<Due>, now_ms: u64) {
        let mut st = self.lock();
        if st.closed || st.away {
            return;
        }
        for (entry, due_ms) in loaded {
            st.far.count -= 1;
            st.far.bytes -= entry.size;
            st.insert(entry, due_ms, now_ms);
        }
        st.far.first = next.filter(|_| st.far.count > 0);
        drop(st);
        self.wake.notify_one();
    }

    /// Takes a far message, read from storage as `entry`, out of the queue (a
    /// management operation removes or moves it, [`Queue::tail`] held): None
    /// if it is not far (any more).
    pub fn take_far(&self, entry: Entry) -> Option<Entry> {
        let mut st = self.lock();
        if !st.holds_far(entry.id) {
            return None;
        }
        st.far.count -= 1;
        st.far.bytes -= entry.size;
        st.shrink(entry.size);
        Some(entry)
    }
}

impl super::State {
    /// [`Queue::is_far`], under the lock.
    fn holds_far(&self, id: MessageId) -> bool {
        self.far.count > 0 && id <= self.tail.cursor && !self.entries.contains_key(&id)
    }

    /// Whether the timeline holds more than the head's bound and its latest
    /// entry may go far, so that the depager should move some of it.
    pub(super) fn wants_far(&self, now_ms: u64) -> bool {
        let bound = self.tail.limit.messages;
        self.scheduled.len() as u64 > bound
            && self
                .far
                .stuck_at
                .is_none_or(|at| self.scheduled.inserted() >= at.saturating_add(bound / 2))
            && self
                .scheduled
                .latest()
                .next()
                .is_some_and(|(at_ms, _)| due_far_ahead(at_ms, now_ms))
    }
}

#[cfg(test)]
mod tests {
    use rebound_storage::MessageRecord;

    use super::*;
    use crate::queue::paging_tests::queue;

    fn stored(id: MessageId) -> Entry {
        let record = MessageRecord {
            message_id: id,
            ..Default::default()
        };
        Entry::read_back(record, None).0
    }

    const NOW: u64 = 1_000_000;

    #[test]
    fn the_latest_due_half_goes_far_and_comes_back_in_time() {
        let q = queue(4);
        // Due in 10 s, 20 s, ... 60 s; one due at once; one due within the lookahead.
        q.enqueue((1..=6).map(|i| (stored(i), NOW + i * 10_000)), NOW);
        q.enqueue([(stored(7), 0), (stored(8), NOW + LOOKAHEAD_MS)], NOW);
        let before = q.snapshot();
        let moved = q.move_far(NOW);
        let ids: Vec<MessageId> = moved.iter().map(|(due, _)| due.id).collect();
        assert_eq!(ids, [6, 5, 4, 3, 2], "down to half the bound, never one due soon");
        let after = q.snapshot();
        assert_eq!((after.messages, after.bytes), (before.messages, before.bytes));
        assert_eq!((after.paged, after.scheduled), (5, before.scheduled));
        assert_eq!(q.far_wake_ms(), Some(NOW + 20_000 - LOOKAHEAD_MS));
        assert!(q.move_far(NOW).is_empty(), "within the bound now");

        assert!(q.is_far(2) && !q.is_far(1) && !q.is_far(9));
        let back = moved
            .into_iter()
            .rev()
            .take(2)
            .map(|(due, e)| (e, due.at_ms))
            .collect();
        q.load_far(
            back,
            Some(Due {
                at_ms: NOW + 40_000,
                id: 4,
            }),
            NOW,
        );
        assert!(!q.is_far(2) && q.is_far(4));
        assert_eq!(q.far_wake_ms(), Some(NOW + 40_000 - LOOKAHEAD_MS));
        assert_eq!(q.snapshot().paged, 3);

        // A management operation takes one; the others come back.
        assert!(q.take_far(stored(4)).is_some());
        assert!(q.take_far(stored(1)).is_none(), "in memory");
        assert_eq!(q.snapshot().messages, before.messages - 1);
        q.load_far(
            vec![(stored(5), NOW + 50_000), (stored(6), NOW + 60_000)],
            None,
            NOW,
        );
        assert_eq!(q.far_wake_ms(), None);
        assert_eq!(q.snapshot().paged, 0);
    }

    #[test]
    fn what_must_stay_stays_and_a_failed_index_write_puts_back() {
        let q = queue(2);
        // A redelivery of a group holds its place; a scheduled send of one does not yet.
        let mut grouped = stored(1);
        grouped.group = Some("g".into());
        grouped.delivery_count = 1;
        let mut scheduled_send = stored(5);
        scheduled_send.group = Some("h".into());
        let mut unstored = stored(2);
        unstored.stored = false;
        let mut expiring = stored(4);
        expiring.expiration_ms = NOW + 30_000;
        q.enqueue(
            [
                (grouped, NOW + 60_000),
                (unstored, NOW + 60_000),
                (stored(3), NOW + 60_000),
                (expiring, NOW + 60_000),
                (scheduled_send, NOW + 60_000),
            ],
            NOW,
        );
        let moved = q.move_far(NOW);
        assert_eq!(moved.iter().map(|(d, _)| d.id).collect::<Vec<_>>(), [5, 3]);
        q.far_failed(moved, NOW);
        assert_eq!((q.snapshot().paged, q.snapshot().scheduled), (0, 5));
        assert_eq!(q.far_wake_ms(), None);
    }

    #[test]
    fn a_timeline_that_must_stay_is_looked_at_again_only_after_half_a_bound() {
        let q = queue(4);
        let unstored = |id| {
            let mut e = stored(id);
            e.stored = false;
            (e, NOW + 60_000)
        };
        q.enqueue((1..=5).map(unstored), NOW);
        assert!(q.move_far(NOW).is_empty());
        q.enqueue([(stored(6), NOW + 60_000)], NOW);
        assert!(q.move_far(NOW).is_empty(), "one insert since");
        q.enqueue([(stored(7), NOW + 60_000)], NOW);
        let moved = q.move_far(NOW);
        assert_eq!(moved.iter().map(|(d, _)| d.id).collect::<Vec<_>>(), [7, 6]);
    }
}
