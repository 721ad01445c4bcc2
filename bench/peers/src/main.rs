//! `peers`: the RabbitMQ and NATS JetStream halves of `bench/compare.sh`.
//!
//! It runs the same four workloads as `rebound perf` (durable, fan, poison, backlog)
//! against a peer broker and prints one JSON object in `rebound perf --json`'s schema,
//! with `"system": "rabbitmq"` or `"nats"`. A tool for people: nothing in CI uses it.
//!
//! Measurement, identical for both peers:
//! - every message carries, in its first 16 bytes, its index and the time it was handed
//!   to the client library (nanoseconds since the run's start, one process, one clock);
//! - latency = consumer receipt − that time, for the first receipt of each good message;
//! - `send_rate` = messages / (first publish → last publisher confirm);
//! - `e2e_rate` = deliveries / (first publish → last first-receipt);
//! - each producer keeps at most `--window` publishes unconfirmed (publisher confirms /
//!   JetStream publish acks); each consumer acks every message on its own.
mod common;
mod nats;
mod rabbit;

use clap::{Parser, ValueEnum};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum System {
    Rabbitmq,
    Nats,
}

#[derive(Parser, Debug)]
#[command(about = "RabbitMQ / NATS JetStream side of bench/compare.sh: rebound perf's workloads and JSON schema")]
struct Cli {
    /// Which peer to drive.
    system: System,
    /// durable | fan | poison | backlog (the table of broker/src/perf/workload.rs).
    #[arg(long)]
    workload: String,
    /// Broker URL (amqp://guest:guest@127.0.0.1:5673/%2f, nats://127.0.0.1:4223).
    #[arg(long)]
    url: String,
    /// Overrides of the workload's numbers, as in rebound perf.
    #[arg(long)]
    messages: Option<u64>,
    #[arg(long)]
    size: Option<usize>,
    #[arg(long)]
    producers: Option<u32>,
    #[arg(long)]
    consumers: Option<u32>,
    #[arg(long)]
    in_flight: Option<usize>,
    /// NATS poison retries: `nak-delay` (default) naks with the backoff delay for the
    /// delivery count; `ack-wait` sets the consumer's BackOff and leaves poison unacked.
    #[arg(long, default_value = "nak-delay")]
    nats_retry: String,
    /// RabbitMQ x-delivery-limit. Quorum queues dead-letter a message once it was
    /// *returned* more often than the limit, so 5 deliveries = limit 4 (the default).
    #[arg(long, default_value_t = common::MAX_DELIVERIES - 1)]
    rabbit_delivery_limit: u32,
    /// PID of the broker process, for rss_bytes / peak_rss_bytes from /proc.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Print one JSON line (the only output format; accepted for symmetry).
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let base = common::named(&cli.workload)
        .ok_or_else(|| anyhow::anyhow!("unknown workload {}", cli.workload))?;
    let spec = common::Workload {
        messages: cli.messages.unwrap_or(base.messages),
        size: cli.size.unwrap_or(base.size),
        producers: cli.producers.unwrap_or(base.producers).max(1),
        consumers: cli.consumers.unwrap_or(base.consumers).max(1),
        in_flight: cli.in_flight.unwrap_or(base.in_flight).max(1),
        ..base.clone()
    };
    anyhow::ensure!(spec.size >= 16, "--size must be at least 16");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(cli.timeout_s);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = rt.block_on(async {
        match cli.system {
            System::Rabbitmq => rabbit::run(&cli.url, spec, cli.server_pid, deadline, cli.rabbit_delivery_limit).await,
            System::Nats => nats::run(&cli.url, spec, cli.server_pid, deadline, &cli.nats_retry).await,
        }
    })?;
    println!("{}", serde_json::to_string(&report)?);
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(())
}
