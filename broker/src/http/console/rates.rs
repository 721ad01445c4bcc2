//! Rates for the console: a small ring of samples of the broker's counters, taken
//! every [`EVERY`] for the last `KEPT` samples (10 minutes), by a task of the
//! engine's own that ends when the broker shuts down.
//!
//! Counters only grow, so a rate is the difference of two samples over their
//! interval; the overview's chart is the ring as rates, the queues table shows
//! each queue's in and out rate over the last interval.
//!
//! The ring sums every queue, so it is shown only to callers who may browse every
//! queue; one who may browse some gets the totals of those ([`Totals::of`]) and
//! no history (keeping a ring per queue would cost what `/metrics` avoids).
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::engine::Broker;
use crate::queue::{Counters, Queue};
use crate::time::now_ms;

/// How often the counters are sampled.
pub const EVERY: Duration = Duration::from_secs(5);
/// Samples kept: 10 minutes.
const KEPT: usize = 120;

/// The broker's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Totals {
    pub at_ms: u64,
    pub added: u64,
    pub acked: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    pub expired: u64,
    pub dropped: u64,
    pub removed: u64,
    pub moved_out: u64,
    pub commits: u64,
    pub ops: u64,
    pub syncs: u64,
}

impl Totals {
    /// The store's figures now, before any queue is added.
    fn now(broker: &Arc<Broker>) -> Totals {
        let stats = broker.store().stats();
        Totals {
            at_ms: now_ms(),
            commits: stats.commits,
            ops: stats.ops,
            syncs: stats.syncs,
            ..Totals::default()
        }
    }

    fn add(&mut self, c: &Counters) {
        self.added += c.added;
        self.acked += c.acked;
        self.redelivered += c.redelivered;
        self.dead_lettered += c.dead_lettered;
        self.expired += c.expired;
        self.dropped += c.dropped;
        self.removed += c.removed;
        self.moved_out += c.moved_out;
    }

    /// The counters of `queues` summed now, with the store's figures.
    pub fn of(broker: &Arc<Broker>, queues: &[Arc<Queue>]) -> Totals {
        let mut totals = Totals::now(broker);
        for queue in queues {
            totals.add(&queue.snapshot().counters);
        }
        totals
    }
}

/// Per second between two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    pub at_ms: u64,
    pub added: f64,
    pub acked: f64,
    pub redelivered: f64,
    pub dead_lettered: f64,
    pub commits: f64,
    /// Store ops per fsync over the interval (0 without fsyncs).
    pub ops_per_sync: f64,
}

impl Rates {
    fn between(a: &Totals, b: &Totals) -> Rates {
        let secs = (b.at_ms.saturating_sub(a.at_ms) as f64 / 1000.0).max(0.001);
        let per_s = |x: u64, y: u64| y.saturating_sub(x) as f64 / secs;
        let syncs = b.syncs.saturating_sub(a.syncs);
        Rates {
            at_ms: b.at_ms,
            added: per_s(a.added, b.added),
            acked: per_s(a.acked, b.acked),
            redelivered: per_s(a.redelivered, b.redelivered),
            dead_lettered: per_s(a.dead_lettered, b.dead_lettered),
            commits: per_s(a.commits, b.commits),
            ops_per_sync: if syncs == 0 {
                0.0
            } else {
                b.ops.saturating_sub(a.ops) as f64 / syncs as f64
            },
        }
    }
}

/// A queue's in (added) and out (acked) rate per second over the last interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct QueueRates {
    pub in_per_s: f64,
    pub out_per_s: f64,
}

#[derive(Default)]
struct Ring {
    samples: VecDeque<Totals>,
    /// Each queue's (added, acked) at the last sample, and its rates since the one before.
    queues: HashMap<String, (u64, u64, QueueRates)>,
}

/// The samples, shared by the sampling task and the handlers.
#[derive(Default)]
pub struct Sampler {
    ring: Mutex<Ring>,
}

impl Sampler {
    /// Starts sampling `broker` every [`EVERY`] until it shuts down.
    pub fn start(broker: &Arc<Broker>) -> Arc<Sampler> {
        let sampler = Arc::new(Sampler::default());
        sampler.sample(broker);
        let (task_sampler, task_broker) = (sampler.clone(), broker.clone());
        broker.spawn(async move {
            let mut tick = tokio::time::interval(EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = task_broker.shutdown().cancelled() => return,
                    _ = tick.tick() => task_sampler.sample(&task_broker),
                }
            }
        });
        sampler
    }

    /// Takes one sample now.
    pub fn sample(&self, broker: &Arc<Broker>) {
        let mut totals = Totals::now(broker);
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let secs = ring.samples.back().map_or(1.0, |last| {
            (totals.at_ms.saturating_sub(last.at_ms) as f64 / 1000.0).max(0.001)
        });
        let mut queues = HashMap::with_capacity(ring.queues.len());
        for queue in broker.management().queues_page("", usize::MAX, |_| true).items {
            let c = queue.snapshot().counters;
            totals.add(&c);
            let rates = match ring.queues.get(&queue.name) {
                Some(&(added, acked, _)) => QueueRates {
                    in_per_s: c.added.saturating_sub(added) as f64 / secs,
                    out_per_s: c.acked.saturating_sub(acked) as f64 / secs,
                },
                None => QueueRates::default(),
            };
            queues.insert(queue.name.clone(), (c.added, c.acked, rates));
        }
        ring.queues = queues;
        if ring.samples.len() == KEPT {
            ring.samples.pop_front();
        }
        ring.samples.push_back(totals);
    }

    /// The latest totals and the rates between consecutive samples, oldest first.
    pub fn history(&self) -> (Totals, Vec<Rates>) {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let rates = ring
            .samples
            .iter()
            .zip(ring.samples.iter().skip(1))
            .map(|(a, b)| Rates::between(a, b))
            .collect();
        (ring.samples.back().copied().unwrap_or_default(), rates)
    }

    /// A queue's rates over the last interval (zero for a queue not yet sampled twice).
    pub fn queue(&self, name: &str) -> QueueRates {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.queues.get(name).map(|q| q.2).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_differences_over_the_interval() {
        let a = Totals {
            at_ms: 1000,
            added: 10,
            ops: 100,
            syncs: 10,
            ..Totals::default()
        };
        let b = Totals {
            at_ms: 6000,
            added: 60,
            acked: 25,
            ops: 400,
            syncs: 20,
            ..Totals::default()
        };
        let r = Rates::between(&a, &b);
        assert_eq!(
            (r.added, r.acked, r.ops_per_sync, r.at_ms),
            (10.0, 5.0, 30.0, 6000)
        );
        assert_eq!(Rates::between(&b, &b).ops_per_sync, 0.0);
    }
}
