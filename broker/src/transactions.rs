//! The open transactions: what each has gathered, which session it belongs to, and
//! a memory of recently finished ones so that a late commit or rollback is told what
//! happened. Committing and rolling back are the engine's (`engine/transact.rs`).
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{BrokerError, Result};
use crate::message::Prepared;
use crate::queue::{Entry, Queue};
use rebound_config::Limits;

/// Identifies a `Transact` stream.
pub type SessionId = u64;

/// How many finished transactions are remembered, so that a late commit or rollback
/// gets told what happened rather than "unknown".
const FINISHED_KEPT: usize = 4096;

#[derive(Default)]
pub struct Transaction {
    session: SessionId,
    /// Sends, validated and given their ids, invisible until the commit.
    pub sends: Vec<Prepared>,
    /// Acked deliveries, out of their queues but still in storage.
    pub acks: Vec<(Arc<Queue>, Entry)>,
    /// Acked deliveries of queues other nodes serve, held there
    /// (`engine/cluster/held.rs`), each with how to ask that node to resolve them.
    pub elsewhere: Vec<(Tell, HeldAcks)>,
    /// What `max-transaction-bytes` counts of the sends.
    bytes: u64,
}

impl Transaction {
    /// What finishing it does.
    pub fn outcome(&self) -> Outcome {
        Outcome {
            sends: self.sends.len() as u32,
            acks: self.acks() as u32,
        }
    }

    /// Its acks, those other nodes hold included.
    fn acks(&self) -> usize {
        let elsewhere: usize = self.elsewhere.iter().map(|(_, h)| h.message_ids.len()).sum();
        self.acks.len() + elsewhere
    }

    /// Whether `messages` more (of `bytes`) fit in transaction `id`.
    fn room(&self, id: u64, messages: usize, bytes: u64, limits: &Limits) -> Result<()> {
        let held = (self.sends.len() + self.acks() + messages) as u64;
        if held > limits.max_transaction_messages {
            return Err(BrokerError::LimitReached {
                what: format!("transaction {id} would hold {held} messages"),
                limit: "max-transaction-messages",
                value: limits.max_transaction_messages,
            });
        }
        let total = self.bytes.saturating_add(bytes);
        if total > limits.max_transaction_bytes {
            return Err(BrokerError::LimitReached {
                what: format!("transaction {id} would hold {total} bytes of messages"),
                limit: "max-transaction-bytes",
                value: limits.max_transaction_bytes,
            });
        }
        Ok(())
    }
}

#[derive(Default)]
struct State {
    open: HashMap<u64, Transaction>,
    finished: VecDeque<(u64, &'static str)>,
    /// How many transactions each session has open (no entry: none).
    per_session: HashMap<SessionId, u64>,
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

/// What a node holds for another's transaction after one settle: what that
/// node's commit removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldAcks {
    /// The node that holds them (`engine/cluster/held.rs`) and serves their queue.
    pub node: String,
    pub queue: rebound_storage::QueueId,
    /// The epoch of that node's lease on the queue.
    pub epoch: u64,
    pub message_ids: Vec<u64>,
    /// The transaction they are held for (its id on its node).
    pub transaction: u64,
}

/// Asks the nodes that hold acks of transaction `id` (`elsewhere`) to
/// resolve them (once per consumer stream the acks came through), now that
/// it has ended.
pub fn tell_holders(elsewhere: &[(Tell, HeldAcks)], id: u64) {
    let mut told: Vec<&Tell> = Vec::new();
    for (tell, _) in elsewhere {
        if !told.iter().any(|t| Arc::ptr_eq(t, tell)) {
            tell(id);
            told.push(tell);
        }
    }
}

/// Asks the node that holds acks of a transaction (its id) to resolve them,
/// once it has ended (`engine/cluster/held.rs`): the gRPC edge makes the call, as the
/// consumer whose acks they are.
pub type Tell = Arc<dyn Fn(u64) + Send + Sync>;

impl Transactions {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many transactions are open, over every session.
    pub fn open(&self) -> usize {
        self.lock().open.len()
    }

    /// Opens a transaction of `session`, unless it has `max-open-transactions`.
    pub fn begin(&self, session: SessionId, limits: &Limits) -> Result<u64> {
        let mut st = self.lock();
        let open = st.per_session.entry(session).or_default();
        if *open >= limits.max_open_transactions {
            return Err(BrokerError::LimitReached {
                what: format!("this session has {open} transactions open"),
                limit: "max-open-transactions",
                value: limits.max_open_transactions,
            });
        }
        *open += 1;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        st.open.insert(
            id,
            Transaction {
                session,
                ..Default::default()
            },
        );
        Ok(id)
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
        if let Some(open) = st.per_session.get_mut(&tx.session) {
            *open -= 1;
            if *open == 0 {
                st.per_session.remove(&tx.session);
            }
        }
        if st.finished.len() == FINISHED_KEPT {
            st.finished.pop_front();
        }
        st.finished.push_back((id, how));
        Ok(tx)
    }

    /// Checks that a transaction is open and has room for `acks` more messages
    /// (before a consumer's acks are taken into it).
    pub fn check_room(&self, id: u64, acks: usize, limits: &Limits) -> Result<()> {
        self.with(id, None, |tx| tx.room(id, acks, 0, limits))?
    }

    /// Adds sends, or none of them when they would not fit.
    pub fn add_sends(
        &self,
        id: u64,
        session: SessionId,
        records: Vec<Prepared>,
        limits: &Limits,
    ) -> Result<()> {
        let bytes = records
            .iter()
            .map(|p| crate::message::counted_bytes(&p.record))
            .sum();
        self.with(id, Some(session), |tx| {
            tx.room(id, records.len(), bytes, limits)?;
            tx.bytes += bytes;
            tx.sends.extend(records);
            Ok(())
        })?
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

    /// Adds acks another node holds for the transaction (`tell` asks it to
    /// resolve them); if the transaction is gone meanwhile they are handed
    /// back.
    pub fn add_elsewhere(&self, id: u64, tell: Tell, held: HeldAcks) -> std::result::Result<(), HeldAcks> {
        match self.lock().open.get_mut(&id) {
            Some(tx) => {
                tx.elsewhere.push((tell, held));
                Ok(())
            }
            None => Err(held),
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
        let limits = Limits::default();
        let a = txs.begin(1, &limits).unwrap();
        let b = txs.begin(1, &limits).unwrap();
        assert!(txs.check_room(a, 0, &limits).is_ok());
        assert!(matches!(
            txs.finish(a, 2, "committed"),
            Err(BrokerError::FailedPrecondition(_))
        ));
        assert!(txs.finish(a, 1, "committed").is_ok());
        let err = txs.finish(a, 1, "committed").err().unwrap().to_string();
        assert_eq!(err, format!("transaction {a} was already committed"));
        assert!(matches!(
            txs.check_room(999, 0, &limits),
            Err(BrokerError::TransactionNotFound(999))
        ));
        assert_eq!(txs.of_session(1), vec![b]);
    }

    fn refused(result: Result<impl std::fmt::Debug>) -> String {
        match result {
            Err(err @ BrokerError::LimitReached { .. }) => err.to_string(),
            other => panic!("expected a LimitReached, got {other:?}"),
        }
    }

    #[test]
    fn a_session_opens_at_most_max_open_transactions() {
        let txs = Transactions::default();
        let limits = Limits {
            max_open_transactions: 2,
            ..Limits::default()
        };
        let a = txs.begin(1, &limits).unwrap();
        txs.begin(1, &limits).unwrap();
        assert_eq!(
            refused(txs.begin(1, &limits)),
            "this session has 2 transactions open: max-open-transactions is 2"
        );
        // Another session has its own; a finished transaction makes room.
        txs.begin(2, &limits).unwrap();
        txs.finish(a, 1, "committed").unwrap();
        txs.begin(1, &limits).unwrap();
    }

    #[test]
    fn a_transaction_holds_at_most_its_messages_and_bytes() {
        let txs = Transactions::default();
        let limits = Limits {
            max_transaction_messages: 3,
            max_transaction_bytes: 100,
            ..Limits::default()
        };
        let record = |body: usize| Prepared {
            record: rebound_storage::MessageRecord {
                body: vec![b'x'; body].into(),
                ..Default::default()
            },
            due_ms: 0,
            duplicate_id: None,
            to_disk: false,
        };
        let id = txs.begin(1, &limits).unwrap();
        txs.add_sends(id, 1, vec![record(40), record(40)], &limits)
            .unwrap();
        assert_eq!(
            refused(txs.add_sends(id, 1, vec![record(40)], &limits)),
            format!("transaction {id} would hold 120 bytes of messages: max-transaction-bytes is 100")
        );
        txs.add_sends(id, 1, vec![record(20)], &limits).unwrap();
        assert_eq!(
            refused(txs.check_room(id, 1, &limits)),
            format!("transaction {id} would hold 4 messages: max-transaction-messages is 3")
        );
        // What was refused left the transaction as it was.
        assert_eq!(txs.finish(id, 1, "committed").unwrap().sends.len(), 3);
    }
}
