//! Outage mode: telling "a dependency is down" from "this message is bad".
//!
//! A poison message fails alone while others succeed; an outage fails everything.
//! When `outage-threshold` distinct messages fail in a row with no success between,
//! or failures make up at least `outage-failure-ratio` of the last `outage-window`
//! outcomes, the queue enters outage mode: its delivery pauses for `outage-pause`,
//! then exactly one probe message is delivered. An ack (the probe's or any other)
//! shows the dependency is back and ends the outage; a failed probe pauses the queue
//! again, for `outage-pause × outage-pause-multiplier^k` capped at `max-outage-pause`
//! (the redelivery formula, [`redelivery::geometric`]). A consumer may also pause
//! the queue itself: a nack's `pause_queue_ms` enters (or prolongs) the outage.
//!
//! Failures during an outage are not the messages' fault: unless
//! `outage-counts-attempts`, the caller gives each its attempt back, so an outage
//! does not dead-letter good messages. The failure that reveals the outage is one
//! of them; those before it were counted, as nobody could tell yet.
//!
//! This file is the pure state machine. The queue keeps one under its lock (in
//! memory only: a restarted broker starts in normal mode), its picking asks
//! [`Outage::gate`] whether to deliver, and settling reports the outcomes.
use std::collections::{HashSet, VecDeque};

use rebound_config::EffectiveSettings;
use rebound_storage::MessageId;

use crate::redelivery;

/// The outage settings of a queue's address.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    pub threshold: Option<u32>,
    pub failure_ratio: Option<f64>,
    pub window: u32,
    pub pause_ms: u64,
    pub multiplier: f64,
    pub max_pause_ms: u64,
    pub counts_attempts: bool,
}

impl Policy {
    pub fn of(settings: &EffectiveSettings) -> Policy {
        Policy {
            threshold: settings.outage_threshold,
            failure_ratio: settings.outage_failure_ratio,
            window: settings.outage_window,
            pause_ms: settings.outage_pause_ms,
            multiplier: settings.outage_pause_multiplier,
            max_pause_ms: settings.max_outage_pause_ms,
            counts_attempts: settings.outage_counts_attempts,
        }
    }

    /// Whether failures are watched at all (a consumer's pause works regardless).
    fn detects(&self) -> bool {
        self.threshold.is_some() || self.failure_ratio.is_some()
    }

    /// The `n`-th pause (the first is 1) of an outage whose first pause was `base_ms`.
    pub fn pause(&self, base_ms: u64, n: u32) -> u64 {
        redelivery::geometric(base_ms, self.multiplier, n).min(self.max_pause_ms)
    }
}

/// Whether the queue may deliver now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Open,
    /// One message, the probe.
    Probe,
    /// Nothing; look again at `until_ms` (`None`: when the probe is settled).
    Closed {
        until_ms: Option<u64>,
    },
}

/// A change worth one log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Entered { pause_ms: u64, by_consumer: bool },
    Left { lasted_ms: u64 },
}

/// What stat, the console and metrics show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Status {
    #[default]
    Normal,
    /// `next_probe_ms` is `None` while the probe is out.
    Outage {
        since_ms: u64,
        next_probe_ms: Option<u64>,
    },
}

/// What a failure meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The queue is in outage mode: the failure is the outage's, not the message's.
    pub in_outage: bool,
    pub change: Option<Change>,
}

/// One queue's outage state.
#[derive(Debug, Default)]
pub struct Outage {
    /// Distinct messages failed since the last success (at most the threshold).
    failing: HashSet<MessageId>,
    /// The last outcomes, `true` for a failure (kept only with a failure ratio).
    recent: VecDeque<bool>,
    recent_failures: usize,
    current: Option<Current>,
}

#[derive(Debug, Clone, Copy)]
struct Current {
    since_ms: u64,
    /// Pauses so far, the first included.
    pauses: u32,
    /// The first pause, which later ones grow from.
    base_ms: u64,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Paused { until_ms: u64 },
    Probing { probe: MessageId },
}

impl Outage {
    pub fn gate(&self, now_ms: u64) -> Gate {
        match self.current.map(|c| c.phase) {
            None => Gate::Open,
            Some(Phase::Paused { until_ms }) if now_ms < until_ms => Gate::Closed {
                until_ms: Some(until_ms),
            },
            Some(Phase::Paused { .. }) => Gate::Probe,
            Some(Phase::Probing { .. }) => Gate::Closed { until_ms: None },
        }
    }

    /// The probe the gate allowed has left.
    pub fn probe_sent(&mut self, probe: MessageId) {
        if let Some(c) = &mut self.current
            && matches!(c.phase, Phase::Paused { .. })
        {
            c.phase = Phase::Probing { probe };
        }
    }

    /// A delivery came back without an outcome (released, not handed over, or
    /// dead-lettered by its consumer): if it was the probe, another one goes.
    pub fn returned(&mut self, id: MessageId) {
        if let Some(c) = &mut self.current
            && c.phase == (Phase::Probing { probe: id })
        {
            c.phase = Phase::Paused { until_ms: 0 };
        }
    }

    /// `n` deliveries were acked.
    pub fn succeeded(&mut self, now_ms: u64, n: usize, policy: &Policy) -> Option<Change> {
        self.failing.clear();
        for _ in 0..n.min(policy.window as usize) {
            self.record(false, policy);
        }
        let current = self.current.take()?;
        self.recent.clear();
        self.recent_failures = 0;
        Some(Change::Left {
            lasted_ms: now_ms.saturating_sub(current.since_ms),
        })
    }

    /// The delivery of message `id` failed.
    pub fn failed(&mut self, now_ms: u64, id: MessageId, policy: &Policy) -> Failure {
        if let Some(c) = &mut self.current {
            if c.phase == (Phase::Probing { probe: id }) {
                c.pauses = c.pauses.saturating_add(1);
                let until_ms = now_ms.saturating_add(policy.pause(c.base_ms, c.pauses));
                c.phase = Phase::Paused { until_ms };
            }
            return Failure {
                in_outage: true,
                change: None,
            };
        }
        if !policy.detects() {
            return Failure {
                in_outage: false,
                change: None,
            };
        }
        self.record(true, policy);
        let by_count = policy.threshold.is_some_and(|t| {
            if self.failing.len() < t as usize {
                self.failing.insert(id);
            }
            self.failing.len() >= t as usize
        });
        let by_ratio = policy.failure_ratio.is_some_and(|ratio| {
            self.recent.len() >= policy.window as usize
                && self.recent_failures as f64 >= ratio * self.recent.len() as f64
        });
        let change = (by_count || by_ratio).then(|| self.enter(now_ms, policy.pause_ms, policy, false));
        Failure {
            in_outage: change.is_some(),
            change,
        }
    }

    /// A consumer said its dependency is down: pause for `pause_ms` (at most
    /// `max-outage-pause`), entering outage mode if the queue is not in it.
    pub fn pause(&mut self, now_ms: u64, pause_ms: u64, policy: &Policy) -> Option<Change> {
        let pause_ms = pause_ms.min(policy.max_pause_ms);
        let Some(c) = &mut self.current else {
            return Some(self.enter(now_ms, pause_ms, policy, true));
        };
        c.base_ms = pause_ms;
        // While a probe is out its outcome decides; its failure pauses from the new base.
        if let Phase::Paused { until_ms } = &mut c.phase {
            *until_ms = (*until_ms).max(now_ms.saturating_add(pause_ms));
        }
        None
    }

    /// An operator ends the outage: delivery resumes at once.
    pub fn resume(&mut self, now_ms: u64) -> Option<Change> {
        let current = self.current.take()?;
        self.failing.clear();
        self.recent.clear();
        self.recent_failures = 0;
        Some(Change::Left {
            lasted_ms: now_ms.saturating_sub(current.since_ms),
        })
    }

    /// An operator asks for the next probe now rather than at the end of the
    /// pause; false when there is no outage, or a probe is already out.
    pub fn probe_now(&mut self) -> bool {
        match &mut self.current {
            Some(Current {
                phase: Phase::Paused { until_ms },
                ..
            }) => {
                *until_ms = 0;
                true
            }
            _ => false,
        }
    }

    pub fn status(&self) -> Status {
        match self.current {
            None => Status::Normal,
            Some(c) => Status::Outage {
                since_ms: c.since_ms,
                next_probe_ms: match c.phase {
                    Phase::Paused { until_ms } => Some(until_ms),
                    Phase::Probing { .. } => None,
                },
            },
        }
    }

    fn enter(&mut self, now_ms: u64, base_ms: u64, policy: &Policy, by_consumer: bool) -> Change {
        let pause_ms = policy.pause(base_ms, 1);
        self.failing.clear();
        self.current = Some(Current {
            since_ms: now_ms,
            pauses: 1,
            base_ms,
            phase: Phase::Paused {
                until_ms: now_ms.saturating_add(pause_ms),
            },
        });
        Change::Entered {
            pause_ms,
            by_consumer,
        }
    }

    fn record(&mut self, failure: bool, policy: &Policy) {
        if policy.failure_ratio.is_none() {
            return;
        }
        if self.recent.len() >= policy.window as usize && self.recent.pop_front() == Some(true) {
            self.recent_failures -= 1;
        }
        self.recent.push_back(failure);
        self.recent_failures += usize::from(failure);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy(threshold: Option<u32>, ratio: Option<f64>) -> Policy {
        Policy::of(&EffectiveSettings {
            outage_threshold: threshold,
            outage_failure_ratio: ratio,
            outage_window: 10,
            ..EffectiveSettings::default()
        })
    }

    #[test]
    fn off_by_default() {
        let p = Policy::of(&EffectiveSettings::default());
        let mut o = Outage::default();
        for id in 0..1000 {
            assert!(!o.failed(0, id, &p).in_outage);
        }
        assert_eq!(o.gate(0), Gate::Open);
        assert_eq!(o.status(), Status::Normal);
    }

    #[test]
    fn distinct_failures_in_a_row_enter_and_an_ack_leaves() {
        let p = policy(Some(3), None);
        let mut o = Outage::default();
        assert!(!o.failed(10, 1, &p).in_outage);
        assert!(!o.failed(10, 2, &p).in_outage);
        let third = o.failed(10, 3, &p);
        assert_eq!(
            third.change,
            Some(Change::Entered {
                pause_ms: 1000,
                by_consumer: false
            })
        );
        assert!(third.in_outage);
        assert_eq!(o.gate(500), Gate::Closed { until_ms: Some(1010) });
        assert_eq!(o.gate(1010), Gate::Probe);
        o.probe_sent(7);
        assert_eq!(o.gate(1011), Gate::Closed { until_ms: None });
        assert_eq!(o.succeeded(1500, 1, &p), Some(Change::Left { lasted_ms: 1490 }));
        assert_eq!(o.gate(1500), Gate::Open);
    }

    #[test]
    fn a_poison_message_alone_or_a_success_between_does_not_enter() {
        let p = policy(Some(3), None);
        let mut o = Outage::default();
        for _ in 0..100 {
            assert!(!o.failed(0, 42, &p).in_outage, "the same message again");
        }
        o.succeeded(0, 1, &p);
        for round in 0..100 {
            assert!(!o.failed(0, round * 2, &p).in_outage);
            assert!(!o.failed(0, round * 2 + 1, &p).in_outage);
            o.succeeded(0, 1, &p);
        }
    }

    #[test]
    fn a_failure_ratio_over_the_window_enters() {
        let p = policy(None, Some(0.5));
        let mut o = Outage::default();
        // Fewer outcomes than the window: no verdict yet.
        for id in 0..4 {
            assert!(!o.failed(0, id, &p).in_outage);
            o.succeeded(0, 1, &p);
        }
        // 4 of 9, then 5 of 10.
        assert!(!o.failed(0, 8, &p).in_outage);
        assert!(o.failed(0, 9, &p).in_outage);
    }

    #[test]
    fn a_failed_probe_pauses_longer_and_other_failures_change_nothing() {
        let p = policy(Some(1), None);
        let mut o = Outage::default();
        o.failed(0, 1, &p);
        assert_eq!(o.gate(1000), Gate::Probe);
        o.probe_sent(5);
        assert!(o.failed(1000, 6, &p).in_outage, "a straggler");
        assert_eq!(o.gate(1000), Gate::Closed { until_ms: None });
        assert_eq!(o.failed(1000, 5, &p).change, None);
        assert_eq!(o.gate(1000), Gate::Closed { until_ms: Some(3000) });
        assert_eq!(
            o.status(),
            Status::Outage {
                since_ms: 0,
                next_probe_ms: Some(3000)
            }
        );
    }

    #[test]
    fn a_returned_probe_is_replaced_at_once() {
        let p = policy(Some(1), None);
        let mut o = Outage::default();
        o.failed(0, 1, &p);
        o.probe_sent(1);
        o.returned(2);
        assert_eq!(o.gate(2000), Gate::Closed { until_ms: None });
        o.returned(1);
        assert_eq!(o.gate(1001), Gate::Probe);
    }

    #[test]
    fn a_consumer_pause_works_without_detection_and_is_capped() {
        let p = policy(None, None);
        let mut o = Outage::default();
        assert_eq!(
            o.pause(0, 500, &p),
            Some(Change::Entered {
                pause_ms: 500,
                by_consumer: true
            })
        );
        assert_eq!(o.gate(499), Gate::Closed { until_ms: Some(500) });
        assert_eq!(o.pause(100, 10_000_000, &p), None);
        assert_eq!(
            o.gate(100),
            Gate::Closed {
                until_ms: Some(60_100)
            }
        );
    }

    proptest! {
        /// Whatever happens, the gate never lets a second probe out while one is,
        /// and never opens during an outage.
        #[test]
        fn never_more_than_one_probe_in_flight(
            ops in proptest::collection::vec((0u8..6, 0u64..8, 0u64..3000), 1..200),
            threshold in 1u32..4,
        ) {
            let p = policy(Some(threshold), Some(0.8));
            let mut o = Outage::default();
            let mut now = 0;
            let mut probes: Vec<MessageId> = Vec::new();
            let mut next_probe = 1000;
            for (op, id, dt) in ops {
                now += dt;
                match o.gate(now) {
                    Gate::Probe => {
                        prop_assert!(probes.is_empty(), "a second probe while {probes:?} is out");
                        probes.push(next_probe);
                        o.probe_sent(next_probe);
                        next_probe += 1;
                    }
                    Gate::Open => prop_assert_eq!(o.status(), Status::Normal),
                    Gate::Closed { .. } => prop_assert!(o.status() != Status::Normal),
                }
                match op {
                    0 => { o.failed(now, id, &p); }
                    1 => if let Some(probe) = probes.pop() { o.failed(now, probe, &p); },
                    2 => if let Some(probe) = probes.pop() { o.returned(probe); },
                    3 => { o.pause(now, id * 100, &p); }
                    4 => {
                        // An ack ends the outage; a probe still out is an ordinary delivery.
                        o.succeeded(now, 1, &p);
                        probes.clear();
                    }
                    _ => { o.returned(id); }
                }
            }
        }

        /// Consecutive failed probes pause for base × multiplier^(k−1), capped.
        #[test]
        fn pause_grows_geometrically_up_to_the_cap(
            base in 1u64..5000,
            multiplier in 1.0f64..4.0,
            cap in 1u64..200_000,
            probes in 1u32..40,
        ) {
            let p = Policy::of(&EffectiveSettings {
                outage_threshold: Some(1),
                outage_pause_ms: base,
                outage_pause_multiplier: multiplier,
                max_outage_pause_ms: cap,
                ..EffectiveSettings::default()
            });
            let mut o = Outage::default();
            o.failed(0, 0, &p);
            let mut now = 0;
            let mut last = 0;
            for k in 1..=probes {
                let Gate::Closed { until_ms: Some(until) } = o.gate(now) else {
                    panic!("paused expected");
                };
                let pause = until - now;
                let expected = ((base as f64 * multiplier.powi(k as i32 - 1)) as u64).min(cap);
                prop_assert_eq!(pause, expected);
                prop_assert!(pause >= last && pause <= cap);
                last = pause;
                now = until;
                prop_assert_eq!(o.gate(now), Gate::Probe);
                o.probe_sent(k as MessageId);
                o.failed(now, k as MessageId, &p);
            }
        }
    }
}
