//! The tables, created and migrated by the store when it opens.
//!
//! [`MIGRATIONS`] is append-only: entry `i` takes the schema from version `i`
//! to `i + 1`, and `schema_version` records the versions applied. Opening runs
//! every migration the database has not seen, in one transaction under an
//! advisory lock, so that brokers starting together against one database
//! migrate it once. A database migrated by a newer rebound is refused
//! ([`StorageError::SchemaTooNew`]) rather than written with an old layout.
//! Never edit an entry that has shipped; add one.

use deadpool_postgres::Pool;

use super::pool::{db_error, pool_error};
use crate::error::StorageError;

/// Taken for the migration transaction (any constant; "rebound" in ASCII).
const MIGRATION_LOCK: i64 = 0x0072_6562_6f75_6e64;

/// The migrations, in order; the schema's version is how many were applied.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the single-node layout (`docs/storage.md`, "Tables").
    "CREATE TABLE addresses (
         name text PRIMARY KEY,
         record bytea NOT NULL);
     CREATE TABLE queues (
         id bigint PRIMARY KEY,
         record bytea NOT NULL);
     CREATE TABLE messages (
         queue bigint NOT NULL,
         id bigint NOT NULL,
         priority integer NOT NULL,
         expiration_ms bigint NOT NULL,
         size integer NOT NULL,
         grp text,
         record bytea NOT NULL,
         PRIMARY KEY (queue, id));
     CREATE TABLE delivery_states (
         queue bigint NOT NULL,
         id bigint NOT NULL,
         record bytea NOT NULL,
         PRIMARY KEY (queue, id));
     CREATE TABLE duplicate_ids (
         address text NOT NULL,
         seq bigint NOT NULL,
         id bytea NOT NULL,
         PRIMARY KEY (address, seq));
     CREATE TABLE id_allocator (next_id bigint NOT NULL);
     INSERT INTO id_allocator VALUES (1);
     -- Rows of a queue that keeps up are inserted and deleted within
     -- seconds: vacuum them long before the default 20 % of dead rows.
     ALTER TABLE messages SET (autovacuum_vacuum_scale_factor = 0.01,
                               autovacuum_vacuum_insert_scale_factor = 0.01);
     ALTER TABLE delivery_states SET (autovacuum_vacuum_scale_factor = 0.01);",
    // 2: several brokers on one database (`cluster.rs`, `fence.rs`).
    "CREATE TABLE nodes (
         id text PRIMARY KEY,
         advertise text NOT NULL,
         incarnation bigint NOT NULL,
         heartbeat_at timestamptz NOT NULL);
     -- No row, or node NULL: nobody serves the queue. epoch only grows.
     CREATE TABLE queue_leases (
         queue bigint PRIMARY KEY,
         node text,
         epoch bigint NOT NULL,
         expires_at timestamptz);
     CREATE INDEX queue_leases_node ON queue_leases (node);
     -- Messages stored for a queue by a node that does not own it.
     CREATE TABLE inbox (
         queue bigint NOT NULL,
         id bigint NOT NULL,
         PRIMARY KEY (queue, id));
     -- Queue ids of nodes that create queues concurrently (see cluster.rs):
     -- one id per queue name, so that two nodes creating one queue agree.
     CREATE TABLE queue_id_allocator (next_id bigint NOT NULL);
     INSERT INTO queue_id_allocator VALUES (1);
     CREATE TABLE queue_names (
         name text PRIMARY KEY,
         id bigint NOT NULL UNIQUE);
     -- Fails the group transaction that calls it when a lease it writes
     -- under is gone, with its own SQLSTATE (fence.rs).
     CREATE FUNCTION rebound_fence(expected integer, held bigint) RETURNS integer
     LANGUAGE plpgsql AS $$
     BEGIN
         IF held <> expected THEN
             RAISE EXCEPTION 'a queue lease this node wrote under is gone'
                 USING ERRCODE = 'RBF01';
         END IF;
         RETURN 1;
     END $$;",
    // 3: one row per duplicate id and address, whichever node stored it:
    // a node's insert of an id another stored conflicts (duplicate_ids.rs).
    // Nodes' seqs may then coincide; they only order an address's rows.
    "DELETE FROM duplicate_ids a USING duplicate_ids b
         WHERE a.address = b.address AND a.id = b.id AND a.seq < b.seq;
     ALTER TABLE duplicate_ids DROP CONSTRAINT duplicate_ids_pkey;
     ALTER TABLE duplicate_ids ADD PRIMARY KEY (address, id);
     CREATE INDEX duplicate_ids_seq ON duplicate_ids (address, seq);",
    // 4: the bytes each node's queues hold, for the other nodes' address
    // size limits (sizes.rs).
    "CREATE TABLE queue_sizes (
         queue bigint PRIMARY KEY,
         node text NOT NULL,
         bytes bigint NOT NULL);",
    // 5: where each node's HTTP endpoint is reached, for the consoles of
    // the other nodes (NULL: it has none).
    "ALTER TABLE nodes ADD COLUMN http_advertise text;",
    // 6: scheduled messages a queue keeps out of memory, by when they are
    // due, in batches keyed by their earliest (`Op::PutDues`).
    "CREATE TABLE dues (
         queue bigint NOT NULL,
         due_ms bigint NOT NULL,
         id bigint NOT NULL,
         record bytea NOT NULL,
         PRIMARY KEY (queue, due_ms, id));",
    // 7: when a scheduled send made a message due (its record's
    // `scheduled_at_ms`), read by recovery like the other indexed fields.
    "ALTER TABLE messages ADD COLUMN scheduled_at_ms bigint NOT NULL DEFAULT 0;",
];

/// Brings the schema to the newest version, creating it in an empty
/// database (or schema, per `search_path`).
pub(super) async fn migrate(pool: &Pool) -> Result<(), StorageError> {
    let mut client = pool.get().await.map_err(pool_error)?;
    let tx = client.transaction().await.map_err(db_error)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(db_error)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        .await
        .map_err(db_error)?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM schema_version", &[])
        .await
        .map_err(db_error)?;
    let found: i32 = row.get(0);
    let known = MIGRATIONS.len() as i32;
    if found > known {
        return Err(StorageError::SchemaTooNew { found, known });
    }
    for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql).await.map_err(db_error)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&(version as i32 + 1)],
        )
        .await
        .map_err(db_error)?;
    }
    tx.commit().await.map_err(db_error)
}
