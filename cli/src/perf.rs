//! `rebound perf`: the command line of the load generator; the workloads, the
//! load and the report are the `rebound-perf` crate's.

use anyhow::bail;
use clap::builder::PossibleValuesParser;
use rebound_perf::{Api, HEADER, PERF_CONFIG, WORKLOADS, Workload};

use crate::args::ServerArgs;

/// Arguments of `rebound perf`.
#[derive(Debug, clap::Args)]
#[command(after_help = format!(
    "Workloads: durable (1→1, 50,000 × 1 KiB), fan (4→4 on one queue), poison (10,000, every \
     10th always nacked), backlog (500,000 × 100 B sent before any is consumed), groups (50,000 over 100 \
     message groups, 2 consumers); see BENCHMARKS.md.\npoison needs the broker started with: rebound serve --config {PERF_CONFIG}"
))]
pub struct PerfArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The workload to run.
    #[arg(long, value_parser = PossibleValuesParser::new(WORKLOADS.iter().map(|w| w.name)))]
    workload: String,
    /// Messages to send (default: the workload's).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    messages: Option<u64>,
    /// Body size in bytes, at least 16 (default: the workload's).
    #[arg(long, value_name = "BYTES")]
    size: Option<usize>,
    /// Producers, each on its own connection (default: the workload's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    producers: Option<u32>,
    /// Consumers, each on its own connection (default: the workload's).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    consumers: Option<u32>,
    /// Unacknowledged sends per producer (default: the workload's).
    #[arg(long, value_name = "MESSAGES")]
    in_flight: Option<usize>,
    /// Messages per client call (default: the workload's).
    #[arg(long, value_name = "MESSAGES")]
    batch: Option<usize>,
    /// How producers send: `publish` (a Publish stream; one message per call,
    /// batched by the client; needs --batch 1) or `send` (a unary Send call per
    /// batch). Default: publish with --batch 1, send otherwise.
    #[arg(long, value_parser = ["publish", "send"])]
    api: Option<String>,
    /// Message groups the messages are spread over (default: the workload's).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    groups: Option<u64>,
    /// Connect the consumers to this broker instead of --server: another node
    /// of a cluster, so that messages go in through one node and out through
    /// another (the report's broker figures are --server's).
    #[arg(long, value_name = "URL")]
    consumer_server: Option<String>,
    /// Print the result as one JSON object (schema in BENCHMARKS.md).
    #[arg(long)]
    json: bool,
}

impl PerfArgs {
    /// The workload with the overrides applied.
    fn spec(&self) -> anyhow::Result<Workload> {
        let base = rebound_perf::named(&self.workload)
            .ok_or_else(|| anyhow::anyhow!("unknown workload {}", self.workload))?;
        let spec = Workload {
            messages: self.messages.unwrap_or(base.messages),
            size: self.size.unwrap_or(base.size),
            producers: self.producers.unwrap_or(base.producers),
            consumers: self.consumers.unwrap_or(base.consumers),
            in_flight: self.in_flight.unwrap_or(base.in_flight),
            batch: self.batch.unwrap_or(base.batch),
            groups: self.groups.or(base.groups),
            ..base.clone()
        };
        if spec.size < HEADER {
            bail!("--size must be at least {HEADER}: the body carries the send time and a sequence number");
        }
        if spec.batch == 0 || spec.batch > spec.in_flight {
            bail!("--batch must be between 1 and --in-flight ({})", spec.in_flight);
        }
        Ok(spec)
    }

    /// The API to send with, checked against the batch size.
    fn api(&self, spec: &Workload) -> anyhow::Result<Api> {
        let api = match self.api.as_deref() {
            Some("publish") => Api::Publish,
            Some(_) => Api::Send,
            None => Api::default_for(spec.batch),
        };
        if api == Api::Publish && spec.batch != 1 {
            bail!("--api publish sends one message per call: it needs --batch 1");
        }
        Ok(api)
    }
}

/// Runs `rebound perf`. Ctrl-C stops the run; like a failed run, it deletes its
/// queue before the command exits.
pub async fn run(args: PerfArgs) -> anyhow::Result<()> {
    let spec = args.spec()?;
    let api = args.api(&spec)?;
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No SIGINT handler: no interruption either, the default action stands.
            std::future::pending::<()>().await;
        }
    };
    let report = rebound_perf::run_until_with(
        &args.server.server,
        args.consumer_server.as_deref(),
        &args.server.options()?,
        spec,
        api,
        interrupt,
    )
    .await?;
    Ok(report.print(args.json)?)
}
