//! Which queues this node serves, when several brokers share one database
//! (`crate::cluster` decides; this carries it out). A durable queue another
//! node serves stays in the registry, so that sends route to it and listings
//! show it, but is away (`queue/away.rs`): its messages are only stored here.
//! Loading a queue reads it back from the store as a restart would, through
//! its depager, with the delivery counts and scheduled redeliveries stored.
//! Non-durable queues live in one node's memory and are never moved.
use rebound_storage::QueueId;
use tracing::info;

use super::Broker;

impl Broker {
    /// The ids of the durable queues: those nodes take leases on.
    pub fn durable_queue_ids(&self) -> Vec<QueueId> {
        let mut ids: Vec<QueueId> = self
            .read()
            .queues
            .values()
            .filter(|q| q.durable)
            .map(|q| q.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Stops serving queue `id` here (its consumers are told it moved).
    /// Returns whether there is such a durable queue.
    pub fn unload_queue(&self, id: QueueId) -> bool {
        let Some(queue) = self.durable_queue(id) else {
            return false;
        };
        if queue.is_served() {
            queue.unload();
            info!(queue = %queue.name, "no longer served by this node");
        }
        true
    }

    /// Serves queue `id` here from what the store holds. Returns whether
    /// there is such a durable queue.
    pub fn load_queue(&self, id: QueueId) -> bool {
        let Some(queue) = self.durable_queue(id) else {
            return false;
        };
        if !queue.is_served() {
            queue.load();
            info!(queue = %queue.name, "served by this node");
        }
        true
    }

    fn durable_queue(&self, id: QueueId) -> Option<std::sync::Arc<crate::queue::Queue>> {
        self.read()
            .queues
            .values()
            .find(|q| q.id == id && q.durable)
            .cloned()
    }
}
