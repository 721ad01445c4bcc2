//! Prometheus metrics: what the broker counts, and the registry `GET /metrics`
//! encodes (with the `prometheus-client` crate, in the OpenMetrics text format).
//!
//! Two kinds, so that 10,000 queues cost nothing between scrapes: instruments
//! updated as things happen, only where a per-queue figure cannot say it, and
//! collectors that read at scrape time what the broker keeps anyway.
//!
//! | file | what |
//! |---|---|
//! | `instruments.rs` | the instruments: [`instruments::Metrics`], owned by the broker (connections, commit and delivery latencies, config reloads) |
//! | `queues.rs` | collector: every queue's gauges and counters, from the queue's own counters (updated under its lock where the events happen); summed, the consume streams |
//! | `addresses.rs` | collector: every address's size, blocked sends and drops, from its running totals; which addresses take dead letters |
//! | `broker.rs` | collector: the store's statistics, open transactions, uptime, the bytes held against `global-max-size` |
//! | `process.rs` | collector: the process's own figures (`process_*`), from `/proc/self` |
//!
//! Every name starts with `rebound_`, except the `process_*` family, which keeps
//! the names every Prometheus client library and dashboard uses.
mod addresses;
mod broker;
pub mod instruments;
mod process;
mod queues;

use std::sync::Arc;

use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};

use crate::engine::Broker;
pub(crate) use process::{cpu_micros, status_bytes};
pub use queues::Shown;

/// The registry `/metrics` encodes: the instruments and the collectors
/// that read `broker` at scrape time, showing the queues of the addresses
/// `shown` keeps. Cheap to build: one per scrape, for its caller.
pub fn registry(broker: &Arc<Broker>, shown: Shown) -> Registry {
    let mut registry = Registry::default();
    let rebound = registry.sub_registry_with_prefix("rebound");
    let m = broker.metrics();
    rebound.register(
        "build",
        "The broker's version",
        Info::new([("version", env!("CARGO_PKG_VERSION"))]),
    );
    rebound.register(
        "connections",
        "Client connections open (plaintext and TLS)",
        m.connections.clone(),
    );
    rebound.register(
        "connections_accepted",
        "Client connections accepted",
        m.connections_accepted.clone(),
    );
    rebound.register(
        "connections_refused",
        "Client connections closed at accept because every one the bounds allow was busy or logged in",
        m.connections_refused.clone(),
    );
    rebound.register(
        "http_connections",
        "Connections to the HTTP endpoint open",
        m.http_connections.clone(),
    );
    rebound.register(
        "connections_closed",
        "Connections the broker closed: refused at accept, evicted for a newcomer, silent past the handshake timeout, or idle",
        m.connections_closed.clone(),
    );
    rebound.register(
        "store_commit_failures",
        "Store commits that failed (the broker is not ready while the last one did)",
        broker.commit_failures().clone(),
    );
    rebound.register_with_unit(
        "store_commit_latency",
        "Time from handing a commit to the store until it is durable",
        Unit::Seconds,
        m.commit_latency.clone(),
    );
    rebound.register_with_unit(
        "delivery_latency",
        "Time from a message's send to its first delivery to a consumer",
        Unit::Seconds,
        m.delivery_latency.clone(),
    );
    rebound.register(
        "config_reloads",
        "Config reloads, applied (ok) or rejected (failed)",
        m.reloads.clone(),
    );
    rebound.register_collector(Box::new(addresses::Addresses(broker.clone(), shown.clone())));
    rebound.register_collector(Box::new(queues::Queues(broker.clone(), shown)));
    rebound.register_collector(Box::new(broker::BrokerWide(broker.clone())));
    registry.register_collector(Box::new(process::Process));
    registry
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use rebound_config::Config;
    use rebound_storage::MemoryStore;

    use super::*;

    /// The cost of a scrape with 10,000 queues (figures in BENCHMARKS.md):
    /// `cargo test --release -p rebound-broker scrape_cost -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "a measurement; run it in release"]
    async fn scrape_cost_with_10000_queues() {
        let broker = Broker::open(&Config::parse("", "test").unwrap(), Arc::new(MemoryStore::new()))
            .await
            .unwrap();
        for i in 0..10_000 {
            let name = format!("orders.region-{}.queue-{i}", i % 50);
            broker
                .create_queue(&name, &name, None, true, None, false)
                .await
                .unwrap();
        }
        let registry = registry(&broker, Arc::new(|_| true));
        let mut times = Vec::new();
        let mut bytes = 0;
        for _ in 0..21 {
            let started = Instant::now();
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            times.push(started.elapsed());
            bytes = text.len();
        }
        times.sort();
        println!(
            "scrape of 10000 queues: median {:.1} ms (min {:.1}, max {:.1}), {bytes} bytes",
            times[10].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[20].as_secs_f64() * 1e3
        );
    }
}
