//! rebound's durable storage: the [`Store`] trait the broker programs
//! against, and three stores behind it: [`SledStore`], a write-ahead journal
//! with group commit in front of run files for queued messages and sled for
//! the rest, which the broker runs on by default; [`PostgresStore`], the same
//! contract in a PostgreSQL database, with group commit into one transaction
//! per group; and [`MemoryStore`], the same contract in memory, for fast tests
//! of the broker's engine ([`memory`] says why).
//!
//! Why a trait: the broker holds an `Arc<dyn Store>` and no store's type
//! appears in this crate's API (errors are boxed into [`StorageError`]), so
//! another store can replace sled behind it; what every store must do is one
//! test suite, `tests/contract/`. The design (data model, key layout, the
//! journal, group commit, checkpoints, runs, large messages, durability, the
//! PostgreSQL schema) is in `docs/storage.md`.
//!
//! ```text
//! lib.rs           the Store trait, Op, Commit, Recovered; the limits
//! error.rs         StorageError
//! limits.rs        the size checks every store applies to a commit
//! keys.rs          the key layout
//! records.rs       the record format (protobuf)
//! memory.rs        MemoryStore
//! postgres/        PostgresStore (its module docs list its files)
//! sled_store/      SledStore (its module docs list its files)
//! kv.rs            OrderedKv: what the write path needs from the kv behind the journal
//! group_commit.rs  the committer (uses write_set, journal, checkpoint)
//! write_set.rs     ops to key-level writes, one set per group
//! journal.rs       the write-ahead journal and its format
//! memtable.rs      journaled writes not yet in the kv
//! checkpoint.rs    the checkpointer: memtable into the kv, segments freed
//! runs/            where checkpointed messages live: run files, manifest, merged ranges
//! large.rs         body files of large messages
//! ```

#![warn(missing_docs)]

mod checkpoint;
pub mod error;
mod group_commit;
mod journal;
pub mod keys;
mod kv;
pub mod large;
mod limits;
pub mod memory;
mod memtable;
pub mod postgres;
pub mod records;
mod runs;
pub mod sled_store;
mod write_set;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

pub use error::StorageError;
pub use memory::MemoryStore;
pub use postgres::{
    ClientIdentity, DatabaseClock, Heartbeat, InboxNotice, LiveNode, PostgresOptions, PostgresStore,
    QueueLease,
};
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
/// Derived from sled 0.34.7 (`docs/storage.md`, "Why no write ever becomes a
/// blob"; checked at compile time in [`sled_store`]): it is what keeps every
/// page of records inline in sled's fsynced log rather than in a
/// never-fsynced blob.
pub const MAX_INLINE_RECORD_BYTES: usize = 128 << 10;

/// Message bodies longer than this (64 KiB) are stored in their own files
/// under `large/` rather than in sled (`docs/storage.md`, "Large messages").
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

    /// Which of messages `ids` of `queue` are stored, in the order given. A
    /// store behind a network answers in one round trip.
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

    /// Whether the store writes, for the broker's health: a store whose
    /// background writes can fail says so here (commits alone cannot show a
    /// failure nobody waits on).
    fn health(&self) -> StoreHealth {
        StoreHealth::Healthy
    }

    /// The most messages an [`Op::DeleteQueue`] should take with it, if the
    /// store writes one delete per key it removes: a caller deleting a
    /// larger queue removes its messages first, that many per commit, so
    /// that no commit (nor the memory it takes) grows with the queue. `None`:
    /// the store deletes a queue whole, however large.
    fn queue_delete_chunk(&self) -> Option<usize> {
        None
    }

    /// Whether a commit may fail with [`StorageError::DuplicateIds`]: the
    /// store refuses a duplicate id another commit stored already (another
    /// node's, on a database several brokers share). `false`: the caller's
    /// own cache of ids is the only check, and a caller need not keep a copy
    /// of a commit to make it again.
    fn refuses_stored_duplicate_ids(&self) -> bool {
        false
    }

    /// Finishes queued commits, flushes and fsyncs everything and stops the
    /// committer; later commits fail with [`StorageError::Closed`]. Reads
    /// keep working; the store's files are released when the store is
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
        /// The entry's id (the PostgreSQL store keys entries by id, so
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
pub struct Commit {
    done: Done,
    inboxed: Vec<(QueueId, MessageId)>,
}

#[derive(Debug)]
enum Done {
    Plain(oneshot::Receiver<Result<(), StorageError>>),
    /// Answered with the messages stored for a queue this node serves that
    /// joined the queue's inbox (`postgres/inbox.rs`).
    Joining(oneshot::Receiver<Result<Vec<(QueueId, MessageId)>, StorageError>>),
}

impl Commit {
    /// A commit that has already completed with `result`.
    pub fn ready(result: Result<(), StorageError>) -> Commit {
        let (tx, rx) = oneshot::channel();
        // The receiver is alive, so sending cannot fail.
        let _ = tx.send(result);
        Commit::from(rx)
    }

    /// The messages it stores with an inbox row (several brokers on one
    /// database): the queue's owner takes them into its memory from its
    /// inbox, so the node that stored them must not, also when it is that
    /// owner. Those stored for a queue another node serves are named from
    /// the start; once the commit has resolved, also those stored for a queue
    /// this node serves whose inbox held messages of other nodes then (they
    /// joined the inbox behind those, to keep one producer's order).
    pub fn inboxed(&self) -> &[(QueueId, MessageId)] {
        &self.inboxed
    }

    /// Resolved by `done` with the messages that joined an inbox besides
    /// `inboxed`.
    pub(crate) fn joining(
        done: oneshot::Receiver<Result<Vec<(QueueId, MessageId)>, StorageError>>,
        inboxed: Vec<(QueueId, MessageId)>,
    ) -> Commit {
        Commit {
            done: Done::Joining(done),
            inboxed,
        }
    }
}

/// A commit completed by whoever holds the sender; a dropped sender means
/// [`StorageError::Closed`].
impl From<oneshot::Receiver<Result<(), StorageError>>> for Commit {
    fn from(done: oneshot::Receiver<Result<(), StorageError>>) -> Commit {
        Commit {
            done: Done::Plain(done),
            inboxed: Vec::new(),
        }
    }
}

impl Future for Commit {
    type Output = Result<(), StorageError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let commit = &mut *self;
        match &mut commit.done {
            Done::Plain(done) => Pin::new(done)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(StorageError::Closed))),
            Done::Joining(done) => Pin::new(done).poll(cx).map(|r| {
                let joined = r.unwrap_or(Err(StorageError::Closed))?;
                commit.inboxed.extend(joined);
                Ok(())
            }),
        }
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
    /// Bytes the store uses on disk.
    pub disk_bytes: u64,
}
