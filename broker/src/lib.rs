//! The rebound broker: the engine, its gRPC services and the daemon (`rebound
//! serve`). The `rebound` binary and its client commands are `rebound-cli`.
//!
//! # Layout
//!
//! | file | what |
//! |---|---|
//! | `engine/` | the engine, [`Broker`](engine::Broker): send, consume, settle, dispatch, recovery; management ([`Management`](engine::Management)) and the cluster side ([`Cluster`](engine::Cluster)) as types of their own |
//! | `postoffice.rs` | the registry of addresses and queues, and routing |
//! | `queue/` | a queue's in-memory state: ready, delivering, scheduled, paged; consumers and their credit |
//! | `timeline.rs` | message ids ordered by due time (delayed redeliveries, expiry) |
//! | `redelivery.rs` | the redelivery policy (delay formula, attempts, schedules) |
//! | `dead_letter.rs` | what a dead letter carries (`_AMQ_ORIG_*`, reason, failures) |
//! | `scheduled.rs` | when a producer's message becomes deliverable (`_AMQ_SCHED_DELIVERY`) |
//! | `address_full.rs` | what a send to a full address does (`address-full-policy`) |
//! | `address_size.rs` | the bytes held per address and broker-wide, as running totals |
//! | `memory.rs` | the memory the default `global-max-size` is half of |
//! | `duplicates.rs` | the per-address duplicate-id caches (`_AMQ_DUPL_ID`) |
//! | `outage.rs` | a queue's outage mode (paused by its consumers, then probed) |
//! | `time.rs` | wall-clock time as the broker stores it (milliseconds since the epoch) |
//! | `explain.rs` | the redelivery policy of an address as a readable schedule |
//! | `transactions.rs` | the open transactions and what each has gathered |
//! | `settings.rs` | the address-settings in force, cached per address |
//! | `message.rs` | the checks on new messages; how selectors see a message |
//! | `routing.rs` | routing types in the store |
//! | `error.rs` | the engine's errors |
//! | `grpc/` | the `rebound.v1` services: wire conversion and the one error mapping |
//! | `security/` | who is calling ([`Principal`](security::Principal)), and what they may do |
//! | `http/` | the HTTP endpoint (`http-listen`): health probes, metrics and the web console |
//! | `metrics/` | the Prometheus metrics: instruments and scrape-time collectors |
//! | `cluster/` | the node's tasks when several brokers share one PostgreSQL database: membership, queue leases and their balance, the inbox |
//! | `connections/` | accepting connections, gRPC and HTTP: bounded per listener and per address, timed out, below the open-file limit |
//! | `commit_health.rs` | whether the store takes commits (readiness, liveness) |
//! | `log_every.rs` | a log line that repeats at most once per period |
//! | `daemon/` | `rebound serve`: opening the store, serving, shutting down |
//! | `reload.rs` | live config reload |
//! | `tls.rs` | the TLS listener (`[tls]`), its certificate swapped on reload |
//! | `data_dir.rs` | the data dir, private to the broker's user |
//!
//! `docs/architecture.md` draws these rooms and says where each thing lives.
//!
//! The storage format lives in `rebound-storage`, the settings model and matching in
//! `rebound-config`, the gRPC contract in `rebound-protocol`.
pub mod address_full;
pub mod address_size;
pub mod cluster;
pub mod commit_health;
pub mod connections;
pub mod daemon;
pub mod data_dir;
pub mod dead_letter;
pub mod duplicates;
pub mod engine;
pub mod error;
pub mod explain;
pub mod grpc;
pub mod http;
pub mod log_every;
pub mod memory;
pub mod message;
pub mod metrics;
pub mod outage;
pub mod postoffice;
pub mod queue;
pub mod redelivery;
pub mod reload;
pub mod routing;
pub mod scheduled;
pub mod security;
pub mod settings;
pub mod time;
pub mod timeline;
pub mod tls;
pub mod transactions;
