//! The node's metadata task: keeps the registry in step with the addresses
//! and queues other nodes create and delete (`engine/cluster/catalog.rs`). It re-reads
//! them from the store when a group that wrote some notifies, and every
//! [`REREAD`] anyway, for notifications lost while its listening connection
//! was down.
use std::sync::Arc;
use std::time::Duration;

use rebound_storage::PostgresStore;
use tracing::debug;

use crate::engine::{Broker, Stored};

/// How often the addresses and queues are read anyway.
pub const REREAD: Duration = Duration::from_secs(5);

/// Runs until the broker shuts down.
pub async fn run(store: Arc<PostgresStore>, broker: Arc<Broker>) {
    let mut notices = store.metadata_notices();
    let mut previous = Stored::default();
    loop {
        tokio::select! {
            Some(_) = notices.recv() => while notices.try_recv().is_ok() {},
            _ = tokio::time::sleep(REREAD) => {}
            _ = broker.shutdown().cancelled() => return,
        }
        match store.metadata().await {
            Ok((addresses, queues)) => previous = broker.cluster().merge_stored(addresses, queues, &previous),
            Err(err) => debug!(%err, "cannot read the addresses and queues"),
        }
    }
}
