//! What both peers share: the workload table, the message body, the counters, the
//! latency histograms, /proc readings and the JSON report.
//!
//! The workload table and the helpers `rebound perf` measures with come from the
//! rebound-perf crate itself (`rebound_perf`, perf/ at the repository root), so both
//! sides run the same loads; keep [`report`] in step with perf/src/report.rs.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};

pub use rebound_perf::{histogram, named, process_cpu_s, Workload};

/// Good messages the consumers must ack.
pub fn good_messages(spec: &Workload) -> u64 {
    spec.messages - spec.poison_count()
}

/// Producer `index`'s contiguous share of the sequence numbers.
pub fn share(spec: &Workload, index: u32) -> std::ops::Range<u64> {
    rebound_perf::share(spec.messages, spec.producers, index)
}

/// The poison retry policy both peers are set up to approximate (rebound's
/// bench/perf.toml: 5 deliveries, 10 ms × 2^n apart, then the dead-letter address).
pub const MAX_DELIVERIES: u32 = 5;
pub const BACKOFF_MS: [u64; 4] = [10, 20, 40, 80];

/// The delay after the `failed`-th failed delivery (1-based).
pub fn backoff_after(failed: u32) -> Duration {
    let i = (failed.max(1) as usize - 1).min(BACKOFF_MS.len() - 1);
    Duration::from_millis(BACKOFF_MS[i])
}

/// What one run's tasks share.
pub struct Run {
    pub spec: Workload,
    pub epoch: Instant,
    pub sent: AtomicU64,
    pub last_sent_ns: AtomicU64,
    pub acked: AtomicU64,
    pub last_ack_ns: AtomicU64,
    /// Deliveries of poison messages, every attempt.
    pub poison_deliveries: AtomicU64,
    /// Good messages delivered more than once.
    pub redelivered_good: AtomicU64,
    /// First receipt of each message: a redelivered good message counts once.
    seen: Vec<std::sync::atomic::AtomicBool>,
    pub latency: Mutex<Histogram<u64>>,
    pub send_latency: Mutex<Histogram<u64>>,
}

impl Run {
    pub fn new(spec: Workload) -> Arc<Run> {
        let n = spec.messages;
        Arc::new(Run {
            spec,
            epoch: Instant::now(),
            sent: AtomicU64::new(0),
            last_sent_ns: AtomicU64::new(0),
            acked: AtomicU64::new(0),
            last_ack_ns: AtomicU64::new(0),
            poison_deliveries: AtomicU64::new(0),
            redelivered_good: AtomicU64::new(0),
            seen: (0..n)
                .map(|_| std::sync::atomic::AtomicBool::new(false))
                .collect(),
            latency: Mutex::new(histogram()),
            send_latency: Mutex::new(histogram()),
        })
    }

    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// The body of message `seq`: send time (ns since epoch, LE), seq (LE), zeros —
    /// byte for byte rebound perf's layout.
    pub fn body(&self, seq: u64) -> (Vec<u8>, u64) {
        let sent_ns = self.now_ns();
        let mut b = vec![0u8; self.spec.size];
        b[0..8].copy_from_slice(&sent_ns.to_le_bytes());
        b[8..16].copy_from_slice(&seq.to_le_bytes());
        (b, sent_ns)
    }

    /// A publish sent at `sent_ns` was confirmed.
    pub fn confirmed(&self, sent_ns: u64) {
        let now = self.now_ns();
        self.send_latency
            .lock()
            .unwrap()
            .saturating_record(now.saturating_sub(sent_ns) / 1000);
        self.last_sent_ns.fetch_max(now, Ordering::Relaxed);
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A good message arrived: record its end-to-end latency. False if it had
    /// arrived before (its ack then does not count again).
    pub fn received(&self, seq: u64, sent_ns: u64, redelivered: bool) -> bool {
        if redelivered {
            self.redelivered_good.fetch_add(1, Ordering::Relaxed);
        }
        let first = self
            .seen
            .get(seq as usize)
            .is_some_and(|b| !b.swap(true, Ordering::AcqRel));
        if first {
            let now = self.now_ns();
            self.latency
                .lock()
                .unwrap()
                .saturating_record(now.saturating_sub(sent_ns) / 1000);
        }
        first
    }

    /// A good message's ack went out.
    pub fn acked_one(&self) {
        self.last_ack_ns.fetch_max(self.now_ns(), Ordering::Relaxed);
        self.acked.fetch_add(1, Ordering::Relaxed);
    }

    /// Polls until every good message is acked.
    pub async fn wait_acked(&self, deadline: Instant) -> anyhow::Result<()> {
        let good = good_messages(&self.spec);
        while self.acked.load(Ordering::Relaxed) < good {
            if Instant::now() > deadline {
                anyhow::bail!(
                    "timed out: {} of {} good messages acked",
                    self.acked.load(Ordering::Relaxed),
                    good
                );
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }
}

/// How often completion is checked (as rebound perf's POLL).
pub const POLL: Duration = Duration::from_millis(5);

pub fn body_fields(body: &[u8]) -> Option<(u64, u64)> {
    let sent = u64::from_le_bytes(body.get(0..8)?.try_into().ok()?);
    let seq = u64::from_le_bytes(body.get(8..16)?.try_into().ok()?);
    Some((sent, seq))
}

/// VmRSS and VmHWM of a process, in bytes.
pub fn rss(pid: Option<u32>) -> (u64, u64) {
    let Some(pid) = pid else { return (0, 0) };
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return (0, 0);
    };
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn latency(h: &Histogram<u64>) -> Value {
    let ms = |us: u64| us as f64 / 1000.0;
    json!({
        "p50": ms(h.value_at_quantile(0.5)),
        "p99": ms(h.value_at_quantile(0.99)),
        "p999": ms(h.value_at_quantile(0.999)),
        "max": ms(h.max()),
    })
}

/// What a driver measured besides the shared counters.
pub struct Outcome {
    pub queue: String,
    pub end_s: f64,
    /// Backlog: (RSS before filling, RSS filled, drain start s).
    pub backlog: Option<(u64, u64, f64)>,
    pub poison_dlq_s: Option<f64>,
    pub rss_end: (u64, u64),
    pub extra: Map<String, Value>,
}

/// The report, in rebound perf's schema (field order included) plus peer fields.
pub fn report(system: &str, run: &Run, o: Outcome) -> Value {
    let spec = &run.spec;
    let s = |ns: u64| ns as f64 / 1e9;
    let good = good_messages(spec);
    let send_done_s = s(run.last_sent_ns.load(Ordering::Relaxed));
    let good_done_s = s(run.last_ack_ns.load(Ordering::Relaxed));
    let mut v = Map::new();
    let mut put = |k: &str, x: Value| {
        v.insert(k.to_string(), x);
    };
    put("system", json!(system));
    put("workload", json!(spec.name));
    put("queue", json!(o.queue));
    put("messages", json!(spec.messages));
    put("size", json!(spec.size));
    put("producers", json!(spec.producers));
    put("consumers", json!(spec.consumers));
    put("in_flight", json!(spec.in_flight));
    put("batch", json!(1));
    put("duration_s", json!(o.end_s));
    put("send_rate", json!(spec.messages as f64 / send_done_s));
    put("e2e_rate", json!(good as f64 / good_done_s));
    put("latency_ms", latency(&run.latency.lock().unwrap()));
    put("send_latency_ms", latency(&run.send_latency.lock().unwrap()));
    put("store_commits", Value::Null);
    put("store_syncs", Value::Null);
    put("syncs_per_message", Value::Null);
    put("rss_bytes", json!(o.rss_end.0));
    put("peak_rss_bytes", json!(o.rss_end.1));
    put("client_cpu_s", json!(process_cpu_s()));
    if let Some(dlq_s) = o.poison_dlq_s {
        put("poison_messages", json!(spec.poison_count()));
        put("good_done_s", json!(good_done_s));
        put("poison_dlq_s", json!(dlq_s));
        let pd = run.poison_deliveries.load(Ordering::Relaxed);
        put(
            "deliveries_per_poison",
            json!(pd as f64 / spec.poison_count().max(1) as f64),
        );
    }
    if let Some((before, filled, drain_from_s)) = o.backlog {
        let growth = filled as i64 - before as i64;
        put("drain_rate", json!(good as f64 / (good_done_s - drain_from_s)));
        put("rss_growth_bytes", json!(growth));
        put("bytes_per_message", json!(growth as f64 / spec.messages as f64));
    }
    put(
        "redelivered_good",
        json!(run.redelivered_good.load(Ordering::Relaxed)),
    );
    for (k, x) in o.extra {
        v.insert(k, x);
    }
    Value::Object(v)
}
