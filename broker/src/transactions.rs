//! The open transactions: what each has gathered, which session it belongs to, and
//! a memory of recently finished ones so that a late commit or rollback is told what
//! happened. Committing and rolling back are the engine's (`engine/transact.rs`).
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rebound_storage::MessageRecord;

use crate::error::{BrokerError, Result};
use crate::queue::{Entry, Queue};

/// Identifies a `Transact` stream.
pub type SessionId = u64;

/// How many finished transactions are remembered, so that a late commit or rollback
/// gets told what happened rather than "unknown".
const FINISHED_KEPT: usize = 4096;

#[derive(Default)]
pub struct Transaction {
    session: SessionId,
    /// Sends, validated and given their ids, invisible until the commit.
    pub sends: Vec<MessageRecord>,
    /// Acked deliveries, out of their queues but still in storage.
    pub acks: Vec<(Arc<Queue>, Entry)>,
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
    pub fn finish(&self, id: u64, session: SessionId, how: &'static str) -> Result<Transaction> {
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
    pub fn of_session(&self, session: SessionId) -> Vec<u64> {
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
