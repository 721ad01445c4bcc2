//! [`MemoryStore`]: the [`Store`] in memory, for fast tests of what sits on
//! top of it.
//!
//! Why it exists: the broker's engine (queues, delivery, redelivery, DLQ
//! moves) should be testable in microseconds, without a directory, threads or
//! fsyncs, and a broker test should not pass or fail because of the disk.
//! Artemis tests `QueueImpl` over a `NullStorageManager`; nats-server runs
//! its store tests against both its memory and its file store. Unlike a null
//! store this one keeps what is committed, so a test can restart the broker
//! ([`MemoryStore::reopen`]) and check what it recovers.
//!
//! It keeps the whole [`Store`] contract, checked by the same suite as the
//! sled store (`tests/contract/`): commits apply whole and in order or not
//! at all, with the same size limits (`src/limits.rs`); ids increase across
//! reopens; [`Store::recover`] orders as documented on [`Recovered`]. A
//! commit is applied under one lock before [`Store::commit`] returns, so its
//! future is ready at once. Nothing survives the process, and there is no
//! crash to model: a commit is either applied or refused.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use crate::error::StorageError;
use crate::limits;
use crate::records::{AddressRecord, DeliveryState, MessageRecord, QueueRecord};
use crate::{
    Commit, Due, DueBatch, IndexEntry, MessageId, Op, QueueCount, QueueId, Recovered, RecoveredDuplicateId,
    RecoveredQueue, ScannedMessage, Store, StoreStats,
};

/// The [`Store`] in memory. Cheap to create; [`MemoryStore::reopen`] models
/// a restart over the same data.
#[derive(Default)]
pub struct MemoryStore {
    /// What a restart keeps, shared with every reopened store.
    disk: Arc<Disk>,
    closed: AtomicBool,
    commits: AtomicU64,
    ops: AtomicU64,
}

/// The data, and the last id handed out.
#[derive(Default)]
struct Disk {
    data: Mutex<Data>,
    last_id: AtomicU64,
}

#[derive(Default)]
struct Data {
    addresses: BTreeMap<String, AddressRecord>,
    queues: BTreeMap<QueueId, QueueRecord>,
    messages: BTreeMap<(QueueId, MessageId), MessageRecord>,
    states: BTreeMap<(QueueId, MessageId), DeliveryState>,
    dues: BTreeMap<(QueueId, Due), Vec<Due>>,
    duplicate_ids: BTreeMap<(String, u64), Bytes>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// A restart: a new store over the same data, which sees every commit
    /// made so far and hands out ids above every id handed out before. This
    /// store is closed, as if its process had gone: its later commits fail
    /// with [`StorageError::Closed`], its reads keep working. Its counters
    /// stay behind; the new store's start at zero.
    pub fn reopen(&self) -> MemoryStore {
        self.close_now();
        MemoryStore {
            disk: Arc::clone(&self.disk),
            ..MemoryStore::default()
        }
    }

    /// Closes this handle; a commit applying meanwhile is finished first.
    fn close_now(&self) {
        let _data = self.data();
        self.closed.store(true, Ordering::SeqCst);
    }

    fn data(&self) -> MutexGuard<'_, Data> {
        // Applying a commit cannot panic halfway (no user code runs under the
        // lock), so a poisoned lock still guards consistent data.
        self.disk.data.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Data {
    fn apply(&mut self, op: Op) {
        match op {
            Op::PutAddress(record) => {
                self.addresses.insert(record.name.clone(), record);
            }
            Op::DeleteAddress(name) => {
                self.duplicate_ids.retain(|(address, _), _| *address != name);
                self.addresses.remove(&name);
            }
            Op::PutQueue(record) => {
                self.queues.insert(record.id, record);
            }
            Op::DeleteQueue(queue) => {
                self.queues.remove(&queue);
                self.messages.retain(|(q, _), _| *q != queue);
                self.states.retain(|(q, _), _| *q != queue);
                self.dues.retain(|(q, _), _| *q != queue);
            }
            Op::PutMessage { queue, message } => {
                self.messages.insert((queue, message.message_id), message);
            }
            Op::PutState { queue, id, state } => {
                self.states.insert((queue, id), state);
            }
            Op::RemoveMessage { queue, id } => {
                self.messages.remove(&(queue, id));
                self.states.remove(&(queue, id));
            }
            Op::RemoveStatelessMessage { queue, id } => {
                self.messages.remove(&(queue, id));
            }
            Op::PutDues { queue, entries } => {
                let mut entries = entries;
                entries.sort_unstable();
                if let Some(&first) = entries.first() {
                    self.dues.insert((queue, first), entries);
                }
            }
            Op::RemoveDues { queue, first } => {
                self.dues.remove(&(queue, first));
            }
            Op::PutDuplicateId { address, seq, id } => {
                self.duplicate_ids.insert((address, seq), id);
            }
            Op::RemoveDuplicateId { address, seq, .. } => {
                self.duplicate_ids.remove(&(address, seq));
            }
            Op::Claim { .. } => {}
        }
    }

    fn recover_queue(&self, record: &QueueRecord, head: usize) -> RecoveredQueue {
        let mut all = self
            .messages
            .range((record.id, MessageId::MIN)..=(record.id, MessageId::MAX));
        let messages = all
            .by_ref()
            .take(head)
            .map(|(&key, message)| IndexEntry {
                id: key.1,
                priority: message.priority,
                expiration_ms: message.expiration_ms,
                // At most MAX_RECORD_BYTES: commits are checked.
                size: u32::try_from(prost::Message::encoded_len(message)).unwrap_or(u32::MAX),
                state: self.states.get(&key).cloned(),
                scheduled_at_ms: message.scheduled_at_ms,
                group: crate::records::group_of(&message.properties).map(str::to_owned),
            })
            .collect();
        RecoveredQueue {
            record: record.clone(),
            messages,
            more: all.next().is_some(),
        }
    }

    fn queue_range(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
    ) -> impl Iterator<Item = (&(QueueId, MessageId), &MessageRecord)> {
        let range = (queue, after.saturating_add(1))..(queue, before);
        (after < before)
            .then(|| self.messages.range(range))
            .into_iter()
            .flatten()
    }
}

impl Store for MemoryStore {
    fn commit(&self, ops: Vec<Op>) -> Commit {
        if let Err(e) = ops.iter().try_for_each(limits::check_op) {
            return Commit::ready(Err(e));
        }
        let count = ops.len() as u64;
        let mut data = self.data();
        // Under the lock: once close (or reopen) returns, nothing applies.
        if self.closed.load(Ordering::SeqCst) {
            return Commit::ready(Err(StorageError::Closed));
        }
        ops.into_iter().for_each(|op| data.apply(op));
        // Counted under the lock, so that stats never lag a visible commit.
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.ops.fetch_add(count, Ordering::Relaxed);
        Commit::ready(Ok(()))
    }

    fn generate_id(&self) -> Result<MessageId, StorageError> {
        // From 1, as the sled store: 0 is what an unset protobuf field reads as.
        Ok(self.disk.last_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn read_message(&self, queue: QueueId, id: MessageId) -> Result<Option<MessageRecord>, StorageError> {
        Ok(self.data().messages.get(&(queue, id)).cloned())
    }

    fn read_state(&self, queue: QueueId, id: MessageId) -> Result<Option<DeliveryState>, StorageError> {
        Ok(self.data().states.get(&(queue, id)).cloned())
    }

    fn scan_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        max_messages: usize,
        max_bytes: u64,
    ) -> Result<Vec<ScannedMessage>, StorageError> {
        let data = self.data();
        let mut bytes = 0;
        let mut out = Vec::new();
        for (key, record) in data.queue_range(queue, after, MessageId::MAX) {
            if out.len() == max_messages || (bytes >= max_bytes && !out.is_empty()) {
                break;
            }
            bytes += prost::Message::encoded_len(record) as u64;
            out.push(ScannedMessage {
                record: record.clone(),
                state: data.states.get(key).cloned(),
            });
        }
        Ok(out)
    }

    fn count_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
        max_messages: usize,
    ) -> Result<QueueCount, StorageError> {
        let data = self.data();
        let mut count = QueueCount::after(after);
        for (key, record) in data.queue_range(queue, after, before) {
            if count.full(max_messages) {
                break;
            }
            count.add(key.1, prost::Message::encoded_len(record) as u64);
        }
        Ok(count)
    }

    fn scan_due(
        &self,
        queue: QueueId,
        after: Option<Due>,
        max: usize,
    ) -> Result<Vec<DueBatch>, StorageError> {
        let from = match after {
            Some(after) => Bound::Excluded((queue, after)),
            None => Bound::Included((queue, Due { at_ms: 0, id: 0 })),
        };
        let last = Due {
            at_ms: u64::MAX,
            id: MessageId::MAX,
        };
        Ok(self
            .data()
            .dues
            .range((from, Bound::Included((queue, last))))
            .take(max)
            .map(|(&(_, first), entries)| DueBatch {
                first,
                entries: entries.clone(),
            })
            .collect())
    }

    fn recover_head(&self, head: usize) -> Result<Recovered, StorageError> {
        let data = self.data();
        Ok(Recovered {
            addresses: data.addresses.values().cloned().collect(),
            queues: data
                .queues
                .values()
                .map(|q| data.recover_queue(q, head))
                .collect(),
            duplicate_ids: data
                .duplicate_ids
                .iter()
                .map(|((address, seq), id)| RecoveredDuplicateId {
                    address: address.clone(),
                    seq: *seq,
                    id: id.clone(),
                })
                .collect(),
        })
    }

    /// `syncs` counts commits (each is its own "sync"); `disk_bytes` is 0.
    fn stats(&self) -> StoreStats {
        let commits = self.commits.load(Ordering::Relaxed);
        StoreStats {
            commits,
            ops: self.ops.load(Ordering::Relaxed),
            syncs: commits,
            disk_bytes: 0,
        }
    }

    fn close(&self) -> Result<(), StorageError> {
        self.close_now();
        Ok(())
    }
}
