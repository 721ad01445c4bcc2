//! What a node of a cluster (several brokers on one database) asks of the
//! database: its membership, the leases on the queues it serves, and queue
//! ids no other node hands out. The broker's `cluster` module decides when;
//! this file only says how, in SQL.
//!
//! Every time is the database's (`now()`): nodes never compare their own
//! clocks. A lease is a row of `queue_leases`; acquiring it bumps its
//! `epoch`, which is what fencing (`fence.rs`) checks, so that a node that
//! lost a lease can no longer write as the queue's owner.
//!
//! A node may acquire a lease whose holder is itself, expired or not: a
//! node that starts again under its id knows its previous process is gone
//! (node ids are unique by the operator's promise, `[cluster]`), and the new
//! epoch fences whatever that process, or a lease this process gave up
//! locally, might still have in flight.

use std::time::Duration;

use deadpool_postgres::Pool;

use super::PostgresStore;
use super::clock::DATABASE_MS;
use super::pool::{db_error, pool_error};
use super::reads::{address_records, queue_records};
use crate::QueueId;
use crate::error::StorageError;
use crate::records::{AddressRecord, QueueRecord};

/// A node that heartbeat within the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveNode {
    /// Its `node-id`.
    pub id: String,
    /// Where the other nodes reach its gRPC.
    pub advertise: String,
    /// How many times it registered (a node started again has a new one).
    pub incarnation: u64,
    /// Where its HTTP endpoint is reached, if it has one.
    pub http_advertise: Option<String>,
}

/// What a heartbeat found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heartbeat {
    /// The leases the node holds, `(queue, epoch)`.
    pub leases: Vec<(QueueId, u64)>,
}

/// A row of `queue_leases`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueLease {
    /// The queue.
    pub queue: QueueId,
    /// Who holds it; `None` once released.
    pub node: Option<String>,
    /// Bumped by every acquisition.
    pub epoch: u64,
    /// Whether it has not run out (by the database's clock).
    pub live: bool,
}

impl PostgresStore {
    /// Registers node `node` (or registers it again after a restart or an
    /// outage), reachable at `advertise` (and its HTTP endpoint at
    /// `http_advertise`), and turns fencing on for it:
    /// from now on owner writes need a lease ([`PostgresStore::acquire`]).
    /// Returns its incarnation, which [`PostgresStore::heartbeat`] checks.
    pub fn register_node(
        &self,
        node: &str,
        advertise: &str,
        http_advertise: Option<&str>,
    ) -> impl Future<Output = Result<u64, StorageError>> + Send + 'static {
        self.fence.set_node(node);
        let (node, advertise) = (node.to_owned(), advertise.to_owned());
        let http_advertise = http_advertise.map(str::to_owned);
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            let row = client
                .query_one(
                    "INSERT INTO nodes (id, advertise, http_advertise, incarnation, heartbeat_at)
                     VALUES ($1, $2, $3, 1, now())
                     ON CONFLICT (id) DO UPDATE SET advertise = EXCLUDED.advertise,
                         http_advertise = EXCLUDED.http_advertise,
                         incarnation = nodes.incarnation + 1, heartbeat_at = now()
                     RETURNING incarnation",
                    &[&node, &advertise, &http_advertise],
                )
                .await
                .map_err(db_error)?;
            Ok(row.get::<_, i64>(0) as u64)
        })
    }

    /// Records that node `node` (incarnation `incarnation`) is alive and
    /// extends every lease it holds to `lease` from now, in one transaction.
    /// Returns the leases it holds: a queue the node believes it serves and
    /// that is missing was taken over. Reads the database's time for the
    /// store's clock ([`PostgresStore::clock`]). Fails with
    /// [`StorageError::NodeReplaced`] once another process registered the
    /// same id.
    pub fn heartbeat(
        &self,
        node: &str,
        incarnation: u64,
        lease: Duration,
    ) -> impl Future<Output = Result<Heartbeat, StorageError>> + Send + 'static {
        let node = node.to_owned();
        let clock = self.clock();
        self.db.run(move |pool| async move {
            let mut client = pool.get().await.map_err(pool_error)?;
            let tx = client.transaction().await.map_err(db_error)?;
            let alive = tx
                .query_opt(
                    &format!(
                        "UPDATE nodes SET heartbeat_at = now() WHERE id = $1 AND incarnation = $2
                         RETURNING {DATABASE_MS}"
                    ),
                    &[&node, &(incarnation as i64)],
                )
                .await
                .map_err(db_error)?;
            let Some(alive) = alive else {
                return Err(StorageError::NodeReplaced { node });
            };
            clock.reread(alive.get(0));
            let rows = tx
                .query(
                    "UPDATE queue_leases SET expires_at = now() + $2::bigint * interval '1 millisecond'
                     WHERE node = $1 RETURNING queue, epoch",
                    &[&node, &millis(lease)],
                )
                .await
                .map_err(db_error)?;
            tx.commit().await.map_err(db_error)?;
            let leases = rows
                .iter()
                .map(|row| (row.get::<_, i64>(0) as QueueId, row.get::<_, i64>(1) as u64))
                .collect();
            Ok(Heartbeat { leases })
        })
    }

    /// Takes the lease of `queue` for `lease` if nobody holds it, it ran
    /// out, or `node` holds it (see the module docs); returns the new epoch,
    /// which fencing then expects of this node's owner writes to the queue,
    /// or `None` if another node holds it. The node then empties the
    /// queue's inbox before it reads the queue
    /// ([`PostgresStore::empty_inbox`]).
    pub fn acquire(
        &self,
        node: &str,
        queue: QueueId,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<u64>, StorageError>> + Send + 'static {
        let node = node.to_owned();
        let fence = std::sync::Arc::clone(&self.fence);
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            let row = client
                .query_opt(
                    "INSERT INTO queue_leases AS l (queue, node, epoch, expires_at)
                     VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond')
                     ON CONFLICT (queue) DO UPDATE SET node = EXCLUDED.node,
                         epoch = l.epoch + 1, expires_at = EXCLUDED.expires_at
                     WHERE l.node IS NULL OR l.node = EXCLUDED.node OR l.expires_at < now()
                     RETURNING epoch",
                    &[&i64::from(queue), &node, &millis(lease)],
                )
                .await
                .map_err(db_error)?;
            let epoch = row.map(|row| row.get::<_, i64>(0) as u64);
            if let Some(epoch) = epoch {
                fence.hold(queue, epoch);
            }
            Ok(epoch)
        })
    }

    /// Stops serving `queue`: owner writes to it are refused from now on
    /// (at once, before the database hears of it), and the lease is given
    /// back if `node` still holds it, so another node may take it at once.
    pub fn release(
        &self,
        node: &str,
        queue: QueueId,
    ) -> impl Future<Output = Result<(), StorageError>> + Send + 'static {
        self.fence.forget(queue);
        let node = node.to_owned();
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            client
                .execute(
                    "UPDATE queue_leases SET node = NULL, expires_at = NULL
                     WHERE queue = $1 AND node = $2",
                    &[&i64::from(queue), &node],
                )
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    /// Stops serving `queue` without asking the database (the lease is
    /// lost, or the database cannot be reached): owner writes to it are
    /// refused from now on.
    pub fn forget_lease(&self, queue: QueueId) {
        self.fence.forget(queue);
    }

    /// The nodes whose last heartbeat is less than `lease` old.
    pub fn live_nodes(
        &self,
        lease: Duration,
    ) -> impl Future<Output = Result<Vec<LiveNode>, StorageError>> + Send + 'static {
        self.db.run(move |pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            let rows = client
                .query(
                    "SELECT id, advertise, incarnation, http_advertise FROM nodes
                     WHERE heartbeat_at > now() - $1::bigint * interval '1 millisecond' ORDER BY id",
                    &[&millis(lease)],
                )
                .await
                .map_err(db_error)?;
            Ok(rows
                .iter()
                .map(|row| LiveNode {
                    id: row.get(0),
                    advertise: row.get(1),
                    incarnation: row.get::<_, i64>(2) as u64,
                    http_advertise: row.get(3),
                })
                .collect())
        })
    }

    /// Every lease row, by queue.
    pub fn leases(&self) -> impl Future<Output = Result<Vec<QueueLease>, StorageError>> + Send + 'static {
        self.db.run(|pool| async move { leases(&pool).await })
    }

    /// The id of queue `name`: the one a node gave it already, or one no
    /// node has handed out, above every queue stored (also those a single
    /// broker created before the cluster). So two nodes that create one
    /// queue at once create it once. Blocks for a round trip, as
    /// [`Store::generate_id`](crate::Store::generate_id) does for a block of
    /// ids: the broker needs the id under its registry lock, and creates
    /// queues rarely. The name is given back when the queue is deleted.
    pub fn allocate_queue_id(&self, name: &str) -> Result<QueueId, StorageError> {
        let name = name.to_owned();
        self.db.block(move |pool| async move {
            let mut client = pool.get().await.map_err(pool_error)?;
            let tx = client.transaction().await.map_err(db_error)?;
            let known = tx
                .query_opt("SELECT id FROM queue_names WHERE name = $1", &[&name])
                .await
                .map_err(db_error)?;
            let id = match known {
                Some(row) => row.get::<_, i64>(0),
                None => {
                    let row = tx
                        .query_one(
                            "WITH next AS (
                                 UPDATE queue_id_allocator SET next_id =
                                     greatest(next_id, (SELECT coalesce(max(id), 0) + 1 FROM queues)) + 1
                                 RETURNING next_id - 1 AS id)
                             INSERT INTO queue_names (name, id) SELECT $1, id FROM next
                             ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
                             RETURNING id",
                            &[&name],
                        )
                        .await
                        .map_err(db_error)?;
                    row.get::<_, i64>(0)
                }
            };
            tx.commit().await.map_err(db_error)?;
            QueueId::try_from(id).map_err(|_| StorageError::QueueIdsExhausted)
        })
    }

    /// Every address and queue record: what other nodes may have created or
    /// deleted since this one read them.
    pub fn metadata(
        &self,
    ) -> impl Future<Output = Result<(Vec<AddressRecord>, Vec<QueueRecord>), StorageError>> + Send + 'static
    {
        self.db.run(|pool| async move {
            let client = pool.get().await.map_err(pool_error)?;
            Ok((address_records(&client).await?, queue_records(&client).await?))
        })
    }

    /// A message every time a group created or deleted addresses or queues
    /// (`writes.rs`), from a connection of its own; stops when the receiver
    /// is dropped. Notifications sent while it reconnects are lost: read
    /// [`PostgresStore::metadata`] now and then anyway.
    pub fn metadata_notices(&self) -> tokio::sync::mpsc::UnboundedReceiver<String> {
        self.db.listen(METADATA_CHANNEL)
    }
}

/// The channel of the notifications of [`PostgresStore::metadata_notices`].
pub(super) const METADATA_CHANNEL: &str = "rebound_metadata";

async fn leases(pool: &Pool) -> Result<Vec<QueueLease>, StorageError> {
    let client = pool.get().await.map_err(pool_error)?;
    let rows = client
        .query(
            "SELECT queue, node, epoch, coalesce(expires_at > now(), false)
             FROM queue_leases ORDER BY queue",
            &[],
        )
        .await
        .map_err(db_error)?;
    Ok(rows
        .iter()
        .map(|row| QueueLease {
            queue: row.get::<_, i64>(0) as QueueId,
            node: row.get(1),
            epoch: row.get::<_, i64>(2) as u64,
            live: row.get(3),
        })
        .collect())
}

/// A lease as the `bigint` of milliseconds the statements take.
fn millis(lease: Duration) -> i64 {
    i64::try_from(lease.as_millis()).unwrap_or(i64::MAX)
}
