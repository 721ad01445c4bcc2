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
//! ([`FILTER_SCAN_LIMIT`]).
//!
//! Ready messages are ordered by priority, then by id (= send order), so a message
//! that comes back without a delay returns to its original position, as in Artemis.
//! Messages of a group are delivered one at a time in send order ([`groups`]): only
//! a group's front is ever in a ready set.
mod away;
mod entry;
mod far;
mod groups;
mod state;
mod tail;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rebound_config::RoutingType;
use rebound_storage::{MessageId, QueueId, ScannedMessage};
use tokio::sync::{Notify, mpsc};

pub use entry::{
    BODY_CACHE_BYTES, BrowseState, ConsumerId, Counters, Dispatched, Entry, MAX_FAILURES_KEPT, Pick, Snapshot,
};
pub use far::LOOKAHEAD_MS;
use state::{Consumer, Place, ReadySet, State};
use tail::Goes;
pub use tail::ReadLimit;

use crate::address_size::Meter;
use crate::outage::{Gate, Outage};

/// How far a filtered consumer's pick looks into the ready messages; beyond that it
/// waits for the next round rather than hold the queue's lock for a long scan.
const FILTER_SCAN_LIMIT: usize = 1000;

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

    /// Stored messages about to be committed for this queue (see `tail.rs`):
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
        st.tail.uncounted = Some(tail::Uncounted {
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
    /// see `tail.rs`); returns how many it loaded.
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

    /// Wakes the depager if the head wants more.
    fn shrunk(&self, st: &State) {
        if st.wants_depage() {
            self.depage.notify_one();
        }
    }

    /// Attaches a consumer with initial credit; deliveries arrive on the receiver.
    /// None if the queue was deleted or is served by another node.
    pub fn attach(
        &self,
        id: ConsumerId,
        credit: u32,
        filter: Option<Arc<rebound_selector::Selector>>,
    ) -> Option<mpsc::UnboundedReceiver<Vec<Dispatched>>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut st = self.lock();
        if st.closed || st.away {
            return None;
        }
        st.groups.rebalance();
        st.consumers.push(Consumer {
            id,
            credit,
            outstanding: HashMap::new(),
            next_delivery_id: 1,
            filter,
            ready: ReadySet::new(),
            closing: false,
            tx,
        });
        drop(st);
        self.wake.notify_one();
        Some(rx)
    }

    /// Grants a consumer more credit (none once it is closing), up to `cap`
    /// deliveries unsettled or still to come; the rest is dropped. Credit it
    /// already has is kept (a lowered cap takes effect as deliveries use it).
    pub fn grant(&self, consumer: ConsumerId, credit: u32, cap: u32) {
        let mut st = self.lock();
        if let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer && !c.closing) {
            let room = cap.saturating_sub(u32::try_from(c.outstanding.len()).unwrap_or(u32::MAX));
            c.credit = c.credit.max(c.credit.saturating_add(credit).min(room));
        }
        drop(st);
        self.wake.notify_one();
    }

    /// Stops deliveries to a consumer that is closing gracefully.
    pub fn stop(&self, consumer: ConsumerId) {
        let mut st = self.lock();
        if let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer) {
            c.credit = 0;
            c.closing = true;
        }
    }

    /// Detaches a consumer and hands back the messages it had not settled, and
    /// whether it had announced its close (see [`Queue::stop`]).
    pub fn detach(&self, consumer: ConsumerId) -> (Vec<Entry>, bool) {
        let mut st = self.lock();
        let Some(pos) = st.consumers.iter().position(|c| c.id == consumer) else {
            return (Vec::new(), false);
        };
        let gone = st.consumers.remove(pos);
        // Its groups are free: their ready fronts go back to the shared ready set.
        st.groups.unbind(gone.id);
        for key in gone.ready {
            if let Some(slot) = st.entries.get_mut(&key.1) {
                slot.place = Place::Ready;
                st.ready.insert(key);
            }
        }
        let mut ids: Vec<MessageId> = gone.outstanding.into_values().collect();
        ids.sort_unstable();
        let entries = ids.into_iter().filter_map(|id| st.take_delivered(id)).collect();
        drop(st);
        self.wake.notify_one();
        (entries, gone.closing)
    }

    /// Takes settled deliveries of a consumer out of the queue. Returns the entries
    /// and the delivery ids that were not outstanding.
    pub fn take_delivered(&self, consumer: ConsumerId, delivery_ids: &[u64]) -> (Vec<Entry>, Vec<u64>) {
        let mut st = self.lock();
        let mut taken = Vec::with_capacity(delivery_ids.len());
        let mut unknown = Vec::new();
        for &did in delivery_ids {
            let id = st
                .consumers
                .iter_mut()
                .find(|c| c.id == consumer)
                .and_then(|c| c.outstanding.remove(&did));
            match id.and_then(|id| st.take_delivered(id)) {
                Some(entry) => taken.push(entry),
                None => unknown.push(did),
            }
        }
        self.shrunk(&st);
        (taken, unknown)
    }

    /// Delivered messages taken with [`Queue::take_delivered`] or [`Queue::detach`]
    /// left the queue for good (acked, dead-lettered, moved): their groups move on.
    pub fn finish(&self, entries: &[Entry]) {
        if entries.iter().all(|e| e.group.is_none()) {
            return;
        }
        let mut st = self.lock();
        let mut moved = false;
        for entry in entries {
            // Not if it came back meanwhile (a failed commit requeued it).
            if let Some(group) = &entry.group
                && !st.entries.contains_key(&entry.id)
            {
                moved |= st.release(group, entry.id);
            }
        }
        drop(st);
        if moved {
            self.wake.notify_one();
        }
    }

    /// How many messages of its group wait behind `entry`, if it holds its group.
    pub fn held_behind(&self, entry: &Entry) -> Option<usize> {
        let group = entry.group.as_deref()?;
        self.lock().groups.held_behind(group, entry.id)
    }

    /// Picks messages for consumers with credit, round-robin, after moving due
    /// scheduled messages back to ready. `matches` tells whether an entry passes a
    /// consumer's filter; `persist_counts` that the dispatcher stores the delivery
    /// counts of the picks before delivery, which gives them a stored state (marked
    /// here, under the lock, so that no path can take the entry before it knows).
    /// Returns the picks, the messages that expired, and when the
    /// dispatcher should look again (the next scheduled or expiry time).
    pub fn pick(
        &self,
        now_ms: u64,
        persist_counts: bool,
        matches: &dyn Fn(&Entry, &rebound_selector::Selector) -> bool,
    ) -> (Vec<Pick>, Vec<Entry>, Option<u64>) {
        let mut st = self.lock();
        let st = &mut *st;
        for id in st.scheduled.pop_due(now_ms) {
            st.due(id, now_ms);
        }
        let mut expired = Vec::new();
        for id in st.expiring.pop_due(now_ms) {
            let delivering = matches!(
                st.entries.get(&id).map(|s| s.place),
                Some(Place::Delivering { .. })
            );
            // A message being delivered is not expired under the consumer's feet; it is
            // checked again if it comes back.
            if !delivering && let Some(entry) = st.take(id) {
                expired.push(entry);
            }
        }
        if !expired.is_empty() {
            self.shrunk(st);
        }
        let mut picks = Vec::new();
        // Outage mode: nothing while paused, then one probe.
        let gate = st.outage.gate(now_ms);
        let budget = match gate {
            Gate::Open => usize::MAX,
            Gate::Probe => 1,
            Gate::Closed { .. } => 0,
        };
        // Filtered consumers that found nothing for them in this round.
        let mut passed = vec![false; st.consumers.len()];
        while picks.len() < budget
            && (!st.ready.is_empty() || st.consumers.iter().any(|c| !c.ready.is_empty()))
        {
            let n = st.consumers.len();
            let Some(ci) = (0..n)
                .map(|k| (st.next_consumer + k) % n)
                .find(|&i| st.consumers[i].credit > 0 && !passed[i])
            else {
                break;
            };
            let consumer = &st.consumers[ci];
            let first = |set: &ReadySet| match &consumer.filter {
                None => set.first().copied(),
                Some(filter) => set
                    .iter()
                    .take(FILTER_SCAN_LIMIT)
                    .find(|(_, id)| st.entries.get(id).is_some_and(|s| matches(&s.entry, filter)))
                    .copied(),
            };
            // The first of its own groups' fronts and of the shared ready set.
            let key = match (first(&consumer.ready), first(&st.ready)) {
                (Some(own), Some(shared)) if shared < own => Some((shared, false)),
                (Some(own), _) => Some((own, true)),
                (None, shared) => shared.map(|key| (key, false)),
            };
            let Some((key, own)) = key else {
                passed[ci] = true;
                continue;
            };
            st.next_consumer = (ci + 1) % n;
            if own {
                st.consumers[ci].ready.remove(&key);
            } else {
                st.ready.remove(&key);
            }
            let id = key.1;
            let consumer = &mut st.consumers[ci];
            consumer.credit -= 1;
            let delivery_id = consumer.next_delivery_id;
            consumer.next_delivery_id += 1;
            consumer.outstanding.insert(delivery_id, id);
            let (cid, tx) = (consumer.id, consumer.tx.clone());
            let slot = st.entries.get_mut(&id).expect("ready ids have entries");
            slot.place = Place::Delivering {
                consumer: cid,
                delivery_id,
            };
            slot.entry.delivery_count += 1;
            slot.entry.state_stored |= persist_counts;
            if let Some(group) = &slot.entry.group {
                st.groups.bind(group, cid);
            }
            if slot.entry.delivery_count > 1 {
                st.counters.redelivered += 1;
            }
            st.delivering += 1;
            picks.push(Pick {
                consumer_tx: tx,
                consumer: cid,
                delivery_id,
                entry: slot.entry.clone(),
            });
        }
        // A consumer has credit left and nothing is ready for it: read back what is
        // paged, as far as the head has room.
        if st.wants_depage() && st.starving() {
            self.depage.notify_one();
        }
        if let (Gate::Probe, Some(probe)) = (gate, picks.first()) {
            st.outage.probe_sent(probe.entry.id);
        }
        let reopens = match gate {
            Gate::Closed { until_ms } => until_ms,
            _ => None,
        };
        let next = [st.scheduled.next_due(), st.expiring.next_due(), reopens]
            .into_iter()
            .flatten()
            .min();
        (picks, expired, next)
    }

    /// A picked message that could not be handed over (its consumer vanished, its
    /// body could not be read): undo the pick.
    pub fn unpick(&self, pick: &Pick) {
        self.undo_pick(pick, true);
    }

    /// A picked message that vanished from storage: it leaves the queue (counted as
    /// dropped) and its consumer gets the credit back.
    pub fn forget(&self, pick: &Pick) {
        self.undo_pick(pick, false);
    }

    fn undo_pick(&self, pick: &Pick, keep: bool) {
        {
            let mut guard = self.lock();
            let st = &mut *guard;
            st.outage.returned(pick.entry.id);
            if let Some(c) = st.consumers.iter_mut().find(|c| c.id == pick.consumer)
                && c.outstanding.remove(&pick.delivery_id).is_some()
            {
                c.credit += 1;
            }
            let picked = Place::Delivering {
                consumer: pick.consumer,
                delivery_id: pick.delivery_id,
            };
            if st
                .entries
                .get(&pick.entry.id)
                .is_some_and(|slot| slot.place == picked)
            {
                if keep {
                    let slot = st.entries.get_mut(&pick.entry.id).expect("checked above");
                    slot.entry.delivery_count -= 1;
                    st.delivering -= 1;
                    st.unpicked(pick.entry.id);
                } else {
                    st.take(pick.entry.id);
                    st.counters.dropped += 1;
                    self.shrunk(st);
                }
            }
        }
        self.wake.notify_one();
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
