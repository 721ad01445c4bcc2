//! A queue's in-memory state: which messages are ready, being delivered or waiting
//! for a delayed redelivery, and which consumers may receive how many more.
//!
//! Storage is the source of truth across restarts; this is the index the broker
//! works from while running. A durable message costs an [`Entry`] here (its id,
//! priority, size, delivery count), not its body, which stays in storage until the
//! message is delivered. Everything here is synchronous and short: callers hold the
//! lock only to move entries between the sets, never across an await. One exception
//! reads storage under it: a filtered consumer's pick may need a body that only
//! storage has to evaluate its selector, which is why that scan is bounded
//! (`FILTER_SCAN_LIMIT` in `consumers.rs`).
//!
//! Ready messages are ordered by priority, then by id (= send order), so a message
//! that comes back without a delay returns to its original position, as in Artemis.
//! Messages of a group are delivered one at a time in send order ([`groups`]): only
//! a group's front is ever in a ready set.
//!
//! [`Queue`] is one type; this file holds its core (adding messages, taking them
//! out, closing, the views) and the others an idea each:
//!
//! | file | what |
//! |---|---|
//! | `entry.rs` | what a queue holds and hands out: entries, picks, counters, snapshots |
//! | `state.rs` | the sets messages are kept in, and inserting into and taking out of them |
//! | `consumers.rs` | consumers: attaching, credit, the pick, deliveries until settled |
//! | `groups.rs` | message groups: one delivery at a time per group, bound to a consumer |
//! | `tail.rs` | paging: the stored backlog beyond a bounded head stays on disk |
//! | `far.rs` | scheduled messages due far ahead wait on disk |
//! | `away.rs` | a queue served by another node holds nothing here |
//! | `inbox.rs` | arrivals wait behind an inbox take under way |
//! | `tests.rs` | unit tests: credit, order, scheduling, filters, the body cache |
//! | `group_tests.rs` | unit tests of message groups |
//! | `paging_tests.rs` | unit tests of paging |
mod away;
mod consumers;
mod entry;
mod far;
mod groups;
mod inbox;
mod state;
mod tail;

use std::sync::{Mutex, MutexGuard};

use rebound_config::RoutingType;
use rebound_storage::{MessageId, QueueId};
use tokio::sync::Notify;

pub use entry::{
    BODY_CACHE_BYTES, BrowseState, ConsumerId, Counters, Dispatched, Entry, MAX_FAILURES_KEPT, Pick, Snapshot,
};
pub use far::LOOKAHEAD_MS;
pub use inbox::Taking;
use state::{Place, State};
use tail::Goes;
pub use tail::ReadLimit;

use crate::address_size::Meter;
use crate::outage::Outage;

/// How a message comes to [`Queue::add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arrival {
    /// Sent or moved here: paged if the head is full or older ones are paged.
    New,
    /// Sent past a size limit under PAGE: paged if stored.
    ToDisk,
    /// Back after a delivery, or recovered: kept in memory.
    Back,
}

/// A queue bound to an address.
#[derive(Debug)]
pub struct Queue {
    pub id: QueueId,
    pub name: String,
    pub address: String,
    pub routing_type: RoutingType,
    pub durable: bool,
    pub auto_created: bool,
    pub filter: Option<rebound_selector::Selector>,
    state: Mutex<State>,
    /// Wakes the queue's dispatcher: new messages, new credit, a message back.
    pub wake: Notify,
    /// Wakes the queue's depager: the head fell below half its bound.
    pub depage: Notify,
    /// Held by whoever reads or changes the paged tail in storage (the depager,
    /// management operations): one at a time.
    pub tail: tokio::sync::Mutex<()>,
}

impl Queue {
    pub fn new(
        id: QueueId,
        name: String,
        address: String,
        routing_type: RoutingType,
        durable: bool,
        auto_created: bool,
        filter: Option<rebound_selector::Selector>,
    ) -> Queue {
        Queue {
            id,
            name,
            address,
            routing_type,
            durable,
            auto_created,
            filter,
            state: Mutex::new(State::default()),
            wake: Notify::new(),
            depage: Notify::new(),
            tail: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves only in-memory sets behind; the data
        // on disk is intact, so carrying on beats poisoning every later call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds new messages (sent or moved here); `due_ms` > now schedules them.
    pub fn enqueue(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) -> bool {
        self.add(entries, now_ms, Arrival::New)
    }

    /// Adds new messages that go to the paged tail whatever room the head has
    /// (stored ones; those not stored stay in memory): sent past a size limit
    /// under `address-full-policy = PAGE`.
    pub fn enqueue_to_disk(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) -> bool {
        self.add(entries, now_ms, Arrival::ToDisk)
    }

    /// Puts back messages this queue already counted: recovered at start-up, or back
    /// after a failed or released delivery. Returns false if the queue was deleted.
    pub fn requeue(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) -> bool {
        self.add(entries, now_ms, Arrival::Back)
    }

    fn add(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64, arrival: Arrival) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        if st.away {
            // Stored, which is all this node does for a queue another serves.
            entries
                .into_iter()
                .for_each(|(entry, _)| st.tail.abandoned(entry.id));
            return true;
        }
        for (entry, due_ms) in entries {
            // Taken out under an earlier serving (its commit answered late): the
            // store has it, and this serving reads it there if it is still stored.
            if !st.serves(&entry) {
                continue;
            }
            // A new arrival waits behind an inbox take under way (`inbox.rs`).
            if let Some(behind) = &mut st.behind_take
                && arrival != Arrival::Back
            {
                behind.push((entry, due_ms, arrival));
                continue;
            }
            // Only a new arrival finds the head full; one coming back stays in memory.
            let head_full = match arrival {
                Arrival::New => {
                    let (messages, bytes) = st.head();
                    st.tail.full(messages, bytes)
                }
                Arrival::ToDisk => true,
                Arrival::Back => false,
            };
            if arrival != Arrival::Back {
                st.counters.added += 1;
            }
            st.grow(entry.size);
            if st.tail.admit(entry.id, entry.stored, entry.size, head_full) == Goes::Memory {
                st.insert(entry, due_ms, now_ms);
            }
        }
        let far = st.wants_far(now_ms);
        drop(st);
        self.wake.notify_one();
        if far {
            self.depage.notify_one();
        }
        true
    }

    /// Counts what the queue holds into `meter` from now on (its address's and the
    /// broker's totals), or stops counting it (`None`) and takes it away.
    pub fn measure(&self, meter: Option<Meter>) {
        let mut st = self.lock();
        if let Some(old) = &st.meter {
            old.sub(st.bytes);
        }
        if let Some(new) = &meter {
            new.add(st.bytes);
        }
        st.meter = meter;
    }

    /// Wakes the depager if the head wants more.
    fn shrunk(&self, st: &State) {
        if st.wants_depage() {
            self.depage.notify_one();
        }
    }

    /// How many messages of its group wait behind `entry`, if it holds its group.
    pub fn held_behind(&self, entry: &Entry) -> Option<usize> {
        let group = entry.group.as_deref()?;
        self.lock().groups.held_behind(group, entry.id)
    }

    /// Takes a message out of the queue unless it is being delivered.
    pub fn take_idle(&self, id: MessageId) -> Option<Entry> {
        let mut st = self.lock();
        let taken = match st.entries.get(&id)?.place {
            Place::Delivering { .. } => None,
            _ => st.take(id),
        };
        self.shrunk(&st);
        drop(st);
        // Its group may have moved on.
        self.wake.notify_one();
        taken
    }

    /// Removes every message not being delivered; returns them.
    pub fn purge(&self) -> Vec<Entry> {
        let mut st = self.lock();
        let ids: Vec<MessageId> = st
            .entries
            .iter()
            .filter(|(_, s)| !matches!(s.place, Place::Delivering { .. }))
            .map(|(&id, _)| id)
            .collect();
        let taken = ids.into_iter().filter_map(|id| st.take(id)).collect();
        self.shrunk(&st);
        drop(st);
        self.wake.notify_one();
        taken
    }

    /// Marks the queue deleted: it accepts nothing more, its consumers are dropped
    /// (their streams end) and its dispatcher stops.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.consumers.clear();
        st.entries.clear();
        st.ready.clear();
        st.scheduled.clear();
        st.expiring.clear();
        st.groups = Default::default();
        st.cached = 0;
        st.scheduled_bytes = 0;
        drop(st);
        self.wake.notify_one();
        self.depage.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Up to `limit` entries in memory in queue order: ready, ready in a group (its
    /// front, or behind it), delivering, scheduled; and the cursor at that moment
    /// (the paged messages are the stored ones above it).
    pub fn browse(&self, limit: usize) -> (Vec<(Entry, BrowseState)>, MessageId) {
        let st = self.lock();
        let cursor = st.tail.cursor;
        let ready = st.ready.iter().map(|&(_, id)| id);
        let grouped = st
            .entries
            .iter()
            .filter(|(_, s)| matches!(s.place, Place::ReadyFor(_) | Place::Behind(_)))
            .map(|(&id, _)| id);
        let delivering: Vec<MessageId> = st
            .entries
            .iter()
            .filter(|(_, s)| matches!(s.place, Place::Delivering { .. }))
            .map(|(&id, _)| id)
            .collect();
        let mut scheduled: Vec<(u64, MessageId)> = st
            .entries
            .iter()
            .filter_map(|(&id, s)| match s.place {
                Place::Scheduled(due) => Some((due, id)),
                _ => None,
            })
            .collect();
        scheduled.sort_unstable();
        let entries = ready
            .chain(grouped)
            .chain(delivering)
            .chain(scheduled.into_iter().map(|(_, id)| id))
            .take(limit)
            .filter_map(|id| {
                let slot = st.entries.get(&id)?;
                let state = match slot.place {
                    Place::Behind(due) if due > 0 => BrowseState::Scheduled(due),
                    Place::Ready | Place::ReadyFor(_) | Place::Behind(_) => BrowseState::Ready,
                    Place::Delivering { .. } => BrowseState::Delivering,
                    Place::Scheduled(due) => BrowseState::Scheduled(due),
                };
                Some((slot.entry.clone(), state))
            })
            .collect();
        (entries, cursor)
    }

    pub fn snapshot(&self) -> Snapshot {
        let st = self.lock();
        Snapshot {
            messages: st.entries.len() as u64 + st.tail.count + st.far.count,
            paged: st.tail.count + st.far.count,
            paged_bytes: st.tail.bytes + st.far.bytes,
            counting: st.tail.uncounted.is_some(),
            delivering: st.delivering,
            scheduled: st.scheduled.len() as u64 + st.far.count,
            consumers: st.consumers.len() as u32,
            bytes: st.bytes,
            groups: st.groups.len() as u64,
            group_bytes: st.groups.bytes(),
            counters: st.counters.clone(),
            outage: st.outage.status(),
        }
    }

    /// Works on the queue's outage state (`outage.rs`) under its lock, and wakes
    /// the dispatcher if that changed the state (the gate may have opened).
    pub fn outage<R>(&self, update: impl FnOnce(&mut Outage) -> R) -> R {
        let mut st = self.lock();
        let before = st.outage.status();
        let result = update(&mut st.outage);
        let changed = st.outage.status() != before;
        drop(st);
        if changed {
            self.wake.notify_one();
        }
        result
    }

    /// Bytes of the messages the queue holds.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Updates the counters under the lock.
    pub fn count(&self, update: impl FnOnce(&mut Counters)) {
        update(&mut self.lock().counters);
    }
}

#[cfg(test)]
mod group_tests;
#[cfg(test)]
mod paging_tests;
#[cfg(test)]
mod tests;
