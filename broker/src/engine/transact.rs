//! Local transactions, as a JMS transacted session has them.
//!
//! A transaction gathers sends and acks. Sends are validated and given their ids at
//! once but stay in memory, invisible; acked messages leave their queue (no one else
//! gets them) but stay in storage. Commit writes all of it — the new messages and the
//! removals — in ONE storage commit, so after a crash either all of a transaction
//! happened or none of it. Rollback discards the sends and hands the acked messages to
//! the redelivery policy as failed deliveries (count incremented, delay, DLA).
//!
//! Every transaction belongs to the session (a `Transact` stream) that began it;
//! when the session ends, its open transactions are rolled back. Ordering
//! consequence: a rolled-back message may be redelivered to any consumer of its
//! queue, and after a redelivery delay it comes back behind messages sent later.
use std::sync::Arc;

use rebound_storage::MessageRecord;
use tracing::{info, warn};

use super::Broker;
use super::cluster::held_removal_ops;
use super::ops::removal_ops;
use super::send::OnDuplicate;
use crate::error::Result;
use crate::queue::{Entry, Queue};
use crate::transactions::{HeldAcks, Outcome, SessionId, Tell, tell_holders};

impl Broker {
    /// Begins a transaction of `session`; returns its id. Refused when the session
    /// already has `max-open-transactions` open.
    pub fn begin_transaction(&self, session: SessionId) -> Result<u64> {
        self.transactions.begin(session, &self.limits())
    }

    /// Validates messages and adds them to a transaction of `session`; returns
    /// their ids. They become visible only when it commits. Refused, leaving the
    /// transaction as it was, beyond `max-transaction-messages` or `-bytes`.
    pub fn send_in_transaction(
        &self,
        id: u64,
        session: SessionId,
        batch: Vec<MessageRecord>,
    ) -> Result<Vec<u64>> {
        let records = self.prepare(batch)?;
        let ids = records.iter().map(|p| p.record.message_id).collect();
        self.transactions
            .add_sends(id, session, records, &self.limits())?;
        Ok(ids)
    }

    /// Checks that transaction `id` is open and has room for `acks` more, before
    /// a consumer's acks that another node will hold for it are forwarded there.
    pub fn check_transaction_room(&self, id: u64, acks: usize) -> Result<()> {
        self.transactions.check_room(id, acks, &self.limits())
    }

    /// Adds to its transaction acks that another node holds for it
    /// (`cluster/held.rs`), which `tell` asks that node to resolve once the
    /// transaction has ended; handed back when it ended meanwhile.
    pub fn add_held_elsewhere(&self, tell: Tell, held: HeldAcks) -> std::result::Result<(), HeldAcks> {
        self.transactions.add_elsewhere(held.transaction, tell, held)
    }

    /// Commits: the sends become visible and the acked messages are removed,
    /// durably and together, those other nodes hold for it included
    /// (`cluster/held.rs`; those nodes are asked then to resolve them, whatever the
    /// outcome). If storage fails, a send's duplicate id was already seen on
    /// its address ([`BrokerError::DuplicateId`](crate::error::BrokerError::DuplicateId), as in Artemis), or a send's
    /// address is full ([`BrokerError::AddressFull`](crate::error::BrokerError::AddressFull): FAIL, or BLOCK past
    /// `max-block-time`), the transaction is rolled back.
    pub async fn commit_transaction(self: &Arc<Self>, id: u64, session: SessionId) -> Result<Outcome> {
        let tx = self.transactions.finish(id, session, "committed")?;
        let outcome = tx.outcome();
        let mut removals: Vec<_> = tx.acks.iter().flat_map(|(q, e)| removal_ops(q, [e])).collect();
        removals.extend(tx.elsewhere.iter().flat_map(|(_, held)| held_removal_ops(held)));
        let result = self.route_sends(tx.sends, removals, OnDuplicate::Refuse).await;
        tell_holders(&tx.elsewhere, id);
        match result {
            Ok(_) => {
                for (queue, entry) in &tx.acks {
                    self.acked(queue, 1);
                    queue.finish(std::slice::from_ref(entry));
                }
                Ok(outcome)
            }
            Err(err) => {
                self.return_acks(tx.acks, "transaction commit failed").await;
                Err(err)
            }
        }
    }

    /// Rolls back: sends discarded, acked messages returned as failed deliveries.
    pub async fn rollback_transaction(self: &Arc<Self>, id: u64, session: SessionId) -> Result<Outcome> {
        let tx = self.transactions.finish(id, session, "rolled back")?;
        let outcome = tx.outcome();
        tell_holders(&tx.elsewhere, id);
        self.return_acks(tx.acks, "transaction rolled back").await;
        Ok(outcome)
    }

    /// Rolls back every transaction a session left open.
    pub async fn session_gone(self: &Arc<Self>, session: SessionId) {
        for id in self.transactions.of_session(session) {
            if let Ok(outcome) = self.rollback_transaction(id, session).await {
                info!(
                    transaction = id,
                    returned = outcome.acks,
                    "rolled back the open transaction of a closed session"
                );
            }
        }
    }

    /// Returns rolled-back acks to their queues as failed deliveries. When the broker
    /// is stopping they stay where storage has them, as a consumer's do.
    async fn return_acks(self: &Arc<Self>, acks: Vec<(Arc<Queue>, Entry)>, reason: &str) {
        if self.is_shutting_down() {
            return;
        }
        let mut by_queue: Vec<(Arc<Queue>, Vec<Entry>)> = Vec::new();
        for (queue, entry) in acks {
            match by_queue.iter_mut().find(|(q, _)| Arc::ptr_eq(q, &queue)) {
                Some((_, entries)) => entries.push(entry),
                None => by_queue.push((queue, vec![entry])),
            }
        }
        for (queue, entries) in by_queue {
            if let Err(err) = self.fail(&queue, entries, reason, None, None).await {
                warn!(queue = %queue.name, %err, "could not return rolled-back messages");
            }
        }
    }
}
