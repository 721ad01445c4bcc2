//! The sets a queue keeps its messages in, and the two moves every other
//! operation is made of: inserting an entry where it belongs (ready, waiting in the
//! timeline until due, or behind its group's front) and taking it out of whichever
//! set holds it.
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use rebound_storage::MessageId;
use tokio::sync::mpsc;

use super::entry::{BODY_CACHE_BYTES, ConsumerId, Counters, Dispatched, Entry};
use super::far::Far;
use super::groups::{Admitted, Groups};
use super::tail::Tail;
use crate::address_size::Meter;
use crate::outage::Outage;
use crate::timeline::Timeline;

/// A ready set: by priority, then id (= send order).
pub(super) type ReadySet = BTreeSet<(Reverse<u8>, MessageId)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Ready,
    /// Ready, the front of a group bound to this consumer: in its own ready set.
    ReadyFor(ConsumerId),
    Scheduled(u64),
    Delivering {
        consumer: ConsumerId,
        delivery_id: u64,
    },
    /// Behind its group's front; due then (0: at once).
    Behind(u64),
}

#[derive(Debug)]
pub(super) struct Slot {
    pub(super) entry: Entry,
    pub(super) place: Place,
}

#[derive(Debug)]
pub(super) struct Consumer {
    pub(super) id: ConsumerId,
    /// Deliveries this consumer may still receive (AMQP-style link credit: each
    /// delivery uses one, the consumer grants more).
    pub(super) credit: u32,
    /// Unsettled deliveries: delivery id → message id.
    pub(super) outstanding: HashMap<u64, MessageId>,
    pub(super) next_delivery_id: u64,
    /// Only messages this selector matches are delivered to the consumer.
    pub(super) filter: Option<Arc<rebound_selector::Selector>>,
    /// The ready fronts of the groups bound to this consumer.
    pub(super) ready: ReadySet,
    /// The consumer said it is stopping: what it still holds at detach was not
    /// processed and does not count as an attempt.
    pub(super) closing: bool,
    pub(super) tx: mpsc::UnboundedSender<Vec<Dispatched>>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// Every message of the queue in memory. A B-tree rather than a hash map: a deep backlog
    /// costs its entries and not a doubling table (about 80 B less per message).
    pub(super) entries: BTreeMap<MessageId, Slot>,
    pub(super) ready: ReadySet,
    pub(super) scheduled: Timeline,
    pub(super) expiring: Timeline,
    pub(super) consumers: Vec<Consumer>,
    pub(super) next_consumer: usize,
    pub(super) delivering: u64,
    /// Bytes of every message of the queue, paged ones included.
    pub(super) bytes: u64,
    /// Moved with `bytes` while the queue is bound to its address.
    pub(super) meter: Option<Meter>,
    /// Its paged messages.
    pub(super) tail: Tail,
    /// Its scheduled messages waiting on disk (`far.rs`).
    pub(super) far: Far,
    /// Bytes of the messages in the timeline (`scheduled`).
    pub(super) scheduled_bytes: u64,
    /// Bytes of stored messages also held in memory (at most [`BODY_CACHE_BYTES`]).
    pub(super) cached: u64,
    pub(super) counters: Counters,
    pub(super) closed: bool,
    /// Served by another node (`away.rs`): nothing is kept or delivered here.
    pub(super) away: bool,
    /// Which serving of the queue this is: one more at each load (`away.rs`).
    pub(super) serving: u64,
    /// New arrivals waiting behind an inbox take under way (`inbox.rs`).
    pub(super) behind_take: Option<Vec<(Entry, u64, super::Arrival)>>,
    pub(super) outage: Outage,
    pub(super) groups: Groups,
}

impl State {
    pub(super) fn grow(&mut self, bytes: u64) {
        self.bytes += bytes;
        if let Some(meter) = &self.meter {
            meter.add(bytes);
        }
    }

    pub(super) fn shrink(&mut self, bytes: u64) {
        self.bytes -= bytes;
        if let Some(meter) = &self.meter {
            meter.sub(bytes);
        }
    }

    /// Messages and bytes in memory that count towards the head's bound: not
    /// those waiting in the timeline for a later delivery (as in Artemis, whose
    /// scheduled messages are not counted by the read limits), so that messages
    /// due far ahead never hold back those behind them.
    pub(super) fn head(&self) -> (u64, u64) {
        (
            (self.entries.len() - self.scheduled.len()) as u64,
            self.bytes - self.tail.bytes - self.scheduled_bytes - self.far.bytes,
        )
    }

    /// Whether the depager should read more.
    pub(super) fn wants_depage(&self) -> bool {
        let (messages, bytes) = self.head();
        self.tail.wants_depage(messages, bytes, || self.starving())
    }

    /// Whether a consumer has credit and nothing ready to take.
    pub(super) fn starving(&self) -> bool {
        self.ready.is_empty() && self.consumers.iter().any(|c| c.credit > 0 && c.ready.is_empty())
    }

    pub(super) fn insert(&mut self, mut entry: Entry, due_ms: u64, now_ms: u64) {
        if entry.stored && entry.record.is_some() {
            if self.cached + entry.size <= BODY_CACHE_BYTES {
                self.cached += entry.size;
            } else {
                entry.record = None;
            }
        }
        if let Some(group) = &entry.group {
            entry.group = Some(self.groups.intern(group));
        }
        entry.serving = Some(self.serving);
        let id = entry.id;
        let place = self.place(&entry, due_ms, now_ms);
        if entry.expiration_ms != 0 {
            self.expiring.insert(entry.expiration_ms, id);
        }
        self.entries.insert(id, Slot { entry, place });
    }

    /// Where `entry`, due at `due_ms`, goes, put in that set. A message scheduled at
    /// send (never delivered yet) joins its group only when it is due; a redelivery
    /// that waits for its delay keeps its place at its group's front.
    fn place(&mut self, entry: &Entry, due_ms: u64, now_ms: u64) -> Place {
        let id = entry.id;
        let due = due_ms > now_ms;
        let group = entry
            .group
            .as_ref()
            .filter(|g| !(due && entry.delivery_count == 0 && !self.groups.is_front(g, id)));
        if let Some(group) = group
            && self.groups.admit(group, id) == Admitted::Behind
        {
            return Place::Behind(if due { due_ms } else { 0 });
        }
        if due {
            self.scheduled.insert(due_ms, id);
            self.scheduled_bytes += entry.size;
            Place::Scheduled(due_ms)
        } else {
            self.ready_place(entry)
        }
    }

    /// Puts a deliverable entry in the ready set it belongs to: its group's
    /// consumer's, if its group is bound, else the shared one.
    fn ready_place(&mut self, entry: &Entry) -> Place {
        let key = (Reverse(entry.priority), entry.id);
        let owner = entry.group.as_deref().and_then(|g| self.groups.owner(g));
        if let Some(owner) = owner
            && let Some(consumer) = self.consumers.iter_mut().find(|c| c.id == owner)
        {
            consumer.ready.insert(key);
            return Place::ReadyFor(owner);
        }
        self.ready.insert(key);
        Place::Ready
    }

    /// A message out of the timeline (its time came) goes where it belongs now.
    pub(super) fn due(&mut self, id: MessageId, now_ms: u64) {
        let Some(slot) = self.entries.remove(&id) else {
            return;
        };
        if matches!(slot.place, Place::Scheduled(_)) {
            self.scheduled_bytes -= slot.entry.size;
        }
        let place = self.place(&slot.entry, 0, now_ms);
        self.entries.insert(id, Slot { place, ..slot });
    }

    /// Makes a picked message that was not handed over deliverable again.
    pub(super) fn unpicked(&mut self, id: MessageId) {
        let Some(slot) = self.entries.remove(&id) else {
            return;
        };
        let place = self.ready_place(&slot.entry);
        self.entries.insert(id, Slot { place, ..slot });
    }

    /// Removes an entry from every set; its group moves on.
    pub(super) fn take(&mut self, id: MessageId) -> Option<Entry> {
        self.remove(id, true)
    }

    /// Takes a delivered entry to settle it: its group stays held until it comes
    /// back ([`State::insert`]) or is gone for good ([`State::release`]).
    pub(super) fn take_delivered(&mut self, id: MessageId) -> Option<Entry> {
        self.remove(id, false)
    }

    fn remove(&mut self, id: MessageId, release: bool) -> Option<Entry> {
        let slot = self.entries.remove(&id)?;
        let key = (Reverse(slot.entry.priority), id);
        match slot.place {
            Place::Ready => {
                self.ready.remove(&key);
            }
            Place::ReadyFor(owner) => {
                if let Some(consumer) = self.consumers.iter_mut().find(|c| c.id == owner) {
                    consumer.ready.remove(&key);
                }
            }
            Place::Scheduled(due) => {
                self.scheduled.remove(due, id);
                self.scheduled_bytes -= slot.entry.size;
            }
            Place::Delivering { .. } => self.delivering -= 1,
            Place::Behind(_) => {}
        }
        if let Some(group) = &slot.entry.group
            && (release || !matches!(slot.place, Place::Delivering { .. }))
        {
            self.release(group, id);
        }
        if slot.entry.expiration_ms != 0 {
            self.expiring.remove(slot.entry.expiration_ms, id);
        }
        self.shrink(slot.entry.size);
        if slot.entry.stored && slot.entry.record.is_some() {
            self.cached -= slot.entry.size;
        }
        Some(slot.entry)
    }

    /// `id` left `group` for good: the next message behind it, if it was the front,
    /// becomes deliverable. Returns whether one did.
    pub(super) fn release(&mut self, group: &str, id: MessageId) -> bool {
        let Some(next) = self.groups.leave(group, id) else {
            return false;
        };
        let Some(slot) = self.entries.remove(&next) else {
            return false;
        };
        let place = match slot.place {
            Place::Behind(due) if due > 0 => {
                self.scheduled.insert(due, next);
                self.scheduled_bytes += slot.entry.size;
                Place::Scheduled(due)
            }
            _ => self.ready_place(&slot.entry),
        };
        self.entries.insert(next, Slot { place, ..slot });
        true
    }
}
