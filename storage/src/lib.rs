//! rebound's durable storage: the [`Store`] trait the broker programs
//! against, and three engines behind it: [`SledStore`], a write-ahead journal
//! with group commit in front of page files for queued messages and sled for
//! the rest, which the broker runs on by default;
//! [`PostgresStore`], the same contract in a PostgreSQL database, with group
//! commit into one transaction per group ([`postgres`] has its design); and
//! [`MemoryStore`], the same contract in memory, for fast tests of the
//! broker's engine ([`memory`] says why).
//!
//! The broker holds an `Arc<dyn Store>`; no engine type appears in this
//! crate's API (errors are boxed into [`StorageError`]), so another engine can
//! replace sled behind the same trait. What every engine must do is one test
//! suite, `tests/contract/`, which `tests/engines.rs` runs against each
//! engine: a new engine (PostgreSQL, say) passes it unchanged by adding a
//! `Harness` and one `store_contract!` line there.
//!
//! # Data model
//!
//! Queues hold message *references*. A message stored for a queue is one
//! record keyed by queue and [`MessageId`]; a multicast message is stored once
//! per queue it reaches. That duplicates the body per subscription, but an
//! acknowledgement never coordinates across queues and a dead-letter move is
//! one atomic commit.
//!
//! # Key layout
//!
//! One ordered keyspace, a kind byte, then big-endian integers so that byte
//! order is numeric order ([`keys`]). In [`SledStore`] the message records
//! (`0x01`) live in the pages once checkpointed (below), everything else in
//! one sled tree:
//!
//! ```text
//! 0x01 | queue u32 | message u64  -> MessageRecord
//! 0x02 | queue u32 | message u64  -> DeliveryState   (only once written)
//! 0x03 | queue u32 | due u64 | message u64  -> DueBatchRecord   (Op::PutDues)
//! 0x10 | address name (UTF-8)     -> AddressRecord
//! 0x11 | queue u32                -> QueueRecord
//! 0x20                            -> journal checkpoint (u64 BE)
//! 0x30 | len u32 | address | seq u64  -> DuplicateIdRecord
//! ```
//!
//! # Source files
//!
//! ```text
//! src/lib.rs             the Store trait, Op, Commit, Recovered; the limits
//! src/limits.rs          the size checks every engine applies to a commit
//! src/memory.rs          MemoryStore
//! src/postgres/          PostgresStore (its module docs list its files)
//! src/sled_store.rs      SledStore: opening, reads, recovery, sled's gaps,
//!                        which keys go to the pages and which to sled
//! src/engine.rs          Engine: what the write path needs from the engine
//! src/group_commit.rs    the committer (uses write_set, journal, checkpoint)
//! src/write_set.rs       ops to key-level writes, one set per group
//! src/journal.rs         the write-ahead journal and its format
//! src/memtable.rs        journaled writes not yet in the engine
//! src/checkpoint.rs      the checkpointer: memtable into the engine, segments freed
//! src/pages/             where checkpointed messages live: runs, manifest, merged ranges
//! src/large.rs           body files of large messages
//! src/keys.rs, records.rs  key layout and record format
//! tests/contract/        the Store contract, for every engine
//! tests/engines.rs       the contract run against every engine
//! tests/postgres.rs      what only PostgresStore does (the database failing)
//! tests/cluster.rs       PostgresStore for several brokers: leases, fencing
//! tests/store.rs, large.rs, crash.rs   what only SledStore does
//! ```
//!
//! # Files on disk (SledStore)
//!
//! ```text
//! <dir>/journal/<seq>.wal                    journal segments (the durability point)
//! <dir>/journal/spare.wal                    the next segment, zero-filled or recycled
//! <dir>/pages/<number>.run                  a run of queued message records
//! <dir>/pages/MANIFEST                       the runs and their live ids, as of a checkpoint
//! <dir>/db, conf, snap.*                     sled (its blobs/ stays empty, see below)
//! <dir>/large/q<queue>-m<id>.body            body of a large message
//! <dir>/large/q<queue>-m<id>.g<gen>.body     same, written again (gen >= 1)
//! ```
//!
//! # How a commit becomes durable
//!
//! In [`SledStore`], the write path has three stages, one file each:
//!
//! 1. **Group commit** (`src/group_commit.rs`): one committer thread takes
//!    every commit queued, folds them into one set of key-level writes
//!    (`src/write_set.rs`), appends that set to the journal as *one record*
//!    and `fdatasync`s the journal once, then answers every waiter.
//! 2. **Journal** (`src/journal.rs`, the on-disk format is documented there):
//!    preallocated 8 MiB segments ([`JOURNAL_SEGMENT_BYTES`]), so a sync never
//!    has a file size to commit; records carry a length, a crc32 and a
//!    sequence number, and replay stops at the first record that is not whole.
//!    One record per group is what makes a commit atomic: after a crash a
//!    group is replayed whole or not at all, so a DLQ move (remove from queue
//!    A, insert into queue B, delete the state) is in exactly one queue.
//! 3. **Checkpoint** (`src/checkpoint.rs`): journaled writes are readable at
//!    once from an in-memory table (`src/memtable.rs`), frozen at the end of
//!    each segment or once its estimated size reaches 4 MiB
//!    ([`SledOptions::memtable_table_bytes`]), whichever comes first, and
//!    reach the engine one table later: a checkpointer thread applies a
//!    table (leaving out what the next table writes again, and deletes of
//!    keys the engine cannot have). Its message records become one sorted,
//!    synced file, a run, in `pages/`, and its acks clear bits in the runs'
//!    live bitmaps (`src/pages/` says why and how); its other writes go to
//!    sled. After the table that ends a segment it writes the pages'
//!    manifest, records the journal position in sled under `0x20`, makes
//!    sled durable (`flush()` and `fdatasync`) and recycles the segment; a
//!    table frozen within a segment only leaves memory, its records staying
//!    in the journal until then. A message acked within a table or two (a
//!    queue that keeps up, a message redelivered after a short delay) never
//!    reaches the engine at all. Opening the store replays the journal after
//!    the recorded position. The size bound is what keeps a deep backlog's
//!    drain in bounded memory: its segments are full of ~20-byte deletes that
//!    cost ten times that in a table (BENCHMARKS.md, "Deep backlogs").
//!
//! Artemis's journal works the same way (pre-filled, reused journal files,
//! compacted into the bindings and messages it keeps); the pages and sled
//! play the part of the compacted state.
//!
//! # Record encoding
//!
//! Values are protobuf messages encoded with prost; the types in [`records`]
//! *are* the on-disk format. Compatibility rule: never reuse a tag, only add
//! fields whose zero value means "as before". A value that fails to decode is
//! reported as [`StorageError::Corrupt`] with its key in hex, never a panic; a
//! journal with a gap or a damaged record before its end is refused with
//! [`StorageError::CorruptJournal`] naming the file and offset, rather than
//! silently dropping acknowledged commits.
//! A message (key plus its full encoded record, body included) may be at most
//! [`MAX_RECORD_BYTES`]; what is stored inline (every other record, and a
//! message without the body it keeps in a file) at most
//! [`MAX_INLINE_RECORD_BYTES`]. Commits breaking either are refused whole
//! with [`StorageError::RecordTooLarge`], by every engine (`src/limits.rs`).
//!
//! # Large messages
//!
//! As in Artemis, a body above [`LARGE_BODY_THRESHOLD`] (64 KiB), or one that
//! would push the record over [`MAX_INLINE_RECORD_BYTES`], is written to its
//! own file under `large/` rather than into the journal ([`large`] has the
//! details). The `0x01` record of such a message has no body and a marker
//! (tag 100, see [`records`]) with the body's length and file generation. The
//! committer does it inside the group, in this order:
//!
//! 1. write each body file and `sync_data` it; then fsync `large/` once for
//!    the whole group;
//! 2. append the group's record (records carry the marker) to the journal and
//!    fdatasync it;
//! 3. unlink the files of messages the group removed, replaced or whose queue
//!    it deleted; then answer the waiters.
//!
//! So a send is acknowledged only once both body and record are durable, and
//! a crash leaves at worst a body no record references, never a record
//! without its body. Opening the store deletes such orphans (a file whose
//! `(queue, id, generation)` is not what the record under `0x01|queue|id`
//! says, after the journal is replayed). Should a body file vanish anyway
//! (deleted by hand, lost by the file system), [`Store::recover`] still lists
//! the message (with a warning in the log), so that the broker's indexes
//! match the store, and [`Store::read_message`] reports
//! [`StorageError::Corrupt`] naming the key and the file; it never panics.
//!
//! Fan-out: a multicast message is one record per queue; when one group
//! stores the same message id with the same body for several queues, the
//! body is written and synced once and the other names are hard links to it.
//! Bodies are read whole into memory by `read_message`, like small ones.
//!
//! Why 64 KiB: below it, a separate file costs an extra `sync_data` and
//! directory fsync for little gain; above it, values bloat sled's pages,
//! which sled rewrites whole on every consolidation (17–20 values per page),
//! and keeping records at most half of [`MAX_INLINE_RECORD_BYTES`] leaves the
//! other half for properties.
//!
//! # Why sled 0.34.7
//!
//! It is the last stable sled (2021) and is pinned with `=`. The 1.0 alphas
//! drop transactions, `generate_id` and the stability of batches, use a new
//! on-disk format and have no release cadence, so they are not an upgrade
//! path; we treat 0.34.7 as frozen vendor code and keep it behind [`Store`].
//!
//! # Durability
//!
//! A [`Commit`] resolves only after its ops are in a journal record that has
//! been `fdatasync`ed, and readable. The pages and sled are only checkpoint
//! targets. A run is synced when written, and the manifest naming it is
//! written to a temporary file, synced, renamed and its directory synced,
//! all before sled records the checkpoint. sled's own durability gaps are
//! closed at every checkpoint ([`sled_store`]):
//!
//! * sled's `flush()` uses `sync_file_range`, which leaves data in the drive's
//!   volatile cache: after the flush we `fdatasync` sled's log file, and only
//!   then may the journal segments it covers be reused;
//! * log items above `segment_size / 4 - 20` bytes become blob files that sled
//!   never fsyncs: sled's segments are 16 MiB and its values are capped
//!   ([`MAX_INLINE_RECORD_BYTES`]) so that even a whole page of maximum-size
//!   records stays inline, so no blob is written; larger bodies go to our own
//!   fsynced files (above);
//! * concurrent `flush_async` deadlocks in 0.34.7: it is never called;
//! * `flush()` itself can hang after a long run of writes (sled #1412, seen
//!   here at one close in twenty with `examples/fill_and_close.rs`): the
//!   checkpointer flushes every few thousand writes, and commits that wait
//!   on a checkpoint for more than 10 s say so in the log.
//!
//! A store dropped without [`Store::close`] (or a killed process) keeps every
//! commit that was acknowledged; the crash tests kill a child process with
//! SIGKILL and check exactly that, one of them with 16 KiB journal segments
//! so that the kills land in the middle of checkpoints. A failed journal
//! sync, directory sync or checkpoint is fatal: the store refuses every
//! later commit (see `src/group_commit.rs` for why a retried fsync proves
//! nothing).
//!
//! # Disk space and memory
//!
//! An ack removes the message's keys (and its body file, once the removal is
//! durable). A run's file goes once none of its messages is live, and a run
//! left with a few live messages is compacted into a new one, so the pages
//! take about what the queued messages take. The journal holds the segment being written, the one the
//! checkpointer keeps back, those not yet checkpointed (at most 4 waiting;
//! commits wait beyond that) and one spare: normally 24 MiB, at most about
//! 60 MiB with the default segment size. The same writes, net of what later
//! writes replaced, are held in memory until their checkpoint. Queued
//! messages cost memory only through their runs' block indexes and live
//! bitmaps, well under a byte per message. sled, which keeps the rest,
//! reuses the log space of removed records but never shrinks its file;
//! it holds no messages, so its size follows the number of queues,
//! addresses, duplicate ids and redelivered messages, not the backlog.
//!
//! # Group commit
//!
//! An `fdatasync` costs a fraction of a millisecond to milliseconds whatever
//! the batch size, so commits are grouped: while the committer syncs, new
//! commits queue up and ride the next group. Concurrent producers share syncs;
//! a lone producer pays one per commit.
//!
//! Measured on the project machine (2 vCPU, ext4 on virtio, release build,
//! `cargo run --release -p rebound-storage --example commit_throughput`),
//! each committer awaiting one 1 KiB `PutMessage` per commit, three 3 s runs;
//! next to them the disk did 6,800–7,300 `fdatasync`/s of 4 KiB into a
//! preallocated file and 4,800–5,500 appending (`bench/fsync_rate.py`):
//!
//! | committers | msgs/s        | syncs per commit |
//! |-----------:|--------------:|-----------------:|
//! | 1          | 6,100–6,400   | 1.00             |
//! | 8          | 23,900–24,600 | 0.21–0.22        |
//! | 64         | 70,500–76,600 | 0.027            |
//!
//! Before the journal (commit 1a7d9b8), each group was a sled batch, a
//! `flush()` and an `fdatasync` of sled's growing log; run alternately with
//! the journal build, twice, it gave 2,400–2,500, 10,400–10,800 and
//! 49,600–50,500 msgs/s (the journal: 6,300–6,700, 23,000–23,400 and
//! 72,500–72,800). sled's flush hands every IO buffer to its thread pool,
//! and the sync had file-size metadata to commit.
//!
//! Large messages (same example, `3 /tmp 1048576 1,8,64`), 1 MiB bodies each
//! written to a file and `sync_data`ed inside the group, are bound by the
//! disk's write bandwidth rather than the sync count: 460–650 MiB/s with 1
//! committer, 560–650 MiB/s with 8 or 64 (two runs).

#![warn(missing_docs)]

mod checkpoint;
mod engine;
pub mod error;
mod group_commit;
mod journal;
pub mod keys;
pub mod large;
mod limits;
pub mod memory;
mod memtable;
mod pages;
pub mod postgres;
pub mod records;
pub mod sled_store;
mod write_set;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

pub use error::StorageError;
pub use memory::MemoryStore;
pub use postgres::{ClientIdentity, InboxNotice, LiveNode, PostgresOptions, PostgresStore, QueueLease};
pub use records::{
    AddressRecord, DeliveryState, DuplicateIdRecord, FailureRecord, MessageRecord, PropertyValue,
    QueueRecord, RoutingType,
};
pub use sled_store::{SledOptions, SledStore};

/// A queue's id, assigned by the broker.
pub type QueueId = u32;

/// A message's id: globally unique and increasing, from [`Store::generate_id`].
pub type MessageId = u64;

/// A batch of a queue's due-time index, as [`Store::scan_due`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueBatch {
    /// Its earliest entry, which keys it.
    pub first: Due,
    /// Its messages, ascending.
    pub entries: Vec<Due>,
}

/// A message in a queue's due-time index ([`Op::PutDues`]), in the index's
/// order: when the message is due (ms since the epoch), then its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Due {
    /// When the message is due, ms since the epoch.
    pub at_ms: u64,
    /// The message.
    pub id: MessageId,
}

/// The largest message a commit may store, key plus its full encoded
/// [`MessageRecord`] (body included): 16 MiB. The broker uses it as the
/// ceiling of its message size.
///
/// Bodies above [`LARGE_BODY_THRESHOLD`] live in files, so sled does not bound
/// this; what does: `read_message` returns the body whole, in memory, and the
/// broker keeps messages in memory while delivering them, so this bounds the
/// memory one message can pin (times the fan-out of a multicast send when it
/// is not hard-linked). It equals the committer's group byte budget, so one
/// maximum message fills a group on its own rather than stalling the commits
/// behind it for longer (writing and syncing 16 MiB takes on the order of
/// 100 ms on the project's disk). It keeps sizes well inside
/// [`IndexEntry::size`]'s `u32`, and leaves a factor of 4 of headroom over
/// the "few MiB" messages it is meant for. Raising it needs streaming of
/// bodies (as Artemis does), not a bigger constant.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// The largest value the store puts into sled, key plus encoded value:
/// 128 KiB. Every record but a large message's body must fit.
///
/// Derived from sled 0.34.7 in [`sled_store`]: it is what keeps every page of
/// records inline in sled's fsynced log rather than in a never-fsynced blob.
pub const MAX_INLINE_RECORD_BYTES: usize = 128 << 10;

/// Message bodies longer than this (64 KiB) are stored in their own files
/// under `large/` rather than in sled; see "Large messages" above.
pub const LARGE_BODY_THRESHOLD: usize = 64 << 10;

/// Nominal size of a journal segment by default, 8 MiB (Artemis's
/// `journal-file-size` is 10 MiB). A segment's writes wait in memory until it
/// is checkpointed, so this also bounds that memory ([`SledOptions`]). The
/// range users may choose is the configuration's (`journal-file-size`); the
/// store only refuses segments too small to hold a journal record
/// ([`StorageError::JournalSegmentTooSmall`]).
pub const JOURNAL_SEGMENT_BYTES: u64 = 8 << 20;

/// The durable state of the broker.
///
/// Dyn-compatible: the broker holds an `Arc<dyn Store>`.
pub trait Store: Send + Sync + 'static {
    /// Applies `ops` atomically, in order; the returned future resolves once
    /// they are durable (fsynced). Concurrent commits share one flush and
    /// fdatasync (group commit). Never blocks the caller's thread.
    fn commit(&self, ops: Vec<Op>) -> Commit;

    /// Like [`Store::commit`], for a commit that nothing waits on at once (a
    /// consumer's ack): a store whose commits share syncs may hold it up to
    /// about a millisecond for another commit to share its sync, rather than
    /// sync it alone just before the next one arrives. The future still
    /// resolves only once the ops are durable.
    fn commit_patient(&self, ops: Vec<Op>) -> Commit {
        self.commit(ops)
    }

    /// A new message id, greater than every id handed out before, also across
    /// crashes (ids may be skipped).
    fn generate_id(&self) -> Result<MessageId, StorageError>;

    /// The message `id` held by `queue`, if any.
    fn read_message(&self, queue: QueueId, id: MessageId) -> Result<Option<MessageRecord>, StorageError>;

    /// The delivery state of message `id` in `queue`, if one was written.
    fn read_state(&self, queue: QueueId, id: MessageId) -> Result<Option<DeliveryState>, StorageError>;

    /// Which of messages `ids` of `queue` are stored, in the order given. An
    /// engine behind a network answers in one round trip.
    fn stored_messages(&self, queue: QueueId, ids: &[MessageId]) -> Result<Vec<bool>, StorageError> {
        ids.iter()
            .map(|&id| Ok(self.read_message(queue, id)?.is_some()))
            .collect()
    }

    /// Everything needed to rebuild the broker's in-memory indexes at
    /// start-up, without keeping bodies. Messages of queues that have no
    /// queue record are not returned.
    fn recover(&self) -> Result<Recovered, StorageError> {
        self.recover_head(usize::MAX)
    }

    /// [`Store::recover`], with at most the first `head` messages of each
    /// queue ([`RecoveredQueue::more`] says whether it has more): start-up
    /// then costs the queues' heads, not their backlogs, which the broker
    /// reads later ([`Store::scan_queue`], [`Store::count_queue`]).
    fn recover_head(&self, head: usize) -> Result<Recovered, StorageError>;

    /// The messages of `queue` with ids above `after`, ascending, whole
    /// (bodies included) with their delivery states: at most `max_messages`,
    /// and no more once `max_bytes` of them (encoded) are read, but always
    /// at least one if there is one. Every commit that completed is seen.
    fn scan_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        max_messages: usize,
        max_bytes: u64,
    ) -> Result<Vec<ScannedMessage>, StorageError>;

    /// How many messages `queue` holds with ids above `after` and below
    /// `before`, and their bytes (as [`IndexEntry::size`]), counting at most
    /// `max_messages`; without decoding them.
    fn count_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
        max_messages: usize,
    ) -> Result<QueueCount, StorageError>;

    /// Up to `max` batches of `queue`'s due-time index ([`Op::PutDues`]) whose
    /// earliest entry comes after `after` (`None`: from the start), ascending
    /// by that entry: the scheduled messages the broker keeps out of memory,
    /// those due next first. Every commit that completed is seen.
    fn scan_due(&self, queue: QueueId, after: Option<Due>, max: usize)
    -> Result<Vec<DueBatch>, StorageError>;

    /// Counters for metrics.
    fn stats(&self) -> StoreStats;

    /// Whether the store writes, for the broker's health: an engine whose
    /// background writes can fail says so here (commits alone cannot show a
    /// failure nobody waits on).
    fn health(&self) -> StoreHealth {
        StoreHealth::Healthy
    }

    /// The most messages an [`Op::DeleteQueue`] should take with it, if the
    /// engine writes one delete per key it removes: a caller deleting a
    /// larger queue removes its messages first, that many per commit, so
    /// that no commit (nor the memory it takes) grows with the queue. `None`:
    /// the engine deletes a queue whole, however large.
    fn queue_delete_chunk(&self) -> Option<usize> {
        None
    }

    /// Whether a commit may fail with [`StorageError::DuplicateIds`]: the
    /// engine refuses a duplicate id another commit stored already (another
    /// node's, on a database several brokers share). `false`: the caller's
    /// own cache of ids is the only check, and a caller need not keep a copy
    /// of a commit to make it again.
    fn refuses_stored_duplicate_ids(&self) -> bool {
        false
    }

    /// Finishes queued commits, flushes and fsyncs everything and stops the
    /// committer; later commits fail with [`StorageError::Closed`]. Reads
    /// keep working; the engine's files are released when the store is
    /// dropped.
    fn close(&self) -> Result<(), StorageError>;
}

/// One change in a [`Store::commit`].
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Creates or replaces an address.
    PutAddress(AddressRecord),
    /// Deletes an address and its duplicate-id cache.
    DeleteAddress(String),
    /// Creates or replaces a queue.
    PutQueue(QueueRecord),
    /// Deletes a queue with all its messages and delivery states.
    DeleteQueue(QueueId),
    /// Stores a message reference in `queue`, under `message.message_id`.
    PutMessage {
        /// The queue.
        queue: QueueId,
        /// The message.
        message: MessageRecord,
    },
    /// Creates or replaces the delivery state of a message reference.
    PutState {
        /// The queue.
        queue: QueueId,
        /// The message.
        id: MessageId,
        /// The new state.
        state: DeliveryState,
    },
    /// Removes a message reference and its delivery state (ack, or the first
    /// half of a move).
    RemoveMessage {
        /// The queue.
        queue: QueueId,
        /// The message.
        id: MessageId,
    },
    /// Removes a message reference that never had a delivery state, as the
    /// caller knows (it wrote none and recovered none): [`Op::RemoveMessage`]
    /// without the state's delete, which is a write (a tombstone) like any other.
    /// A state that does exist stays behind.
    RemoveStatelessMessage {
        /// The queue.
        queue: QueueId,
        /// The message.
        id: MessageId,
    },
    /// Adds a batch to `queue`'s due-time index ([`Store::scan_due`]): the
    /// scheduled messages the broker moves out of memory together, by when
    /// they are due. One record per batch, keyed by its earliest entry (a
    /// batch with that key is replaced; an empty one writes nothing), so
    /// that the index costs a write per batch, not per message. The index is
    /// the broker's: removing a message leaves its entry; deleting the queue
    /// drops the queue's batches.
    PutDues {
        /// The queue.
        queue: QueueId,
        /// The messages, in any order (read back ascending).
        entries: Vec<Due>,
    },
    /// Removes the batch of `queue`'s due-time index keyed by `first`.
    RemoveDues {
        /// The queue.
        queue: QueueId,
        /// The batch's earliest entry.
        first: Due,
    },
    /// Adds (or replaces) entry `seq` of an address's duplicate-id cache.
    PutDuplicateId {
        /// The address whose cache it is.
        address: String,
        /// The entry's place in that cache, oldest first.
        seq: u64,
        /// The id.
        id: bytes::Bytes,
    },
    /// Removes entry `seq` of an address's duplicate-id cache (the FIFO
    /// dropped it).
    RemoveDuplicateId {
        /// The address whose cache it is.
        address: String,
        /// The entry's place in that cache.
        seq: u64,
        /// The entry's id (the PostgreSQL engine keys entries by id, so
        /// that several nodes' caches share one row per id).
        id: bytes::Bytes,
    },
    /// Commits only if node `node` holds the lease of `queue` under `epoch`,
    /// and lets this commit remove that queue's messages: a transaction of
    /// one node removing the messages another node serves and holds aside
    /// for it (several brokers on one database, `postgres/fence.rs`). A
    /// single broker's stores have no leases and ignore it.
    Claim {
        /// The queue.
        queue: QueueId,
        /// The node that serves it.
        node: String,
        /// The epoch of its lease.
        epoch: u64,
    },
}

/// The outcome of a [`Store::commit`]: resolves once the ops are durable or
/// have failed.
///
/// Dropping it does not cancel the commit.
#[derive(Debug)]
#[must_use = "a commit is only durable once its future resolves"]
pub struct Commit(oneshot::Receiver<Result<(), StorageError>>);

impl Commit {
    /// A commit that has already completed with `result`.
    pub fn ready(result: Result<(), StorageError>) -> Commit {
        let (tx, rx) = oneshot::channel();
        // The receiver is alive, so sending cannot fail.
        let _ = tx.send(result);
        Commit(rx)
    }
}

/// A commit completed by whoever holds the sender; a dropped sender means
/// [`StorageError::Closed`].
impl From<oneshot::Receiver<Result<(), StorageError>>> for Commit {
    fn from(rx: oneshot::Receiver<Result<(), StorageError>>) -> Commit {
        Commit(rx)
    }
}

impl Future for Commit {
    type Output = Result<(), StorageError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(StorageError::Closed)))
    }
}

/// What [`Store::recover`] returns.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recovered {
    /// All addresses, ordered by name.
    pub addresses: Vec<AddressRecord>,
    /// All queues, ordered by id.
    pub queues: Vec<RecoveredQueue>,
    /// Every duplicate-id cache entry, those of one address together and
    /// ascending by seq (addresses in no particular order). Also those of
    /// addresses that have no address record.
    pub duplicate_ids: Vec<RecoveredDuplicateId>,
}

/// One entry of an address's duplicate-id cache, as [`Store::recover`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredDuplicateId {
    /// The address whose cache it is.
    pub address: String,
    /// Its place in that cache, oldest first.
    pub seq: u64,
    /// The id.
    pub id: bytes::Bytes,
}

/// One queue and the index of its messages.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredQueue {
    /// The queue definition.
    pub record: QueueRecord,
    /// Its messages, ascending by id (the first ones, see [`Store::recover_head`]).
    pub messages: Vec<IndexEntry>,
    /// Whether the queue holds more messages than `messages`.
    pub more: bool,
}

/// A message as [`Store::scan_queue`] reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScannedMessage {
    /// The message, body included.
    pub record: MessageRecord,
    /// Its delivery state, if one was written.
    pub state: Option<DeliveryState>,
}

/// What [`Store::count_queue`] counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueCount {
    /// Messages counted.
    pub messages: u64,
    /// Their bytes, as [`IndexEntry::size`] says.
    pub bytes: u64,
    /// The id of the last one counted (`after` if none was).
    pub last: MessageId,
    /// Whether the range has more than `max_messages` messages.
    pub more: bool,
}

impl QueueCount {
    /// Nothing counted yet, in a range after `after`.
    pub(crate) fn after(after: MessageId) -> QueueCount {
        QueueCount {
            last: after,
            ..QueueCount::default()
        }
    }

    /// Whether `max` messages are counted already; if so, notes that the
    /// range has more (the caller stops before looking at the next one).
    pub(crate) fn full(&mut self, max: usize) -> bool {
        self.more = self.messages == max as u64;
        self.more
    }

    /// Counts message `id` of `bytes`.
    pub(crate) fn add(&mut self, id: MessageId, bytes: u64) {
        self.messages += 1;
        self.bytes += bytes;
        self.last = id;
    }
}

/// What the broker indexes about a stored message; the body stays on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexEntry {
    /// The message id.
    pub id: MessageId,
    /// Its priority, `0..=9`.
    pub priority: u32,
    /// Its expiry (ms since the epoch), `0` = never.
    pub expiration_ms: u64,
    /// Size of the encoded record in bytes, body included (also when the body
    /// is in a file): what `MessageRecord::encoded_len` says.
    pub size: u32,
    /// Its delivery state, if one was written.
    pub state: Option<DeliveryState>,
    /// When its scheduled send made it due ([`MessageRecord::scheduled_at_ms`]),
    /// `0` = at once; a `state` says instead.
    pub scheduled_at_ms: u64,
    /// Its message group ([`records::group_of`]): a queue delivers a group in order.
    pub group: Option<String>,
}

/// Whether a store writes ([`Store::health`]).
#[derive(Clone, Debug)]
pub enum StoreHealth {
    /// It writes.
    Healthy,
    /// Its background writes fail on an error that may clear (out of file
    /// handles, or of disk space: [`StorageError::is_transient`]) and are
    /// tried again; commits wait once a few such writes are behind.
    Retrying(StorageError),
    /// It refuses every commit until it is opened again (a restart).
    Failed(StorageError),
}

/// Counters of a [`Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoreStats {
    /// Commits that completed durably.
    pub commits: u64,
    /// Ops in those commits.
    pub ops: u64,
    /// Journal fdatasyncs, one per group.
    pub syncs: u64,
    /// Bytes the engine uses on disk.
    pub disk_bytes: u64,
}
