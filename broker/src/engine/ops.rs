//! The storage ops the engine writes for messages already in a queue: removing
//! them, and recording their delivery state (count, failures, when a delayed
//! redelivery is due) so that a restart finds them as they were.
use rebound_storage::{DeliveryState, Op};

use crate::queue::{Entry, Queue};

/// The storage ops that remove `entries` of `queue` (those it stored), with their
/// delivery state where one may exist.
pub(super) fn removal_ops<'a>(queue: &Queue, entries: impl IntoIterator<Item = &'a Entry>) -> Vec<Op> {
    entries
        .into_iter()
        .filter(|e| e.stored)
        .map(|e| {
            let (queue, id) = (queue.id, e.id);
            match e.state_stored {
                true => Op::RemoveMessage { queue, id },
                false => Op::RemoveStatelessMessage { queue, id },
            }
        })
        .collect()
}

/// The op that stores `entry`'s delivery state; the entry remembers that it has one.
pub(super) fn state_op(queue: &Queue, entry: &mut Entry, scheduled_at_ms: u64) -> Op {
    entry.state_stored = true;
    Op::PutState {
        queue: queue.id,
        id: entry.id,
        state: DeliveryState {
            delivery_count: entry.delivery_count,
            scheduled_at_ms,
            failures: entry.failures.clone(),
        },
    }
}
