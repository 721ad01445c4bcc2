//! The gRPC edge: the `Messaging` and `Admin` services of `rebound.v1`.
//!
//! These files translate between the wire types and the engine and nothing more;
//! errors become `tonic::Status` through the single `From<BrokerError>` mapping.
pub mod admin;
pub mod messaging;
