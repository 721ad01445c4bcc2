//! `rebound-chaos`: runs rebound under faults and checks what its clients saw
//! (RELIABILITY.md). A run builds its topology (three nodes and PostgreSQL,
//! each in a network namespace; or one node on the embedded store), runs the
//! workload while the schedule injects faults, heals everything, drains every
//! queue and checks the ledger. Exit status: 0 when every check passed, 1
//! when one failed, 2 when the run itself could not be made.
//!
//! | file | what |
//! |---|---|
//! | `lib.rs` | the ledger and its checker (the library) |
//! | `topology.rs` | what a run runs on: network namespaces and processes, or one node on a tmpfs |
//! | `workload.rs` | producers and consumers through random nodes, all logged to the ledger |
//! | `faults.rs` | the faults, and the seeded schedule that injects them |

mod faults;
mod topology;
mod workload;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{ArgGroup, Parser, ValueEnum};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rebound_chaos::checker::{self, Kind, Report};
use rebound_chaos::ledger::{self, Entry, Event, Ledger, MessageRef, Outcome};
use rebound_client::Client;

use crate::faults::{Fault, Schedule};
use crate::topology::{Cluster, Error, Result, Single, Topology};
use crate::workload::Control;

/// After the faults: how long the healed topology may take to serve again.
const HEAL_TIMEOUT: Duration = Duration::from_secs(120);
/// After healing: load goes on this long before the producers stop.
const RECOVERY: Duration = Duration::from_secs(5);
/// A drained ledger stays this quiet before the run ends.
const QUIET: Duration = Duration::from_secs(3);
/// Anomalies printed in full (all are in the ledger).
const SHOWN: usize = 20;

#[derive(Debug, Parser)]
#[command(
    name = "rebound-chaos",
    version,
    about = "Runs rebound under faults and checks what its clients saw (needs root)"
)]
#[command(group(ArgGroup::new("what").required(true).args(["schedule", "fault", "check"])))]
struct Args {
    /// A named schedule: `ci` injects every fault type once (about 3 minutes in all).
    #[arg(long, value_enum)]
    schedule: Option<Named>,
    /// One fault type, injected again and again for --duration.
    #[arg(long, value_enum)]
    fault: Option<Fault>,
    /// How long --fault goes on, e.g. 90s, 3m, 30m.
    #[arg(long, default_value = "3m", value_parser = parse_duration)]
    duration: Duration,
    /// Seeds the schedule (which faults, which nodes, how long) and the
    /// workload's choices; a run prints its seed so that it can be replayed.
    #[arg(long)]
    seed: Option<u64>,
    /// Where to write the ledger (JSON lines), whatever the outcome; without
    /// it a failed run writes `rebound-chaos-<seed>.jsonl` in the current directory.
    #[arg(long)]
    ledger: Option<PathBuf>,
    /// Checks a ledger written by an earlier run instead of running.
    #[arg(long, value_name = "LEDGER")]
    check: Option<PathBuf>,
    /// Where to keep the nodes' and PostgreSQL's logs (a directory per
    /// scenario); without it they go with the run's temporary directory.
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// How long draining may take once the producers stopped.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// The `rebound` binary (default: the one next to this program, then `rebound` on PATH).
    #[arg(long, env = "REBOUND_BIN")]
    rebound: Option<PathBuf>,
    /// Anomalies of this kind (e.g. `reordered`, `stored-twice`) are
    /// reported but do not fail the run: a defect known and still open
    /// (RELIABILITY.md says which). One kind per flag.
    #[arg(long, value_name = "KIND", value_parser = parse_kind)]
    known: Vec<Kind>,
}

/// A kind of anomaly by its name, with `-` for a space (`group-order`).
fn parse_kind(name: &str) -> std::result::Result<Kind, String> {
    Kind::ALL
        .into_iter()
        .find(|k| k.name().replace(' ', "-") == name)
        .ok_or_else(|| {
            let names: Vec<String> = Kind::ALL.iter().map(|k| k.name().replace(' ', "-")).collect();
            format!("not a kind of anomaly; one of {}", names.join(", "))
        })
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Named {
    /// Every cluster fault once, then the embedded store's faults twice each.
    Ci,
}

fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("'{text}': expected a number and s, m or h, e.g. 30m"))?;
    let scale = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return Err(format!("'{text}': the unit is s, m or h")),
    };
    Ok(Duration::from_secs(number * scale))
}

/// One part of a run: a topology and what is done to it.
struct Scenario {
    name: &'static str,
    embedded: bool,
    schedule: Schedule,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(path) = &args.check {
        return match read_ledger(path) {
            Ok(entries) => verdict(&[report("ledger", &checker::check(&entries), None, &args.known)]),
            Err(e) => fail(&e),
        };
    }
    let outcome = tokio::select! {
        outcome = run(&args) => outcome,
        signal = interrupted() => Err(Error::Interrupted(signal)),
    };
    match outcome {
        Ok(passed) => verdict(&passed),
        Err(e) => fail(&e),
    }
}

fn fail(e: &Error) -> ExitCode {
    eprintln!("rebound-chaos: {e}");
    ExitCode::from(2)
}

fn verdict(passed: &[bool]) -> ExitCode {
    if passed.iter().all(|p| *p) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Waits for SIGINT or SIGTERM; says which.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

fn read_ledger(path: &Path) -> Result<Vec<Entry>> {
    let context = |source| Error::Io {
        context: format!("read {}", path.display()),
        source,
    };
    let file = std::fs::File::open(path).map_err(context)?;
    ledger::read_jsonl(std::io::BufReader::new(file)).map_err(context)
}

/// The `rebound` binary to run.
fn rebound_binary(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_owned());
    }
    let sibling = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("rebound")));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("rebound"));
    sibling
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Missing("no rebound binary: build it (cargo build -p rebound-cli) or give --rebound PATH (or REBOUND_BIN)".into()))
}

/// Runs every scenario of the arguments; says of each whether it passed.
async fn run(args: &Args) -> Result<Vec<bool>> {
    topology::require_root()?;
    let rebound = rebound_binary(args.rebound.as_deref())?;
    let seed = args.seed.unwrap_or_else(|| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        u64::from(now.subsec_nanos()) ^ now.as_secs()
    });
    eprintln!(
        "rebound-chaos: seed {seed} (replay with --seed {seed}), rebound {}",
        rebound.display()
    );
    let mut rng = StdRng::seed_from_u64(seed);
    let scenarios = match (args.schedule, args.fault) {
        (Some(Named::Ci), _) => {
            let twice: Vec<Fault> = Fault::EMBEDDED.iter().chain(&Fault::EMBEDDED).copied().collect();
            vec![
                Scenario {
                    name: "cluster",
                    embedded: false,
                    schedule: Schedule::each_once(&Fault::CLUSTER, &mut rng),
                },
                Scenario {
                    name: "embedded",
                    embedded: true,
                    schedule: Schedule::each_once(&twice, &mut rng),
                },
            ]
        }
        (None, Some(fault)) => vec![Scenario {
            name: if fault.embedded() { "embedded" } else { "cluster" },
            embedded: fault.embedded(),
            schedule: Schedule::repeat(fault, args.duration),
        }],
        (None, None) => unreachable!("clap requires --schedule, --fault or --check"),
    };
    let mut passed = Vec::new();
    for scenario in &scenarios {
        let (report, drained, entries) = run_scenario(scenario, args, &rebound, &mut rng, seed).await?;
        let ok = self::report(scenario.name, &report, Some(drained), &args.known);
        let path = match &args.ledger {
            Some(path) if scenarios.len() > 1 => {
                Some(path.with_extension(format!("{}.jsonl", scenario.name)))
            }
            Some(path) => Some(path.clone()),
            None if !ok => Some(PathBuf::from(format!(
                "rebound-chaos-{seed}-{}.jsonl",
                scenario.name
            ))),
            None => None,
        };
        if let Some(path) = path {
            let context = |source| Error::Io {
                context: format!("write {}", path.display()),
                source,
            };
            let file = std::fs::File::create(&path).map_err(context)?;
            ledger::write_jsonl(&entries, std::io::BufWriter::new(file)).map_err(context)?;
            println!("  ledger:       {}", path.display());
        }
        if let Some(logs) = &args.logs {
            println!("  logs:         {}", logs.join(scenario.name).display());
        }
        passed.push(ok);
    }
    Ok(passed)
}

/// One scenario: topology up, workload and faults, heal, drain, check.
async fn run_scenario(
    scenario: &Scenario,
    args: &Args,
    rebound: &Path,
    rng: &mut StdRng,
    seed: u64,
) -> Result<(Report, bool, Vec<Entry>)> {
    eprintln!("rebound-chaos: {}: starting", scenario.name);
    let mut topology = if scenario.embedded {
        Topology::Embedded(Single::start(rebound).await?)
    } else {
        Topology::Cluster(Cluster::start(rebound).await?)
    };
    eprintln!(
        "rebound-chaos: {}: serving; logs in {}",
        scenario.name,
        topology.dir().display()
    );
    let ledger = Arc::new(Ledger::new());
    let control = Arc::new(Control::default());
    ledger.record(Event::Phase {
        name: "workload".into(),
    });
    let mut tasks = workload::start(topology.nodes(), ledger.clone(), control.clone(), seed);
    scenario.schedule.run(&mut topology, rng, &ledger).await?;

    ledger.record(Event::Phase { name: "heal".into() });
    topology.heal().await?;
    topology.wait_serving(HEAL_TIMEOUT).await?;
    tokio::time::sleep(RECOVERY).await;
    control.stop_sending.store(true, Ordering::Relaxed);
    ledger.record(Event::Phase { name: "drain".into() });
    control.draining.store(true, Ordering::Relaxed);
    eprintln!("rebound-chaos: {}: healed; draining", scenario.name);
    let drained = drain(&ledger, args.drain_timeout).await;
    control.done.store(true, Ordering::Relaxed);
    if tokio::time::timeout(Duration::from_secs(30), async {
        while tasks.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        tasks.abort_all();
    }
    record_depths(&topology.nodes(), &ledger).await?;
    ledger.record(Event::Phase { name: "done".into() });
    if let Some(logs) = &args.logs {
        topology.save_logs(&logs.join(scenario.name))?;
    }
    let entries = ledger.snapshot();
    Ok((checker::check(&entries), drained, entries))
}

/// Waits until every acknowledged message was delivered, none waits for a
/// redelivery or a settle, every scheduled one is due, and the ledger stayed
/// quiet a while; `false` if that did not happen within `timeout`.
async fn drain(ledger: &Ledger, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let entries = ledger.snapshot();
        let quiet = entries
            .last()
            .is_none_or(|last| ledger.now_us().saturating_sub(last.t_us) >= QUIET.as_micros() as u64);
        if quiet && awaited(&entries) == 0 && ledger::wall_ms() >= latest_due_ms(&entries) {
            return true;
        }
    }
    false
}

/// Messages the drain still waits for: acknowledged and never delivered,
/// delivered and not settled, or nacked and not delivered again. (A settle
/// whose confirmation was lost leaves the message to the queue-depth check.)
fn awaited(entries: &[Entry]) -> usize {
    let mut delivered = HashSet::new();
    let mut awaited = HashSet::<MessageRef>::new();
    for entry in entries {
        match &entry.event {
            Event::SendAcked { msg, .. } if !delivered.contains(msg) => {
                awaited.insert(*msg);
            }
            Event::Delivered { msg, .. } => {
                delivered.insert(*msg);
                awaited.insert(*msg);
            }
            Event::SettleConfirmed {
                msg,
                outcome: Outcome::Ack,
                ..
            }
            | Event::SettleFailed { msg, .. } => {
                awaited.remove(msg);
            }
            _ => {}
        }
    }
    awaited.len()
}

/// When the last scheduled message is due (ms since the epoch).
fn latest_due_ms(entries: &[Entry]) -> u64 {
    entries
        .iter()
        .filter_map(|e| match e.event {
            Event::SendAttempted { deliver_at_ms, .. } => deliver_at_ms,
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Records what each queue still holds, asking the nodes in turn until one
/// answers (each reports the figures of the queue's owner).
async fn record_depths(nodes: &[(String, String)], ledger: &Ledger) -> Result<()> {
    for queue in topology::QUEUES {
        let mut answer = None;
        for (_, url) in nodes {
            let ask = async { Client::connect(url).await?.queue(queue).await };
            if let Ok(Ok(info)) = tokio::time::timeout(Duration::from_secs(10), ask).await {
                answer = Some(info);
                break;
            }
        }
        let info = answer
            .ok_or_else(|| Error::Unanswered(format!("no node answered how many messages {queue} holds")))?;
        ledger.record(Event::QueueDepth {
            queue: queue.into(),
            messages: info.messages,
            scheduled: info.scheduled,
            served_by: info.served_by,
        });
    }
    Ok(())
}

/// Prints a scenario's figures and anomalies; whether it passed, anomalies
/// of the `known` kinds aside.
fn report(name: &str, report: &Report, drained: Option<bool>, known: &[Kind]) -> bool {
    let faults: Vec<String> = report.faults.iter().map(|(f, n)| format!("{f} {n}")).collect();
    println!("rebound-chaos: {name}");
    println!(
        "  sends:        {} messages in {} attempts: {} acknowledged, {} refused, {} unconfirmed ({} of them delivered)",
        report.sent, report.attempts, report.acked, report.failed, report.unconfirmed, report.recovered
    );
    println!(
        "  deliveries:   {} ({} messages delivered more than once); {} consumer streams ended by an error",
        report.deliveries, report.redelivered, report.streams_ended
    );
    println!(
        "  faults:       {}",
        if faults.is_empty() {
            "none".into()
        } else {
            faults.join(", ")
        }
    );
    let counts: Vec<String> = Kind::ALL
        .iter()
        .map(|k| format!("{} {}", k.name(), report.count(*k)))
        .collect();
    println!("  checks:       {}", counts.join(", "));
    println!(
        "  longest gap:  {:.1} s without an acknowledged send, {:.1} s without a delivery (one queue)",
        report.longest_send_gap_ms as f64 / 1000.0,
        report.longest_delivery_gap_ms as f64 / 1000.0
    );
    if let Some(drained) = drained {
        println!(
            "  drained:      {}",
            if drained {
                "yes"
            } else {
                "no: some acknowledged messages never came (reported lost)"
            }
        );
    }
    for anomaly in report.anomalies.iter().take(SHOWN) {
        println!("  {anomaly}");
    }
    if report.anomalies.len() > SHOWN {
        println!(
            "  ... and {} more (see the ledger)",
            report.anomalies.len() - SHOWN
        );
    }
    let passed = report.passed_but(known);
    let known: Vec<String> = known
        .iter()
        .filter(|k| report.count(**k) > 0)
        .map(|k| format!("{} {}", k.name(), report.count(*k)))
        .collect();
    println!(
        "  result:       {}{}",
        if passed { "PASS" } else { "FAIL" },
        if known.is_empty() {
            String::new()
        } else {
            format!(" (known defects seen: {})", known.join(", "))
        }
    );
    passed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_seconds_minutes_and_hours() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("45"), Ok(Duration::from_secs(45)));
        assert!(parse_duration("3 days").is_err());
        assert!(parse_duration("m").is_err());
    }

    #[test]
    fn known_kinds_are_named_as_the_report_names_them() {
        assert_eq!(parse_kind("group-order"), Ok(Kind::GroupOrder));
        assert_eq!(parse_kind("stored-twice"), Ok(Kind::StoredTwice));
        assert!(parse_kind("lost-ish").unwrap_err().contains("reordered"));
        for kind in Kind::ALL {
            assert_eq!(parse_kind(&kind.name().replace(' ', "-")), Ok(kind));
        }
    }

    #[test]
    fn the_drain_waits_for_nacked_and_unsettled_messages() {
        let ledger = Ledger::new();
        let msg = MessageRef { producer: 1, seq: 1 };
        ledger.record(Event::SendAcked {
            msg,
            message_id: 1,
            duplicate: false,
        });
        assert_eq!(awaited(&ledger.snapshot()), 1);
        let delivered = Event::Delivered {
            consumer: 1,
            stream: 1,
            msg,
            queue: "q".into(),
            message_id: 1,
            delivery_count: 1,
            node: "n1".into(),
            wall_ms: 0,
        };
        ledger.record(delivered.clone());
        ledger.record(Event::SettleConfirmed {
            stream: 1,
            msg,
            delivery_count: 1,
            outcome: Outcome::Nack,
        });
        assert_eq!(awaited(&ledger.snapshot()), 1);
        ledger.record(delivered);
        ledger.record(Event::SettleConfirmed {
            stream: 1,
            msg,
            delivery_count: 1,
            outcome: Outcome::Ack,
        });
        assert_eq!(awaited(&ledger.snapshot()), 0);
    }
}
