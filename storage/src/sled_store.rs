//! [`SledStore`]: the [`Store`] on page files and sled 0.34.7. The only file
//! that imports sled.
//!
//! Commits are made durable by the journal ([`crate::journal`]); the engine
//! holds the same writes, applied after they are journaled, and is made
//! durable at checkpoints ([`crate::checkpoint`]). The engine is two: message
//! records (`0x01` keys) go to the pages ([`crate::pages`]), every other
//! record to sled; this file routes each read and write by its key. sled's
//! own background flusher is off (`flush_every_ms(None)`): it writes when its
//! IO buffer is full and at checkpoints. Opening replays the journal records
//! after the checkpoint recorded under [`keys::JOURNAL_CHECKPOINT`], and first
//! moves the messages a store from before the pages kept in sled.
//!
//! sled's own durability has three gaps (reference §1.2), closed here:
//!
//! * `flush()` ends in `sync_file_range`, which does not flush the drive's
//!   write cache. A checkpoint therefore also calls `sync_data()`
//!   (fdatasync) on a read-only handle of `<dir>/db`, sled's one log file.
//! * A log write bigger than `segment_size / 4 - 20` bytes goes to a file
//!   under `<dir>/blobs/` that sled never fsyncs. We make that impossible:
//!   see [`SEGMENT_SIZE`] and the derivation of [`MAX_INLINE_RECORD_BYTES`]
//!   below. Message bodies that would not fit go to our own fsynced files
//!   under `<dir>/large/` instead ([`crate::large`]).
//! * `flush_async` deadlocks when called concurrently (sled #1308): it is
//!   never called; the checkpointer uses the blocking `flush()` on its own
//!   thread.
//!
//! And one liveness gap: `flush()` can wait forever after a large run of
//! writes (sled #1412); the checkpointer flushes every
//! [`FLUSH_EVERY_WRITES`] writes to stay clear of it.
//!
//! # Why no write ever becomes a blob
//!
//! In `pagecache/logger.rs` (`reserve_inner`) sled sends a log item to a blob
//! when `MAX_MSG_HEADER_LEN (32) + serialized_len > segment_size /
//! MINIMUM_ITEMS_PER_SEGMENT (4) - SEG_HEADER_LEN (20)` (constants in
//! `pagecache/constants.rs`). The item is not one value: it is either a delta
//! (one key and value) or, every `PAGE_CONSOLIDATION_THRESHOLD` (10) deltas and
//! on every split or merge, a whole **leaf page** with all its keys and
//! values. A leaf splits once it holds more than 16 entries
//! (`Node::should_split` in `node.rs`) and a merge can add up to 3 more, so a
//! page routinely holds 17 to 20 records. With the largest segment sled
//! accepts (16 MiB, `config.rs` asserts `segment_size <= 1 << 24`) the inline
//! budget is `4 MiB - 52` bytes per page, and a page of
//! [`LEAF_ENTRIES_BOUND`] records of [`MAX_INLINE_RECORD_BYTES`] each (plus sled's
//! per-entry length prefixes and page header) fits in it; a compile-time
//! assertion below checks that arithmetic, and a test checks that pages full of
//! maximum-size records leave `blobs/` empty while 600 KiB values, far below
//! the naive "segment_size / 4" limit, do not.
//!
//! Memory: sled allocates its in-memory IO buffer at segment size, so with
//! 16 MiB segments expect up to about 32 MiB of RSS for the buffer being
//! filled and the one being written, on top of `cache_capacity`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::engine::Engine;
use crate::error::StorageError;
use crate::group_commit::Committer;
use crate::journal::{self, Journal};
use crate::keys::{self, Key};
use crate::large::{self as large_dir, LargeBody, LargeDir, MarkerView};
use crate::memtable::{Memtable, Table};
use crate::pages::Pages;
use crate::records::{
    self, AddressRecord, DeliveryState, DueBatchRecord, DuplicateIdRecord, MessageIndex, MessageRecord,
    QueueRecord,
};
use crate::{
    Commit, Due, DueBatch, IndexEntry, JOURNAL_SEGMENT_BYTES, MAX_INLINE_RECORD_BYTES, MessageId, Op,
    QueueCount, QueueId, Recovered, RecoveredDuplicateId, RecoveredQueue, ScannedMessage, Store, StoreHealth,
    StoreStats,
};

/// sled segment size: the largest sled 0.34.7 accepts. Stored in sled's
/// `conf` file; a database created with another value refuses to open.
pub const SEGMENT_SIZE: usize = 16 << 20;

/// Records per leaf page the [`MAX_INLINE_RECORD_BYTES`] budget allows for: sled
/// holds 17 to 20 per page (see the module docs); the rest is headroom.
pub const LEAF_ENTRIES_BOUND: usize = 28;

/// Bytes of a page sled keeps inline: `segment_size / 4 - SEG_HEADER_LEN -
/// MAX_MSG_HEADER_LEN`.
const INLINE_PAGE_BYTES: usize = SEGMENT_SIZE / 4 - 20 - 32;

// Per entry sled adds two length varints (key and value, <= 10 bytes each for
// our sizes); a page adds its header and its `lo`/`hi` bound keys, which are
// themselves keys of records, counted here as two more entries.
const _: () = assert!((LEAF_ENTRIES_BOUND + 2) * (MAX_INLINE_RECORD_BYTES + 20) + 64 <= INLINE_PAGE_BYTES);

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
    pages: Arc<Pages>,
    /// Journaled writes sled does not have yet: read before sled.
    memtable: Arc<Memtable<Bytes>>,
    large: Arc<LargeDir>,
    dir: PathBuf,
}

/// How long opening waits for sled's file lock before giving up.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Opens sled, waiting (up to [`LOCK_WAIT`]) while its file lock is still held.
///
/// sled releases the lock only when its background threads have let go of the
/// database, a moment after the last handle is dropped, so a store reopened at once in
/// the same process, or by a broker started while the previous one is exiting, can
/// find it still taken. Another live process holding it still fails, after the wait.
fn open_when_unlocked(config: &sled::Config) -> sled::Result<sled::Db> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match config.open() {
            // sled 0.34.7 reports a held lock only through this message.
            Err(sled::Error::Io(e))
                if e.to_string().starts_with("could not acquire lock") && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            result => return result,
        }
    }
}

impl SledStore {
    /// Opens (or creates) the store in `dir` with default options.
    pub fn open(dir: &Path) -> Result<SledStore, StorageError> {
        SledStore::open_with(dir, SledOptions::default())
    }

    /// Opens (or creates) the store in `dir`: replays the journal into sled,
    /// checkpoints, and deletes large-message body files that no record
    /// references (left by a crash).
    pub fn open_with(dir: &Path, options: SledOptions) -> Result<SledStore, StorageError> {
        journal::check_segment_bytes(options.journal_segment_bytes)?;
        let db = open_when_unlocked(
            &sled::Config::new()
                .path(dir)
                .segment_size(SEGMENT_SIZE)
                .cache_capacity(options.cache_capacity)
                .flush_every_ms(None),
        )?;
        let log = File::open(dir.join("db"))
            .map_err(|e| StorageError::io("opening the sled log for fdatasync", e))?;
        let pages = Arc::new(Pages::open(dir)?);
        let engine = SledEngine {
            db: db.clone(),
            log: Arc::new(log),
            pages: Arc::clone(&pages),
        };
        engine.move_messages_to_pages()?;
        let checkpoint = engine.checkpointed()?;
        // Replayed records are gathered into tables, as the memtable gathers
        // commits, so that the pages get runs of a few MiB, not one per record.
        let mut table = Table::new();
        let mut table_bytes = 0;
        let replayed = journal::replay(dir, checkpoint, |writes| {
            for (key, value) in writes {
                table_bytes += key.len() + value.as_ref().map_or(0, Vec::len);
                table.insert(key, value.map(Bytes::from));
            }
            if table_bytes >= options.memtable_table_bytes {
                table_bytes = 0;
                engine.apply(std::mem::take(&mut table).into_iter())?;
            }
            Ok(())
        })?;
        engine.apply(table.into_iter())?;
        if replayed.records > 0 {
            tracing::info!(records = replayed.records, "replayed the journal");
        }
        // After a restart sled hands out ids from its last persisted counter plus
        // two intervals, and persists the new counter only with the next flush:
        // without one, a second crash would hand out the same ids again. Drawing
        // an id now puts that counter update before the checkpoint's flush.
        db.generate_id()?;
        engine.checkpoint(replayed.last_seq)?;
        let journal = Journal::start(dir, replayed, options.journal_segment_bytes)?;
        let large = Arc::new(LargeDir::open(dir)?);
        // Make the directory entries of the files sled created (and of
        // `large/`) durable ourselves rather than rely on sled having done it.
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StorageError::io("syncing the store directory", e))?;
        let sweep = large.sweep(|queue, id, generation| {
            let key = keys::message(queue, id);
            match engine.get(&key) {
                Ok(Some(value)) => match <MarkerView as prost::Message>::decode(&value[..]) {
                    Ok(view) => view.large.is_some_and(|m| m.generation == generation),
                    // Cannot tell which file a corrupt record means: keep.
                    Err(_) => true,
                },
                Ok(None) => false,
                Err(e) => {
                    tracing::warn!(error = %e, "reading a record during the sweep failed; keeping its file");
                    true
                }
            }
        })?;
        if sweep.deleted > 0 {
            tracing::info!(
                deleted = sweep.deleted,
                kept = sweep.kept,
                "deleted orphaned large-message bodies"
            );
        }
        let memtable = Arc::new(Memtable::new(options.memtable_table_bytes));
        let committer = Committer::start(
            engine,
            journal,
            Arc::clone(&memtable),
            Arc::clone(&large),
            dir.to_path_buf(),
        )?;
        Ok(SledStore {
            committer,
            db,
            pages,
            memtable,
            large,
            dir: dir.to_path_buf(),
        })
    }

    /// The current value of `key`: the memtable's, else the engine's.
    fn value(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        match self.memtable.get(key) {
            Some(value) => Ok(value),
            None => engine_get(&self.db, &self.pages, key),
        }
    }

    fn get<M: prost::Message + Default>(&self, key: &[u8]) -> Result<Option<M>, StorageError> {
        self.value(key)?
            .map(|value| records::decode(key, &value))
            .transpose()
    }

    /// Decodes every record under `prefix`, in key order.
    fn scan<M: prost::Message + Default>(&self, prefix: &[u8]) -> Result<Vec<M>, StorageError> {
        self.db
            .scan_prefix(prefix)
            .map(|entry| {
                let (key, value) = entry?;
                records::decode(&key, &value)
            })
            .collect()
    }

    /// Calls `visit` with the current value of every key in `from..=to`, in
    /// key order, the memtable's writes over sled's, until it returns false.
    fn visit_range(
        &self,
        from: &[u8],
        to: &[u8],
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<bool, StorageError>,
    ) -> Result<(), StorageError> {
        /// Writes taken from each memtable table per round.
        const ROUND: usize = 4096;
        let mut from = from.to_vec();
        loop {
            // The memtable first, as in `keys_with_prefix`: what the
            // checkpointer moves to sled meanwhile is then read twice, and the
            // memtable's copy wins.
            let (writes, complete) = self.memtable.range(&from, to, ROUND);
            let bound = complete.clone().unwrap_or_else(|| to.to_vec());
            let mut engine = self.engine_range(&from, &bound)?.peekable();
            let mut writes = writes.into_iter().peekable();
            loop {
                let engine_key = match engine.peek() {
                    Some(Err(_)) => return Err(engine.next().expect("peeked").expect_err("peeked")),
                    Some(Ok((key, _))) => Some(key.clone()),
                    None => None,
                };
                let take_write = match (&engine_key, writes.peek()) {
                    (None, None) => break,
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (Some(e), Some((w, _))) => {
                        if e == w {
                            engine.next();
                        }
                        e >= w
                    }
                };
                let more = if take_write {
                    match writes.next().expect("peeked") {
                        (key, Some(value)) => visit(&key, &value)?,
                        (_, None) => true,
                    }
                } else {
                    let (key, value) = engine.next().expect("peeked")?;
                    visit(&key, &value)?
                };
                if !more {
                    return Ok(());
                }
            }
            match complete {
                Some(mut last) => {
                    last.push(0);
                    from = last;
                }
                None => return Ok(()),
            }
        }
    }

    /// The engine's records in `from..=to`, in key order: a range of one
    /// queue's messages from the pages, any other from sled.
    #[allow(clippy::type_complexity)]
    fn engine_range(
        &self,
        from: &[u8],
        to: &[u8],
    ) -> Result<Box<dyn Iterator<Item = Result<(Vec<u8>, Bytes), StorageError>> + '_>, StorageError> {
        // `from` may be a key with a byte appended (where a round of
        // `visit_range` ends): the first id at or after it is the next one.
        let message_at = |bound: &[u8]| match bound.get(..13).map(Key::decode) {
            Some(Ok(Key::Message { queue, id })) => Some((queue, id, bound.len() > 13)),
            _ => None,
        };
        match (message_at(from), message_at(to)) {
            (Some((queue, first, after)), Some((q, last, _))) if q == queue => {
                let Some(first) = first.checked_add(u64::from(after)) else {
                    return Ok(Box::new(std::iter::empty()));
                };
                Ok(Box::new(self.pages.range(queue, first, last).map(move |entry| {
                    let (id, value) = entry?;
                    Ok((keys::message(queue, id).to_vec(), value))
                })))
            }
            _ if from.first() == Some(&keys::MESSAGE) || to.first() == Some(&keys::MESSAGE) => {
                Err(StorageError::refused(format!(
                    "a range of message keys must be within one queue: {}..={}",
                    keys::hex(from),
                    keys::hex(to)
                )))
            }
            _ => Ok(Box::new(self.db.range(from.to_vec()..=to.to_vec()).map(
                |entry| {
                    let (key, value) = entry?;
                    Ok((key.to_vec(), Bytes::from_owner(value)))
                },
            ))),
        }
    }

    /// The encoded size of a stored message with its body, as
    /// [`IndexEntry::size`] says, warning if its body file is missing.
    fn stored_size(&self, queue: QueueId, id: MessageId, key: &[u8], value: &[u8]) -> u32 {
        let mut size = value.len() as i64;
        if let Some(body) = large_dir::stored_marker(key, value) {
            size += body.inline_size_delta();
            if !self.large.path(queue, id, body.generation).exists() {
                tracing::warn!(
                    key = %keys::hex(key),
                    "the body file of a large message is missing; reading it will fail"
                );
            }
        }
        // At most MAX_RECORD_BYTES for what this store writes.
        u32::try_from(size.max(0)).unwrap_or(u32::MAX)
    }

    fn recover_queue(&self, record: QueueRecord, head: usize) -> Result<RecoveredQueue, StorageError> {
        // Both scans ascend by id: a merge join pairs each message with its
        // state, if any, and skips states without a message.
        let mut states = per_message(&self.db, &keys::queue_states(record.id));
        let mut next_state = states.next().transpose()?;
        let mut messages = Vec::new();
        let mut more = false;
        for entry in self.pages.range(record.id, 0, MessageId::MAX) {
            if messages.len() == head {
                more = true;
                break;
            }
            let (id, value) = entry?;
            let key = keys::message(record.id, id);
            let index: MessageIndex = records::decode(&key, &value)?;
            let mut state = None;
            while let Some((state_id, state_key, state_value)) = &next_state {
                if *state_id > id {
                    break;
                }
                if *state_id == id {
                    state = Some(records::decode(state_key, state_value)?);
                }
                next_state = states.next().transpose()?;
            }
            messages.push(IndexEntry {
                id,
                priority: index.priority,
                expiration_ms: index.expiration_ms,
                size: self.stored_size(record.id, id, &key, &value),
                state,
                scheduled_at_ms: index.scheduled_at_ms,
                group: records::group_of(&index.properties).map(str::to_owned),
            });
        }
        Ok(RecoveredQueue {
            record,
            messages,
            more,
        })
    }
}

impl SledStore {
    /// Every duplicate-id cache entry: key order is one address after the
    /// other, each ascending by seq.
    fn recover_duplicate_ids(&self) -> Result<Vec<RecoveredDuplicateId>, StorageError> {
        self.db
            .scan_prefix([keys::DUPLICATE_ID])
            .map(|entry| {
                let (key, value) = entry?;
                let Ok(Key::DuplicateId { address, seq }) = Key::decode(&key) else {
                    return Err(StorageError::Corrupt {
                        key: keys::hex(&key),
                        reason: "not a duplicate-id key".into(),
                    });
                };
                let record: DuplicateIdRecord = records::decode(&key, &value)?;
                Ok(RecoveredDuplicateId {
                    address,
                    seq,
                    id: record.id,
                })
            })
            .collect()
    }
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
                + self.pages.disk_bytes()
                + self.large.bytes()
                + journal::disk_bytes(&self.dir),
        }
    }

    fn close(&self) -> Result<(), StorageError> {
        self.committer.close()
    }
}

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
fn message_id(key: &[u8]) -> Result<MessageId, StorageError> {
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

/// The current value of `key` in the engine: a message record's in the
/// pages, any other's in sled.
fn engine_get(db: &sled::Db, pages: &Pages, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
    match Key::decode(key) {
        Ok(Key::Message { queue, id }) => pages.get(queue, id),
        _ => Ok(db.get(key)?.map(Bytes::from_owner)),
    }
}

/// The entries under a per-message prefix (`0x01|q` or `0x02|q`) with the
/// message id decoded from each key.
fn per_message(
    db: &sled::Db,
    prefix: &[u8],
) -> impl Iterator<Item = Result<(MessageId, sled::IVec, sled::IVec), StorageError>> + use<> {
    db.scan_prefix(prefix).map(|entry| {
        let (key, value) = entry?;
        Ok((message_id(&key)?, key, value))
    })
}

/// The committer's (and checkpointer's) view of the engine: the message
/// records in the pages, everything else in sled, and sled's log file to
/// fdatasync.
#[derive(Clone)]
struct SledEngine {
    db: sled::Db,
    log: Arc<File>,
    pages: Arc<Pages>,
}

impl SledEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>, StorageError> {
        engine_get(&self.db, &self.pages, key)
    }

    /// Moves message records a store from before the pages kept in sled
    /// into the pages, a batch at a time, each batch durable in the pages
    /// before sled lets go of it (so a crash in between only moves a batch
    /// twice).
    fn move_messages_to_pages(&self) -> Result<(), StorageError> {
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
                "moving stored messages from sled to the pages"
            );
            self.pages.apply(puts)?;
            self.pages.checkpoint()?;
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
    fn checkpointed(&self) -> Result<u64, StorageError> {
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
impl Engine for SledEngine {
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
            None => self.pages.queues(),
        };
        queues.sort_unstable();
        Ok(queues
            .into_iter()
            .flat_map(|queue| {
                self.pages
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
        let mut highest = self.pages.highest(queue);
        for entry in per_message(&self.db, &keys::queue_states(queue)) {
            highest = highest.max(Some(entry?.0));
        }
        Ok(highest)
    }

    /// Message records go to the pages, the rest to sled one write at a
    /// time, not as a sled batch: a batch seals sled's IO buffer and hands it
    /// to sled's thread pool every time, which cost more than the writes.
    /// Atomicity comes from the journal: what a crash cuts short is replayed,
    /// and readers see the memtable until the engine has it all.
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
        self.pages.apply(messages)
    }

    /// The pages first: what the journal replays from `seq` on after a
    /// crash is then always a suffix of what they hold.
    fn checkpoint(&self, seq: u64) -> Result<(), StorageError> {
        self.pages.checkpoint()?;
        self.db
            .insert(Key::JournalCheckpoint.encode(), &seq.to_be_bytes())?;
        self.db.flush()?;
        self.log
            .sync_data()
            .map_err(|e| StorageError::io("fdatasync of the sled log", e))
    }
}

impl From<sled::Error> for StorageError {
    fn from(e: sled::Error) -> StorageError {
        StorageError::Engine(Arc::new(e))
    }
}

#[cfg(test)]
mod tests {
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
        let value = engine_get(&store.db, &store.pages, &keys::message(1, 71))
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
            .pages
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

    /// A store from before the pages kept its messages in sled: opening it
    /// moves them to the pages, and a malformed message key there is corrupt.
    #[tokio::test]
    async fn messages_kept_in_sled_move_to_the_pages_when_the_store_opens() {
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
