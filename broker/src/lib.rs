//! The rebound broker: the engine, its gRPC services, and the `rebound` binary.
//!
//! # Layout
//! - [`broker`]: the engine — addresses, queues, sending, settling, dead-lettering.
//! - [`postoffice`]: the registry of addresses and queues, and routing.
//! - [`queue`]: a queue's in-memory state (ready, delivering, scheduled; consumers
//!   and their credit).
//! - [`scheduled`]: the scheduled-delivery handler (delayed redeliveries, expiry).
//! - [`dispatch`]: the per-queue task that hands messages to consumers.
//! - [`redelivery`]: the redelivery policy (delay formula, attempts, schedules).
//! - [`dead_letter`]: what a dead letter carries (`_AMQ_ORIG_*`, reason, failures).
//! - [`transaction`]: local transactions (sends and acks committed together).
//! - [`message`]: validation and wire ⇄ storage conversion.
//! - [`grpc`]: the `rebound.v1` services; [`error`]: errors and their gRPC codes.
//! - [`daemon`]: `rebound serve`; [`reload`]: live config reload.
//!
//! The storage format lives in `rebound-storage`, the settings model and matching in
//! `rebound-config`, the gRPC contract in `rebound-protocol`.
pub mod broker;
pub mod daemon;
pub mod dead_letter;
pub mod dispatch;
pub mod error;
pub mod grpc;
pub mod message;
pub mod postoffice;
pub mod queue;
pub mod redelivery;
pub mod reload;
pub mod scheduled;
pub mod time;
pub mod transaction;
