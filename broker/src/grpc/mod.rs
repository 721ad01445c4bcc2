//! The gRPC edge: the `Messaging` and `Admin` services of `rebound.v1`, and
//! `Cluster`, which the nodes of a cluster call on each other.
//!
//! These files translate between the wire and the engine and nothing more: wire
//! types are converted in `convert.rs`, and errors become `tonic::Status` through
//! the single `From<BrokerError>` mapping in `status.rs`.
pub mod admin;
pub mod cluster;
mod convert;
mod follow;
mod gate;
pub mod messaging;
mod peers;
mod proxy;
mod publish;
mod status;

pub use peers::Peers;
