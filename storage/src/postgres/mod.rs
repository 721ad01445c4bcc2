//! [`PostgresStore`]: the [`Store`] in a PostgreSQL database, for a broker
//! whose durable state should live where users already run, back up and
//! replicate their data, and (next) for several brokers sharing one database.
//!
//! It keeps the whole contract (`tests/contract/`, run by `tests/engines.rs`
//! when `REBOUND_TEST_POSTGRES_URL` names a database): the same ops, limits
//! (`src/limits.rs`), ordering and errors as the other engines.
//!
//! # Source files
//!
//! ```text
//! postgres/mod.rs           PostgresStore: opening, the Store impl
//! postgres/pool.rs          its own tokio runtime, the connection pool, errors
//! postgres/schema.rs        the tables, created and migrated at open, versioned
//! postgres/writes.rs        ops folded into one net set of rows, and its SQL
//! postgres/group_commit.rs  the committer: one transaction per group
//! postgres/reads.rs         reads and recovery (ranged reads of a queue's index)
//! postgres/ids.rs           message ids reserved in blocks
//! postgres/tls.rs           TLS to the database, verifying the server
//! postgres/cluster.rs       several brokers: membership, queue leases, queue ids
//! postgres/fence.rs         owner writes only under a lease held (fencing)
//! postgres/inbox.rs         messages stored for a queue another node serves
//! postgres/duplicate_ids.rs duplicate ids shared by the nodes: which are stored
//! postgres/sizes.rs         the address sizes each node publishes for the others
//! ```
//!
//! # Tables
//!
//! The rows are the keys of the sled layout (`src/keys.rs`) with the same
//! prost records as values (`src/records.rs`), so the two engines agree on
//! what a record is and a dump of one can be loaded into the other:
//!
//! ```text
//! addresses       (name text PK, record bytea)               0x10
//! queues          (id bigint PK, record bytea)               0x11
//! messages        (queue, id PK, priority, expiration_ms,    0x01
//!                  size, grp, record bytea,
//!                  scheduled_at_ms)                           (migration 7)
//! delivery_states (queue, id PK, record bytea)               0x02
//! dues            (queue, due_ms, id PK, record bytea)       0x03 (migration 6)
//! duplicate_ids   (address, id bytea PK, seq)                0x30 (PK since
//!                                                             migration 3)
//! id_allocator    (next_id bigint): the next free message id
//! schema_version  (version int): the migrations applied
//!
//! nodes           (id text PK, advertise, incarnation,       migration 2:
//!                  heartbeat_at)                              several brokers
//! queue_leases    (queue PK, node, epoch, expires_at)
//! inbox           (queue, id PK)
//! queue_id_allocator (next_id bigint)
//! queue_names     (name PK, id): one queue id per name across nodes
//! queue_sizes     (queue PK, node, bytes)                     migration 4
//! ```
//!
//! A message row repeats the few fields recovery indexes (priority, expiry,
//! encoded size, group) next to its record, so that recovery reads no bodies.
//! Queue and message ids are stored as `bigint` (a message id above 2^63
//! would sort wrong; ids count up from 1). The tables have no prefix: give
//! rebound a database of its own, or a schema of its own through the URL
//! (`?options=-c%20search_path%3Drebound`).
//!
//! # Writes: group commit
//!
//! As in the sled engine, one committer (`group_commit.rs`) takes every
//! commit queued, up to the same group bounds, folds their ops into the net
//! final value of every row touched (`writes.rs`; a put then a delete of the
//! same message becomes one delete of a row that may not exist), and writes
//! the group in ONE transaction of a few multi-row statements (`unnest` of
//! arrays), `COMMIT`ted with `synchronous_commit = on` (set on every
//! connection, whatever the server's default), and answers every waiter.
//! `BEGIN`, the statements and `COMMIT` are pipelined on one connection: a
//! group costs one round trip and one WAL flush, whatever its size. A commit
//! resolves only once PostgreSQL has made its transaction durable;
//! concurrent producers share a COMMIT. Groups that touch different rows
//! may be in the database together, on different connections, so that
//! PostgreSQL flushes their commits together (`group_commit.rs`).
//!
//! Measured on the project machine (2 vCPU shared with other builds, release
//! build, PostgreSQL 15 on the same machine from `.ci/postgres.sh`, so
//! `fsync` and `synchronous_commit` on; `rebound perf --size 1024`, runs
//! alternated with the sled engine): `durable` 19,600–31,900 msg/s while
//! PostgreSQL committed 8,500 one-row transactions a second (sled 27,900–72,300),
//! `fan` 25,900–56,400 msg/s; when the disk managed only 200–300 fsyncs a second,
//! `durable` fell to 4,700–19,300 (sled 20,000–29,000). Up to 7 groups in
//! flight (the default pool of 8) or 1 (`postgres-pool-size = 2`) measured the
//! same within the noise on this machine, where a round trip costs little;
//! groups in flight together are for a database across a network, where they
//! hide the round trips.
//!
//! # When the database fails
//!
//! A group that cannot get a connection, or whose statements or COMMIT fail
//! for a connection reason, fails whole with [`StorageError::Unavailable`]
//! (the broker answers `UNAVAILABLE`); nothing of it is visible. The
//! committer keeps running: the pool drops the broken connection and the next
//! group connects again, so commits succeed again as soon as the database is
//! back, without a restart. Unlike a failed fsync, a failed transaction
//! proves nothing lost: PostgreSQL either committed it whole or not at all.
//! (A connection lost *during* COMMIT leaves the outcome unknown; the waiter
//! is told it failed, so at worst a message the producer retries is stored
//! twice, never an acknowledged one lost.)
//!
//! # Reads are synchronous
//!
//! [`Store`]'s reads return values, not futures, and the broker calls them
//! from its tokio tasks. The store therefore owns a small runtime of its own
//! (two threads, `pool.rs`) that drives every connection and the committer;
//! a read is a task spawned there and waited for on a std channel. The cost:
//! a read blocks the calling worker thread for one round trip to the
//! database (a fraction of a millisecond on the same machine). The broker
//! reads only at start-up (recovery) and for messages it no longer holds in
//! memory, so this is rare on the hot path. Never call a read from the
//! store's own runtime (nothing in this crate does).
//!
//! # Message ids
//!
//! [`Store::generate_id`] hands out ids from a block reserved in the
//! database (`ids.rs`): one round trip per 65,536 ids, committed
//! before its first id is used, so ids keep increasing across restarts (a
//! restart skips the rest of a block) and stay unique between nodes.
//!
//! # What `data-dir` still holds
//!
//! Nothing: this engine writes no file, and `rebound serve` with `storage =
//! "postgres"` does not create the data directory.
//!
//! # TLS
//!
//! With `postgres-ca-file` every connection is encrypted and the server's
//! certificate verified against that CA and the URL's host (`tls.rs` says
//! why only that mode). With a client certificate as well
//! ([`PostgresOptions::tls_client`]) every connection presents it, for a
//! server that authenticates the broker by certificate.
//!
//! # Not yet
//!
//! * [`StoreStats::disk_bytes`] is 0: PostgreSQL reports its own size.
//!
//! # Several brokers on one database
//!
//! Built so far (migration 2):
//!
//! * Membership and leases (`cluster.rs`): a node registers (`nodes`, with
//!   an incarnation that a restart bumps) and heartbeats on the database's
//!   clock; each queue it serves is a lease row in `queue_leases`
//!   (holder, epoch, expiry), acquired when free, run out or its own
//!   (bumping the epoch), renewed by every heartbeat in one statement,
//!   released. Queue ids come from `queue_id_allocator`, one per queue
//!   name (`queue_names`), so that nodes never hand out one id twice and two
//!   nodes creating one queue create it once. A group that writes addresses
//!   or queues sends one `NOTIFY rebound_metadata`, for the other nodes'
//!   registries.
//! * Fencing in the same transaction as the writes (`fence.rs`): a commit's
//!   owner writes (removals, delivery states) carry the epochs of their
//!   queues' leases, taken when submitted; the group transaction starts
//!   with a `SELECT … FROM queue_leases … FOR SHARE` of those rows (which
//!   conflicts with a takeover's `UPDATE`) and aborts if one is not held.
//!   The committer then fails only the commits that wrote under a lost
//!   lease ([`StorageError::Fenced`]) and writes the others again. A node
//!   stalled inside such a transaction does not hold those rows for long:
//!   every connection sets `idle_in_transaction_session_timeout` (5 s,
//!   `pool.rs`), and the server ends the session.
//! * Rows are written in key order within a group (sorted maps), so two
//!   nodes' groups lock rows in the same order and cannot deadlock on them.
//!
//! * The inbox (`inbox.rs`): a message stored for a queue another node
//!   holds gets an `inbox` row in the same transaction, and the group sends
//!   one `NOTIFY` naming those queues (never one per message); the owner
//!   listens, polls as a backstop, and takes the rows in a fenced
//!   transaction.

mod cluster;
mod duplicate_ids;
mod fence;
mod group_commit;
mod ids;
mod inbox;
mod pool;
mod reads;
mod schema;
mod sizes;
mod tls;
mod writes;

/// The test database helpers of `tests/`, for the tests of private parts.
#[cfg(test)]
#[path = "../../tests/pg/mod.rs"]
mod test_pg;

use std::sync::{Arc, Mutex};

use rustls_pki_types::CertificateDer;

use crate::error::StorageError;
use crate::records::{DeliveryState, MessageRecord};
use crate::{
    Commit, Due, DueBatch, MessageId, Op, QueueCount, QueueId, Recovered, ScannedMessage, Store, StoreStats,
};

pub use cluster::{LiveNode, QueueLease};
use fence::Fence;
use group_commit::Committer;
use ids::IdBlock;
pub use inbox::InboxNotice;
use pool::Database;
pub use tls::ClientIdentity;

/// How to reach the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresOptions {
    /// A libpq-style connection string or `postgres://` URL.
    pub url: String,
    /// Most connections the store opens: the committer uses up to all but
    /// one (one per group in flight), reads the others. At least 2.
    pub pool_size: usize,
    /// The CAs the server's certificate must chain to: `Some` = every
    /// connection uses TLS and verifies the server (`tls.rs`); `None` =
    /// plain connections.
    pub tls_roots: Option<Vec<CertificateDer<'static>>>,
    /// The client certificate every connection presents (only with
    /// `tls_roots`); `None` = none.
    pub tls_client: Option<ClientIdentity>,
}

impl PostgresOptions {
    /// The URL with the default pool size (8: up to 7 groups in flight).
    pub fn new(url: impl Into<String>) -> PostgresOptions {
        PostgresOptions {
            url: url.into(),
            pool_size: 8,
            tls_roots: None,
            tls_client: None,
        }
    }
}

/// The [`Store`] in PostgreSQL; see the [module docs](self).
pub struct PostgresStore {
    committer: Committer,
    ids: Mutex<IdBlock>,
    /// This node's leases, once it joins a cluster (`fence.rs`).
    fence: Arc<Fence>,
    // Last: the runtime stops once the committer's handle is gone.
    db: Database,
}

impl PostgresStore {
    /// Connects, creates or migrates the schema, and starts the committer.
    /// Fails with [`StorageError::Unavailable`] if the database cannot be
    /// reached, and [`StorageError::SchemaTooNew`] if a newer rebound
    /// migrated it.
    pub fn open(options: &PostgresOptions) -> Result<PostgresStore, StorageError> {
        let db = Database::connect(options)?;
        db.block(|pool| async move { schema::migrate(&pool).await })?;
        let fence = Arc::new(Fence::default());
        Ok(PostgresStore {
            committer: Committer::start(&db, options.pool_size.max(2) - 1, Arc::clone(&fence)),
            ids: Mutex::new(IdBlock::default()),
            fence,
            db,
        })
    }
}

impl Store for PostgresStore {
    fn commit(&self, ops: Vec<Op>) -> Commit {
        self.committer.submit(ops)
    }

    fn generate_id(&self) -> Result<MessageId, StorageError> {
        let mut ids = self.ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        ids.next(|| self.db.block(|pool| async move { ids::reserve(&pool).await }))
    }

    fn refuses_stored_duplicate_ids(&self) -> bool {
        true
    }

    fn read_message(&self, queue: QueueId, id: MessageId) -> Result<Option<MessageRecord>, StorageError> {
        self.db
            .block(move |pool| async move { reads::message(&pool, queue, id).await })
    }

    fn read_state(&self, queue: QueueId, id: MessageId) -> Result<Option<DeliveryState>, StorageError> {
        self.db
            .block(move |pool| async move { reads::state(&pool, queue, id).await })
    }

    fn stored_messages(&self, queue: QueueId, ids: &[MessageId]) -> Result<Vec<bool>, StorageError> {
        let ids = ids.to_vec();
        self.db
            .block(move |pool| async move { reads::stored(&pool, queue, ids).await })
    }

    fn recover_head(&self, head: usize) -> Result<Recovered, StorageError> {
        self.db
            .block(move |pool| async move { reads::recover_head(&pool, head).await })
    }

    fn scan_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        max_messages: usize,
        max_bytes: u64,
    ) -> Result<Vec<ScannedMessage>, StorageError> {
        self.db.block(move |pool| async move {
            reads::scan_queue(&pool, queue, after, max_messages, max_bytes).await
        })
    }

    fn count_queue(
        &self,
        queue: QueueId,
        after: MessageId,
        before: MessageId,
        max_messages: usize,
    ) -> Result<QueueCount, StorageError> {
        self.db.block(move |pool| async move {
            reads::count_queue(&pool, queue, after, before, max_messages).await
        })
    }

    fn scan_due(
        &self,
        queue: QueueId,
        after: Option<Due>,
        max: usize,
    ) -> Result<Vec<DueBatch>, StorageError> {
        self.db
            .block(move |pool| async move { reads::scan_due(&pool, queue, after, max).await })
    }

    /// `syncs` counts the group transactions committed; `disk_bytes` is 0.
    fn stats(&self) -> StoreStats {
        let (commits, ops, syncs) = self.committer.counters();
        StoreStats {
            commits,
            ops,
            syncs,
            disk_bytes: 0,
        }
    }

    fn close(&self) -> Result<(), StorageError> {
        self.committer.close();
        Ok(())
    }
}
