//! Black-box tests: they run the real `rebound` binary (a broker on a random
//! port in a temporary directory, and the CLI against it) and talk to it only
//! as users do, over gRPC and the command line.
//!
//! One test binary with a module per area (ripgrep's layout): one link step,
//! one shared harness in `support`.

#[macro_use]
mod support;

mod address_full;
mod auth;
mod bad_input;
mod cli;
mod client;
mod cluster;
mod cluster_clock;
mod cluster_moves;
mod cluster_tls;
mod config_truth;
mod console;
mod console_browser;
mod console_security;
mod crash;
mod dead_letters;
mod deployment;
mod disk_full;
mod duplicates;
mod flood;
mod groups;
mod hostile;
mod limits;
mod listener;
mod logs;
mod messaging;
mod metrics;
mod module_tables;
mod operations;
mod operator;
mod outage;
mod paging;
mod permissions;
mod postgres;
mod publish;
mod redelivery;
mod scheduled;
mod tls;
mod tooling;
mod transactions;
