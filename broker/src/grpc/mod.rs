//! The gRPC edge: the `Messaging` and `Admin` services of `rebound.v1`, and
//! `Cluster`, which the nodes of a cluster call on each other.
//!
//! These files translate between the wire and the engine and nothing more: wire
//! types are converted in `convert.rs`, and errors become `tonic::Status` through
//! the single `From<BrokerError>` mapping in `status.rs`.
//!
//! | file | what |
//! |---|---|
//! | `messaging.rs` | `rebound.v1.Messaging`: sends, Consume streams, settles, transactions |
//! | `publish.rs` | the Publish stream: many sends in flight on one stream |
//! | `gate.rs` | who may send: the permission check of every send, whichever way it comes |
//! | `admin.rs` | `rebound.v1.Admin`: addresses, queues, management, server info |
//! | `convert.rs` | wire types to engine types and back |
//! | `status.rs` | engine errors to `tonic::Status`, in one place |
//! | `cluster/` | calls about queues another node serves, and the `Cluster` service |
pub mod admin;
pub mod cluster;
mod convert;
mod gate;
pub mod messaging;
mod publish;
mod status;

pub use cluster::Nodes;

/// Largest gRPC message accepted; above the largest max-message-size, so that the
/// broker's own check (which names the limit and the address) is what users see.
/// Also what a node's calls to another node take and send (`cluster/nodes.rs`).
pub(crate) const MAX_GRPC_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
