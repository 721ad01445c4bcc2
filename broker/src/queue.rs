//! A queue's in-memory state: which messages are ready, being delivered or waiting
//! for a delayed redelivery, and which consumers may receive how many more.
//!
//! Storage is the source of truth across restarts; this is the index the broker
//! works from while running. A durable message costs an [`Entry`] here (its id,
//! priority, size, delivery count), not its body, which stays in storage until the
//! message is delivered. Everything here is synchronous and short: callers hold the
//! lock only to move entries between the sets, never across an await or I/O.
//!
//! Ready messages are ordered by priority, then by id (= send order), so a message
//! that comes back without a delay returns to its original position, as in Artemis.
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use rebound_config::RoutingType;
use rebound_storage::{FailureRecord, MessageId, MessageRecord, QueueId};
use tokio::sync::{Notify, mpsc};

use crate::scheduled::Timeline;

/// How many failure reasons a message keeps; they travel with it to the DLQ.
pub const MAX_FAILURES_KEPT: usize = 5;

/// Bytes of stored messages a queue keeps in memory as well, so that a queue that
/// keeps up with its producers delivers without reading storage back. A backlog
/// beyond this costs only its index entries: the bodies stay on disk until delivery.
pub const BODY_CACHE_BYTES: u64 = 8 << 20;

/// A message reference held by a queue.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: MessageId,
    pub priority: u8,
    pub expiration_ms: u64,
    /// Encoded size in bytes, for `max-size-bytes` and the queue's byte gauge.
    pub size: u64,
    /// Deliveries so far, the current one included while it is being delivered.
    pub delivery_count: u32,
    /// The last failures, oldest first, at most [`MAX_FAILURES_KEPT`].
    pub failures: Vec<FailureRecord>,
    /// Whether the message is in storage (durable message on a durable queue).
    pub stored: bool,
    /// The message itself: always when it is not stored; for a stored message a copy
    /// kept while the queue's body cache has room ([`BODY_CACHE_BYTES`]).
    pub record: Option<Arc<MessageRecord>>,
}

impl Entry {
    pub fn record_failure(&mut self, at_ms: u64, reason: String) {
        if self.failures.len() == MAX_FAILURES_KEPT {
            self.failures.remove(0);
        }
        self.failures.push(FailureRecord { at_ms, reason });
    }
}

/// Identifies a consumer attachment on a queue.
pub type ConsumerId = u64;

/// What the queue sends to a consumer's stream.
#[derive(Debug)]
pub struct Dispatched {
    pub delivery_id: u64,
    pub delivery_count: u32,
    pub record: Arc<MessageRecord>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Ready,
    Scheduled(u64),
    Delivering { consumer: ConsumerId, delivery_id: u64 },
}

#[derive(Debug)]
struct Slot {
    entry: Entry,
    place: Place,
}

#[derive(Debug)]
struct Consumer {
    id: ConsumerId,
    /// Deliveries this consumer may still receive (AMQP-style link credit: each
    /// delivery uses one, the consumer grants more).
    credit: u32,
    /// Unsettled deliveries: delivery id → message id.
    outstanding: HashMap<u64, MessageId>,
    next_delivery_id: u64,
    /// Only messages this selector matches are delivered to the consumer.
    filter: Option<Arc<rebound_selector::Selector>>,
    /// The consumer said it is stopping: what it still holds at detach was not
    /// processed and does not count as an attempt.
    closing: bool,
    /// Credit taken back (see [`Queue::revoke`]) that later grants pay off first.
    debt: u32,
    tx: mpsc::UnboundedSender<Vec<Dispatched>>,
}

/// How far a filtered consumer's pick looks into the ready messages; beyond that it
/// waits for the next round rather than hold the queue's lock for a long scan.
const FILTER_SCAN_LIMIT: usize = 1000;

/// Counters since the broker started, and the gauges derived from the state.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub added: u64,
    pub acked: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    pub dropped: u64,
    pub expired: u64,
}

/// A point-in-time view of a queue, for stats.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub messages: u64,
    pub delivering: u64,
    pub scheduled: u64,
    pub consumers: u32,
    pub bytes: u64,
    pub counters: Counters,
}

/// A message picked for delivery, not yet sent.
#[derive(Debug)]
pub struct Pick {
    pub consumer_tx: mpsc::UnboundedSender<Vec<Dispatched>>,
    pub consumer: ConsumerId,
    pub delivery_id: u64,
    pub entry: Entry,
}

/// Where a browsed message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowseState {
    Ready,
    Delivering,
    Scheduled(u64),
}

#[derive(Debug, Default)]
struct State {
    /// Every message of the queue. A B-tree rather than a hash map: a deep backlog
    /// costs its entries and not a doubling table (about 80 B less per message).
    entries: BTreeMap<MessageId, Slot>,
    ready: BTreeSet<(Reverse<u8>, MessageId)>,
    scheduled: Timeline,
    expiring: Timeline,
    consumers: Vec<Consumer>,
    next_consumer: usize,
    delivering: u64,
    bytes: u64,
    /// Bytes of stored messages also held in memory (at most [`BODY_CACHE_BYTES`]).
    cached: u64,
    counters: Counters,
    closed: bool,
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
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves only in-memory sets behind; the data
        // on disk is intact, so carrying on beats poisoning every later call.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds new messages (sent or moved here); `due_ms` > now schedules them.
    pub fn enqueue(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) -> bool {
        self.add(entries, now_ms, true)
    }

    /// Puts back messages this queue already counted: recovered at start-up, or back
    /// after a failed or released delivery. Returns false if the queue was deleted.
    pub fn requeue(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64) -> bool {
        self.add(entries, now_ms, false)
    }

    fn add(&self, entries: impl IntoIterator<Item = (Entry, u64)>, now_ms: u64, count: bool) -> bool {
        let mut st = self.lock();
        if st.closed {
            return false;
        }
        for (entry, due_ms) in entries {
            if count {
                st.counters.added += 1;
            }
            st.bytes += entry.size;
            st.insert(entry, due_ms, now_ms);
        }
        drop(st);
        self.wake.notify_one();
        true
    }

    /// Attaches a consumer with initial credit; deliveries arrive on the receiver.
    pub fn attach(
        &self,
        id: ConsumerId,
        credit: u32,
        filter: Option<Arc<rebound_selector::Selector>>,
    ) -> Option<mpsc::UnboundedReceiver<Vec<Dispatched>>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut st = self.lock();
        if st.closed {
            return None;
        }
        st.consumers.push(Consumer {
            id,
            credit,
            outstanding: HashMap::new(),
            next_delivery_id: 1,
            filter,
            closing: false,
            debt: 0,
            tx,
        });
        drop(st);
        self.wake.notify_one();
        Some(rx)
    }

    /// Grants a consumer more credit (none once it is closing).
    pub fn grant(&self, consumer: ConsumerId, credit: u32) {
        let mut st = self.lock();
        if let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer && !c.closing) {
            let paid = credit.min(c.debt);
            c.debt -= paid;
            c.credit = c.credit.saturating_add(credit - paid);
        }
        drop(st);
        self.wake.notify_one();
    }

    /// Takes back credit a consumer granted itself for a settle that was refused (a
    /// window client grants one credit per settle it sends), so that its window does
    /// not grow; what it has not got yet is owed by its next grants.
    pub fn revoke(&self, consumer: ConsumerId, credit: u32) {
        let mut st = self.lock();
        if let Some(c) = st.consumers.iter_mut().find(|c| c.id == consumer) {
            let taken = credit.min(c.credit);
            c.credit -= taken;
            c.debt = c.debt.saturating_add(credit - taken);
        }
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
        let mut ids: Vec<MessageId> = gone.outstanding.into_values().collect();
        ids.sort_unstable();
        (
            ids.into_iter().filter_map(|id| st.take(id)).collect(),
            gone.closing,
        )
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
            match id.and_then(|id| st.take(id)) {
                Some(entry) => taken.push(entry),
                None => unknown.push(did),
            }
        }
        (taken, unknown)
    }

    /// Picks messages for consumers with credit, round-robin, after moving due
    /// scheduled messages back to ready. `matches` tells whether an entry passes a
    /// consumer's filter. Returns the picks, the messages that expired, and when the
    /// dispatcher should look again (the next scheduled or expiry time).
    pub fn pick(
        &self,
        now_ms: u64,
        matches: &dyn Fn(&Entry, &rebound_selector::Selector) -> bool,
    ) -> (Vec<Pick>, Vec<Entry>, Option<u64>) {
        let mut st = self.lock();
        let st = &mut *st;
        for id in st.scheduled.pop_due(now_ms) {
            if let Some(slot) = st.entries.get_mut(&id) {
                slot.place = Place::Ready;
                st.ready.insert((Reverse(slot.entry.priority), id));
            }
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
        let mut picks = Vec::new();
        // Filtered consumers that found nothing for them in this round.
        let mut passed = vec![false; st.consumers.len()];
        while !st.ready.is_empty() {
            let n = st.consumers.len();
            let Some(ci) = (0..n)
                .map(|k| (st.next_consumer + k) % n)
                .find(|&i| st.consumers[i].credit > 0 && !passed[i])
            else {
                break;
            };
            let key = match &st.consumers[ci].filter {
                None => st.ready.first().copied(),
                Some(filter) => st
                    .ready
                    .iter()
                    .take(FILTER_SCAN_LIMIT)
                    .find(|(_, id)| st.entries.get(id).is_some_and(|s| matches(&s.entry, filter)))
                    .copied(),
            };
            let Some(key) = key else {
                passed[ci] = true;
                continue;
            };
            st.next_consumer = (ci + 1) % n;
            st.ready.remove(&key);
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
        let next = [st.scheduled.next_due(), st.expiring.next_due()]
            .into_iter()
            .flatten()
            .min();
        (picks, expired, next)
    }

    /// A picked message that could not be handed over (its consumer vanished, its
    /// body could not be read): undo the pick.
    pub fn unpick(&self, pick: &Pick) {
        {
            let mut guard = self.lock();
            let st = &mut *guard;
            if let Some(c) = st.consumers.iter_mut().find(|c| c.id == pick.consumer)
                && c.outstanding.remove(&pick.delivery_id).is_some()
            {
                c.credit += 1;
            }
            if let Some(slot) = st.entries.get_mut(&pick.entry.id)
                && slot.place
                    == (Place::Delivering {
                        consumer: pick.consumer,
                        delivery_id: pick.delivery_id,
                    })
            {
                slot.entry.delivery_count -= 1;
                slot.place = Place::Ready;
                st.delivering -= 1;
                st.ready.insert((Reverse(slot.entry.priority), pick.entry.id));
            }
        }
        self.wake.notify_one();
    }

    /// Takes a message out of the queue unless it is being delivered.
    pub fn take_idle(&self, id: MessageId) -> Option<Entry> {
        let mut st = self.lock();
        match st.entries.get(&id)?.place {
            Place::Delivering { .. } => None,
            _ => st.take(id),
        }
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
        ids.into_iter().filter_map(|id| st.take(id)).collect()
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
        st.cached = 0;
        drop(st);
        self.wake.notify_one();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Up to `limit` entries in queue order: ready, delivering, scheduled.
    pub fn browse(&self, limit: usize) -> Vec<(Entry, BrowseState)> {
        let st = self.lock();
        let ready = st.ready.iter().map(|&(_, id)| id);
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
        ready
            .chain(delivering)
            .chain(scheduled.into_iter().map(|(_, id)| id))
            .take(limit)
            .filter_map(|id| {
                let slot = st.entries.get(&id)?;
                let state = match slot.place {
                    Place::Ready => BrowseState::Ready,
                    Place::Delivering { .. } => BrowseState::Delivering,
                    Place::Scheduled(due) => BrowseState::Scheduled(due),
                };
                Some((slot.entry.clone(), state))
            })
            .collect()
    }

    pub fn snapshot(&self) -> Snapshot {
        let st = self.lock();
        Snapshot {
            messages: st.entries.len() as u64,
            delivering: st.delivering,
            scheduled: st.scheduled.len() as u64,
            consumers: st.consumers.len() as u32,
            bytes: st.bytes,
            counters: st.counters.clone(),
        }
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

impl State {
    fn insert(&mut self, mut entry: Entry, due_ms: u64, now_ms: u64) {
        if entry.stored && entry.record.is_some() {
            if self.cached + entry.size <= BODY_CACHE_BYTES {
                self.cached += entry.size;
            } else {
                entry.record = None;
            }
        }
        let id = entry.id;
        let place = if due_ms > now_ms {
            self.scheduled.insert(due_ms, id);
            Place::Scheduled(due_ms)
        } else {
            self.ready.insert((Reverse(entry.priority), id));
            Place::Ready
        };
        if entry.expiration_ms != 0 {
            self.expiring.insert(entry.expiration_ms, id);
        }
        self.entries.insert(id, Slot { entry, place });
    }

    /// Removes an entry from every set.
    fn take(&mut self, id: MessageId) -> Option<Entry> {
        let slot = self.entries.remove(&id)?;
        match slot.place {
            Place::Ready => {
                self.ready.remove(&(Reverse(slot.entry.priority), id));
            }
            Place::Scheduled(due) => self.scheduled.remove(due, id),
            Place::Delivering { .. } => self.delivering -= 1,
        }
        if slot.entry.expiration_ms != 0 {
            self.expiring.remove(slot.entry.expiration_ms, id);
        }
        self.bytes -= slot.entry.size;
        if slot.entry.stored && slot.entry.record.is_some() {
            self.cached -= slot.entry.size;
        }
        Some(slot.entry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Queue {
        Queue::new(1, "q".into(), "q".into(), RoutingType::Anycast, true, false, None)
    }

    fn entry(id: MessageId, priority: u8) -> Entry {
        Entry {
            id,
            priority,
            expiration_ms: 0,
            size: 10,
            delivery_count: 0,
            failures: Vec::new(),
            stored: true,
            record: None,
        }
    }

    fn ids(picks: &[Pick]) -> Vec<MessageId> {
        picks.iter().map(|p| p.entry.id).collect()
    }

    #[test]
    fn each_delivery_uses_one_credit() {
        let q = queue();
        q.enqueue((1..=5).map(|id| (entry(id, 4), 0)), 100);
        let _rx = q.attach(7, 2, None).unwrap();
        let (picks, _, _) = q.pick(100, &|_, _| true);
        assert_eq!(ids(&picks), vec![1, 2]);
        assert!(q.pick(100, &|_, _| true).0.is_empty(), "no credit left");
        let (taken, unknown) = q.take_delivered(7, &[picks[0].delivery_id, 999]);
        assert_eq!(taken.len(), 1);
        assert_eq!(unknown, vec![999]);
        assert!(
            q.pick(100, &|_, _| true).0.is_empty(),
            "settling grants no credit"
        );
        q.grant(7, 1);
        assert_eq!(ids(&q.pick(100, &|_, _| true).0), vec![3]);
        q.grant(7, 10);
        assert_eq!(ids(&q.pick(100, &|_, _| true).0), vec![4, 5]);
    }

    #[test]
    fn revoked_credit_is_paid_back_by_later_grants_and_closing_stops_grants() {
        let q = queue();
        q.enqueue((1..=5).map(|id| (entry(id, 4), 0)), 100);
        let _rx = q.attach(1, 1, None).unwrap();
        q.revoke(1, 2);
        assert!(q.pick(100, &|_, _| true).0.is_empty());
        q.grant(1, 1);
        assert!(q.pick(100, &|_, _| true).0.is_empty(), "the grant paid the debt");
        q.grant(1, 1);
        assert_eq!(q.pick(100, &|_, _| true).0.len(), 1);
        q.stop(1);
        q.grant(1, 5);
        assert!(q.pick(100, &|_, _| true).0.is_empty(), "no credit after close");
    }

    #[test]
    fn priority_then_send_order_and_returned_messages_keep_their_place() {
        let q = queue();
        q.enqueue([(entry(1, 4), 0), (entry(2, 9), 0), (entry(3, 4), 0)], 100);
        let _rx = q.attach(1, 1, None).unwrap();
        let first = q.pick(100, &|_, _| true).0;
        assert_eq!(ids(&first), vec![2]);
        let (taken, _) = q.take_delivered(1, &[first[0].delivery_id]);
        let mut back = taken.into_iter().next().unwrap();
        back.priority = 0;
        q.requeue([(back, 0)], 100);
        let mut order = Vec::new();
        for _ in 0..3 {
            q.grant(1, 1);
            let p = q.pick(100, &|_, _| true).0;
            order.extend(ids(&p));
            q.take_delivered(1, &[p[0].delivery_id]);
        }
        assert_eq!(order, vec![1, 3, 2]);
    }

    #[test]
    fn scheduled_messages_do_not_block_and_come_back_when_due() {
        let q = queue();
        q.enqueue([(entry(1, 4), 500), (entry(2, 4), 0)], 100);
        let _rx = q.attach(1, 10, None).unwrap();
        let (picks, _, next) = q.pick(100, &|_, _| true);
        assert_eq!(ids(&picks), vec![2]);
        assert_eq!(next, Some(500));
        assert_eq!(q.snapshot().scheduled, 1);
        assert_eq!(ids(&q.pick(500, &|_, _| true).0), vec![1]);
        assert_eq!(q.snapshot().scheduled, 0);
    }

    #[test]
    fn competing_consumers_share_round_robin_and_detach_returns_outstanding() {
        let q = queue();
        q.enqueue((1..=4).map(|id| (entry(id, 4), 0)), 100);
        let _a = q.attach(1, 10, None).unwrap();
        let _b = q.attach(2, 10, None).unwrap();
        let picks = q.pick(100, &|_, _| true).0;
        let by = |c| picks.iter().filter(|p| p.consumer == c).count();
        assert_eq!((by(1), by(2)), (2, 2));
        let (back, closing) = q.detach(1);
        assert!(!closing);
        assert_eq!(back.len(), 2);
        assert!(back.iter().all(|e| e.delivery_count == 1));
        assert_eq!(q.snapshot().delivering, 2);
    }

    #[test]
    fn expired_messages_leave_the_queue() {
        let q = queue();
        let mut e = entry(1, 4);
        e.expiration_ms = 150;
        q.enqueue([(e, 0), (entry(2, 4), 0)], 100);
        let (_, expired, next) = q.pick(100, &|_, _| true);
        assert!(expired.is_empty());
        assert_eq!(next, Some(150));
        let (_, expired, _) = q.pick(150, &|_, _| true);
        assert_eq!(expired.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1]);
        let snap = q.snapshot();
        assert_eq!((snap.messages, snap.bytes), (1, 10));
    }

    #[test]
    fn a_filtered_consumer_gets_only_what_matches_and_does_not_block_others() {
        let q = queue();
        q.enqueue((1..=6).map(|id| (entry(id, 4), 0)), 100);
        let even = Arc::new(rebound_selector::Selector::parse("even = TRUE").unwrap());
        let _f = q.attach(1, 10, Some(even)).unwrap();
        let is_even = |e: &Entry, _: &rebound_selector::Selector| e.id.is_multiple_of(2);
        let picks = q.pick(100, &is_even).0;
        assert_eq!(ids(&picks), vec![2, 4, 6]);
        let _all = q.attach(2, 10, None).unwrap();
        assert_eq!(ids(&q.pick(100, &is_even).0), vec![1, 3, 5]);
    }

    #[test]
    fn stored_bodies_are_cached_only_up_to_the_budget() {
        let q = queue();
        let big = |id| Entry {
            size: BODY_CACHE_BYTES / 2,
            record: Some(Arc::new(MessageRecord::default())),
            ..entry(id, 4)
        };
        q.enqueue([(big(1), 0), (big(2), 0), (big(3), 0)], 100);
        let _rx = q.attach(1, 10, None).unwrap();
        let picks = q.pick(100, &|_, _| true).0;
        let cached: Vec<bool> = picks.iter().map(|p| p.entry.record.is_some()).collect();
        assert_eq!(cached, vec![true, true, false]);
        // An ack frees its share of the budget for the next message.
        q.take_delivered(1, &[picks[0].delivery_id]);
        q.enqueue([(big(4), 0)], 100);
        assert!(q.pick(100, &|_, _| true).0[0].entry.record.is_some());
    }

    #[test]
    fn unpick_restores_the_message() {
        let q = queue();
        q.enqueue([(entry(1, 4), 0)], 100);
        let _rx = q.attach(1, 1, None).unwrap();
        let picks = q.pick(100, &|_, _| true).0;
        q.unpick(&picks[0]);
        let again = q.pick(100, &|_, _| true).0;
        assert_eq!(again[0].entry.delivery_count, 1);
    }
}
