//! Message groups: messages with the same `_AMQ_GROUP_ID` (or `JMSXGroupID`) go to
//! one consumer at a time, in send order, as in Artemis — and, beyond Artemis, in
//! order across failures.
//!
//! A group delivers **one message at a time**. Its oldest message is its *front*:
//! ready (in the shared ready set, or in its consumer's own ready set once the group
//! is bound), being delivered, out being settled, or waiting in the timeline for its
//! redelivery delay. Every later message of the group waits *behind* it, outside
//! every set a pick looks at, so a blocked group costs a pick nothing: there is no
//! scan over its messages, however many (the state here is one entry per group with
//! messages or with a consumer, plus the ids waiting behind the fronts). When the
//! front leaves for good (acked, dead-lettered, moved, expired, removed), the next
//! message behind it becomes the front. A failed front that comes back, at once or
//! after its delay, is still the front, so nothing of its group overtakes it.
//!
//! A group is bound to the consumer that takes its first message and stays with it
//! until that consumer leaves; its front then goes back to the shared ready set and
//! the next consumer to take it owns the group. Since only one message of a group is
//! ever delivering, moving a group never lets two consumers work on it at once.
//!
//! The cost: a group's throughput is bounded by one message's round trip, and a
//! message that keeps failing holds its whole group until it is dead-lettered.
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use rebound_storage::MessageId;

use super::entry::ConsumerId;

#[derive(Debug, Default)]
struct Group {
    /// The consumer the group is bound to.
    owner: Option<ConsumerId>,
    /// The message the group's delivery is at (see the module docs).
    front: Option<MessageId>,
    /// The messages waiting behind the front, in send order.
    behind: BTreeSet<MessageId>,
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
        let group = self.groups.entry(name.clone()).or_default();
        match group.front {
            None => {
                group.front = Some(id);
                Admitted::Front
            }
            Some(front) if front == id => Admitted::Front,
            Some(_) => {
                group.behind.insert(id);
                Admitted::Behind
            }
        }
    }

    pub(super) fn is_front(&self, name: &str, id: MessageId) -> bool {
        self.groups.get(name).is_some_and(|g| g.front == Some(id))
    }

    pub(super) fn owner(&self, name: &str) -> Option<ConsumerId> {
        self.groups.get(name).and_then(|g| g.owner)
    }

    /// Binds the group to the consumer that took its front.
    pub(super) fn bind(&mut self, name: &str, consumer: ConsumerId) {
        if let Some(group) = self.groups.get_mut(name) {
            group.owner = Some(consumer);
        }
    }

    /// How many messages wait behind `id` if it is its group's front.
    pub(super) fn held_behind(&self, name: &str, id: MessageId) -> Option<usize> {
        let group = self.groups.get(name)?;
        (group.front == Some(id)).then_some(group.behind.len())
    }

    /// `id` left its group. If it was the front, the next message behind it (if any)
    /// becomes the front and is returned.
    pub(super) fn leave(&mut self, name: &str, id: MessageId) -> Option<MessageId> {
        let group = self.groups.get_mut(name)?;
        let next = if group.front == Some(id) {
            group.front = group.behind.pop_first();
            group.front
        } else {
            group.behind.remove(&id);
            None
        };
        if group.front.is_none() && group.owner.is_none() {
            self.groups.remove(name);
        }
        next
    }

    /// A consumer left: its groups are free for the next consumer to take.
    pub(super) fn unbind(&mut self, consumer: ConsumerId) {
        self.groups.retain(|_, g| {
            if g.owner == Some(consumer) {
                g.owner = None;
            }
            g.owner.is_some() || g.front.is_some()
        });
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.groups.len()
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
        assert_eq!(g.len(), 1, "an empty unbound group is forgotten");
    }

    #[test]
    fn a_bound_group_is_kept_until_its_consumer_leaves() {
        let mut g = Groups::default();
        let a = name("a");
        g.admit(&a, 1);
        g.bind("a", 7);
        assert_eq!(g.leave("a", 1), None);
        assert_eq!(g.owner("a"), Some(7));
        g.unbind(7);
        assert_eq!(g.owner("a"), None);
        assert_eq!(g.len(), 0);
    }
}
