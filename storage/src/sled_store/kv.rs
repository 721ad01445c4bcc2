//! The kv of a [`SledStore`](super::SledStore): message records in the runs,
//! every other record in sled, each read and write routed by its key; and
//! its checkpoint.

use std::fs::File;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::StorageError;
use crate::keys::{self, Key};
use crate::kv::OrderedKv;
use crate::large::{self as large_dir, LargeBody};
use crate::runs::Runs;
use crate::{MessageId, QueueId};

/// Writes the checkpointer applies to sled between two `flush()` calls.
///
/// sled 0.34.7 can hang in `flush()` for good (sled #1412, open): the
/// caller waits for a stable log position that no IO thread will ever
/// reach. It happened here when a checkpoint applied a few hundred thousand
/// writes and then flushed: `examples/fill_and_close.rs` (500,000 messages
/// into a fresh store, close, again) hung at 2 of 44 closes. Flushing every
/// 4,096 writes, so that sled writes its IO buffer in small steps as it did
/// when every group was flushed, the same loop ran 204 closes without one.
const FLUSH_EVERY_WRITES: usize = 4096;

/// The queue and id of a message key (`0x01|q|id`).
fn message_key(key: &[u8]) -> Result<(QueueId, MessageId), StorageError> {
    match Key::decode(key) {
        Ok(Key::Message { queue, id }) => Ok((queue, id)),
        other => Err(StorageError::Corrupt {
            key: keys::hex(key),
            reason: format!("{other:?} where a message key belongs"),
        }),
    }
}

/// The message id of a per-message key (`0x01|q|id` or `0x02|q|id`).
pub(super) fn message_id(key: &[u8]) -> Result<MessageId, StorageError> {
    match Key::decode(key) {
        Ok(Key::Message { id, .. } | Key::State { id, .. }) => Ok(id),
        Ok(other) => Err(StorageError::Corrupt {
            key: keys::hex(key),
            reason: format!("{other:?} where a message or state key belongs"),
        }),
        Err(e) => Err(StorageError::Corrupt {
            key: keys::hex(key),
            reason: e.to_string(),
        }),
    }
}

/// The current value of `key` in the kv: a message record's in the
/// runs, any other's in sled.
pub(super) fn kv_get(db: &sled::Db, runs: &Runs, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
    match Key::decode(key) {
        Ok(Key::Message { queue, id }) => runs.get(queue, id),
        _ => Ok(db.get(key)?.map(Bytes::from_owner)),
    }
}

/// The entries under a per-message prefix (`0x01|q` or `0x02|q`) with the
/// message id decoded from each key.
pub(super) fn per_message(
    db: &sled::Db,
    prefix: &[u8],
) -> impl Iterator<Item = Result<(MessageId, sled::IVec, sled::IVec), StorageError>> + use<> {
    db.scan_prefix(prefix).map(|entry| {
        let (key, value) = entry?;
        Ok((message_id(&key)?, key, value))
    })
}

/// The committer's (and checkpointer's) view of the kv: the message
/// records in the runs, everything else in sled, and sled's log file to
/// fdatasync.
#[derive(Clone)]
pub(super) struct SledKv {
    pub(super) db: sled::Db,
    pub(super) log: Arc<File>,
    pub(super) runs: Arc<Runs>,
}

impl SledKv {
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        kv_get(&self.db, &self.runs, key)
    }

    /// Moves message records a store from before the runs kept in sled
    /// into the runs, a batch at a time, each batch durable in the runs
    /// before sled lets go of it (so a crash in between only moves a batch
    /// twice).
    pub(super) fn move_messages_to_runs(&self) -> Result<(), StorageError> {
        const BATCH: usize = 50_000;
        loop {
            let (mut moved, mut puts) = (Vec::with_capacity(BATCH), Vec::with_capacity(BATCH));
            for entry in self.db.scan_prefix([keys::MESSAGE]).take(BATCH) {
                let (key, value) = entry?;
                puts.push((message_key(&key)?, Some(Bytes::from_owner(value))));
                moved.push(key);
            }
            if moved.is_empty() {
                return Ok(());
            }
            tracing::info!(
                messages = moved.len(),
                "moving stored messages from sled to the runs"
            );
            self.runs.apply(puts)?;
            self.runs.checkpoint()?;
            for key in moved {
                self.db.remove(key)?;
            }
            self.db.flush()?;
            self.log
                .sync_data()
                .map_err(|e| StorageError::io("fdatasync of the sled log", e))?;
        }
    }

    /// The seq of the last journal record known to be durable in sled.
    pub(super) fn checkpointed(&self) -> Result<u64, StorageError> {
        let key = Key::JournalCheckpoint.encode();
        match self.db.get(&key)? {
            None => Ok(0),
            Some(value) => {
                value
                    .as_ref()
                    .try_into()
                    .map(u64::from_be_bytes)
                    .map_err(|_| StorageError::Corrupt {
                        key: keys::hex(&key),
                        reason: format!("a checkpoint is 8 bytes, this one {}", value.len()),
                    })
            }
        }
    }
}

/// Values stay `Bytes` (the journal's encoding, not copied) until the
/// checkpointer applies them: most are deleted before, and the committer
/// copies no value into sled's type.
impl OrderedKv for SledKv {
    type Value = Bytes;

    fn keys_with_prefix(&self, prefix: &[u8]) -> Result<Vec<Vec<u8>>, StorageError> {
        if prefix.first() != Some(&keys::MESSAGE) {
            return self
                .db
                .scan_prefix(prefix)
                .keys()
                .map(|key| Ok(key?.to_vec()))
                .collect();
        }
        // A queue's own prefix (`0x01|q`, the committer's case) reads that
        // queue alone, not every queue's ids.
        let mut queues = match prefix.get(1..5) {
            Some(queue) => vec![QueueId::from_be_bytes(queue.try_into().expect("4 bytes"))],
            None => self.runs.queues(),
        };
        queues.sort_unstable();
        Ok(queues
            .into_iter()
            .flat_map(|queue| {
                self.runs
                    .ids(queue)
                    .into_iter()
                    .map(move |id| keys::message(queue, id).to_vec())
            })
            .filter(|key| key.starts_with(prefix))
            .collect())
    }

    fn marker(&self, key: &[u8]) -> Result<Option<LargeBody>, StorageError> {
        Ok(self
            .get(key)?
            .and_then(|stored| large_dir::stored_marker(key, &stored)))
    }

    /// States: a forward scan, once per queue and process, rather than
    /// sled's reverse iteration (`next_back`), a path of sled 0.34.7 the
    /// store otherwise never takes.
    fn highest_id(&self, queue: QueueId) -> Result<Option<MessageId>, StorageError> {
        let mut highest = self.runs.highest(queue);
        for entry in per_message(&self.db, &keys::queue_states(queue)) {
            highest = highest.max(Some(entry?.0));
        }
        Ok(highest)
    }

    /// Message records go to the runs, the rest to sled one write at a
    /// time, not as a sled batch: a batch seals sled's IO buffer and hands it
    /// to sled's thread pool every time, which cost more than the writes.
    /// Atomicity comes from the journal: what a crash cuts short is replayed,
    /// and readers see the memtable until the kv has it all.
    fn apply(&self, writes: impl Iterator<Item = (Vec<u8>, Option<Bytes>)>) -> Result<(), StorageError> {
        let mut messages = Vec::new();
        let mut others = 0;
        for (key, value) in writes {
            if key.first() == Some(&keys::MESSAGE) {
                messages.push((message_key(&key)?, value));
                continue;
            }
            match value {
                Some(value) => self.db.insert(key, &value[..])?,
                None => self.db.remove(key)?,
            };
            others += 1;
            if others % FLUSH_EVERY_WRITES == 0 {
                self.db.flush()?;
            }
        }
        self.runs.apply(messages)
    }

    /// The runs first: what the journal replays from `seq` on after a
    /// crash is then always a suffix of what they hold.
    fn checkpoint(&self, seq: u64) -> Result<(), StorageError> {
        self.runs.checkpoint()?;
        self.db
            .insert(Key::JournalCheckpoint.encode(), &seq.to_be_bytes())?;
        self.db.flush()?;
        self.log
            .sync_data()
            .map_err(|e| StorageError::io("fdatasync of the sled log", e))
    }
}
