//! [`SledStore`]: the [`Store`] on run files and sled 0.34.7, the broker's
//! default. The only module that imports sled.
//!
//! Why: commits are made durable by the journal (`src/journal.rs`) and
//! reach the kv (the runs for message records, sled for the rest) only at
//! checkpoints, so a commit costs one append and one `fdatasync`, and sled's
//! own durability gaps are closed once per checkpoint. `docs/storage.md` has
//! the design ("How a commit becomes durable", "sled's gaps", "Why no write
//! ever becomes a blob").
//!
//! ```text
//! mod.rs       SledStore, its options, the sled limits, the Store impl
//! open.rs      opening: sled's lock, journal replay, the sweep of orphaned bodies
//! reads.rs     the memtable's writes merged over the kv's, by key and by range
//! recovery.rs  the broker's indexes rebuilt at start-up
//! kv.rs        the kv: which keys go to the runs and which to sled; checkpoints
//! ```

mod kv;
mod open;
mod reads;
mod recovery;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;

use self::kv::message_id;
use crate::error::StorageError;
use crate::group_commit::Committer;
use crate::journal;
use crate::keys::{self, Key};
use crate::large::{LargeDir, MarkerView};
use crate::memtable::Memtable;
use crate::records::{self, AddressRecord, DeliveryState, DueBatchRecord, MessageRecord, QueueRecord};
use crate::runs::Runs;
use crate::{
    Commit, Due, DueBatch, JOURNAL_SEGMENT_BYTES, MAX_INLINE_RECORD_BYTES, MessageId, Op, QueueCount,
    QueueId, Recovered, ScannedMessage, Store, StoreHealth, StoreStats,
};

/// sled segment size: the largest sled 0.34.7 accepts. Stored in sled's
/// `conf` file; a database created with another value refuses to open.
pub const SEGMENT_SIZE: usize = 16 << 20;

/// Records per leaf page the [`MAX_INLINE_RECORD_BYTES`] budget allows for: sled
/// holds 17 to 20 per page (`docs/storage.md`, "Why no write ever becomes a
/// blob"); the rest is headroom.
pub const LEAF_ENTRIES_BOUND: usize = 28;

/// Bytes of a page sled keeps inline: `segment_size / 4 - SEG_HEADER_LEN -
/// MAX_MSG_HEADER_LEN`.
const INLINE_PAGE_BYTES: usize = SEGMENT_SIZE / 4 - 20 - 32;

// Per entry sled adds two length varints (key and value, <= 10 bytes each for
// our sizes); a page adds its header and its `lo`/`hi` bound keys, which are
// themselves keys of records, counted here as two more entries.
const _: () = assert!((LEAF_ENTRIES_BOUND + 2) * (MAX_INLINE_RECORD_BYTES + 20) + 64 <= INLINE_PAGE_BYTES);

/// Messages per commit when a large queue is deleted ([`Store::queue_delete_chunk`]):
/// about 0.5 MB of journal record.
const QUEUE_DELETE_CHUNK: usize = 10_000;

/// Tuning for [`SledStore::open_with`].
#[derive(Debug, Clone)]
pub struct SledOptions {
    /// sled's page-cache budget in bytes. It measures the on-disk size of
    /// cached pages, so real memory use is higher (sled #986, #1410).
    pub cache_capacity: u64,
    /// Nominal size of a journal segment ([`JOURNAL_SEGMENT_BYTES`] by
    /// default), used as given. Writes reach sled once per segment, so
    /// smaller segments mean more checkpoints and less memory; the crash
    /// tests use tiny ones to checkpoint often. A size too small for one
    /// journal record is refused with
    /// [`StorageError::JournalSegmentTooSmall`], which names the minimum.
    pub journal_segment_bytes: u64,
    /// Estimated memory of the journaled writes not yet in sled at which
    /// they are handed to the checkpointer even before their segment is
    /// full ([`crate::memtable`]; 4 MiB by default). The checkpointer holds
    /// some ten such tables at most, so this bounds that memory; the crash
    /// tests use tiny ones to freeze tables within segments.
    pub memtable_table_bytes: usize,
}

impl Default for SledOptions {
    /// 32 MiB: bodies are read once, at delivery, so a large cache mostly holds pages
    /// of a backlog that is not being read; the OS page cache serves re-reads. (256
    /// MiB cost ~700 B of RSS per queued 100 B message in the `backlog` workload.)
    fn default() -> SledOptions {
        SledOptions {
            cache_capacity: 32 << 20,
            journal_segment_bytes: JOURNAL_SEGMENT_BYTES,
            memtable_table_bytes: crate::memtable::TABLE_BYTES,
        }
    }
}

/// The [`Store`] backed by sled, with group commit. Open it once per
/// directory and process.
pub struct SledStore {
    // Declared first so that dropping the store stops the committer first.
    committer: Committer,
    db: sled::Db,
    /// The message records the memtable no longer holds.
    runs: Arc<Runs>,
    /// Journaled writes sled does not have yet: read before sled.
    memtable: Arc<Memtable<Bytes>>,
    large: Arc<LargeDir>,
    dir: PathBuf,
}

impl Store for SledStore {
    fn commit(&self, ops: Vec<Op>) -> Commit {
        self.committer.submit(ops, false)
    }

    fn commit_patient(&self, ops: Vec<Op>) -> Commit {
        self.committer.submit(ops, true)
    }

    fn generate_id(&self) -> Result<MessageId, StorageError> {
        // sled counts from 0; ids start at 1 so that 0 can never pass for a real id
        // (it is what an unset protobuf field reads as).
        Ok(self.db.generate_id()? + 1)
    }

    fn read_message(&self, queue: QueueId, id: MessageId) -> Result<Option<MessageRecord>, StorageError> {
        let key = keys::message(queue, id);
        loop {
            let Some(value) = self.value(&key)? else {
                return Ok(None);
            };
            let mut record: MessageRecord = records::decode(&key, &value)?;
            let Some(body) = records::decode::<MarkerView>(&key, &value)?.large else {
                return Ok(Some(record));
            };
            let path = self.large.path(queue, id, body.generation);
            let corrupt = |reason: String| StorageError::Corrupt {
                key: keys::hex(&key),
                reason,
            };
            match std::fs::read(&path) {
                Ok(bytes) if bytes.len() as u64 == body.len => {
                    record.body = bytes.into();
                    return Ok(Some(record));
                }
                Ok(bytes) => {
                    return Err(corrupt(format!(
                        "body file {} has {} bytes, the record says {}",
                        path.display(),
                        bytes.len(),
                        body.len
                    )));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    // The committer unlinks a body only after the record that
                    // replaced or removed it is applied: if the record changed
                    // meanwhile, read again; if not, the file is really gone.
                    if self.value(&key)?.as_deref() == Some(&value[..]) {
                        return Err(corrupt(format!("body file {} is missing", path.display())));
                    }
                }
                Err(e) => return Err(StorageError::io("reading a large-message body", e)),
            }
        }
    }

    fn read_state(&self, queue: QueueId, id: MessageId) -> Result<Option<DeliveryState>, StorageError> {
        self.get(&keys::state(queue, id))
    }

    fn scan_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        max_messages: usize,
        max_bytes: u64,
    ) -> Result<Vec<ScannedMessage>, StorageError> {
        let Some(first) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut bytes = 0u64;
        let mut out: Vec<ScannedMessage> = Vec::new();
        let (from, to) = (keys::message(queue, first), keys::message(queue, MessageId::MAX));
        self.visit_range(&from, &to, |key, value| {
            if out.len() == max_messages || (bytes >= max_bytes && !out.is_empty()) {
                return Ok(false);
            }
            let id = message_id(key)?;
            let record = match records::decode::<MarkerView>(key, value)?.large {
                None => records::decode(key, value)?,
                // A body in a file: read as `read_message` does; gone = acked meanwhile.
                Some(_) => match self.read_message(queue, id)? {
                    Some(record) => record,
                    None => return Ok(true),
                },
            };
            bytes += prost::Message::encoded_len(&record) as u64;
            out.push(ScannedMessage { record, state: None });
            Ok(true)
        })?;
        // States are few (redelivered or scheduled messages): one more range.
        if let (Some(first), Some(last)) = (out.first(), out.last()) {
            let (first, last) = (first.record.message_id, last.record.message_id);
            let mut states = std::collections::HashMap::new();
            self.visit_range(
                &keys::state(queue, first),
                &keys::state(queue, last),
                |key, value| {
                    states.insert(message_id(key)?, records::decode::<DeliveryState>(key, value)?);
                    Ok(true)
                },
            )?;
            for message in &mut out {
                message.state = states.remove(&message.record.message_id);
            }
        }
        Ok(out)
    }

    fn scan_due(
        &self,
        queue: QueueId,
        after: Option<Due>,
        max: usize,
    ) -> Result<Vec<DueBatch>, StorageError> {
        let from = match after {
            // Just past `after`'s key: the next key in byte order.
            Some(after) => [&keys::due(queue, after.at_ms, after.id)[..], &[0]].concat(),
            None => keys::due(queue, 0, 0).to_vec(),
        };
        let mut out = Vec::new();
        if max == 0 {
            return Ok(out);
        }
        self.visit_range(
            &from,
            &keys::due(queue, u64::MAX, MessageId::MAX),
            |key, value| {
                let first = match Key::decode(key) {
                    Ok(Key::Due { due_ms, id, .. }) => Due { at_ms: due_ms, id },
                    other => {
                        return Err(StorageError::Corrupt {
                            key: keys::hex(key),
                            reason: format!("{other:?} where a due-time index key belongs"),
                        });
                    }
                };
                let entries = DueBatchRecord::decode_entries(key, value)?;
                out.push(DueBatch { first, entries });
                Ok(out.len() < max)
            },
        )?;
        Ok(out)
    }

    fn count_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
        max_messages: usize,
    ) -> Result<QueueCount, StorageError> {
        let mut count = QueueCount::after(after);
        let (Some(first), Some(last)) = (after.checked_add(1), before.checked_sub(1)) else {
            return Ok(count);
        };
        if first > last {
            return Ok(count);
        }
        let (from, to) = (keys::message(queue, first), keys::message(queue, last));
        self.visit_range(&from, &to, |key, value| {
            if count.full(max_messages) {
                return Ok(false);
            }
            let id = message_id(key)?;
            count.add(id, u64::from(self.stored_size(queue, id, key, value)));
            Ok(true)
        })?;
        Ok(count)
    }

    fn recover_head(&self, head: usize) -> Result<Recovered, StorageError> {
        // The scans below read sled alone: wait until it holds every commit.
        // A closed store cannot wait, but needs not once its close has
        // checkpointed everything (reads keep working after a close).
        match self.committer.drain() {
            Err(StorageError::Closed) if self.memtable.is_empty() => {}
            result => result?,
        }
        let addresses: Vec<AddressRecord> = self.scan(&[keys::ADDRESS])?;
        let queues = self
            .scan::<QueueRecord>(&[keys::QUEUE])?
            .into_iter()
            .map(|record| self.recover_queue(record, head))
            .collect::<Result<_, _>>()?;
        let duplicate_ids = self.recover_duplicate_ids()?;
        Ok(Recovered {
            addresses,
            queues,
            duplicate_ids,
        })
    }

    /// A queue's deletion expands into a delete of each of its keys, in one
    /// journal record held in memory whole.
    fn queue_delete_chunk(&self) -> Option<usize> {
        Some(QUEUE_DELETE_CHUNK)
    }

    fn health(&self) -> StoreHealth {
        self.committer.health()
    }

    fn stats(&self) -> StoreStats {
        let counters = self.committer.counters();
        StoreStats {
            commits: counters.commits,
            ops: counters.ops,
            syncs: counters.syncs,
            disk_bytes: self.db.size_on_disk().unwrap_or(0)
                + self.runs.disk_bytes()
                + self.large.bytes()
                + journal::disk_bytes(&self.dir),
        }
    }

    fn close(&self) -> Result<(), StorageError> {
        self.committer.close()
    }
}

impl From<sled::Error> for StorageError {
    fn from(e: sled::Error) -> StorageError {
        StorageError::Engine(Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::kv::kv_get;
    use super::*;
    use crate::large;
    use crate::records::QueueRecord;
    use crate::{LARGE_BODY_THRESHOLD, MAX_RECORD_BYTES};
    use prost::Message;

    fn blob_count(dir: &Path) -> usize {
        std::fs::read_dir(dir.join("blobs"))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    fn large_count(dir: &Path) -> usize {
        std::fs::read_dir(dir.join(large::LARGE_DIR))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// A message whose key plus encoded record is exactly `size` bytes, all
    /// but `body` of them in a bytes property.
    fn message_with(id: u64, size: usize, body: usize) -> MessageRecord {
        let mut message = MessageRecord {
            message_id: id,
            body: vec![0xa5; body].into(),
            ..Default::default()
        };
        let pad = |m: &mut MessageRecord, n: usize| {
            m.properties.insert(
                "pad".into(),
                records::PropertyValue {
                    value: Some(records::property_value::Value::Bytes(vec![0x5a; n].into())),
                },
            );
        };
        let mut n = 0;
        for _ in 0..4 {
            pad(&mut message, n);
            let current = keys::message(1, id).len() + message.encoded_len();
            n = (n + size).saturating_sub(current);
        }
        pad(&mut message, n);
        assert_eq!(keys::message(1, id).len() + message.encoded_len(), size);
        message
    }

    /// A message of exactly `size` bytes, nearly all body.
    fn message_of_size(id: u64, size: usize) -> MessageRecord {
        let mut message = MessageRecord {
            message_id: id,
            ..Default::default()
        };
        for _ in 0..3 {
            let current = keys::message(1, id).len() + message.encoded_len();
            let body_len = (message.body.len() + size).saturating_sub(current);
            message.body = vec![0xa5; body_len].into();
        }
        assert_eq!(keys::message(1, id).len() + message.encoded_len(), size);
        message
    }

    /// The largest inline message: a body at the threshold, properties for
    /// the rest of `MAX_INLINE_RECORD_BYTES`.
    fn max_inline(id: u64) -> MessageRecord {
        message_with(id, MAX_INLINE_RECORD_BYTES, LARGE_BODY_THRESHOLD)
    }

    /// A large message (256 KiB body in a file) whose sled value, marker
    /// included, is as big as the limit allows.
    fn max_large(id: u64) -> MessageRecord {
        let body = 256 << 10;
        let inline = MAX_INLINE_RECORD_BYTES - large::MAX_MARKER_BYTES;
        // The body field: tag, 3-byte length varint, bytes.
        message_with(id, inline + 1 + 3 + body, body)
    }

    fn put_record(message: MessageRecord) -> Op {
        Op::PutMessage { queue: 1, message }
    }

    async fn store_with_queue(dir: &Path) -> SledStore {
        let store = SledStore::open(dir).unwrap();
        store
            .commit(vec![Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            })])
            .await
            .unwrap();
        store
    }

    /// Puts 48, removes three in four, puts 24 more: enough to consolidate,
    /// split and merge pages full of `make`'s records.
    async fn churn(store: &SledStore, make: fn(u64) -> MessageRecord) {
        for id in 0..48 {
            store.commit(vec![put_record(make(id))]).await.unwrap();
        }
        for id in (0..48).filter(|id| id % 4 != 0) {
            store
                .commit(vec![Op::RemoveMessage { queue: 1, id }])
                .await
                .unwrap();
        }
        for id in 48..72 {
            store.commit(vec![put_record(make(id))]).await.unwrap();
        }
    }

    #[tokio::test]
    async fn maximum_inline_records_round_trip_and_nothing_becomes_a_blob() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_queue(dir.path()).await;
        churn(&store, max_inline).await;
        store.close().unwrap();
        drop(store);
        assert_eq!(blob_count(dir.path()), 0);
        assert_eq!(large_count(dir.path()), 0);

        let store = SledStore::open(dir.path()).unwrap();
        let messages = &store.recover().unwrap().queues[0].messages;
        assert_eq!(messages.len(), 12 + 24);
        assert!(
            messages
                .iter()
                .all(|m| m.size as usize == MAX_INLINE_RECORD_BYTES - 13)
        );
        assert_eq!(store.read_message(1, 71).unwrap(), Some(max_inline(71)));
    }

    #[tokio::test]
    async fn large_messages_with_maximum_inline_parts_round_trip_and_nothing_becomes_a_blob() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_queue(dir.path()).await;
        churn(&store, max_large).await;
        // The values stored are within a marker's slack of the limit.
        store.committer.drain().unwrap();
        let value = kv_get(&store.db, &store.runs, &keys::message(1, 71))
            .unwrap()
            .unwrap();
        assert!(13 + value.len() > MAX_INLINE_RECORD_BYTES - large::MAX_MARKER_BYTES);
        assert!(13 + value.len() <= MAX_INLINE_RECORD_BYTES);
        store.close().unwrap();
        drop(store);
        assert_eq!(blob_count(dir.path()), 0);
        assert_eq!(large_count(dir.path()), 12 + 24);

        let store = SledStore::open(dir.path()).unwrap();
        let messages = &store.recover().unwrap().queues[0].messages;
        assert_eq!(messages.len(), 12 + 24);
        let expected = max_large(71);
        assert_eq!(messages.last().unwrap().size as usize, expected.encoded_len());
        assert_eq!(store.read_message(1, 71).unwrap(), Some(expected));
        assert_eq!(large_count(dir.path()), 12 + 24);
    }

    #[tokio::test]
    async fn one_byte_over_the_limit_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        let ops = vec![
            Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            }),
            put_record(message_of_size(1, MAX_RECORD_BYTES + 1)),
        ];
        let err = store.commit(ops).await.unwrap_err();
        assert!(
            matches!(err, StorageError::RecordTooLarge { size, max: MAX_RECORD_BYTES, .. } if size == MAX_RECORD_BYTES + 1)
        );
        // Nothing but the journal checkpoint, in sled or in the memtable.
        store.committer.drain().unwrap();
        let keys: Vec<_> = store.db.iter().keys().map(|k| k.unwrap().to_vec()).collect();
        assert_eq!(keys, vec![Key::JournalCheckpoint.encode()]);
        assert_eq!(store.stats().commits, 0);
        assert_eq!(large_count(dir.path()), 0);
    }

    #[tokio::test]
    async fn too_big_an_inline_part_is_refused_even_with_the_body_in_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_queue(dir.path()).await;
        // The body would go to a file, but the properties alone are too big.
        let message = message_with(1, MAX_INLINE_RECORD_BYTES + (1 << 20), 1 << 20);
        let err = store.commit(vec![put_record(message)]).await.unwrap_err();
        assert!(
            matches!(err, StorageError::RecordTooLarge { size, max: MAX_INLINE_RECORD_BYTES, .. } if size > MAX_INLINE_RECORD_BYTES),
            "{err}"
        );
        // Properties over the limit without a body to move out: same.
        let message = message_with(2, MAX_INLINE_RECORD_BYTES + 1, 0);
        assert!(matches!(
            store.commit(vec![put_record(message)]).await,
            Err(StorageError::RecordTooLarge {
                max: MAX_INLINE_RECORD_BYTES,
                ..
            })
        ));
        // But a small body that only makes the record too big moves out.
        let message = message_with(3, MAX_INLINE_RECORD_BYTES + 1000, 2000);
        store.commit(vec![put_record(message.clone())]).await.unwrap();
        assert_eq!(large_count(dir.path()), 1);
        assert_eq!(store.read_message(1, 3).unwrap(), Some(message));
        assert!(store.read_message(1, 1).unwrap().is_none());
    }

    /// The trap the limit avoids: values far below `segment_size / 4` still
    /// become never-fsynced blobs once sled writes their page as a whole.
    #[test]
    fn sled_spills_whole_pages_to_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new()
            .path(dir.path())
            .segment_size(SEGMENT_SIZE)
            .open()
            .unwrap();
        for id in 0..12_u64 {
            db.insert(id.to_be_bytes(), vec![0; 600 << 10]).unwrap();
        }
        db.flush().unwrap();
        assert!(blob_count(dir.path()) > 0);
    }

    #[tokio::test]
    async fn segments_too_small_for_a_record_are_refused_and_the_smallest_works() {
        let dir = tempfile::tempdir().unwrap();
        let options = |journal_segment_bytes| SledOptions {
            journal_segment_bytes,
            ..SledOptions::default()
        };
        let min = journal::MIN_SEGMENT_BYTES;
        let err = SledStore::open_with(dir.path(), options(min - 1))
            .err()
            .expect("refused");
        assert!(
            matches!(err, StorageError::JournalSegmentTooSmall { size, min: m } if size == min - 1 && m == min),
            "{err}"
        );
        assert!(
            err.to_string().contains(&format!("minimum is {min} bytes")),
            "{err}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "nothing created"
        );

        // Every record takes a segment of its own, and all of them survive.
        let store = SledStore::open_with(dir.path(), options(min)).unwrap();
        store
            .commit(vec![Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            })])
            .await
            .unwrap();
        for id in 1..=20 {
            store
                .commit(vec![put_record(message_of_size(id, 100))])
                .await
                .unwrap();
        }
        drop(store);
        let store = SledStore::open_with(dir.path(), options(min)).unwrap();
        let ids: Vec<_> = store.recover().unwrap().queues[0]
            .messages
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, (1..=20).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn garbage_under_a_message_key_is_corrupt_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        store
            .commit(vec![Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            })])
            .await
            .unwrap();
        store
            .runs
            .apply([((1, 5), Some(Bytes::from_static(&[0xff, 0xff, 0xff])))])
            .unwrap();

        let corrupt = |e: StorageError| matches!(e, StorageError::Corrupt { key, .. } if key == keys::hex(&keys::message(1, 5)));
        assert!(corrupt(store.read_message(1, 5).unwrap_err()));
        assert!(corrupt(store.recover().unwrap_err()));
    }

    #[tokio::test]
    async fn malformed_key_in_a_queue_range_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let store = SledStore::open(dir.path()).unwrap();
        store
            .commit(vec![Op::PutQueue(QueueRecord {
                id: 1,
                ..Default::default()
            })])
            .await
            .unwrap();
        store.db.insert(&keys::queue_states(1)[..], &[][..]).unwrap();
        assert!(matches!(store.recover(), Err(StorageError::Corrupt { .. })));
    }

    /// A store from before the runs kept its messages in sled: opening it
    /// moves them to the runs, and a malformed message key there is corrupt.
    #[tokio::test]
    async fn messages_kept_in_sled_move_to_the_runs_when_the_store_opens() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_queue(dir.path()).await;
        for id in [3, 9] {
            let record = message_with(id, 300, 100);
            store
                .db
                .insert(keys::message(1, id), record.encode_to_vec())
                .unwrap();
        }
        store.close().unwrap();
        drop(store);
        let store = SledStore::open(dir.path()).unwrap();
        assert_eq!(store.read_message(1, 9).unwrap(), Some(message_with(9, 300, 100)));
        let ids: Vec<u64> = store.recover().unwrap().queues[0]
            .messages
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(ids, vec![3, 9]);
        assert_eq!(store.db.scan_prefix([keys::MESSAGE]).count(), 0);

        store.db.insert(&keys::queue_messages(1)[..], &[][..]).unwrap();
        store.close().unwrap();
        drop(store);
        assert!(matches!(
            SledStore::open(dir.path()),
            Err(StorageError::Corrupt { .. })
        ));
    }
}
