//! Address sizes across the nodes of a cluster (`crate::cluster` publishes
//! and reads them): the bytes the durable queues this node serves hold, for
//! the other nodes, and what the other nodes' queues hold, kept per address
//! beside this node's own totals (`crate::address_size`), so that a send is
//! held to `max-size-bytes` and `global-max-size` whichever node it reaches.
use std::collections::HashMap;

use rebound_storage::QueueId;

use super::Cluster;
use crate::address_size;

impl Cluster<'_> {
    /// The bytes held by each durable queue this node serves.
    pub fn served_sizes(&self) -> Vec<(QueueId, u64)> {
        self.broker
            .read()
            .queues
            .values()
            .filter(|q| q.durable && q.is_served())
            .map(|q| (q.id, q.bytes()))
            .collect()
    }

    /// Records what the queues other nodes serve hold (`sizes`, by queue id:
    /// theirs as they published it); a queue this node serves counts its own
    /// bytes only.
    pub fn set_sizes_elsewhere(&self, sizes: &HashMap<QueueId, u64>) {
        let reg = self.broker.read();
        let elsewhere = |queues: &[std::sync::Arc<crate::queue::Queue>]| -> u64 {
            queues
                .iter()
                .filter(|q| q.durable && !q.is_served())
                .filter_map(|q| sizes.get(&q.id))
                .sum()
        };
        let per_address: Vec<_> = reg
            .addresses
            .values()
            .map(|a| (&*a.size, elsewhere(&a.queues)))
            .collect();
        let total = per_address.iter().map(|(_, bytes)| bytes).sum();
        address_size::set_elsewhere(&self.broker.sizes, per_address, total);
    }
}
