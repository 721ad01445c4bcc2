//! A queue's consumers: attaching and detaching them, their credit, which
//! consumer gets the next message (the pick, round-robin over those with credit),
//! and their deliveries until settled.
//!
//! Each consumer keeps its own ready set, the fronts of the groups bound to it
//! (`groups.rs`); a pick takes the first of its own set and the shared one.
use std::collections::HashMap;
use std::sync::Arc;

use rebound_storage::MessageId;
use tokio::sync::mpsc;

use super::state::{Consumer, Place, ReadySet};
use super::{ConsumerId, Dispatched, Entry, Pick, Queue};
use crate::outage::Gate;

/// How far a filtered consumer's pick looks into the ready messages; beyond that it
/// waits for the next round rather than hold the queue's lock for a long scan.
const FILTER_SCAN_LIMIT: usize = 1000;

impl Queue {
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
            // Not if it came back meanwhile (a failed commit requeued it), nor
            // if it was taken out under an earlier serving.
            if let Some(group) = &entry.group
                && st.serves(entry)
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
}
