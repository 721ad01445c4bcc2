//! The live ids of one queue in one run.
//!
//! Most runs of a deep queue hold consecutive ids (one producer, or a
//! multicast message stored once per queue under one id), and a queue drains
//! from its oldest id up, so a run's live ids are mostly one span: two
//! integers, whatever the number of messages. Only an id taken out of the
//! middle (an ack out of order, a message moved) turns the span into a
//! roaring bitmap, an eighth of a byte per id while the ids are dense and at
//! most about two bytes.

use roaring::RoaringTreemap;

use super::manifest::QueueLive;
use crate::{MessageId, QueueId};

/// A set of ids; never empty while it belongs to a part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Live {
    /// Every id in `first..=last`.
    Span {
        first: MessageId,
        last: MessageId,
    },
    Ids(RoaringTreemap),
}

impl Live {
    /// The set of `ids`, which ascend.
    pub(crate) fn from_sorted(ids: &[MessageId]) -> Live {
        match (ids.first(), ids.last()) {
            (Some(&first), Some(&last)) if last - first + 1 == ids.len() as u64 => Live::Span { first, last },
            _ => Live::Ids(RoaringTreemap::from_sorted_iter(ids.iter().copied()).expect("ids ascend")),
        }
    }

    pub(crate) fn contains(&self, id: MessageId) -> bool {
        match self {
            Live::Span { first, last } => (*first..=*last).contains(&id),
            Live::Ids(ids) => ids.contains(id),
        }
    }

    pub(crate) fn len(&self) -> u64 {
        match self {
            Live::Span { first, last } => last - first + 1,
            Live::Ids(ids) => ids.len(),
        }
    }

    /// The lowest and the highest id, unless the set is empty.
    pub(crate) fn bounds(&self) -> Option<(MessageId, MessageId)> {
        match self {
            Live::Span { first, last } => Some((*first, *last)),
            Live::Ids(ids) => ids.min().zip(ids.max()),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Live::Ids(ids) if ids.is_empty())
    }

    /// Takes `id` out; whether it was in.
    pub(crate) fn remove(&mut self, id: MessageId) -> bool {
        match self {
            Live::Span { first, last } if !(*first..=*last).contains(&id) => false,
            Live::Span { first, last } if first == last => {
                *self = Live::Ids(RoaringTreemap::new());
                true
            }
            Live::Span { first, .. } if id == *first => {
                *first += 1;
                true
            }
            Live::Span { last, .. } if id == *last => {
                *last -= 1;
                true
            }
            Live::Span { first, last } => {
                let mut ids = RoaringTreemap::new();
                ids.insert_range(*first..=*last);
                ids.remove(id);
                *self = Live::Ids(ids);
                true
            }
            Live::Ids(ids) => ids.remove(id),
        }
    }

    /// The ids, ascending.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = MessageId> + '_> {
        match self {
            Live::Span { first, last } => Box::new(*first..=*last),
            Live::Ids(ids) => Box::new(ids.iter()),
        }
    }

    /// How the manifest stores the set: a span as its two ends, else the
    /// bitmap in roaring's portable format.
    pub(crate) fn encode(&self, queue: QueueId) -> std::io::Result<QueueLive> {
        Ok(match self {
            Live::Span { first, last } => QueueLive {
                queue,
                live: Vec::new(),
                first: *first,
                last: *last,
            },
            Live::Ids(ids) => {
                let mut live = Vec::with_capacity(ids.serialized_size());
                ids.serialize_into(&mut live)?;
                QueueLive {
                    queue,
                    live,
                    first: 0,
                    last: 0,
                }
            }
        })
    }

    /// The inverse of [`Live::encode`].
    pub(crate) fn decode(stored: &QueueLive) -> std::io::Result<Live> {
        if stored.live.is_empty() {
            if stored.first > stored.last {
                return Err(std::io::Error::other("a span ends before it starts"));
            }
            return Ok(Live::Span {
                first: stored.first,
                last: stored.last,
            });
        }
        RoaringTreemap::deserialize_from(&stored.live[..]).map(Live::Ids)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// A set behaves as a `BTreeSet` whatever is removed, and survives
        /// its encoding.
        #[test]
        fn live_ids_are_a_set(ids in prop::collection::btree_set(0..200u64, 1..60), dense in any::<bool>(), removes in prop::collection::vec(0..200u64, 0..80)) {
            let mut model: BTreeSet<u64> = if dense { (10..10 + ids.len() as u64).collect() } else { ids };
            let mut live = Live::from_sorted(&model.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(matches!(live, Live::Span { .. }), dense || model.iter().zip(model.iter().skip(1)).all(|(a, b)| a + 1 == *b));
            for id in removes {
                prop_assert_eq!(live.remove(id), model.remove(&id));
                prop_assert_eq!(live.len(), model.len() as u64);
                prop_assert_eq!(live.is_empty(), model.is_empty());
                prop_assert_eq!(live.bounds(), model.first().copied().zip(model.last().copied()));
                prop_assert_eq!(live.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
                prop_assert!(model.iter().all(|id| live.contains(*id)));
                let again = Live::decode(&live.encode(1).unwrap()).unwrap();
                prop_assert_eq!(again.iter().collect::<Vec<_>>(), live.iter().collect::<Vec<_>>());
            }
        }
    }
}
