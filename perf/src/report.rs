//! The result of a `rebound perf` run: one [`Report`], printed for people or as
//! the one-line JSON object whose schema BENCHMARKS.md documents. Field order
//! is the schema's order; add fields, never rename them, so scripts (and the
//! peer-broker comparison, which emits the same schema) keep working.

use std::io::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Everything a run measured.
#[derive(Debug, Serialize)]
pub struct Report {
    /// Always `"rebound"`; a peer broker's script puts its own name here.
    pub system: &'static str,
    pub workload: &'static str,
    pub queue: String,
    pub messages: u64,
    /// Body bytes per message.
    pub size: usize,
    pub producers: u32,
    pub consumers: u32,
    /// Unacknowledged sends per producer, and messages per `Send` call.
    pub in_flight: usize,
    pub batch: usize,
    /// How producers sent: `publish` (a Publish stream, one message per call,
    /// batched by the client) or `send` (a unary call per batch).
    pub api: &'static str,
    /// From the first send to the end of the run (every good message acked
    /// and, for `poison`, every poison message dead-lettered).
    pub duration_s: f64,
    /// Messages / (first send → last send acknowledged).
    pub send_rate: f64,
    /// Good messages acked / (first send → last ack).
    pub e2e_rate: f64,
    /// End to end, send call → received by a consumer, good messages only.
    pub latency_ms: Latency,
    /// Send call → its acknowledgement (the message is on disk).
    pub send_latency_ms: Latency,
    /// Broker `GetServerInfo` deltas over the run.
    pub store_commits: u64,
    pub store_syncs: u64,
    pub syncs_per_message: f64,
    /// Broker resident set size at the end, and its peak (VmHWM) so far.
    pub rss_bytes: u64,
    pub peak_rss_bytes: u64,
    /// CPU time (user + system) this perf process used: if it nears
    /// `duration_s × cores`, the tool is the bottleneck.
    pub client_cpu_s: f64,
    /// CPU time the broker process used during the run (`GetServerInfo` delta),
    /// and that per message sent, in µs.
    pub broker_cpu_s: f64,
    pub broker_cpu_us_per_message: f64,
    #[serde(flatten)]
    pub extra: Extra,
}

/// Percentiles in milliseconds.
#[derive(Debug, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    /// From a histogram in microseconds.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let ms = |micros: u64| micros as f64 / 1000.0;
        Latency {
            p50: ms(h.value_at_quantile(0.5)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// Workload-specific fields, flattened into the report.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Extra {
    None {},
    Poison {
        poison_messages: u64,
        /// First send → last good message acked.
        good_done_s: f64,
        /// First send → the last poison message moved to the dead-letter address.
        poison_dlq_s: f64,
    },
    Outage {
        /// Deliveries nacked while the consumers' dependency was down.
        outage_deliveries: u64,
        /// Messages the outage dead-lettered.
        dead_lettered: u64,
        /// First send → last message acked.
        good_done_s: f64,
    },
    Backlog {
        /// Messages / (first delivery requested → last ack), with the queue full.
        drain_rate: f64,
        /// Broker RSS after filling minus before, and that per queued message.
        rss_growth_bytes: i64,
        bytes_per_message: f64,
    },
}

impl Report {
    /// Prints the report: a JSON line, or a few aligned lines for people.
    pub fn print(&self, json: bool) -> std::io::Result<()> {
        if json {
            let line = serde_json::to_string(self).map_err(std::io::Error::other)?;
            return writeln!(std::io::stdout(), "{line}");
        }
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let latency = |l: &Latency| {
            format!(
                "p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms",
                l.p50, l.p99, l.p999, l.max
            )
        };
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "workload {}: {} × {} B, {} producer(s) (in flight {}, batch {}, api {}), {} consumer(s), queue {}",
            self.workload,
            self.messages,
            self.size,
            self.producers,
            self.in_flight,
            self.batch,
            self.api,
            self.consumers,
            self.queue
        )?;
        writeln!(out, "send rate      {:.0} msg/s", self.send_rate)?;
        writeln!(out, "e2e rate       {:.0} msg/s", self.e2e_rate)?;
        writeln!(out, "e2e latency    {}", latency(&self.latency_ms))?;
        writeln!(out, "send latency   {}", latency(&self.send_latency_ms))?;
        writeln!(
            out,
            "store          {} syncs ({:.4} per message), {} commits",
            self.store_syncs, self.syncs_per_message, self.store_commits
        )?;
        writeln!(
            out,
            "broker memory  rss {:.1} MiB, peak {:.1} MiB",
            mib(self.rss_bytes),
            mib(self.peak_rss_bytes)
        )?;
        match &self.extra {
            Extra::None {} => {}
            Extra::Poison {
                poison_messages,
                good_done_s,
                poison_dlq_s,
            } => writeln!(
                out,
                "poison         {poison_messages} poison; good done after {good_done_s:.2} s, \
                 all poison dead-lettered after {poison_dlq_s:.2} s"
            )?,
            Extra::Outage {
                outage_deliveries,
                dead_lettered,
                good_done_s,
            } => writeln!(
                out,
                "outage         {outage_deliveries} deliveries during the outage, {dead_lettered} \
                 dead-lettered; all done after {good_done_s:.2} s"
            )?,
            Extra::Backlog {
                drain_rate,
                rss_growth_bytes,
                bytes_per_message,
            } => writeln!(
                out,
                "backlog        drain {drain_rate:.0} msg/s; rss grew {rss_growth_bytes} B filling, \
                 {bytes_per_message:.0} B per queued message"
            )?,
        }
        writeln!(
            out,
            "duration       {:.2} s (perf itself used {:.2} s of CPU)",
            self.duration_s, self.client_cpu_s
        )?;
        writeln!(
            out,
            "broker CPU     {:.2} s, {:.1} µs per message",
            self.broker_cpu_s, self.broker_cpu_us_per_message
        )
    }
}

/// CPU time (user + system) of this process so far, in seconds
/// (`getrusage`); 0 where it cannot be read.
pub fn process_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_process_cpu_time_grows_with_work() {
        let before = super::process_cpu_s();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < std::time::Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spent = super::process_cpu_s() - before;
        assert!(spent > 0.01 && spent < 5.0, "{spent} s ({x})");
    }
}
