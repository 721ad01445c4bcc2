//! The ledger of a fault-injection run and its checker (RELIABILITY.md).
//! The binary (`rebound-chaos`) builds the topology, runs the workload and
//! the faults, and hands the ledger to [`checker::check`].
//!
//! | file | what |
//! |---|---|
//! | `ledger.rs` | every send attempt, delivery, settle and fault of a run, in order |
//! | `checker.rs` | what a drained run's ledger must show |
//! | `main.rs` | the binary; its own modules are listed there |

pub mod checker;
pub mod ledger;
