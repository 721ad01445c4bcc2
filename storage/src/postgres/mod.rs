//! [`PostgresStore`]: the [`Store`] in a PostgreSQL database, for a broker
//! whose durable state should live where users already run, back up and
//! replicate their data, and for several brokers sharing one database.
//!
//! Why its own committer and runtime: a group of commits becomes one
//! transaction, one round trip and one WAL flush, as a group becomes one
//! journal record in the sled store; and the [`Store`]'s synchronous reads
//! wait on a runtime the broker's workers cannot starve. It keeps the whole
//! contract (`tests/contract/`). `docs/storage.md` has the design: the
//! tables, group commit, failures, reads, ids, TLS and several brokers.
//!
//! ```text
//! mod.rs            PostgresStore: opening, the Store impl
//! pool.rs           its own tokio runtime, the connection pool, errors
//! schema.rs         the tables, created and migrated at open, versioned
//! writes.rs         ops folded into one net set of rows, and its SQL
//! group_commit.rs   the committer: one transaction per group
//! reads.rs          reads and recovery (ranged reads of a queue's index)
//! ids.rs            message ids ordered by the database's clock
//! clock.rs          the database's clock, kept between readings
//! tls.rs            TLS to the database, verifying the server
//! cluster.rs        several brokers: membership, queue leases, queue ids
//! fence.rs          owner writes only under a lease held (fencing)
//! inbox.rs          messages stored for a queue another node serves
//! duplicate_ids.rs  duplicate ids shared by the nodes: which are stored
//! sizes.rs          the address sizes each node publishes for the others
//! ```

mod clock;
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

use std::sync::Arc;

use rustls_pki_types::CertificateDer;

use crate::error::StorageError;
use crate::records::{DeliveryState, MessageRecord};
use crate::{
    Commit, Due, DueBatch, MessageId, Op, QueueCount, QueueId, Recovered, ScannedMessage, Store, StoreStats,
};

pub use clock::DatabaseClock;
pub use cluster::{Heartbeat, LiveNode, QueueLease};
use fence::Fence;
use group_commit::Committer;
use ids::TimeIds;
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

/// The [`Store`] in PostgreSQL; `docs/storage.md` has its design.
pub struct PostgresStore {
    committer: Committer,
    ids: TimeIds,
    /// The database's time, read at open and at every heartbeat.
    clock: Arc<DatabaseClock>,
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
        let (ids, clock) = db.block(|pool| async move { ids::open(&pool).await })?;
        let fence = Arc::new(Fence::default());
        Ok(PostgresStore {
            committer: Committer::start(&db, options.pool_size.max(2) - 1, Arc::clone(&fence)),
            ids,
            clock: Arc::new(clock),
            fence,
            db,
        })
    }

    /// The database's time, as this store keeps it: what the nodes of a
    /// cluster go by.
    pub fn clock(&self) -> Arc<DatabaseClock> {
        Arc::clone(&self.clock)
    }
}

impl Store for PostgresStore {
    fn commit(&self, ops: Vec<Op>) -> Commit {
        self.committer.submit(ops)
    }

    fn generate_id(&self) -> Result<MessageId, StorageError> {
        Ok(self.ids.next(self.clock.now_ms()))
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
