//! Several brokers on one PostgreSQL database: each durable queue is served
//! by one node at a time, the holder of its lease.
//!
//! | file | what |
//! |---|---|
//! | `node.rs` | the node's task: heartbeat, lease renewal, balancing, stepping down |
//! | `inbox.rs` | the task that brings messages other nodes stored into served queues |
//! | `metadata.rs` | the task that adds and removes what other nodes create and delete |
//! | `sizes.rs` | the task that shares the bytes each node's queues hold, for address limits |
//! | `balance.rs` | which queues a node takes and gives back (pure) |
//! | `deadline.rs` | until when the node may serve without a renewal, by its own clock |
//!
//! The database side (tables, leases, fencing of owner writes by lease
//! epoch) is `rebound_storage::postgres`; the engine side (queues unloaded
//! while another node serves them, loaded back from the store) is
//! `engine/cluster/serving.rs`.
//!
//! What works: membership with heartbeats on the database's clock, leases
//! taken, renewed, balanced and given back, failover when a node stops
//! (its queues are loaded by others once its leases run out, with the
//! delivery states stored), a node that cannot renew stops serving before
//! its leases can run out, fencing of acks and delivery states written under
//! a lost lease, and queue ids unique across nodes.
//!
//! A message sent through a node that does not serve its queue is stored in
//! the same commit as for any queue, with an inbox row for the queue's owner,
//! which takes it into memory within a second (at once when notified). A
//! non-durable message is not stored: a send with one for a queue another
//! node serves is forwarded to that node (`grpc/cluster/proxy.rs`), or refused with
//! UNAVAILABLE when no node serves the queue yet or in a transaction.
//!
//! Addresses and queues created on one node reach the others at once (a
//! NOTIFY) or within five seconds; a queue has one id per name across the
//! nodes, so two nodes creating it at once create it once. Queue and
//! address deletions reach the others the same way (`engine/cluster/catalog.rs`).
//!
//! Duplicate ids are the cluster's: the database has one row per address
//! and id, so a send whose id another node stored is refused by the store
//! and made again as a duplicate (`crate::duplicates`, and
//! `rebound_storage::postgres`'s `duplicate_ids.rs`).
//!
//! Address sizes are the cluster's, about a second late: each node
//! publishes what the queues it serves hold and counts what the others
//! published against `max-size-bytes` and `global-max-size` (`sizes.rs`).
//!
//! A consumer, and the Admin calls about one queue, reaching a node that does
//! not serve the queue are forwarded to the node that does
//! (`grpc/cluster/proxy.rs`), and a forwarded consumer follows its queue to the next
//! node when that one goes away or gives it up (`grpc/cluster/follow.rs`); management of a queue the node does not serve is
//! otherwise refused with UNAVAILABLE rather than answered from storage.
//! A listing of queues asks the serving nodes for their queues' figures and
//! names the node serving each (`served_by`), and so does the web console,
//! which forwards what it does with one queue to the HTTP endpoint of the
//! node serving it (`http/console/forward.rs`); a node's metrics show the
//! queues it serves only (`metrics/queues.rs`), so that scraping every node
//! counts each queue once.
//!
//! Nodes that serve TLS forward over TLS, each verifying the other against
//! the cluster's CA and presenting its own certificate (`grpc/cluster/nodes.rs`). A
//! caller who logged in with a client certificate is forwarded when the
//! nodes share a secret, with which the forwarding node vouches for it
//! (`security/forwarded.rs` draws the trust boundary).
//!
//! A consumer forwarded to another node may ack inside a transaction of
//! the node it talks to: the serving node holds those messages aside, the
//! transaction's commit removes them under a claim on that node's lease,
//! and the serving node then resolves its holds from the database, also
//! for a node that died first (`engine/cluster/held.rs`, `grpc/cluster/proxy.rs`).
mod balance;
mod deadline;
mod inbox;
mod metadata;
mod node;
mod sizes;

use std::sync::Arc;

use rebound_storage::{PostgresStore, StorageError};

pub use node::{Identity, Node, queue_ids};

use crate::engine::Broker;

/// Joins the cluster with a broker opened with [`queue_ids`] (see
/// [`Node::join`]) and starts the node's tasks as the engine's own.
pub async fn start(
    store: Arc<PostgresStore>,
    broker: &Arc<Broker>,
    me: Identity,
) -> Result<(), StorageError> {
    let id = me.id.clone();
    let node = Node::join(store.clone(), broker.clone(), me).await?;
    broker.spawn(node.run());
    broker.spawn(sizes::run(store.clone(), broker.clone(), id));
    broker.spawn(inbox::run(store.clone(), broker.clone()));
    broker.spawn(metadata::run(store, broker.clone()));
    Ok(())
}
