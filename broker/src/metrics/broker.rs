//! Broker-wide figures read at scrape time from what the broker keeps anyway:
//! the store's statistics, open transactions, uptime, the bytes all addresses
//! hold against `global-max-size`.
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::engine::Broker;

/// The collector of the broker-wide figures.
pub(super) struct BrokerWide(pub(super) Arc<Broker>);

impl std::fmt::Debug for BrokerWide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrokerWide")
    }
}

impl Collector for BrokerWide {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let broker = &self.0;
        let stats = broker.store().stats();
        let counters = [
            ("store_commits", "Store commits made durable.", stats.commits),
            (
                "store_ops",
                "Operations (messages written or removed, ...) in those commits.",
                stats.ops,
            ),
            (
                "store_fsyncs",
                "Journal fsyncs: one per group of commits.",
                stats.syncs,
            ),
        ];
        for (name, help, value) in counters {
            let counter = ConstCounter::new(value);
            counter.encode(encoder.encode_descriptor(name, help, None, counter.metric_type())?)?;
        }
        let per_fsync = if stats.syncs == 0 {
            0.0
        } else {
            stats.ops as f64 / stats.syncs as f64
        };
        let (held, blocked, global_max_size) = broker.management().broker_size();
        let gauges = [
            (
                "global_size_bytes",
                "Bytes of the messages all addresses hold (what global-max-size is measured against).",
                held as f64,
            ),
            (
                "global_max_size_bytes",
                "global-max-size in force; -1 = unlimited.",
                global_max_size.map_or(-1.0, |bytes| bytes as f64),
            ),
            (
                "blocked_sends",
                "Sends waiting for room, over all addresses (address-full-policy BLOCK).",
                blocked as f64,
            ),
            (
                "store_disk_bytes",
                "Bytes the store uses on disk.",
                stats.disk_bytes as f64,
            ),
            (
                "store_ops_per_fsync",
                "Operations per journal fsync since start (group commit at work); rate(store_ops_total) / rate(store_fsyncs_total) for a recent figure",
                per_fsync,
            ),
            (
                "transactions_open",
                "Local transactions open.",
                broker.open_transactions() as f64,
            ),
            (
                "uptime_seconds",
                "Seconds since the broker started.",
                broker.uptime().as_secs_f64(),
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}
