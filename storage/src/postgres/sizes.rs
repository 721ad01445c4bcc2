//! The bytes each node's queues hold, published so that the other nodes
//! hold sends to an address's `max-size-bytes` (and the broker's
//! `global-max-size`) whichever node serves its queues.
//!
//! A node writes the sizes of the queues it serves that changed, every round
//! of its cluster task (one multi-row upsert); a node reads those of the queues
//! other nodes hold under a live lease. A row of a queue whose node stopped
//! serving it is ignored (its lease moved) until the new node overwrites it;
//! a deleted queue's row goes with the queue (`writes.rs`).

use std::collections::HashMap;

use super::PostgresStore;
use super::pool::{db_error, pool_error};
use crate::QueueId;
use crate::error::StorageError;

const PUBLISH: &str = "INSERT INTO queue_sizes (queue, node, bytes)
     SELECT q, $1, b FROM unnest($2::bigint[], $3::bigint[]) AS t(q, b)
     ON CONFLICT (queue) DO UPDATE SET node = EXCLUDED.node, bytes = EXCLUDED.bytes";

const ELSEWHERE: &str = "SELECT s.queue, s.bytes FROM queue_sizes s
     JOIN queue_leases l ON l.queue = s.queue AND l.node = s.node
     WHERE s.node <> $1 AND l.expires_at > now()";

impl PostgresStore {
    /// Publishes the bytes held by the queues node `node` serves.
    pub fn publish_sizes(
        &self,
        node: &str,
        sizes: Vec<(QueueId, u64)>,
    ) -> impl Future<Output = Result<(), StorageError>> + Send + 'static {
        let node = node.to_owned();
        self.db.run(move |pool| async move {
            if sizes.is_empty() {
                return Ok(());
            }
            let (queues, bytes): (Vec<i64>, Vec<i64>) = sizes
                .into_iter()
                .map(|(q, b)| (i64::from(q), i64::try_from(b).unwrap_or(i64::MAX)))
                .unzip();
            let client = pool.get().await.map_err(pool_error)?;
            client
                .execute(PUBLISH, &[&node, &queues, &bytes])
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    /// The bytes held by the queues other nodes than `node` serve under a
    /// live lease, as they last published them.
    pub fn sizes_elsewhere(
        &self,
        node: &str,
    ) -> impl Future<Output = Result<HashMap<QueueId, u64>, StorageError>> + Send + 'static {
        let node = node.to_owned();
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            let rows = client.query(ELSEWHERE, &[&node]).await.map_err(db_error)?;
            Ok(rows
                .iter()
                .map(|row| {
                    (
                        row.get::<_, i64>(0) as QueueId,
                        row.get::<_, i64>(1).max(0) as u64,
                    )
                })
                .collect())
        })
    }
}
