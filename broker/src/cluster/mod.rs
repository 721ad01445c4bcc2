//! Several brokers on one PostgreSQL database: each durable queue is served
//! by one node at a time, the holder of its lease.
//!
//! | file | what |
//! |---|---|
//! | `node.rs` | the node's task: heartbeat, lease renewal, balancing, stepping down |
//! | `balance.rs` | which queues a node takes and gives back (pure) |
//! | `deadline.rs` | until when the node may serve without a renewal, by its own clock |
//!
//! The database side (tables, leases, fencing of owner writes by lease
//! epoch) is `rebound_storage::postgres`; the engine side (queues unloaded
//! while another node serves them, loaded back from the store) is
//! `engine/serving.rs`.
//!
//! What works: membership with heartbeats on the database's clock, leases
//! taken, renewed, balanced and given back, failover when a node stops
//! (its queues are loaded by others once its leases run out, with the
//! delivery states stored), a node that cannot renew stops serving before
//! its leases can run out, fencing of acks and delivery states written under
//! a lost lease, and queue ids unique across nodes.
//!
//! Not yet (issue 17, later steps): a message sent through a node that does
//! not serve its queue is stored, but the serving node learns of it only when
//! it next loads the queue (the inbox and its NOTIFY are to come); consumers,
//! settles, browsing and management of a queue another node serves are not
//! forwarded to it (the client is told UNAVAILABLE, "served by another node",
//! and must connect to the node that serves it); addresses and queues created
//! on one node reach the others only when they restart.
mod balance;
mod deadline;
mod node;

pub use node::{Identity, Node};
