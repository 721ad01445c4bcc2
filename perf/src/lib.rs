//! The load generator behind `rebound perf`, like `artemis perf client`.
//!
//! [`run`] runs one of the named [`WORKLOADS`] against a live broker and
//! reports send and end-to-end rates, latency percentiles and what the broker
//! spent on it (fsyncs, memory), for people or as one JSON object (schema in
//! BENCHMARKS.md) for scripts. It exists so that "how fast is durable?" has one
//! reproducible answer instead of ad-hoc scripts, and so that a peer broker can
//! be measured the same way. The command line (`rebound perf`, in rebound-cli) only
//! picks the workload, applies its overrides and prints the [`Report`].
//!
//! Each run uses a fresh queue `perf.<workload>.<random>` (on an address of the
//! same name) so runs never see each other's messages, and deletes both afterwards,
//! whether the run succeeded, failed or was interrupted ([`run_until`]): a failed
//! run must not leave a queue behind that the next run or an operator trips over.
//! Its producer and consumer tasks are aborted first, and the deletion is checked
//! and repeated for a moment, as a send still under way on the broker can create
//! the address again. A deletion that fails too is reported on stderr, naming the
//! queue.
//!
//! Producers and consumers each get their own connection, and sends go inside an
//! in-flight window, as unary `Send` calls of a batch or as one-message calls on a
//! Publish stream ([`Api`]), so that the tool is not what limits the rate; its
//! own CPU time is reported to show that. A progress line goes to stderr once a
//! second, and a run that makes no progress for [`STALL`] fails instead of hanging.
//!
//! | file | what |
//! |---|---|
//! | `workload.rs` | the workloads, defined once (the table BENCHMARKS.md describes) |
//! | `load.rs` | the producer and consumer tasks, and the counters they share |
//! | `report.rs` | the result of a run, for people or as the JSON object of BENCHMARKS.md |

mod load;
mod report;
mod workload;

// The peer-broker clients of bench/compare.sh (bench/peers) run the same workloads and
// measure them the same way: these are what they share with `rebound perf`.
pub use load::{Api, HEADER, histogram, share};
pub use report::{Extra, Latency, Report, process_cpu_s};
pub use workload::{PERF_CONFIG, WORKLOADS, Workload, named};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use hdrhistogram::Histogram;
use rebound_client::{Client, ConnectOptions, RoutingType, ServerInfo};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use load::Run;

/// A run that neither sends nor acks anything for this long has stalled.
const STALL: Duration = Duration::from_secs(30);

/// How often completion (all acked, all dead-lettered) is checked.
const POLL: Duration = Duration::from_millis(5);

/// Runs `spec` against the broker at `url` (`http://host:port` or `host:port`; for
/// `https://` see [`run_until_with`]) on a
/// fresh queue, deletes the queue (and, for `poison`, its dead-letter queue)
/// afterwards, and returns what was measured. Progress goes to stderr.
///
/// `spec` is one of [`WORKLOADS`], possibly with its numbers changed; its `size`
/// must be at least [`HEADER`] and its `batch` between 1 and `in_flight` (1 for
/// [`Api::Publish`]).
pub async fn run(url: &str, spec: Workload, api: Api) -> anyhow::Result<Report> {
    run_until(url, spec, api, std::future::pending()).await
}

/// Like [`run`], but stops early with an error once `interrupt` completes (the
/// command line passes Ctrl-C); the queue is deleted all the same.
pub async fn run_until(
    url: &str,
    spec: Workload,
    api: Api,
    interrupt: impl Future<Output = ()>,
) -> anyhow::Result<Report> {
    run_until_with(url, None, &ConnectOptions::default(), spec, api, interrupt).await
}

/// Like [`run_until`], with TLS settings (for an `https://` URL) and credentials,
/// and with the consumers connected to `consumer_url` when given: another node of
/// a cluster, so that messages go in through one node and out through another.
pub async fn run_until_with(
    url: &str,
    consumer_url: Option<&str>,
    options: &ConnectOptions,
    spec: Workload,
    api: Api,
    interrupt: impl Future<Output = ()>,
) -> anyhow::Result<Report> {
    let client = Client::connect_with_options(url, options).await?;
    let queue = format!("perf.{}.{:08x}", spec.name, rand::random::<u32>());
    spec.check_settings(&client, &queue).await?;
    client
        .create_queue(&queue, &queue, RoutingType::Anycast, true)
        .await?;
    eprintln!("perf: workload {} on queue {queue}", spec.name);
    // Dropping `measure` (on an interrupt) aborts its tasks, as its own errors do.
    let result = tokio::select! {
        result = measure(url, consumer_url.unwrap_or(url), options, &client, spec, api, queue.clone()) => result,
        () = interrupt => Err(anyhow!("interrupted")),
    };
    if result.is_err() {
        // The error itself is the caller's to report.
        eprintln!("perf: the run failed; deleting queue {queue}");
    }
    clean_up(&client, &queue).await;
    result
}

/// Deletes the run's queue with its address and, for poison, its auto-created
/// dead-letter queue (`DLQ.<address>` on the dead-letter address: its name embeds
/// the queue's), so that repeated or failed runs leave nothing behind. Best effort:
/// what cannot be deleted is reported on stderr.
///
/// A run that stopped early may have had sends in flight; the broker can still be
/// carrying one out after the deletion, and a send to a missing address creates it
/// again (`auto-create-addresses`). So the deletion is checked, after a pause that
/// doubles each round, and repeated until nothing is left or the rounds run out.
async fn clean_up(client: &Client, queue: &str) {
    let mut pause = CLEAN_UP_PAUSE;
    let mut failures = Vec::new();
    for _ in 0..CLEAN_UP_ROUNDS {
        let left = match leftovers(client, queue).await {
            Ok(left) => left,
            Err(err) => {
                failures = vec![format!("what is left of {queue}: {err}")];
                break;
            }
        };
        if left.is_empty() {
            return;
        }
        failures.clear();
        for name in left.iter().filter(|name| *name != queue) {
            if let Err(err) = client.delete_queue(name).await {
                failures.push(format!("queue {name}: {err}"));
            }
        }
        if left.iter().any(|name| name == queue)
            && let Err(err) = client.delete_address(queue, true).await
        {
            failures.push(format!("address {queue} with its queue: {err}"));
        }
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    if failures.is_empty() {
        failures.push(format!("{queue}: it was created again by sends still under way"));
    }
    for failure in failures {
        eprintln!("warning: rebound perf could not delete {failure}");
    }
}

/// Rounds of [`clean_up`], and its first pause: 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s at most.
const CLEAN_UP_ROUNDS: u32 = 5;
const CLEAN_UP_PAUSE: Duration = Duration::from_millis(100);

/// The run's queues (its own and its dead-letter queue) and its address (named like
/// its queue) that still exist.
async fn leftovers(client: &Client, queue: &str) -> rebound_client::Result<Vec<String>> {
    let mut left: Vec<String> = client
        .list_queues()
        .await?
        .into_iter()
        .map(|q| q.name)
        .filter(|name| name.contains(queue))
        .collect();
    match client.address(queue).await {
        Ok(_) if !left.iter().any(|name| name == queue) => left.push(queue.to_owned()),
        Ok(_) => {}
        Err(err) if err.code() == Some(rebound_client::Code::NotFound) => {}
        Err(err) => return Err(err),
    }
    Ok(left)
}

/// Runs the load and gathers the report; `client` is for admin calls only.
async fn measure(
    url: &str,
    consumer_url: &str,
    options: &ConnectOptions,
    client: &Client,
    spec: Workload,
    api: Api,
    queue: String,
) -> anyhow::Result<Report> {
    let producer_clients = connect(url, options, spec.producers).await?;
    let consumer_clients = connect(consumer_url, options, spec.consumers).await?;
    let before = client.server_info().await?;
    let run = Arc::new(Run::new(spec, api, queue));
    let work = drive(client, &run, producer_clients, consumer_clients, &before);
    tokio::select! {
        report = work => report,
        err = watch(&run) => Err(err),
    }
}

async fn connect(url: &str, options: &ConnectOptions, n: u32) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::new();
    for _ in 0..n {
        clients.push(Client::connect_with_options(url, options).await?);
    }
    Ok(clients)
}

async fn drive(
    client: &Client,
    run: &Arc<Run>,
    producers: Vec<Client>,
    consumers: Vec<Client>,
    before: &ServerInfo,
) -> anyhow::Result<Report> {
    let spec = &run.spec;
    let seconds = |ns: u64| ns as f64 / 1e9;
    let now_s = || run.epoch.elapsed().as_secs_f64();
    let producers: Vec<_> = (0..spec.producers)
        .zip(producers)
        .map(|(i, c)| {
            let seqs = load::share(spec.messages, spec.producers, i);
            AbortOnDropHandle::new(tokio::spawn(load::produce(c, run.clone(), seqs)))
        })
        .collect();
    let stop = CancellationToken::new();
    let spawn_consumers = |clients: Vec<Client>| -> Vec<_> {
        clients
            .into_iter()
            .map(|c| AbortOnDropHandle::new(tokio::spawn(load::consume(c, run.clone(), stop.clone()))))
            .collect()
    };

    let (consumers, send_latency, filled) = if spec.backlog {
        let send_latency = join(producers).await.context("producer")?;
        let filled = client.server_info().await?;
        (spawn_consumers(consumers), send_latency, Some((filled, now_s())))
    } else {
        let consumers = spawn_consumers(consumers);
        let send_latency = join(producers).await.context("producer")?;
        (consumers, send_latency, None)
    };
    let send_done_s = seconds(run.last_sent_ns.load(Ordering::Relaxed));

    let good = run.good_messages();
    // With outage mode off, the outage dead-letters messages: they are done too.
    let dead = async || -> anyhow::Result<u64> {
        Ok(match spec.outage_ms {
            Some(_) => client.queue(&run.queue).await?.dead_lettered,
            None => 0,
        })
    };
    let wait_consumers = async {
        while run.acked.load(Ordering::Relaxed) + dead().await? < good {
            if consumers.iter().any(AbortOnDropHandle::is_finished) {
                return Err(anyhow!("a consumer stopped early"));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    };
    if let Err(err) = wait_consumers.await {
        stop.cancel();
        return Err(join(consumers).await.err().unwrap_or(err).context("consumer"));
    }
    let good_done_s = seconds(run.last_ack_ns.load(Ordering::Relaxed));
    let poison = spec.poison_count();
    if poison > 0 {
        while client.queue(&run.queue).await?.dead_lettered < poison {
            tokio::time::sleep(POLL).await;
        }
    }
    let end_s = now_s();
    stop.cancel();
    let latency = join(consumers).await.context("consumer")?;
    let after = client.server_info().await?;

    let syncs = after.store_syncs.saturating_sub(before.store_syncs);
    let broker_cpu_us = after.process_cpu_us.saturating_sub(before.process_cpu_us);
    let extra = match filled {
        _ if spec.outage_ms.is_some() => Extra::Outage {
            outage_deliveries: run.outage_deliveries.load(Ordering::Relaxed),
            dead_lettered: dead().await?,
            good_done_s,
        },
        _ if poison > 0 => Extra::Poison {
            poison_messages: poison,
            good_done_s,
            poison_dlq_s: end_s,
        },
        Some((filled, drain_from_s)) => {
            let growth = filled.rss_bytes as i64 - before.rss_bytes as i64;
            Extra::Backlog {
                drain_rate: good as f64 / (good_done_s - drain_from_s),
                rss_growth_bytes: growth,
                bytes_per_message: growth as f64 / spec.messages as f64,
            }
        }
        None => Extra::None {},
    };
    Ok(Report {
        system: "rebound",
        workload: spec.name,
        queue: run.queue.clone(),
        messages: spec.messages,
        size: spec.size,
        producers: spec.producers,
        consumers: spec.consumers,
        in_flight: spec.in_flight,
        batch: spec.batch,
        api: run.api.name(),
        duration_s: end_s,
        send_rate: spec.messages as f64 / send_done_s,
        e2e_rate: good as f64 / good_done_s,
        latency_ms: Latency::of(&latency),
        send_latency_ms: Latency::of(&send_latency),
        store_commits: after.store_commits.saturating_sub(before.store_commits),
        store_syncs: syncs,
        syncs_per_message: syncs as f64 / spec.messages as f64,
        rss_bytes: after.rss_bytes,
        peak_rss_bytes: after.peak_rss_bytes,
        client_cpu_s: report::process_cpu_s(),
        broker_cpu_s: broker_cpu_us as f64 / 1e6,
        broker_cpu_us_per_message: broker_cpu_us as f64 / spec.messages as f64,
        extra,
    })
}

/// A producer or consumer task. Aborted when dropped: a run that fails or is
/// interrupted stops all of its tasks before it deletes its queue.
type Task = AbortOnDropHandle<anyhow::Result<Histogram<u64>>>;

/// Waits for every task and merges their latency histograms.
async fn join(tasks: Vec<Task>) -> anyhow::Result<Histogram<u64>> {
    let mut total = histogram();
    for task in tasks {
        let h = task.await??;
        total.add(&h).map_err(|e| anyhow!("merging latencies: {e:?}"))?;
    }
    Ok(total)
}

/// Prints a progress line to stderr every second; returns (an error) only if
/// the run stalls.
async fn watch(run: &Run) -> anyhow::Error {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let (mut last, mut still) = ((0, 0), Duration::ZERO);
    loop {
        tick.tick().await;
        let now = (
            run.sent.load(Ordering::Relaxed),
            run.acked.load(Ordering::Relaxed),
        );
        eprintln!(
            "perf {} {:>4}s  sent {:>8} ({:>6}/s)  acked {:>8} ({:>6}/s)  queued {:>8}",
            run.spec.name,
            run.epoch.elapsed().as_secs(),
            now.0,
            now.0 - last.0,
            now.1,
            now.1 - last.1,
            now.0.saturating_sub(now.1),
        );
        still = if now == last {
            still + Duration::from_secs(1)
        } else {
            Duration::ZERO
        };
        if still >= STALL {
            return anyhow!(
                "no progress for {STALL:?}: {} of {} sends acknowledged, {} of {} good messages acked",
                now.0,
                run.spec.messages,
                now.1,
                run.good_messages()
            );
        }
        last = now;
    }
}
