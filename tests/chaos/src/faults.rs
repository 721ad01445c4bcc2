//! The faults, and the schedule that injects them: one at a time, each held
//! for a few leases, then healed, with a pause between them. Every choice
//! (which fault, which node, how long, how far) comes from one seeded RNG, so
//! a run's schedule replays from its seed.

use std::time::Duration;

use clap::ValueEnum;
use rand::Rng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use crate::topology::{Cluster, Result, Single, Topology, iptables};
use rebound_chaos::ledger::{Event, Ledger};

/// A fault type (RELIABILITY.md says what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Fault {
    /// kill -9 of a node, restarted after a pause.
    Kill,
    /// SIGSTOP of a node for 3 to 4 leases, then SIGCONT.
    Pause,
    /// A node cut from PostgreSQL, both ways.
    DbCut,
    /// A node cut from the other nodes, both ways.
    NodeCut,
    /// A node that hears nothing from the others and PostgreSQL, or whose
    /// packets to them are dropped.
    OneWay,
    /// 30% of the packets a node receives dropped.
    Loss,
    /// PostgreSQL crashed (immediate shutdown) and started again.
    PgRestart,
    /// A node's wall clock jumped minutes ahead or back, then back to true.
    Clock,
    /// kill -9 of the embedded-store node, restarted after a pause.
    EmbeddedKill,
    /// The embedded-store node's disk full for a while.
    EmbeddedDiskFull,
}

impl Fault {
    pub const CLUSTER: [Fault; 8] = [
        Fault::Kill,
        Fault::Pause,
        Fault::DbCut,
        Fault::NodeCut,
        Fault::OneWay,
        Fault::Loss,
        Fault::PgRestart,
        Fault::Clock,
    ];
    pub const EMBEDDED: [Fault; 2] = [Fault::EmbeddedKill, Fault::EmbeddedDiskFull];

    /// Its name on the command line and in the ledger.
    pub fn name(self) -> String {
        self.to_possible_value()
            .expect("no skipped variants")
            .get_name()
            .to_owned()
    }

    /// Whether it is injected into one node on the embedded store (else into
    /// the cluster).
    pub fn embedded(self) -> bool {
        Fault::EMBEDDED.contains(&self)
    }
}

/// Seconds drawn uniformly from `range`.
fn secs(rng: &mut StdRng, range: std::ops::Range<f64>) -> Duration {
    Duration::from_secs_f64(rng.random_range(range))
}

/// Injects `fault` into `topology`, holds it, and heals it; the ledger gets
/// its start and its heal.
pub async fn inject(fault: Fault, topology: &mut Topology, rng: &mut StdRng, ledger: &Ledger) -> Result<()> {
    match topology {
        Topology::Cluster(cluster) => inject_cluster(fault, cluster, rng, ledger).await,
        Topology::Embedded(single) => inject_embedded(fault, single, rng, ledger).await,
    }
}

/// Records the start of a fault (and says it on stderr); returns what to
/// record at its heal.
fn started(ledger: &Ledger, fault: Fault, target: String, hold: Duration) -> Event {
    eprintln!(
        "rebound-chaos: {} {target} for {:.1} s",
        fault.name(),
        hold.as_secs_f64()
    );
    ledger.record(Event::FaultStarted {
        fault: fault.name(),
        target: target.clone(),
    });
    Event::FaultHealed {
        fault: fault.name(),
        target,
    }
}

async fn inject_cluster(
    fault: Fault,
    cluster: &mut Cluster,
    rng: &mut StdRng,
    ledger: &Ledger,
) -> Result<()> {
    let i = rng.random_range(0..cluster.nodes.len());
    let name = cluster.nodes[i].name.clone();
    let ns = cluster.nodes[i]
        .ns
        .clone()
        .expect("cluster nodes have a namespace");
    let pg = cluster.pg.ip.clone();
    let peers = cluster.peers_of(i);
    let healed = match fault {
        Fault::Kill => {
            let hold = secs(rng, 1.0..5.0);
            let healed = started(ledger, fault, name, hold);
            cluster.nodes[i].kill();
            tokio::time::sleep(hold).await;
            cluster.nodes[i].start().await?;
            healed
        }
        Fault::Pause => {
            let hold = secs(rng, 6.0..8.0);
            let healed = started(ledger, fault, name, hold);
            cluster.nodes[i].pause()?;
            tokio::time::sleep(hold).await;
            cluster.nodes[i].resume()?;
            healed
        }
        Fault::DbCut => {
            let hold = secs(rng, 5.0..9.0);
            let healed = started(ledger, fault, format!("{name} from PostgreSQL"), hold);
            iptables(&ns, &["-A", "INPUT", "-s", &pg, "-j", "DROP"])?;
            iptables(&ns, &["-A", "OUTPUT", "-d", &pg, "-j", "DROP"])?;
            tokio::time::sleep(hold).await;
            flush(&ns)?;
            healed
        }
        Fault::NodeCut => {
            let hold = secs(rng, 5.0..9.0);
            let healed = started(ledger, fault, format!("{name} from the other nodes"), hold);
            for peer in &peers {
                iptables(&ns, &["-A", "INPUT", "-s", peer, "-j", "DROP"])?;
                iptables(&ns, &["-A", "OUTPUT", "-d", peer, "-j", "DROP"])?;
            }
            tokio::time::sleep(hold).await;
            flush(&ns)?;
            healed
        }
        Fault::OneWay => {
            let hold = secs(rng, 5.0..9.0);
            let inbound = rng.random_bool(0.5);
            let (chain, side, what) = if inbound {
                ("INPUT", "-s", "hears nothing from")
            } else {
                ("OUTPUT", "-d", "is not heard by")
            };
            let healed = started(
                ledger,
                fault,
                format!("{name} {what} the other nodes and PostgreSQL"),
                hold,
            );
            for peer in peers.iter().chain([&pg]) {
                iptables(&ns, &["-A", chain, side, peer, "-j", "DROP"])?;
            }
            tokio::time::sleep(hold).await;
            flush(&ns)?;
            healed
        }
        Fault::Loss => {
            let hold = secs(rng, 8.0..12.0);
            let healed = started(
                ledger,
                fault,
                format!("{name} drops 30% of what it receives"),
                hold,
            );
            iptables(
                &ns,
                &[
                    "-A",
                    "INPUT",
                    "-m",
                    "statistic",
                    "--mode",
                    "random",
                    "--probability",
                    "0.3",
                    "-j",
                    "DROP",
                ],
            )?;
            tokio::time::sleep(hold).await;
            flush(&ns)?;
            healed
        }
        Fault::PgRestart => {
            let hold = secs(rng, 1.0..6.0);
            let healed = started(ledger, fault, "PostgreSQL".into(), hold);
            cluster.pg.crash()?;
            tokio::time::sleep(hold).await;
            cluster.pg.start()?;
            healed
        }
        Fault::Clock => {
            let hold = secs(rng, 5.0..9.0);
            let offset = rng.random_range(30..300) * if rng.random_bool(0.5) { 1 } else { -1 };
            let healed = started(ledger, fault, format!("{name} {offset:+} s"), hold);
            cluster.nodes[i].set_clock(offset)?;
            tokio::time::sleep(hold).await;
            cluster.nodes[i].set_clock(0)?;
            healed
        }
        Fault::EmbeddedKill | Fault::EmbeddedDiskFull => {
            unreachable!("the schedule gives embedded faults to the embedded node")
        }
    };
    ledger.record(healed);
    Ok(())
}

async fn inject_embedded(fault: Fault, single: &mut Single, rng: &mut StdRng, ledger: &Ledger) -> Result<()> {
    let healed = match fault {
        Fault::EmbeddedKill => {
            let hold = secs(rng, 0.5..3.0);
            let healed = started(ledger, fault, single.node.name.clone(), hold);
            single.node.kill();
            tokio::time::sleep(hold).await;
            single.node.start().await?;
            healed
        }
        Fault::EmbeddedDiskFull => {
            let hold = secs(rng, 5.0..10.0);
            let healed = started(ledger, fault, "the data dir's tmpfs".into(), hold);
            single.fill_disk()?;
            tokio::time::sleep(hold).await;
            single.free_disk()?;
            healed
        }
        _ => unreachable!("the schedule gives cluster faults to the cluster"),
    };
    ledger.record(healed);
    Ok(())
}

fn flush(ns: &str) -> Result<()> {
    iptables(ns, &["-F", "INPUT"])?;
    iptables(ns, &["-F", "OUTPUT"])
}

/// Which faults, in which order, with what pauses.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// Load only, before the first fault.
    pub warmup: Duration,
    /// The faults, in order.
    pub faults: Vec<Fault>,
    /// Or, instead of a list: this fault again and again for this long.
    pub repeat: Option<(Fault, Duration)>,
}

impl Schedule {
    /// Every fault of `kinds` once, in an order drawn from `rng`.
    pub fn each_once(kinds: &[Fault], rng: &mut StdRng) -> Schedule {
        let mut faults = kinds.to_vec();
        faults.shuffle(rng);
        Schedule {
            warmup: Duration::from_secs(5),
            faults,
            repeat: None,
        }
    }

    /// `fault` for `duration`.
    pub fn repeat(fault: Fault, duration: Duration) -> Schedule {
        Schedule {
            warmup: Duration::from_secs(5),
            faults: Vec::new(),
            repeat: Some((fault, duration)),
        }
    }

    /// Runs the schedule against `topology`: the warmup, then each fault
    /// after a pause of 1 to 4 s. Ends healed.
    pub async fn run(&self, topology: &mut Topology, rng: &mut StdRng, ledger: &Ledger) -> Result<()> {
        tokio::time::sleep(self.warmup).await;
        let pause = |rng: &mut StdRng| secs(rng, 1.0..4.0);
        for &fault in &self.faults {
            tokio::time::sleep(pause(rng)).await;
            inject(fault, topology, rng, ledger).await?;
        }
        if let Some((fault, duration)) = self.repeat {
            let until = tokio::time::Instant::now() + duration;
            while tokio::time::Instant::now() < until {
                tokio::time::sleep(pause(rng)).await;
                inject(fault, topology, rng, ledger).await?;
            }
        }
        Ok(())
    }
}
