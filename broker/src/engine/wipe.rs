//! Emptying a deleted durable queue in bounded commits, before the queue
//! itself goes.
//!
//! Why: the embedded store deletes a queue with one delete per key, in one
//! journal record held in memory whole, so deleting a queue of 2,000,000
//! messages made a 36 MB record and raised the broker's RSS by 410 MB. When
//! the store says so ([`rebound_storage::Store::queue_delete_chunk`]) the
//! queue's stored messages are removed first, in id order, a chunk per
//! commit, read as the depager reads; the queue's own deletion then has only
//! what arrived meanwhile left to take.
//!
//! The queue is already out of the registry (nothing new is routed to it)
//! and closed (its consumers are gone). A crash before the last commit
//! leaves the queue stored with the messages not yet removed: its deletion
//! was never acknowledged, and the queue is back after a restart.
use rebound_storage::Op;

use super::{Broker, blocking};
use crate::error::Result;
use crate::queue::Queue;

/// Bytes of messages read per chunk, at most.
const CHUNK_BYTES: u64 = 8 << 20;

impl Broker {
    /// Removes the stored messages of `queue`, being deleted, `chunk` per commit.
    pub(super) async fn empty_stored(&self, queue: &Queue, chunk: usize) -> Result<()> {
        let id = queue.id;
        let mut after = 0;
        loop {
            let store = self.store.clone();
            let read = blocking(move || store.scan_queue(id, after, chunk, CHUNK_BYTES)).await?;
            let Some(last) = read.last() else {
                return Ok(());
            };
            after = last.record.message_id;
            let ops = read
                .iter()
                .map(|m| Op::RemoveMessage {
                    queue: id,
                    id: m.record.message_id,
                })
                .collect();
            self.commit(self.submit(ops)).await?;
        }
    }
}
