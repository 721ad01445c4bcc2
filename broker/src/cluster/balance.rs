//! Which queues a node takes and gives back: pure, so that the rules can be
//! checked as properties (every queue ends up served, the spread evens out).
//!
//! With `Q` queues and `N` live nodes, every node aims at holding between
//! `low = floor(Q / N)` and `high = ceil(Q / N)` of them. Each tick, a node
//! * takes free queues (nobody holds them, or their holder is not live) while
//!   it holds fewer than `high`, but stops at `low` while another live node
//!   holds fewer than `low` (that node needs them more);
//! * gives back one queue (its highest id) when it holds more than `high`,
//!   or more than `low` while another live node holds fewer than `low`: the
//!   gentle rebalance, one queue per tick, so that a node joining does not
//!   make every queue move at once.
//!
//! A node never takes back in the tick it gives, and the rules keep a node
//! that gave from taking again while another is short, so queues do not
//! bounce. Free queues are taken in an order of their own for each node
//! (a hash of queue and node), so that nodes starting together mostly try
//! different queues; the database settles the rest (one acquisition wins).
use std::collections::BTreeMap;

use rebound_storage::QueueId;

/// What a node does this tick.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Free queues to acquire, in order.
    pub take: Vec<QueueId>,
    /// A queue to give back.
    pub give: Option<QueueId>,
}

/// `me`'s plan, given the live nodes (`me` among them or not), every queue,
/// and who holds each queue held by a live node (others' queues whose holder
/// is not live count as free, as do those in no map).
pub fn plan(me: &str, live: &[String], queues: &[QueueId], holders: &BTreeMap<QueueId, String>) -> Plan {
    let mut counts: BTreeMap<&str, usize> = live.iter().map(|n| (n.as_str(), 0)).collect();
    counts.entry(me).or_insert(0);
    let mut mine = Vec::new();
    let mut free = Vec::new();
    for &queue in queues {
        match holders
            .get(&queue)
            .and_then(|h| counts.get_mut(h.as_str()).map(|c| (h, c)))
        {
            Some((holder, count)) => {
                *count += 1;
                if holder == me {
                    mine.push(queue);
                }
            }
            None => free.push(queue),
        }
    }
    let nodes = counts.len();
    let (low, high) = (queues.len() / nodes, queues.len().div_ceil(nodes));
    let someone_short = counts.iter().any(|(&node, &count)| node != me && count < low);
    let held = mine.len();
    if held > high || (held > low && someone_short) {
        return Plan {
            take: Vec::new(),
            give: mine.iter().max().copied(),
        };
    }
    let target = if someone_short { low } else { high };
    free.sort_by_key(|&queue| spread(queue, me));
    free.truncate(target.saturating_sub(held));
    Plan {
        take: free,
        give: None,
    }
}

/// A per-node order of queues (FNV-1a over the node id and the queue id).
fn spread(queue: QueueId, node: &str) -> u64 {
    node.bytes()
        .chain(queue.to_be_bytes())
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("n{i}")).collect()
    }

    /// Ticks the nodes in turn, each applying its plan (every acquisition
    /// succeeds: nobody else is taking at that moment), until nothing changes.
    fn settle(live: &[String], queues: &[QueueId], holders: &mut BTreeMap<QueueId, String>) -> usize {
        for round in 0..4 * queues.len() + 4 {
            let mut changed = false;
            for node in live {
                let plan = plan(node, live, queues, holders);
                for queue in &plan.take {
                    holders.insert(*queue, node.clone());
                }
                if let Some(queue) = plan.give {
                    holders.remove(&queue);
                }
                changed |= !plan.take.is_empty() || plan.give.is_some();
            }
            if !changed {
                return round;
            }
        }
        panic!("did not settle: {holders:?}");
    }

    #[test]
    fn a_lone_node_takes_everything_and_a_second_one_gets_half_gently() {
        let queues: Vec<QueueId> = (1..=10).collect();
        let mut holders = BTreeMap::new();
        let first = plan("a", &nodes(0), &queues, &holders);
        assert_eq!(first.take.len(), 10);
        first.take.iter().for_each(|&q| {
            holders.insert(q, "a".to_owned());
        });
        let two = ["a".to_owned(), "b".to_owned()];
        assert_eq!(
            plan("a", &two, &queues, &holders),
            Plan {
                take: vec![],
                give: Some(10)
            },
            "one at a time, the highest id"
        );
        settle(&two, &queues, &mut holders);
        let of_a = holders.values().filter(|h| *h == "a").count();
        assert_eq!((of_a, holders.len()), (5, 10));
    }

    #[test]
    fn the_queues_of_a_node_that_is_not_live_are_free() {
        let holders = BTreeMap::from([(1, "dead".to_owned()), (2, "b".to_owned())]);
        let live = ["a".to_owned(), "b".to_owned()];
        assert_eq!(plan("a", &live, &[1, 2], &holders).take, [1]);
    }

    proptest! {
        /// From any start, the nodes settle with every queue held by a live
        /// node and each holding floor or ceil of its share, and no plan ever
        /// takes a held queue or gives one it does not hold.
        #[test]
        fn every_queue_is_served_and_the_spread_is_even(
            n in 1usize..6,
            q in 0u32..40,
            start in proptest::collection::vec(0usize..8, 0..40),
        ) {
            let live = nodes(n);
            let queues: Vec<QueueId> = (1..=q).collect();
            // Some queues start with live nodes, some with nodes that left.
            let mut holders: BTreeMap<QueueId, String> = queues
                .iter()
                .zip(&start)
                .map(|(&queue, &owner)| (queue, format!("n{owner}")))
                .collect();
            for node in &live {
                let p = plan(node, &live, &queues, &holders);
                for queue in &p.take {
                    prop_assert!(holders.get(queue).is_none_or(|h| !live.contains(h)), "took a held queue");
                }
                if let Some(queue) = p.give {
                    prop_assert_eq!(holders.get(&queue), Some(node));
                }
                prop_assert!(p.take.is_empty() || p.give.is_none());
            }
            settle(&live, &queues, &mut holders);
            holders.retain(|_, h| live.contains(h));
            prop_assert_eq!(holders.len(), queues.len());
            let (low, high) = (queues.len() / n, queues.len().div_ceil(n));
            for node in &live {
                let held = holders.values().filter(|h| *h == node).count();
                prop_assert!((low..=high).contains(&held), "{} holds {}, not {}..={}", node, held, low, high);
            }
        }
    }
}
