//! Per-queue metrics, read at scrape time from each queue's own state: its
//! gauges (messages, delivering, scheduled, consumers, bytes, outage) and the counters
//! the queue keeps under its lock where the events happen (added, acked,
//! redelivered, dead-lettered, expired, dropped). Between scrapes a queue costs
//! nothing here; a scrape takes each queue's lock once. The consume streams
//! of the whole broker are the sum of the queues' consumers.
//!
//! A scrape shows the queues of the addresses its caller may browse (the filter
//! the registry is built with); the consume streams count every queue, as the
//! other broker-wide figures do.
//!
//! Several nodes on one database: a node shows only the queues it serves, so
//! that each queue is shown by exactly one node and a scrape of every node is
//! the cluster's view (summing over the nodes counts nothing twice; the
//! scrape's own `instance` label says which node). A queue that moves to
//! another node starts its counters again there, as after a restart.
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::engine::Broker;
use crate::outage::Status;
use crate::queue::Snapshot;

/// Whether the queues of an address are shown.
pub type Shown = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The collector of the metrics of every queue whose address is shown.
pub(super) struct Queues(pub(super) Arc<Broker>, pub(super) Shown);

impl std::fmt::Debug for Queues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queues")
    }
}

type Labels<'a> = [(&'static str, &'a str); 3];

/// A per-queue metric: its name, its help, and its value from a snapshot.
type Figure = (&'static str, &'static str, fn(&Snapshot) -> u64);

/// The per-queue gauges.
const GAUGES: [Figure; 10] = [
    (
        "queue_messages",
        "Messages in the queue (ready, delivering and scheduled).",
        |s| s.messages,
    ),
    (
        "queue_delivering",
        "Messages delivered and not yet settled.",
        |s| s.delivering,
    ),
    (
        "queue_scheduled",
        "Messages waiting for a delayed (re)delivery.",
        |s| s.scheduled,
    ),
    ("queue_consumers", "Consumers attached.", |s| {
        u64::from(s.consumers)
    }),
    (
        "queue_bytes",
        "Bytes (bodies and properties) of the queue's messages.",
        |s| s.bytes,
    ),
    (
        "queue_paged_messages",
        "Messages kept on disk only (paging), included in queue_messages.",
        |s| s.paged,
    ),
    (
        "queue_paged_bytes",
        "Bytes of the paged messages, included in queue_bytes.",
        |s| s.paged_bytes,
    ),
    (
        "queue_groups",
        "Message groups the queue keeps: those with a message in memory.",
        |s| s.groups,
    ),
    (
        "queue_group_bytes",
        "Memory the kept message groups take beyond their messages (ids, entries, owners).",
        |s| s.group_bytes,
    ),
    (
        "queue_outage",
        "1 while the queue is in outage mode (delivery paused, probing), else 0.",
        |s| u64::from(s.outage != Status::Normal),
    ),
];

/// The per-queue counters (named without `_total`, which the encoding adds).
const COUNTERS: [Figure; 8] = [
    (
        "queue_added",
        "Messages added (sent, moved or dead-lettered here).",
        |s| s.counters.added,
    ),
    ("queue_acked", "Messages acknowledged.", |s| s.counters.acked),
    (
        "queue_redelivered",
        "Deliveries after the first (after a nack, a release or a consumer that went away)",
        |s| s.counters.redelivered,
    ),
    (
        "queue_dead_lettered",
        "Messages moved to the dead-letter address.",
        |s| s.counters.dead_lettered,
    ),
    ("queue_expired", "Messages that expired.", |s| s.counters.expired),
    (
        "queue_dropped",
        "Messages dropped (no dead-letter or expiry address, a redelivery-schedule delete step).",
        |s| s.counters.dropped,
    ),
    (
        "queue_removed",
        "Messages an operator removed (remove, purge).",
        |s| s.counters.removed,
    ),
    (
        "queue_moved_out",
        "Messages moved to another address (an operator's move or retry, a redelivery-schedule move step).",
        |s| s.counters.moved_out,
    ),
];

impl Collector for Queues {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut queues = self.0.queues();
        // Another node's queue (away from this one) is that node's to show.
        queues.retain(|q| q.is_served());
        let snapshots: Vec<(Labels<'_>, Snapshot)> = queues
            .iter()
            .map(|q| {
                let labels = [
                    ("address", q.address.as_str()),
                    ("queue", q.name.as_str()),
                    ("routing_type", q.routing_type.as_str()),
                ];
                (labels, q.snapshot())
            })
            .collect();
        let shown: Vec<&(Labels<'_>, Snapshot)> = snapshots
            .iter()
            .filter(|(labels, _)| (self.1)(labels[0].1))
            .collect();
        for (name, help, value) in GAUGES {
            let metric_type = ConstGauge::new(0u64).metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for (labels, snapshot) in &shown {
                ConstGauge::new(value(snapshot)).encode(family.encode_family(labels)?)?;
            }
        }
        for (name, help, value) in COUNTERS {
            let metric_type = ConstCounter::new(0u64).metric_type();
            let mut family = encoder.encode_descriptor(name, help, None, metric_type)?;
            for (labels, snapshot) in &shown {
                ConstCounter::new(value(snapshot)).encode(family.encode_family(labels)?)?;
            }
        }
        let streams: u64 = snapshots.iter().map(|(_, s)| u64::from(s.consumers)).sum();
        let gauge = ConstGauge::new(streams);
        let help = "Consume streams open (consumers over all queues).";
        gauge.encode(encoder.encode_descriptor("consume_streams", help, None, gauge.metric_type())?)?;
        Ok(())
    }
}
