//! Local transactions, as a JMS transacted session has them.
//!
//! A transaction gathers sends and acks. Sends are validated and given their ids at
//! once but stay in memory, invisible; acked messages leave their queue (no one else
//! gets them) but stay in storage. Commit writes all of it — the new messages and the
//! removals — in ONE storage commit, so after a crash either all of a transaction
//! happened or none of it. Rollback discards the sends and hands the acked messages to
//! the redelivery policy as failed deliveries (count incremented, delay, DLA).
//!
//! Every transaction belongs to the `Transact` stream (the session) that began it;
//! when that stream ends, its open transactions are rolled back. Ordering
//! consequence: a rolled-back message may be redelivered to any consumer of its
//! queue, and after a redelivery delay it comes back behind messages sent later.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rebound_storage::MessageRecord;

use crate::broker::Broker;
use crate::error::{BrokerError, Result};
use crate::queue::{Entry, Queue};

/// Identifies a `Transact` stream.
pub type SessionId = u64;

/// How many finished transactions are remembered, so that a late commit or rollback
/// gets told what happened rather than "unknown".
const FINISHED_KEPT: usize = 4096;

#[derive(Default)]
struct Transaction {
    session: SessionId,
    sends: Vec<MessageRecord>,
    acks: Vec<(Arc<Queue>, Entry)>,
}

#[derive(Default)]
struct State {
    open: HashMap<u64, Transaction>,
    finished: VecDeque<(u64, &'static str)>,
}

/// The open transactions of the broker.
pub struct Transactions {
    state: Mutex<State>,
    next_id: AtomicU64,
}

impl Default for Transactions {
    /// Ids start from the clock (ms × 2^20), so an id from before a restart cannot
    /// name a transaction of this run.
    fn default() -> Transactions {
        Transactions {
            state: Mutex::default(),
            next_id: AtomicU64::new(crate::time::now_ms() << 20),
        }
    }
}

/// What a commit or rollback did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    pub sends: u32,
    pub acks: u32,
}

impl Transactions {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn begin(&self, session: SessionId) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        self.lock().open.insert(
            id,
            Transaction {
                session,
                ..Default::default()
            },
        );
        id
    }

    /// Runs `f` on an open transaction of `session` (any session when None).
    fn with<T>(
        &self,
        id: u64,
        session: Option<SessionId>,
        f: impl FnOnce(&mut Transaction) -> T,
    ) -> Result<T> {
        let mut st = self.lock();
        match st.open.get_mut(&id) {
            Some(tx) if session.is_none_or(|s| s == tx.session) => Ok(f(tx)),
            Some(_) => Err(BrokerError::FailedPrecondition(format!(
                "transaction {id} belongs to another session"
            ))),
            None => Err(unknown(&st, id)),
        }
    }

    /// Takes an open transaction of `session` out, to finish it.
    fn finish(&self, id: u64, session: SessionId, how: &'static str) -> Result<Transaction> {
        self.with(id, Some(session), |_| ())?;
        let mut st = self.lock();
        let tx = st.open.remove(&id).ok_or_else(|| unknown(&st, id))?;
        if st.finished.len() == FINISHED_KEPT {
            st.finished.pop_front();
        }
        st.finished.push_back((id, how));
        Ok(tx)
    }

    /// Checks that a transaction is open (before a consumer's ack is taken into it).
    pub fn check(&self, id: u64) -> Result<()> {
        self.with(id, None, |_| ())
    }

    pub fn add_sends(&self, id: u64, session: SessionId, records: Vec<MessageRecord>) -> Result<()> {
        self.with(id, Some(session), |tx| tx.sends.extend(records))
    }

    /// Adds acked deliveries; if the transaction is gone meanwhile they are handed back.
    pub fn add_acks(
        &self,
        id: u64,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
    ) -> std::result::Result<(), Vec<Entry>> {
        let mut st = self.lock();
        match st.open.get_mut(&id) {
            Some(tx) => {
                tx.acks.extend(entries.into_iter().map(|e| (queue.clone(), e)));
                Ok(())
            }
            None => Err(entries),
        }
    }

    /// The ids of the open transactions of a session.
    fn of_session(&self, session: SessionId) -> Vec<u64> {
        self.lock()
            .open
            .iter()
            .filter(|(_, tx)| tx.session == session)
            .map(|(&id, _)| id)
            .collect()
    }
}

fn unknown(st: &State, id: u64) -> BrokerError {
    match st.finished.iter().find(|(done, _)| *done == id) {
        Some((_, how)) => BrokerError::FailedPrecondition(format!("transaction {id} was already {how}")),
        None => BrokerError::TransactionNotFound(id),
    }
}

impl Broker {
    /// Commits: the sends become visible and the acked messages are removed, durably
    /// and together. If storage fails, the transaction is rolled back.
    pub async fn commit_transaction(self: &Arc<Self>, id: u64, session: SessionId) -> Result<Outcome> {
        let tx = self.transactions().finish(id, session, "committed")?;
        let outcome = Outcome {
            sends: tx.sends.len() as u32,
            acks: tx.acks.len() as u32,
        };
        let removals = tx
            .acks
            .iter()
            .filter(|(_, e)| e.stored)
            .map(|(q, e)| rebound_storage::Op::RemoveMessage {
                queue: q.id,
                id: e.id,
            })
            .collect();
        match self.route_sends(tx.sends, removals).await {
            Ok(_) => {
                for (queue, _) in &tx.acks {
                    queue.count(|c| c.acked += 1);
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
        let tx = self.transactions().finish(id, session, "rolled back")?;
        let outcome = Outcome {
            sends: tx.sends.len() as u32,
            acks: tx.acks.len() as u32,
        };
        self.return_acks(tx.acks, "transaction rolled back").await;
        Ok(outcome)
    }

    /// Rolls back every transaction a session left open.
    pub async fn session_gone(self: &Arc<Self>, session: SessionId) {
        for id in self.transactions().of_session(session) {
            if let Ok(outcome) = self.rollback_transaction(id, session).await {
                tracing::info!(
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
        if self.shutdown.is_cancelled() {
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
            if let Err(err) = self.fail_deliveries(&queue, entries, reason).await {
                tracing::warn!(queue = %queue.name, %err, "could not return rolled-back messages");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_transactions_explain_themselves() {
        let txs = Transactions::default();
        let a = txs.begin(1);
        let b = txs.begin(1);
        assert!(txs.check(a).is_ok());
        assert!(matches!(
            txs.finish(a, 2, "committed"),
            Err(BrokerError::FailedPrecondition(_))
        ));
        assert!(txs.finish(a, 1, "committed").is_ok());
        let err = txs.finish(a, 1, "committed").err().unwrap().to_string();
        assert_eq!(err, format!("transaction {a} was already committed"));
        assert!(matches!(
            txs.check(999),
            Err(BrokerError::TransactionNotFound(999))
        ));
        assert_eq!(txs.of_session(1), vec![b]);
    }
}
