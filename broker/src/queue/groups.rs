//! Message groups: messages with the same `_AMQ_GROUP_ID` (or `JMSXGroupID`) go to
//! one consumer at a time, in send order, as in Artemis — and, beyond Artemis, in
//! order across failures.
//!
//! A group delivers **one message at a time**. Its oldest message is its *front*:
//! ready (in the shared ready set, or in its consumer's own ready set once the group
//! is bound), being delivered, out being settled, or waiting in the timeline for its
//! redelivery delay. Every later message of the group waits *behind* it, outside
//! every set a pick looks at, so a blocked group costs a pick nothing: there is no
//! scan over its messages, however many. When the front leaves for good (acked,
//! dead-lettered, moved, expired, removed), the next message behind it becomes the
//! front. A failed front that comes back, at once or after its delay, is still the
//! front, so nothing of its group overtakes it.
//!
//! A group is kept only while it has a front: once its last message has left, it
//! is forgotten, so the groups a queue keeps are bounded by its messages in memory,
//! not by the group ids it has ever seen (a group id per order is normal use).
//!
//! Which consumer a group is bound to is kept per *bucket* (a hash of the group id,
//! [`BUCKETS`] of them, as Artemis's `group-buckets`), not per group: a bucket is
//! bound to the first consumer that takes the front of one of its groups and stays
//! with it until that consumer leaves, so a group that comes back after being forgotten
//! finds the consumer it had, and what ownership costs is bounded whatever the
//! number of groups. A consumer that attaches frees the buckets with no group (as
//! Artemis's `group-rebalance` does), so that it gets its share of new groups. When
//! a consumer leaves, its groups' ready fronts go back to the shared ready set and
//! the next consumer to take one owns its bucket. Since only one message of a group
//! is ever delivering, moving a group never lets two consumers work on it at once.
//!
//! The cost: a group's throughput is bounded by one message's round trip, and a
//! message that keeps failing holds its whole group until it is dead-lettered.
use std::collections::hash_map::{self, RandomState};
use std::collections::{BTreeSet, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use rebound_storage::MessageId;

use super::entry::ConsumerId;

/// How many buckets a queue's group ownership is kept in.
const BUCKETS: u64 = 1024;

/// What a group costs beyond its id: its slot in the map (key, front, the set
/// behind it, bucket) and the id's reference counts.
const GROUP_OVERHEAD_BYTES: u64 = 80;

/// What a bucket's slot costs.
const BUCKET_BYTES: u64 = 40;

#[derive(Debug)]
struct Group {
    /// The message the group's delivery is at (see the module docs).
    front: MessageId,
    /// The messages waiting behind the front, in send order.
    behind: BTreeSet<MessageId>,
    bucket: u16,
}

#[derive(Debug, Default)]
struct Bucket {
    /// The consumer its groups are bound to.
    owner: Option<ConsumerId>,
    /// How many of its groups are kept.
    groups: u32,
}

/// Where a message admitted to its group goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admitted {
    /// It is the group's front: deliverable (now or when its delay is over).
    Front,
    /// It waits behind the front.
    Behind,
}

/// The groups of one queue.
#[derive(Debug, Default)]
pub(super) struct Groups {
    groups: HashMap<Arc<str>, Group>,
    /// Buckets with an owner or a group (at most [`BUCKETS`]).
    buckets: HashMap<u16, Bucket>,
    hasher: RandomState,
    /// What the groups kept cost in memory (see [`Groups::bytes`]).
    bytes: u64,
}

/// What keeping the group `name` costs.
fn cost(name: &str) -> u64 {
    name.len() as u64 + GROUP_OVERHEAD_BYTES
}

impl Groups {
    /// The group's name as the queue keeps it, shared by all its messages.
    pub(super) fn intern(&mut self, name: &Arc<str>) -> Arc<str> {
        match self.groups.get_key_value(name) {
            Some((kept, _)) => kept.clone(),
            None => name.clone(),
        }
    }

    /// Adds a message to its group: the front if the group has none (or it is the
    /// front coming back), else behind it.
    pub(super) fn admit(&mut self, name: &Arc<str>, id: MessageId) -> Admitted {
        match self.groups.entry(name.clone()) {
            hash_map::Entry::Occupied(mut kept) => {
                let group = kept.get_mut();
                if group.front == id {
                    return Admitted::Front;
                }
                group.behind.insert(id);
                Admitted::Behind
            }
            hash_map::Entry::Vacant(slot) => {
                let bucket = (self.hasher.hash_one(&**name) % BUCKETS) as u16;
                self.buckets.entry(bucket).or_default().groups += 1;
                self.bytes += cost(name);
                slot.insert(Group {
                    front: id,
                    behind: BTreeSet::new(),
                    bucket,
                });
                Admitted::Front
            }
        }
    }

    pub(super) fn is_front(&self, name: &str, id: MessageId) -> bool {
        self.groups.get(name).is_some_and(|g| g.front == id)
    }

    pub(super) fn owner(&self, name: &str) -> Option<ConsumerId> {
        let group = self.groups.get(name)?;
        self.buckets.get(&group.bucket)?.owner
    }

    /// The consumer took the group's front: the group's bucket is bound to it,
    /// unless another consumer holds it already (a front taken from the shared
    /// ready set before its bucket was bound).
    pub(super) fn bind(&mut self, name: &str, consumer: ConsumerId) {
        if let Some(group) = self.groups.get(name)
            && let Some(bucket) = self.buckets.get_mut(&group.bucket)
        {
            bucket.owner.get_or_insert(consumer);
        }
    }

    /// How many messages wait behind `id` if it is its group's front.
    pub(super) fn held_behind(&self, name: &str, id: MessageId) -> Option<usize> {
        let group = self.groups.get(name)?;
        (group.front == id).then_some(group.behind.len())
    }

    /// `id` left its group. If it was the front, the next message behind it (if any)
    /// becomes the front and is returned; if there is none, the group is forgotten.
    pub(super) fn leave(&mut self, name: &str, id: MessageId) -> Option<MessageId> {
        let group = self.groups.get_mut(name)?;
        if group.front != id {
            group.behind.remove(&id);
            return None;
        }
        if let Some(next) = group.behind.pop_first() {
            group.front = next;
            return Some(next);
        }
        let (name, group) = self.groups.remove_entry(name)?;
        self.bytes -= cost(&name);
        if let hash_map::Entry::Occupied(mut bucket) = self.buckets.entry(group.bucket) {
            bucket.get_mut().groups -= 1;
            if bucket.get().groups == 0 && bucket.get().owner.is_none() {
                bucket.remove();
            }
        }
        None
    }

    /// A consumer left: its buckets are free for the next consumer to take.
    pub(super) fn unbind(&mut self, consumer: ConsumerId) {
        self.buckets.retain(|_, b| {
            if b.owner == Some(consumer) {
                b.owner = None;
            }
            b.owner.is_some() || b.groups > 0
        });
    }

    /// A consumer attached: the buckets with no group are free for any consumer.
    pub(super) fn rebalance(&mut self) {
        self.buckets.retain(|_, b| b.groups > 0);
    }

    /// How many groups are kept.
    pub(super) fn len(&self) -> usize {
        self.groups.len()
    }

    /// What the groups kept cost in memory: their ids, their entries, their
    /// buckets (the ids of the messages behind the fronts are counted with those
    /// messages).
    pub(super) fn bytes(&self) -> u64 {
        self.bytes + self.buckets.len() as u64 * BUCKET_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn the_group_properties_are_the_protocols() {
        use rebound_protocol::properties::{GROUP_ID, JMSX_GROUP_ID};
        assert_eq!(
            rebound_storage::records::GROUP_PROPERTIES,
            [GROUP_ID, JMSX_GROUP_ID]
        );
    }

    #[test]
    fn one_front_per_group_and_the_next_moves_up_in_send_order() {
        let mut g = Groups::default();
        let a = name("a");
        assert_eq!(g.admit(&a, 1), Admitted::Front);
        assert_eq!(g.admit(&a, 3), Admitted::Behind);
        assert_eq!(g.admit(&a, 2), Admitted::Behind);
        assert_eq!(g.admit(&name("b"), 4), Admitted::Front);
        // The front coming back (after a failure) is still the front.
        assert_eq!(g.admit(&a, 1), Admitted::Front);
        assert_eq!(g.held_behind("a", 1), Some(2));
        assert_eq!(g.leave("a", 1), Some(2));
        assert_eq!(g.leave("a", 3), None);
        assert_eq!(g.leave("a", 2), None);
        assert_eq!(g.len(), 1, "an empty group is forgotten");
    }

    #[test]
    fn a_group_with_no_message_costs_nothing_however_many_were_seen() {
        let mut g = Groups::default();
        g.admit(&name("kept"), 0);
        g.bind("kept", 7);
        let base = g.bytes();
        assert!(base >= cost("kept"));
        for id in 1..=5000 {
            let group = name(&format!("order-{id}-{}", "x".repeat(1000)));
            assert_eq!(g.admit(&group, id), Admitted::Front);
            g.bind(&group, 7);
            assert!(g.bytes() > base);
            assert_eq!(g.leave(&group, id), None);
        }
        assert_eq!(g.len(), 1);
        // What is left is the buckets' owners, at most one slot per bucket.
        assert!(g.bytes() <= base + BUCKETS * BUCKET_BYTES, "{}", g.bytes());
        g.unbind(7);
        assert_eq!(g.bytes(), cost("kept") + BUCKET_BYTES);
    }

    #[test]
    fn a_forgotten_group_comes_back_to_its_consumer_until_it_leaves() {
        let mut g = Groups::default();
        let a = name("a");
        g.admit(&a, 1);
        g.bind("a", 7);
        assert_eq!(g.leave("a", 1), None);
        assert_eq!(g.len(), 0);
        g.admit(&a, 2);
        assert_eq!(g.owner("a"), Some(7), "its bucket is still bound");
        g.unbind(7);
        assert_eq!(g.owner("a"), None);
        g.bind("a", 8);
        assert_eq!(g.leave("a", 2), None);
        // A consumer attaching frees the buckets with no group.
        g.rebalance();
        g.admit(&a, 3);
        assert_eq!(g.owner("a"), None);
        assert_eq!(g.leave("a", 3), None);
        assert_eq!((g.len(), g.bytes()), (0, 0));
    }
}
