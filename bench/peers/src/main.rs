//! `peers`: the RabbitMQ and NATS JetStream halves of `bench/compare.sh`.
//!
//! It runs the workloads of `rebound perf` (durable, fan, poison, backlog; the table in
//! perf/src/workload.rs, shared through common.rs) against a peer broker, through one
//! workload flow (driver.rs) and what is specific to each broker (nats.rs, rabbit.rs), and prints
//! one JSON line in `rebound perf --json`'s schema, with `"system": "rabbitmq"` or
//! `"nats"`. A tool for people: nothing in CI builds or runs it.
//!
//! Measured exactly as rebound perf measures (perf/src/load.rs):
//! - a body starts with its send time (ns since the run's epoch, LE) and its sequence
//!   number (LE); one process, one monotonic clock;
//! - latency_ms = send call → first receipt by a consumer, good messages only;
//!   send_latency_ms = send call → publisher confirm / publish ack;
//! - send_rate = messages / (first send → last confirm);
//!   e2e_rate = good messages / (first send → last ack);
//! - each producer keeps at most `in_flight` publishes unconfirmed, each consumer holds
//!   at most `credit` unacked deliveries, and every delivery is acked (or, for poison,
//!   nacked) on its own.
mod common;
mod driver;
mod nats;
mod rabbit;

use clap::{Parser, ValueEnum};

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
enum System {
    Rabbitmq,
    Nats,
}

#[derive(Parser, Debug)]
#[command(
    about = "RabbitMQ / NATS JetStream side of bench/compare.sh: rebound perf's workloads and JSON schema"
)]
struct Cli {
    /// Which peer to drive.
    system: System,
    /// durable | fan | poison | backlog (the table of perf/src/workload.rs).
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
    let base =
        common::named(&cli.workload).ok_or_else(|| anyhow::anyhow!("unknown workload {}", cli.workload))?;
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
    // One thread, as `rebound perf`'s load generator: the other cores are the broker's.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        match cli.system {
            System::Rabbitmq => {
                let peer = rabbit::Rabbit::setup(&cli.url, &spec, cli.rabbit_delivery_limit).await?;
                driver::run(peer, &cli.url, spec, cli.server_pid, deadline).await
            }
            System::Nats => {
                let peer = nats::Nats::setup(&cli.url, &spec, &cli.nats_retry).await?;
                driver::run(peer, &cli.url, spec, cli.server_pid, deadline).await
            }
        }
    })?;
    println!("{}", serde_json::to_string(&report)?);
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    Ok(())
}
