//! The node's size task: every [`EVERY`], publishes the bytes the queues it
//! serves hold and reads what the other nodes' queues hold, for address size
//! limits shared by the nodes (`engine/cluster/sizes.rs`). A second late at
//! most, by design: the limits stay soft by what sends carry meanwhile, and
//! a send never waits for the database to be admitted.
//!
//! Only the figures that changed since the last publication are written: a
//! row stays valid as long as its node holds the queue's lease, so a node
//! with many idle queues writes nothing. A queue this node stops serving is
//! forgotten, so that its row is written again when it serves it again.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::{PostgresStore, QueueId};
use tracing::debug;

use crate::engine::Broker;

/// How often the sizes are published and read.
pub const EVERY: Duration = Duration::from_secs(1);

/// Runs until the broker shuts down.
pub async fn run(store: Arc<PostgresStore>, broker: Arc<Broker>, node: String) {
    let mut published: HashMap<QueueId, u64> = HashMap::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = broker.shutdown().cancelled() => return,
        }
        let served: HashMap<QueueId, u64> = broker.cluster().served_sizes().into_iter().collect();
        let changed: Vec<(QueueId, u64)> = served
            .iter()
            .filter(|(queue, bytes)| published.get(*queue) != Some(*bytes))
            .map(|(&queue, &bytes)| (queue, bytes))
            .collect();
        match store.publish_sizes(&node, changed).await {
            Ok(()) => published = served,
            Err(err) => {
                debug!(%err, "cannot publish the sizes of the queues served here");
                // Written next time: whatever differs from what was published.
                published.retain(|queue, bytes| served.get(queue) == Some(bytes));
            }
        }
        match store.sizes_elsewhere(&node).await {
            Ok(sizes) => broker.cluster().set_sizes_elsewhere(&sizes),
            Err(err) => debug!(%err, "cannot read the sizes of the other nodes' queues"),
        }
    }
}
