//! The node's size task: every [`EVERY`], publishes the bytes the queues it
//! serves hold and reads what the other nodes' queues hold, for address size
//! limits shared by the nodes (`engine/shared_sizes.rs`). A second late at
//! most, by design: the limits stay soft by what sends carry meanwhile, and
//! a send never waits for the database to be admitted.
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::PostgresStore;
use tracing::debug;

use crate::engine::Broker;

/// How often the sizes are published and read.
pub const EVERY: Duration = Duration::from_secs(1);

/// Runs until the broker shuts down.
pub async fn run(store: Arc<PostgresStore>, broker: Arc<Broker>, node: String) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = broker.shutdown().cancelled() => return,
        }
        if let Err(err) = store.publish_sizes(&node, broker.served_sizes()).await {
            debug!(%err, "cannot publish the sizes of the queues served here");
        }
        match store.sizes_elsewhere(&node).await {
            Ok(sizes) => broker.set_sizes_elsewhere(&sizes),
            Err(err) => debug!(%err, "cannot read the sizes of the other nodes' queues"),
        }
    }
}
