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
//! A transaction of one node may remove messages of a queue another node
//! serves, which that node holds aside for it: the commit says so with an
//! [`Op::Claim`] naming that node and the epoch it holds the queue under,
//! and its removals of that queue's messages are checked against that claim
//! as the node's own are against its leases. So a transaction never removes
//! messages that a new owner has read back meanwhile.
//!
//! Storing a new message (and the state it is stored with) is anyone's
//! write: for a queue this node holds it claims the lease like an owner
//! write, for one it does not it adds a row to the inbox of the queue's
//! owner (`cluster.rs`). Addresses and queue records carry no claim. Without
//! a node id (a single broker) nothing is claimed or checked.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use deadpool_postgres::Client;

use super::pool::db_error;
use crate::error::StorageError;
use crate::{MessageId, Op, QueueId};

/// This node's id and the epochs of the leases it holds.
#[derive(Default)]
pub(super) struct Fence {
    state: Mutex<State>,
    /// Whether a node id was set (fencing is on).
    on: AtomicBool,
}

#[derive(Default)]
struct State {
    node: Option<Arc<str>>,
    epochs: HashMap<QueueId, u64>,
}

/// The leases a commit (or a group of them) writes under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Claims {
    pub(super) leases: BTreeSet<Lease>,
}

/// That node `node` holds the lease of `queue` under `epoch`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Lease {
    pub(super) queue: QueueId,
    pub(super) epoch: u64,
    pub(super) node: Arc<str>,
}

impl Fence {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Turns fencing on for node `node`.
    pub(super) fn set_node(&self, node: &str) {
        self.state().node = Some(Arc::from(node));
        self.on.store(true, Ordering::Release);
    }

    /// Records that this node holds `queue` under `epoch`, unless it holds a
    /// later one: a queue's epochs only grow, and an acquisition cut short
    /// by the node's deadline still finishes in the background, maybe after
    /// the one that replaced it (its older epoch would fence every write).
    pub(super) fn hold(&self, queue: QueueId, epoch: u64) {
        let mut state = self.state();
        let held = state.epochs.entry(queue).or_insert(epoch);
        *held = (*held).max(epoch);
    }

    /// Forgets `queue`: later owner writes to it are refused.
    pub(super) fn forget(&self, queue: QueueId) {
        self.state().epochs.remove(&queue);
    }

    /// This node's claim on `queue` alone (to drain its inbox).
    pub(super) fn claim(&self, queue: QueueId) -> Result<Claims, StorageError> {
        let state = self.state();
        match (&state.node, state.epochs.get(&queue)) {
            (Some(node), Some(&epoch)) => Ok(Claims {
                leases: BTreeSet::from([Lease {
                    queue,
                    epoch,
                    node: Arc::clone(node),
                }]),
            }),
            _ => Err(StorageError::Fenced { queue }),
        }
    }

    /// What `ops` claim, and the messages they store for queues this node
    /// does not hold (which go to the inbox of the node that does, see
    /// `cluster.rs`). Nothing without fencing. An owner write to a queue
    /// this node does not hold passes if the ops claim another node's lease
    /// on it ([`Op::Claim`]). A message stored for a queue
    /// this node holds claims its lease too: once the lease is lost, the
    /// queue's new owner may have read the queue already, so the message
    /// must reach it through the inbox instead (the commit fails, and the
    /// retried send finds the queue not held).
    pub(super) fn sort(&self, ops: &[Op]) -> Result<Sorted, StorageError> {
        // A single broker's commits pass without taking the lock.
        if !self.on.load(Ordering::Acquire) {
            return Ok(Sorted::default());
        }
        let state = self.state();
        let Some(node) = &state.node else {
            return Ok(Sorted::default());
        };
        let stored: BTreeSet<(QueueId, MessageId)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::PutMessage { queue, message } => Some((*queue, message.message_id)),
                _ => None,
            })
            .collect();
        let mut leases: BTreeSet<Lease> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Claim { queue, node, epoch } => Some(Lease {
                    queue: *queue,
                    epoch: *epoch,
                    node: Arc::from(node.as_str()),
                }),
                _ => None,
            })
            .collect();
        let claimed: BTreeSet<QueueId> = leases.iter().map(|l| l.queue).collect();
        let mine = |queue: QueueId, epoch: u64| Lease {
            queue,
            epoch,
            node: Arc::clone(node),
        };
        let (mut inbox, mut owned) = (Vec::new(), Vec::new());
        for op in ops {
            match write_of(op, &stored) {
                Some(Write::Owner(queue)) => match state.epochs.get(&queue) {
                    Some(&epoch) => {
                        leases.insert(mine(queue, epoch));
                    }
                    None if claimed.contains(&queue) => {}
                    None => return Err(StorageError::Fenced { queue }),
                },
                Some(Write::New(queue, id)) => match state.epochs.get(&queue) {
                    Some(&epoch) => {
                        leases.insert(mine(queue, epoch));
                        owned.push((queue, id));
                    }
                    None => inbox.push((queue, id)),
                },
                None => {}
            }
        }
        let claims = (!leases.is_empty()).then_some(Claims { leases });
        Ok(Sorted { claims, inbox, owned })
    }
}

/// What [`Fence::sort`] found in a commit.
#[derive(Debug, Default)]
pub(super) struct Sorted {
    pub(super) claims: Option<Claims>,
    pub(super) inbox: Vec<(QueueId, MessageId)>,
    /// The new messages for queues this node holds: they join the queue's
    /// inbox if it is not empty (`inbox.rs`).
    pub(super) owned: Vec<(QueueId, MessageId)>,
}

/// What kind of write to a queue an op is.
enum Write {
    /// Only the queue's owner may make it.
    Owner(QueueId),
    /// A new message (or the state it is stored with): anyone may.
    New(QueueId, MessageId),
}

fn write_of(op: &Op, stored: &BTreeSet<(QueueId, MessageId)>) -> Option<Write> {
    match op {
        Op::PutMessage { queue, message } => Some(Write::New(*queue, message.message_id)),
        Op::PutState { queue, id, .. } if stored.contains(&(*queue, *id)) => None,
        Op::PutState { queue, .. }
        | Op::RemoveMessage { queue, .. }
        | Op::RemoveStatelessMessage { queue, .. }
        | Op::PutDues { queue, .. }
        | Op::RemoveDues { queue, .. } => Some(Write::Owner(*queue)),
        _ => None,
    }
}

impl Claims {
    /// The claims of several commits together.
    pub(super) fn merge<'a>(all: impl IntoIterator<Item = &'a Claims>) -> Option<Claims> {
        let mut merged: Option<Claims> = None;
        for claims in all {
            match &mut merged {
                Some(m) => m.leases.extend(claims.leases.iter().cloned()),
                None => merged = Some(claims.clone()),
            }
        }
        merged
    }

    /// The parameters of [`FENCE`] and [`HELD`]: nodes, queues, epochs, count.
    pub(super) fn columns(&self) -> (Vec<String>, Vec<i64>, Vec<i64>, i32) {
        let mut columns = (Vec::new(), Vec::new(), Vec::new(), self.leases.len() as i32);
        for lease in &self.leases {
            columns.0.push(lease.node.to_string());
            columns.1.push(i64::from(lease.queue));
            columns.2.push(lease.epoch as i64);
        }
        columns
    }

    /// Which claims still hold, outside any transaction (after a failed
    /// group, to tell a lost lease from another failure).
    pub(super) async fn held(&self, client: &Client) -> Result<BTreeSet<Lease>, StorageError> {
        let (nodes, queues, epochs, _) = self.columns();
        let rows = client
            .query(HELD, &[&nodes, &queues, &epochs])
            .await
            .map_err(db_error)?;
        Ok(rows
            .iter()
            .map(|row| Lease {
                node: Arc::from(row.get::<_, &str>(0)),
                queue: row.get::<_, i64>(1) as QueueId,
                epoch: row.get::<_, i64>(2) as u64,
            })
            .collect())
    }
}

/// Locks the lease rows a group writes under, and aborts the transaction if
/// one is not held by its node under the claimed epoch. Run first in the
/// group's transaction, with [`Claims::columns`] (`writes.rs`).
pub(super) const FENCE: &str = "SELECT rebound_fence($4, count(*)) FROM (
         SELECT 1 FROM queue_leases l
         JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS f(node, queue, epoch)
           ON l.queue = f.queue AND l.epoch = f.epoch AND l.node = f.node
         FOR SHARE OF l) held";

/// The SQLSTATE `rebound_fence` raises (migration 2).
pub(super) const LOST: &str = "RBF01";

/// The claims that hold.
const HELD: &str = "SELECT l.node, l.queue, l.epoch FROM queue_leases l
     JOIN unnest($1::text[], $2::bigint[], $3::bigint[]) AS f(node, queue, epoch)
       ON l.queue = f.queue AND l.epoch = f.epoch AND l.node = f.node";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::DeliveryState;

    fn ack(queue: QueueId) -> Op {
        Op::RemoveMessage { queue, id: 1 }
    }

    fn claims(fence: &Fence, ops: &[Op]) -> Result<Option<Claims>, StorageError> {
        fence.sort(ops).map(|sorted| sorted.claims)
    }

    #[test]
    fn owner_writes_claim_their_lease_once_fencing_is_on() {
        let fence = Fence::default();
        assert!(
            matches!(claims(&fence, &[ack(1)]), Ok(None)),
            "a single broker claims nothing"
        );
        fence.set_node("n1");
        fence.hold(1, 7);
        let state = Op::PutState {
            queue: 1,
            id: 2,
            state: DeliveryState::default(),
        };
        let claimed = claims(&fence, &[state, ack(1)]).unwrap().unwrap();
        assert_eq!(claimed.leases, BTreeSet::from([lease("n1", 1, 7)]));
        assert!(matches!(
            claims(&fence, &[ack(2)]),
            Err(StorageError::Fenced { queue: 2 })
        ));
        fence.forget(1);
        assert!(matches!(
            claims(&fence, &[ack(1)]),
            Err(StorageError::Fenced { queue: 1 })
        ));
    }

    #[test]
    fn a_late_hold_of_an_older_epoch_does_not_replace_a_newer_one() {
        let fence = Fence::default();
        fence.set_node("n1");
        fence.hold(7, 5);
        fence.hold(7, 4);
        assert_eq!(fence.claim(7).unwrap().leases.first().unwrap().epoch, 5);
        fence.forget(7);
        fence.hold(7, 2);
        assert_eq!(
            fence.claim(7).unwrap().leases.first().unwrap().epoch,
            2,
            "a new holding after a release"
        );
    }

    #[test]
    fn new_messages_claim_a_queue_held_and_go_to_the_inbox_of_one_not_held() {
        let fence = Fence::default();
        let put = |queue, id| Op::PutMessage {
            queue,
            message: crate::MessageRecord {
                message_id: id,
                ..Default::default()
            },
        };
        let scheduled = Op::PutState {
            queue: 2,
            id: 9,
            state: DeliveryState::default(),
        };
        let ops = [put(1, 9), put(2, 9), scheduled];
        assert!(
            fence.sort(&ops).unwrap().inbox.is_empty(),
            "a single broker has no inbox"
        );
        fence.set_node("n1");
        fence.hold(1, 3);
        let sorted = fence.sort(&ops).unwrap();
        assert_eq!(sorted.claims.unwrap().leases, BTreeSet::from([lease("n1", 1, 3)]));
        assert_eq!(
            sorted.inbox,
            [(2, 9)],
            "the state stored with a new message is part of it"
        );
    }

    fn lease(node: &str, queue: QueueId, epoch: u64) -> Lease {
        Lease {
            queue,
            epoch,
            node: Arc::from(node),
        }
    }

    #[test]
    fn a_claim_on_another_node_s_lease_lets_its_queue_s_messages_be_removed() {
        let fence = Fence::default();
        fence.set_node("n1");
        let claim = Op::Claim {
            queue: 2,
            node: "n2".into(),
            epoch: 5,
        };
        assert!(matches!(
            claims(&fence, &[ack(2)]),
            Err(StorageError::Fenced { queue: 2 })
        ));
        let claimed = claims(&fence, &[claim.clone(), ack(2)]).unwrap().unwrap();
        assert_eq!(claimed.leases, BTreeSet::from([lease("n2", 2, 5)]));
        // It covers that queue only.
        assert!(matches!(
            claims(&fence, &[claim, ack(3)]),
            Err(StorageError::Fenced { queue: 3 })
        ));
    }

    #[test]
    fn merged_claims_keep_every_epoch() {
        let claims = |pairs: &[(QueueId, u64)]| Claims {
            leases: pairs.iter().map(|&(q, e)| lease("n", q, e)).collect(),
        };
        let merged = Claims::merge([&claims(&[(1, 1)]), &claims(&[(1, 2), (3, 1)])]).unwrap();
        let expected = [(1, 1), (1, 2), (3, 1)].map(|(q, e)| lease("n", q, e));
        assert_eq!(merged.leases, BTreeSet::from(expected));
        assert_eq!(Claims::merge([]), None);
    }
}
