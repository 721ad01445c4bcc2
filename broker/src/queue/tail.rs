//! Paging: a queue's stored backlog beyond a bounded head stays on disk only.
//!
//! Memory must not grow with the depth of a backlog, so a queue holds in memory
//! at most `max-read-page-messages` / `max-read-page-bytes` of its messages
//! (ready and being delivered, as Artemis counts them; messages waiting in the
//! timeline for a later delivery are not counted, see `State::head`). A stored
//! message that arrives while the head is full, or while older messages are
//! already paged, is only counted here: its record is in the store already, so
//! paging writes nothing. The depager (`engine/depage.rs`) reads paged messages
//! back in id order, in large batches, when the head falls below half its
//! bound, or has room while a consumer with credit has nothing ready (as in
//! Artemis: reading back is bounded by the head's bound, not by the address's
//! `max-size-bytes`, so a consumer that takes many messages before it acks
//! is never starved). Messages not in the store (non-durable) and messages that come back
//! (nacks, released deliveries) always stay in memory.
//!
//! The invariant, with `cursor` the highest id the depager has passed: every
//! stored message of the queue with an id up to `cursor` is in memory, every
//! one above it is paged (and counted, but for a range still being counted
//! after a restart).
//!
//! The race this has to close: a send is committed first and enqueued after,
//! and commits finish out of id order. A depager read could see a message that
//! is committed but not yet enqueued, load it, and then the enqueue would add
//! it a second time. So a stored arrival is *pending* from before its commit
//! until it is enqueued ([`Tail::arriving`]), and the depager never passes a
//! pending id; a message enqueued as paged while a read was in flight
//! (*late*) stops the cursor before it unless the read saw it.
use std::collections::BTreeSet;

use rebound_storage::{MessageId, ScannedMessage};

use super::{Entry, Queue};

/// The head's bound: `max-read-page-messages` and `max-read-page-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    pub messages: u64,
    pub bytes: u64,
}

impl Default for ReadLimit {
    /// No bound until the queue's settings are applied.
    fn default() -> ReadLimit {
        ReadLimit {
            messages: u64::MAX,
            bytes: u64::MAX,
        }
    }
}

/// After a restart, paged messages with ids in `(counted_to, horizon)` are not
/// counted yet (start-up reads only the heads of queues).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uncounted {
    pub counted_to: MessageId,
    pub horizon: MessageId,
}

impl Uncounted {
    fn contains(&self, id: MessageId) -> bool {
        id > self.counted_to && id < self.horizon
    }
}

#[derive(Debug, Default)]
pub(super) struct Tail {
    pub(super) cursor: MessageId,
    /// Paged messages counted, and their bytes.
    pub(super) count: u64,
    pub(super) bytes: u64,
    pub(super) uncounted: Option<Uncounted>,
    pub(super) limit: ReadLimit,
    /// Stored arrivals in a commit not yet enqueued.
    pending: BTreeSet<MessageId>,
    /// Pending arrivals stored with an inbox row that a node taking the
    /// queue over deleted (`Queue::emptied_from_inbox`): their sender
    /// enqueues them after all, as no drain of the inbox will.
    emptied: BTreeSet<MessageId>,
    /// While a depager read is in flight: the ids paged at arrival meanwhile.
    late: Option<Vec<MessageId>>,
    /// Whether a depager count is in flight. A queue unloaded meanwhile gets a
    /// new tail (`unloaded`) without it or `late`, so that what an older count
    /// or read brings back is dropped rather than applied to the new one.
    counting: bool,
}

/// Where a message added to the queue goes.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Goes {
    Memory,
    Paged,
}

impl Tail {
    pub(super) fn is_empty(&self) -> bool {
        self.count == 0 && self.uncounted.is_none()
    }

    /// A stored message is about to be committed for this queue.
    pub(super) fn arriving(&mut self, id: MessageId) {
        self.pending.insert(id);
    }

    /// Whether `id` is committed (or being committed) but not enqueued yet.
    pub(super) fn is_pending(&self, id: MessageId) -> bool {
        self.pending.contains(&id)
    }

    /// The stored arrivals being committed now.
    pub(super) fn arriving_now(&self) -> Vec<MessageId> {
        self.pending.iter().copied().collect()
    }

    /// Its commit failed: it never arrives.
    pub(super) fn abandoned(&mut self, id: MessageId) {
        self.pending.remove(&id);
        self.emptied.remove(&id);
    }

    /// The queue left memory (`away.rs`): nothing is paged any more, but the
    /// bound stays, and so do the arrivals still being committed, so that a
    /// depager of the queue loaded again cannot load one before it arrives.
    pub(super) fn unloaded(&mut self) {
        *self = Tail {
            limit: self.limit,
            pending: std::mem::take(&mut self.pending),
            emptied: std::mem::take(&mut self.emptied),
            ..Tail::default()
        };
    }

    /// Decides where a message goes and counts it if it is paged. `head_full`:
    /// a new arrival finds the head at its bound (a message coming back never
    /// does: it stays in memory).
    pub(super) fn admit(&mut self, id: MessageId, stored: bool, size: u64, head_full: bool) -> Goes {
        if !stored {
            return Goes::Memory;
        }
        self.pending.remove(&id);
        self.emptied.remove(&id);
        if id <= self.cursor {
            return Goes::Memory;
        }
        if !self.is_empty() || head_full {
            self.count += 1;
            self.bytes += size;
            if let Some(late) = &mut self.late {
                late.push(id);
            }
            return Goes::Paged;
        }
        self.cursor = id;
        Goes::Memory
    }

    /// Whether a head of `messages` and `bytes` is at its bound.
    pub(super) fn full(&self, messages: u64, bytes: u64) -> bool {
        messages >= self.limit.messages || bytes >= self.limit.bytes
    }

    /// Whether the depager should read: there are paged messages, and the head
    /// is below half its bound (reading a half-head at a time keeps ahead of
    /// the consumers), or has room and a consumer is `starving`: has credit and
    /// nothing ready (it may be one that takes many messages before it acks).
    pub(super) fn wants_depage(&self, messages: u64, bytes: u64, starving: impl FnOnce() -> bool) -> bool {
        !self.is_empty()
            && ((messages < self.limit.messages.div_ceil(2) && bytes < self.limit.bytes.div_ceil(2))
                || (!self.full(messages, bytes) && starving()))
    }

    /// A depager read starts: after which id, and how much it may read.
    pub(super) fn start_read(&mut self, messages: u64, bytes: u64) -> (MessageId, u64, u64) {
        self.late = Some(Vec::new());
        (
            self.cursor,
            self.limit.messages.saturating_sub(messages).max(1),
            self.limit.bytes.saturating_sub(bytes).max(1),
        )
    }

    /// A depager read failed: nothing changes.
    pub(super) fn abort_read(&mut self) {
        self.late = None;
    }

    /// A depager read of messages `read` (id and size, ascending, all above the
    /// cursor) is back: how many of them to load into memory (a prefix), the
    /// cursor moved past them and the tail's figures updated.
    pub(super) fn finish_read(&mut self, read: &[(MessageId, u64)]) -> Loaded {
        let Some(late) = self.late.take() else {
            return Loaded::default();
        };
        if read.is_empty() && late.is_empty() {
            // Nothing above the cursor, and nothing arrived during the read: no
            // range is left to count, and what the count says is paged is not in
            // the store (removed behind the queue's back), so it is forgotten
            // rather than waited for.
            self.uncounted = None;
            self.count = 0;
            return Loaded {
                take: 0,
                added_bytes: 0,
                forgotten_bytes: std::mem::take(&mut self.bytes),
            };
        }
        let read_set: BTreeSet<MessageId> = read.iter().map(|&(id, _)| id).collect();
        // The read may have missed what was enqueued while it ran.
        let missed = late.into_iter().filter(|id| !read_set.contains(id)).min();
        let stop = [self.pending.first().copied(), missed]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(MessageId::MAX);
        let take = read
            .iter()
            .take_while(|&&(id, _)| id < stop && id > self.cursor)
            .count();
        let mut added_bytes = 0;
        for &(id, size) in &read[..take] {
            if !self.left(id, size) {
                added_bytes += size;
            }
        }
        if let Some(&(last, _)) = read[..take].last() {
            self.cursor = last;
        }
        if let Some(u) = &mut self.uncounted {
            u.counted_to = u.counted_to.max(self.cursor);
            if u.counted_to.saturating_add(1) >= u.horizon {
                self.uncounted = None;
            }
        }
        Loaded {
            take,
            added_bytes,
            forgotten_bytes: 0,
        }
    }

    /// A paged message `id` of `size` bytes leaves the tail (loaded into memory
    /// or removed by management). Returns whether it had been counted, i.e.
    /// whether the queue's byte total already includes it.
    pub(super) fn left(&mut self, id: MessageId, size: u64) -> bool {
        let counted = !self.uncounted.is_some_and(|u| u.contains(id));
        if counted {
            self.count = self.count.saturating_sub(1);
            self.bytes = self.bytes.saturating_sub(size);
        }
        counted
    }

    /// The next range to count after a restart, if any: after, before.
    pub(super) fn to_count(&self) -> Option<(MessageId, MessageId)> {
        self.uncounted.map(|u| (u.counted_to, u.horizon))
    }

    /// A depager count of [`Tail::to_count`]'s range starts.
    pub(super) fn start_count(&mut self) -> Option<(MessageId, MessageId)> {
        self.counting = self.uncounted.is_some();
        self.to_count()
    }

    /// Counted `messages` of `bytes` up to `last`; `done` when the range is.
    /// Returns whether the count was taken (it was started on this tail).
    pub(super) fn counted(&mut self, messages: u64, bytes: u64, last: MessageId, done: bool) -> bool {
        if !std::mem::take(&mut self.counting) {
            return false;
        }
        self.count += messages;
        self.bytes += bytes;
        if let Some(u) = &mut self.uncounted {
            u.counted_to = u.counted_to.max(last);
            if done {
                self.uncounted = None;
            }
        }
        true
    }
}

/// What [`Tail::finish_read`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Loaded {
    /// How many messages of the read to load.
    pub(super) take: usize,
    /// Bytes of those the queue had not counted yet.
    pub(super) added_bytes: u64,
    /// Bytes of paged messages forgotten.
    pub(super) forgotten_bytes: u64,
}

/// The queue's side of paging: what the send path announces, and what the
/// depager counts, reads back and takes.
impl Queue {
    /// Stored messages about to be committed for this queue (the race above):
    /// the depager waits for them to be enqueued or [`Queue::abandon`]ed.
    pub fn arriving(&self, ids: impl IntoIterator<Item = MessageId>) {
        let mut st = self.lock();
        ids.into_iter().for_each(|id| st.tail.arriving(id));
    }

    /// The stored messages being committed for this queue now (announced by
    /// [`Queue::arriving`], neither enqueued nor abandoned yet).
    pub fn arriving_now(&self) -> Vec<MessageId> {
        self.lock().tail.arriving_now()
    }

    /// Whether message `id` is still being committed for this queue.
    pub fn is_arriving(&self, id: MessageId) -> bool {
        self.lock().tail.is_pending(id)
    }

    /// Their commit failed.
    pub fn abandon(&self, ids: impl IntoIterator<Item = MessageId>) {
        let mut st = self.lock();
        ids.into_iter().for_each(|id| st.tail.abandoned(id));
    }

    /// A node taking the queue over deleted the inbox rows of `ids`: those
    /// still being committed here are enqueued by their sender after all
    /// ([`Queue::leaves_to_inbox`]), since the inbox no longer brings them
    /// and the depager waits for them.
    pub fn emptied_from_inbox(&self, ids: impl IntoIterator<Item = MessageId>) {
        let mut st = self.lock();
        for id in ids {
            if st.tail.pending.contains(&id) {
                st.tail.emptied.insert(id);
            }
        }
    }

    /// Whether arrival `id`, committed with an inbox row, is left to the
    /// inbox (and abandoned here), rather than enqueued by its sender.
    pub fn leaves_to_inbox(&self, id: MessageId) -> bool {
        let mut st = self.lock();
        if st.tail.emptied.contains(&id) {
            return false;
        }
        st.tail.abandoned(id);
        true
    }

    /// Sets the bound of the messages kept in memory.
    pub fn set_read_limit(&self, limit: ReadLimit) {
        let mut st = self.lock();
        st.tail.limit = limit;
        let wants = st.wants_depage() || st.wants_far(crate::time::now_ms());
        drop(st);
        if wants {
            self.depage.notify_one();
        }
    }

    /// After a restart: the queue's stored messages with ids above the last one
    /// recovered and below `horizon` were not read (start-up reads heads only).
    pub fn recovered_more(&self, horizon: MessageId) {
        let mut st = self.lock();
        st.tail.uncounted = Some(Uncounted {
            counted_to: st.tail.cursor,
            horizon,
        });
        drop(st);
        self.depage.notify_one();
    }

    /// The range the depager should count next, if any: ids after, before.
    pub fn to_count(&self) -> Option<(MessageId, MessageId)> {
        self.lock().tail.to_count()
    }

    /// Starts a depager count of [`Queue::to_count`]'s range, followed by
    /// [`Queue::counted`]. Only with [`Queue::tail`] held.
    pub fn start_count(&self) -> Option<(MessageId, MessageId)> {
        self.lock().tail.start_count()
    }

    /// Paged messages counted (see [`Queue::start_count`]).
    pub fn counted(&self, count: &rebound_storage::QueueCount) {
        let mut st = self.lock();
        if st
            .tail
            .counted(count.messages, count.bytes, count.last, !count.more)
        {
            st.grow(count.bytes);
        }
    }

    /// Starts a depager read if the head wants one: the id to read after, and
    /// how many messages and bytes at most. Followed by [`Queue::finish_read`]
    /// or [`Queue::abort_read`]. Only with [`Queue::tail`] held.
    pub fn start_read(&self) -> Option<(MessageId, u64, u64)> {
        let mut st = self.lock();
        if !st.wants_depage() {
            return None;
        }
        let (messages, bytes) = st.head();
        Some(st.tail.start_read(messages, bytes))
    }

    /// A read failed.
    pub fn abort_read(&self) {
        self.lock().tail.abort_read();
    }

    /// Loads what a depager read found into memory (as much of it as may be,
    /// see [`Tail::finish_read`]); returns how many it loaded.
    pub fn finish_read(&self, read: Vec<ScannedMessage>, now_ms: u64) -> usize {
        let ids: Vec<(MessageId, u64)> = read
            .iter()
            .map(|m| (m.record.message_id, prost::Message::encoded_len(&m.record) as u64))
            .collect();
        let mut st = self.lock();
        if st.closed || st.away {
            return 0;
        }
        let loaded = st.tail.finish_read(&ids);
        st.grow(loaded.added_bytes);
        st.shrink(loaded.forgotten_bytes);
        for message in read.into_iter().take(loaded.take) {
            let (entry, due_ms) = Entry::read_back(message.record, message.state);
            st.insert(entry, due_ms, now_ms);
        }
        drop(st);
        if loaded.take > 0 {
            self.wake.notify_one();
        }
        loaded.take
    }

    /// Takes a paged message, read from storage as `entry`, out of the queue (a
    /// management operation removes or moves it, [`Queue::tail`] held): None if
    /// it is not paged (any more, or not yet enqueued).
    pub fn take_paged(&self, entry: Entry) -> Option<Entry> {
        let mut st = self.lock();
        if entry.id <= st.tail.cursor || st.tail.is_pending(entry.id) || st.closed || st.away {
            return None;
        }
        if st.tail.left(entry.id, entry.size) {
            st.shrink(entry.size);
        }
        Some(entry)
    }
}
