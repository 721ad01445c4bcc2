//! The broker-wide instruments updated as things happen, where a per-queue
//! figure cannot say it (connections, commit and delivery latencies, config
//! reloads). The engine owns them; they know nothing of it, so the engine
//! imports this file and only the collectors (`mod.rs`) import the engine.
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// `result="ok"` or `result="failed"`.
pub(super) type ResultLabel = [(&'static str, &'static str); 1];
/// `listener="grpc"|"http"` and `reason="refused"|"evicted"|"handshake"|"idle"`.
pub(super) type ClosedLabels = [(&'static str, &'static str); 2];

/// The broker-wide instruments updated as things happen. Cheap to update: an
/// atomic, or a short lock for a histogram.
#[derive(Debug)]
pub struct Metrics {
    /// Client connections open now (gRPC, plaintext and TLS alike).
    pub connections: Gauge,
    /// Client connections accepted since start.
    pub connections_accepted: Counter,
    /// Client connections closed at accept: every one the bound allows was busy
    /// or logged in.
    pub connections_refused: Counter,
    /// Connections to the HTTP endpoint open now.
    pub http_connections: Gauge,
    pub(super) connections_closed: Family<ClosedLabels, Counter>,
    /// Seconds from handing a commit to the store to its being durable.
    pub commit_latency: Histogram,
    /// Seconds from a message's send to its first delivery.
    pub delivery_latency: Histogram,
    pub(super) reloads: Family<ResultLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let reloads = Family::<ResultLabel, Counter>::default();
        // Both results show from the start, so a rate() over them works at once.
        for result in ["ok", "failed"] {
            let _ = reloads.get_or_create(&[("result", result)]);
        }
        Metrics {
            connections: Gauge::default(),
            connections_accepted: Counter::default(),
            connections_refused: Counter::default(),
            http_connections: Gauge::default(),
            connections_closed: Family::default(),
            // 50 µs to 3.3 s.
            commit_latency: Histogram::new(exponential_buckets(0.00005, 2.0, 17)),
            // 1 ms to 18 h: a message may wait long in a backlog.
            delivery_latency: Histogram::new(exponential_buckets(0.001, 4.0, 13)),
            reloads,
        }
    }
}

impl Metrics {
    /// Counts `count` connections of `listener` that the broker closed, and why.
    pub fn connections_closed(&self, listener: &'static str, reason: &'static str, count: usize) {
        if count > 0 {
            let labels = [("listener", listener), ("reason", reason)];
            self.connections_closed
                .get_or_create(&labels)
                .inc_by(count as u64);
        }
    }

    /// Counts a config reload, applied or rejected.
    pub fn reloaded(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.reloads.get_or_create(&[("result", result)]).inc();
    }
}
