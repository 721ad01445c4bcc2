//! The gRPC side of a cluster: what a node does for a call about a queue
//! another node serves, and what the nodes call on each other.
//!
//! | file | what |
//! |---|---|
//! | `proxy.rs` | forwarding a Consume stream, a queue's Admin calls and a non-durable send to the queue's node |
//! | `follow.rs` | a Consume stream that follows its queue to the next node instead of ending |
//! | `heartbeat.rs` | the beats of a forwarded Consume stream, and how a stalled forwarding node is told |
//! | `nodes.rs` | how this node connects to the other nodes (TLS, keepalive) |
//! | `service.rs` | `rebound.v1.Cluster`, served to the other nodes |
pub(super) mod follow;
pub(super) mod heartbeat;
mod nodes;
pub(super) mod proxy;
mod service;

pub use nodes::Nodes;
pub use service::ClusterService;
pub(super) use service::user_of;
