//! Acks held for a transaction of another node (several brokers on one
//! database).
//!
//! A consumer that reached this node through another one (`grpc/cluster/proxy.rs`)
//! may ack inside a transaction of that node. The acked messages leave their
//! queue here, as for a transaction of this node, and wait aside under the
//! transaction's node and id. That node removes them from the database in its
//! own commit, claiming this node's lease on the queue under the epoch they
//! were held with (`Op::Claim`): so its commit never removes messages that a
//! new owner of the queue has read back meanwhile, and it writes its sends and
//! these removals in one transaction.
//!
//! Then that node asks this one to resolve the transaction's holds
//! ([`Cluster::resolve_held`]), and this node looks in the store, which is the
//! truth either way: a message gone was committed (its ack is counted), one
//! still there was not (the transaction rolled back, or its commit failed)
//! and counts as a failed delivery. The same look resolves the holds of a
//! node that died or started again before it asked
//! ([`Cluster::resolve_held_of_gone`], from the cluster task). Holds of a queue
//! this node stopped serving are dropped when resolved: the queue's next
//! owner read those messages back from the store.
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use rebound_storage::Op;
use tracing::warn;

use super::Cluster;
use crate::engine::blocking;
use crate::error::{BrokerError, Result};
use crate::queue::{Entry, Queue};
use crate::transactions::HeldAcks;

/// The transaction of another node an ack joins, as the forwarded stream
/// names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HeldFor {
    /// The node's id.
    pub node: String,
    /// Its incarnation when the ack came (a node that starts again has
    /// forgotten its transactions).
    pub incarnation: u64,
    /// The transaction's id on that node.
    pub transaction: u64,
    /// Who acked: the only caller who may resolve the holds ("" without
    /// security).
    pub user: String,
}

/// What a transaction's commit writes for acks another node holds: the
/// claim on that node's lease, and the removals it covers.
pub(in crate::engine) fn held_removal_ops(held: &HeldAcks) -> impl Iterator<Item = Op> + '_ {
    let claim = Op::Claim {
        queue: held.queue,
        node: held.node.clone(),
        epoch: held.epoch,
    };
    let removals = held.message_ids.iter().map(|&id| Op::RemoveMessage {
        queue: held.queue,
        id,
    });
    std::iter::once(claim).chain(removals)
}

struct Hold {
    queue: Arc<Queue>,
    epoch: u64,
    entries: Vec<Entry>,
}

/// The holds of this node, by transaction.
#[derive(Default)]
pub(in crate::engine) struct Holds {
    by_transaction: Mutex<HashMap<HeldFor, Vec<Hold>>>,
}

impl Holds {
    fn lock(&self) -> MutexGuard<'_, HashMap<HeldFor, Vec<Hold>>> {
        self.by_transaction.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Cluster<'_> {
    /// Holds `entries`, acked from `queue` inside `transaction` of another
    /// node, until that transaction is resolved. Refused when this node no
    /// longer serves the queue (the entries go back as failed deliveries).
    pub(in crate::engine) async fn hold(
        &self,
        transaction: HeldFor,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
    ) -> Result<HeldAcks> {
        let served = self.node().zip(self.lease_epoch(queue.id));
        let Some(((node, _), epoch)) = served else {
            self.broker
                .fail(queue, entries, "its queue moved", None, None)
                .await?;
            return Err(BrokerError::QueueMoved(queue.name.clone()));
        };
        let held = HeldAcks {
            node,
            queue: queue.id,
            epoch,
            message_ids: entries.iter().map(|e| e.id).collect(),
            transaction: transaction.transaction,
        };
        self.broker
            .holds
            .lock()
            .entry(transaction)
            .or_default()
            .push(Hold {
                queue: queue.clone(),
                epoch,
                entries,
            });
        Ok(held)
    }

    /// Resolves the holds of transaction `transaction` of node `node` from
    /// the store (see the module's doc): those of acks `user` made (a call
    /// by anyone else resolves nothing). Holds the store cannot be read for
    /// wait for another try.
    pub async fn resolve_held(&self, node: &str, transaction: u64, user: &str) -> Result<()> {
        let keys: Vec<HeldFor> = self
            .broker
            .holds
            .lock()
            .keys()
            .filter(|k| k.node == node && k.transaction == transaction && k.user == user)
            .cloned()
            .collect();
        for key in keys {
            self.resolve(key).await?;
        }
        Ok(())
    }

    /// Resolves the holds of every node that is not among `live` (node id
    /// and incarnation) any more: it died, or started again and forgot its
    /// transactions.
    pub async fn resolve_held_of_gone(&self, live: &HashMap<String, u64>) {
        let gone: Vec<HeldFor> = self
            .broker
            .holds
            .lock()
            .keys()
            .filter(|k| live.get(&k.node) != Some(&k.incarnation))
            .cloned()
            .collect();
        for key in gone {
            if let Err(err) = self.resolve(key).await {
                warn!(%err, "could not resolve the acks held for a node that went away");
            }
        }
    }

    async fn resolve(&self, key: HeldFor) -> Result<()> {
        let Some(holds) = self.broker.holds.lock().remove(&key) else {
            return Ok(());
        };
        let mut unresolved = Vec::new();
        let mut error = None;
        for hold in holds {
            // Served under another lease since: its next owner read it back.
            if self.lease_epoch(hold.queue.id) != Some(hold.epoch) {
                continue;
            }
            match self.stored_of(&hold).await {
                Ok(stored) => self.resolved(hold, stored).await,
                Err(err) => {
                    error = Some(err);
                    unresolved.push(hold);
                }
            }
        }
        if !unresolved.is_empty() {
            self.broker
                .holds
                .lock()
                .entry(key)
                .or_default()
                .extend(unresolved);
        }
        error.map_or(Ok(()), Err)
    }

    /// Which of a hold's messages the store still has.
    async fn stored_of(&self, hold: &Hold) -> Result<Vec<bool>> {
        let store = self.broker.store.clone();
        let queue = hold.queue.id;
        let ids: Vec<u64> = hold.entries.iter().map(|e| e.id).collect();
        blocking(move || store.stored_messages(queue, &ids)).await
    }

    /// Carries out a resolved hold: the messages gone were acked, the others
    /// failed.
    async fn resolved(&self, hold: Hold, stored: Vec<bool>) {
        let (mut failed, mut acked) = (Vec::new(), Vec::new());
        for (entry, stored) in hold.entries.into_iter().zip(stored) {
            match stored {
                true => failed.push(entry),
                false => acked.push(entry),
            }
        }
        if !acked.is_empty() {
            self.broker.acked(&hold.queue, acked.len());
            hold.queue.finish(&acked);
        }
        if !failed.is_empty()
            && !self.broker.is_shutting_down()
            && let Err(err) = self
                .broker
                .fail(&hold.queue, failed, "transaction rolled back", None, None)
                .await
        {
            warn!(queue = %hold.queue.name, %err, "could not return rolled-back messages");
        }
    }
}
