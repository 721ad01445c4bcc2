//! [`Cluster`], the engine as one node of several on one database: which
//! queues it serves under the cluster's leases, and what it keeps for the
//! other nodes. `crate::cluster` runs the node's tasks (leases, balancing,
//! the inbox) and calls this; the gRPC and HTTP edges ask it where a queue is
//! served before they forward a call.
//!
//! | file | what |
//! |---|---|
//! | `serving.rs` | loading and unloading queues, who serves what, waiting for an owner |
//! | `held.rs` | acks held for a transaction of another node |
//! | `catalog.rs` | the registry kept in step with what other nodes create and delete |
//! | `sizes.rs` | address sizes across the nodes, for address limits |
mod catalog;
mod held;
mod serving;
mod sizes;

use std::sync::Arc;

use super::Broker;

pub use catalog::Stored;
pub use held::HeldFor;
pub(in crate::engine) use held::{Holds, held_removal_ops};
pub(in crate::engine) use serving::{InboxJoined, Leased};
pub use serving::{Owner, QueueIds};

/// The engine's cluster side ([`Broker::cluster`]); on a single broker it
/// serves every queue and holds nothing.
#[derive(Clone, Copy)]
pub struct Cluster<'a> {
    broker: &'a Arc<Broker>,
}

impl<'a> Cluster<'a> {
    pub(in crate::engine) fn new(broker: &'a Arc<Broker>) -> Self {
        Cluster { broker }
    }
}
