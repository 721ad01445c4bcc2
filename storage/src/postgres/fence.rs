//! Fencing: a node writes the state of a queue it serves (removals and
//! delivery states, the writes of an owner) only while it still holds the
//! queue's lease under the epoch it acquired it with.
//!
//! [`Fence`] knows this node's id and, per queue it holds, that epoch
//! (`cluster.rs` records them as leases are acquired, released or lost). A
//! commit captures the epochs of the queues its owner writes touch when it
//! is submitted ([`Fence::claims`]): the epoch its ops were made under. A
//! commit with an owner write to a queue the node does not hold is refused
//! at once with [`StorageError::Fenced`].
//!
//! The group transaction then checks its claims before it writes
//! ([`FENCE`]): a `SELECT … FOR SHARE` of the lease rows, which a takeover's
//! `UPDATE` of the same rows waits for (and which waits for a takeover in
//! progress), and `rebound_fence` (migration 2) raises when a lease is not
//! held under the claimed epoch, which aborts the transaction whole. The
//! committer then asks which claims still hold ([`HELD`]), fails the commits
//! that wrote under a lost lease with [`StorageError::Fenced`] and writes the
//! others again without them, so one stale queue never fails its neighbours.
//!
//! Writes that are no owner's (storing new messages, whoever owns their
//! queue; addresses and queue records) carry no claim. Without a node id
//! (a single broker) nothing is claimed or checked.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::Client;

use super::pool::db_error;
use crate::error::StorageError;
use crate::{Op, QueueId};

/// This node's id and the epochs of the leases it holds.
#[derive(Default)]
pub(super) struct Fence {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    node: Option<Arc<str>>,
    epochs: HashMap<QueueId, u64>,
}

/// The leases a commit (or a group of them) writes under: this node's id and
/// `(queue, epoch)` pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Claims {
    pub(super) node: Arc<str>,
    pub(super) leases: BTreeSet<(QueueId, u64)>,
}

impl Fence {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Turns fencing on for node `node`.
    pub(super) fn set_node(&self, node: &str) {
        self.state().node = Some(Arc::from(node));
    }

    /// Records that this node holds `queue` under `epoch`.
    pub(super) fn hold(&self, queue: QueueId, epoch: u64) {
        self.state().epochs.insert(queue, epoch);
    }

    /// Forgets `queue`: later owner writes to it are refused.
    pub(super) fn forget(&self, queue: QueueId) {
        self.state().epochs.remove(&queue);
    }

    /// What `ops` claim: `None` without fencing or owner writes, and
    /// [`StorageError::Fenced`] for an owner write to a queue not held.
    pub(super) fn claims(&self, ops: &[Op]) -> Result<Option<Claims>, StorageError> {
        let state = self.state();
        let Some(node) = &state.node else { return Ok(None) };
        let mut leases = BTreeSet::new();
        for queue in ops.iter().filter_map(owner_write) {
            let epoch = state.epochs.get(&queue).ok_or(StorageError::Fenced { queue })?;
            leases.insert((queue, *epoch));
        }
        Ok((!leases.is_empty()).then(|| Claims {
            node: Arc::clone(node),
            leases,
        }))
    }
}

/// The queue whose owner alone may make this write, if it is such a write.
fn owner_write(op: &Op) -> Option<QueueId> {
    match op {
        Op::PutState { queue, .. }
        | Op::RemoveMessage { queue, .. }
        | Op::RemoveStatelessMessage { queue, .. } => Some(*queue),
        _ => None,
    }
}

impl Claims {
    /// The claims of several commits together (one node's).
    pub(super) fn merge<'a>(all: impl IntoIterator<Item = &'a Claims>) -> Option<Claims> {
        let mut merged: Option<Claims> = None;
        for claims in all {
            match &mut merged {
                Some(m) => m.leases.extend(claims.leases.iter().copied()),
                None => merged = Some(claims.clone()),
            }
        }
        merged
    }

    /// The parameters of [`FENCE`] and [`HELD`]: node, queues, epochs, count.
    pub(super) fn columns(&self) -> (String, Vec<i64>, Vec<i64>, i32) {
        let (queues, epochs) = self
            .leases
            .iter()
            .map(|&(queue, epoch)| (i64::from(queue), epoch as i64))
            .unzip();
        (self.node.to_string(), queues, epochs, self.leases.len() as i32)
    }

    /// Which claims still hold, outside any transaction (after a failed
    /// group, to tell a lost lease from another failure).
    pub(super) async fn held(&self, client: &Client) -> Result<BTreeSet<(QueueId, u64)>, StorageError> {
        let (node, queues, epochs, _) = self.columns();
        let rows = client
            .query(HELD, &[&node, &queues, &epochs])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| (row.get::<_, i64>(0) as QueueId, row.get::<_, i64>(1) as u64))
            .collect())
    }
}

/// Locks the lease rows a group writes under, and aborts the transaction if
/// one is not held by `$1` under the claimed epoch. Run first in the group's
/// transaction, with [`Claims::columns`] (`writes.rs`).
pub(super) const FENCE: &str = "SELECT rebound_fence($4, count(*)) FROM (
         SELECT 1 FROM queue_leases l
         JOIN unnest($2::bigint[], $3::bigint[]) AS f(queue, epoch)
           ON l.queue = f.queue AND l.epoch = f.epoch
         WHERE l.node = $1
         FOR SHARE OF l) held";

/// The claims that hold.
const HELD: &str = "SELECT l.queue, l.epoch FROM queue_leases l
     JOIN unnest($2::bigint[], $3::bigint[]) AS f(queue, epoch)
       ON l.queue = f.queue AND l.epoch = f.epoch
     WHERE l.node = $1";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::DeliveryState;

    fn ack(queue: QueueId) -> Op {
        Op::RemoveMessage { queue, id: 1 }
    }

    #[test]
    fn only_owner_writes_claim_and_only_once_fencing_is_on() {
        let fence = Fence::default();
        assert!(
            matches!(fence.claims(&[ack(1)]), Ok(None)),
            "a single broker claims nothing"
        );
        fence.set_node("n1");
        fence.hold(1, 7);
        let store = Op::PutMessage {
            queue: 2,
            message: Default::default(),
        };
        assert!(matches!(fence.claims(std::slice::from_ref(&store)), Ok(None)));
        let state = Op::PutState {
            queue: 1,
            id: 2,
            state: DeliveryState::default(),
        };
        let claims = fence.claims(&[store, state, ack(1)]).unwrap().unwrap();
        assert_eq!(&*claims.node, "n1");
        assert_eq!(claims.leases, BTreeSet::from([(1, 7)]));
        assert!(matches!(
            fence.claims(&[ack(2)]),
            Err(StorageError::Fenced { queue: 2 })
        ));
        fence.forget(1);
        assert!(matches!(
            fence.claims(&[ack(1)]),
            Err(StorageError::Fenced { queue: 1 })
        ));
    }

    #[test]
    fn merged_claims_keep_every_epoch() {
        let claims = |pairs: &[(QueueId, u64)]| Claims {
            node: Arc::from("n"),
            leases: pairs.iter().copied().collect(),
        };
        let merged = Claims::merge([&claims(&[(1, 1)]), &claims(&[(1, 2), (3, 1)])]).unwrap();
        assert_eq!(merged.leases, BTreeSet::from([(1, 1), (1, 2), (3, 1)]));
        assert_eq!(Claims::merge([]), None);
    }
}
