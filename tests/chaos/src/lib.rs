//! The ledger of a fault-injection run and its checker (RELIABILITY.md).
//! The binary (`rebound-chaos`) builds the topology, runs the workload and
//! the faults, and hands the ledger to [`checker::check`].

pub mod checker;
pub mod ledger;
