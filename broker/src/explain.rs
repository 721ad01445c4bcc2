//! The redelivery explainer: an address's effective policy as a schedule an operator
//! can read — delivery 2 after 1 s, delivery 3 after 2 s, …, dead-lettered to
//! `DLQ.orders` after the 5th failure, 15 s after the first delivery.
//!
//! It walks the very verdicts the broker acts on ([`redelivery::verdict`]) and the
//! destination the broker forwards to ([`Destination::dead_letters`]), so the console
//! cannot explain a policy the broker does not apply. A consumer's own `retry-after`
//! replaces the delays shown; the time consumers take is not counted.
use rebound_config::EffectiveSettings;

use crate::dead_letter::Destination;
use crate::redelivery::{self, Verdict};

/// Deliveries a plan lists; the walk to the end goes on without listing them.
pub const SHOWN: usize = 30;

/// How far the walk looks for the end (verdicts are cheap: this takes about a ms).
const WALK_LIMIT: u32 = 100_000;

/// An address's redelivery policy as a schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The first deliveries (at most [`SHOWN`]), the first one at 0.
    pub deliveries: Vec<Delivery>,
    /// Deliveries not listed before the end.
    pub more: u64,
    /// What happens after the last failure.
    pub end: End,
    /// Time from the first delivery to the last one, least and most (jitter): None
    /// when there is no end or the walk did not reach it.
    pub total_ms: Option<(u64, u64)>,
    /// `redelivery-collision-avoidance-factor`: formula delays vary by ± this fraction.
    pub jitter_factor: f64,
}

/// One delivery of a message that keeps failing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Delivery {
    /// 1 = the first delivery.
    pub number: u32,
    /// The delay before it, after the previous failure (least, most).
    pub delay_ms: (u64, u64),
    /// When it happens, counted from the first delivery (least, most).
    pub at_ms: (u64, u64),
}

/// How a message that keeps failing leaves its queue.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// `max-delivery-attempts` reached after `after` failures: to `to`, or dropped
    /// when there is no `dead-letter-address`.
    DeadLetter { after: u32, to: Option<Destination> },
    /// A schedule's `move(...)` step after `after` failures.
    Move { after: u32, address: String },
    /// A schedule's `delete` step after `after` failures.
    Delete { after: u32 },
    /// Unlimited attempts and no terminal schedule step: it is never dead-lettered.
    Never,
}

/// The plan for messages of `address` under `settings`.
pub fn plan(settings: &EffectiveSettings, address: &str) -> Plan {
    let mut deliveries = vec![Delivery {
        number: 1,
        delay_ms: (0, 0),
        at_ms: (0, 0),
    }];
    let mut at = (0u64, 0u64);
    let mut more = 0;
    let mut failures = 1u32;
    let end = loop {
        match redelivery::verdict(settings, failures) {
            Verdict::Redeliver(delay) => {
                let (least, most) = delay.range(settings);
                at = (at.0.saturating_add(least), at.1.saturating_add(most));
                if deliveries.len() < SHOWN {
                    deliveries.push(Delivery {
                        number: failures + 1,
                        delay_ms: (least, most),
                        at_ms: at,
                    });
                } else {
                    more += 1;
                }
            }
            terminal => break Some(end_of(terminal, failures, settings, address)),
        }
        if failures == WALK_LIMIT || failures == u32::MAX {
            break None;
        }
        failures += 1;
    };
    let (end, total_ms) = match end {
        Some(end) => (end, Some(at)),
        None => (end_beyond_walk(settings, address), None),
    };
    Plan {
        deliveries,
        more,
        end,
        total_ms,
        jitter_factor: settings.redelivery_collision_avoidance_factor,
    }
}

fn end_of(verdict: Verdict, after: u32, settings: &EffectiveSettings, address: &str) -> End {
    match verdict {
        Verdict::DeadLetter => End::DeadLetter {
            after,
            to: Destination::dead_letters(settings, address),
        },
        Verdict::Move(target) => End::Move {
            after,
            address: target.address_for(address),
        },
        Verdict::Delete => End::Delete { after },
        Verdict::Redeliver(_) => unreachable!("a redelivery does not end the plan"),
    }
}

/// The end of a plan longer than the walk: the first failure count, from the
/// attempts limit and the schedule's terminal steps, whose verdict is terminal.
fn end_beyond_walk(settings: &EffectiveSettings, address: &str) -> End {
    let step_ends = settings
        .redelivery_schedule
        .iter()
        .flat_map(|s| s.steps())
        .filter(|step| step.action.is_terminal())
        .map(|step| step.index.saturating_sub(1));
    let candidates = settings.max_delivery_attempts.into_iter().chain(step_ends);
    match candidates.filter(|&n| n > WALK_LIMIT).min() {
        Some(after) => end_of(redelivery::verdict(settings, after), after, settings, address),
        None => End::Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{SeedableRng, rngs::StdRng};
    use rebound_config::RedeliverySchedule;

    use crate::redelivery::{Decision, decide};

    fn settings(delay: u64, multiplier: f64, max_delay: u64, attempts: Option<u32>) -> EffectiveSettings {
        EffectiveSettings {
            redelivery_delay_ms: delay,
            redelivery_delay_multiplier: multiplier,
            max_redelivery_delay_ms: max_delay,
            max_delivery_attempts: attempts,
            ..EffectiveSettings::default()
        }
    }

    #[test]
    fn geometric_policy_reads_as_a_schedule() {
        let mut s = settings(1000, 2.0, 5000, Some(5));
        s.dead_letter_address = Some("DLA".into());
        s.auto_create_dead_letter_resources = true;
        let plan = plan(&s, "orders");
        let delays: Vec<u64> = plan.deliveries.iter().map(|d| d.delay_ms.0).collect();
        assert_eq!(delays, [0, 1000, 2000, 4000, 5000]);
        assert_eq!(plan.total_ms, Some((12_000, 12_000)));
        assert_eq!(
            plan.end,
            End::DeadLetter {
                after: 5,
                to: Some(Destination {
                    address: "DLA".into(),
                    own_queue: Some("DLQ.orders".into())
                })
            }
        );
    }

    #[test]
    fn jitter_gives_ranges_under_the_cap() {
        let mut s = settings(1000, 1.0, 1200, Some(3));
        s.redelivery_collision_avoidance_factor = 0.5;
        let plan = plan(&s, "a");
        assert_eq!(plan.deliveries[1].delay_ms, (500, 1200));
        assert_eq!(plan.total_ms, Some((1000, 2400)));
        assert_eq!(plan.end, End::DeadLetter { after: 3, to: None });
    }

    #[test]
    fn unlimited_attempts_are_never_dead_lettered_and_list_a_bounded_start() {
        let plan = plan(&settings(10, 1.0, 100, None), "a");
        assert_eq!(plan.end, End::Never);
        assert_eq!(plan.deliveries.len(), SHOWN);
        assert_eq!(plan.total_ms, None);
    }

    #[test]
    fn schedule_steps_and_far_ends() {
        let mut s = settings(0, 1.0, 0, None);
        s.redelivery_schedule = Some(RedeliverySchedule::parse("2:100; 4:move(queue:parked.$)").unwrap());
        let p = plan(&s, "orders");
        let delays: Vec<u64> = p.deliveries.iter().map(|d| d.delay_ms.0).collect();
        assert_eq!(delays, [0, 100, 100]);
        assert_eq!(
            p.end,
            End::Move {
                after: 3,
                address: "parked.orders".into()
            }
        );
        s.redelivery_schedule = None;
        s.max_delivery_attempts = Some(u32::MAX);
        let p = plan(&s, "orders");
        assert_eq!(
            p.end,
            End::DeadLetter {
                after: u32::MAX,
                to: None
            }
        );
        assert_eq!(
            (p.total_ms, p.more),
            (None, u64::from(WALK_LIMIT) - SHOWN as u64 + 1)
        );
    }

    fn any_settings() -> impl Strategy<Value = EffectiveSettings> {
        let schedule = prop_oneof![
            Just(None),
            Just(Some("3:500; 6:2000")),
            Just(Some("2:100; 5:delete")),
            Just(Some("1:50; 4:move(topic:parked)")),
        ];
        (
            0u64..5000,
            1.0f64..4.0,
            0u64..60_000,
            prop_oneof![Just(0.0), 0.0f64..=1.0],
            prop_oneof![Just(None), (1u32..40).prop_map(Some)],
            schedule,
            any::<bool>(),
        )
            .prop_map(|(delay, multiplier, cap, factor, attempts, schedule, dla)| {
                let mut s = settings(delay, multiplier, cap, attempts);
                s.redelivery_collision_avoidance_factor = factor;
                s.redelivery_schedule = schedule.map(|t| RedeliverySchedule::parse(t).unwrap());
                s.dead_letter_address = dla.then(|| "DLA".to_owned());
                s
            })
    }

    proptest! {
        /// What the broker decides after each failure is what the plan shows: a
        /// delay within the listed range, or the plan's end at the same failure.
        #[test]
        fn plan_agrees_with_the_broker(s in any_settings(), seed in any::<u64>()) {
            let plan = plan(&s, "orders");
            let mut rng = StdRng::seed_from_u64(seed);
            for delivery in plan.deliveries.iter().skip(1) {
                let failures = delivery.number - 1;
                match decide(&s, failures, None, &mut rng) {
                    Decision::Redeliver { delay_ms } => {
                        prop_assert!(delivery.delay_ms.0 <= delay_ms && delay_ms <= delivery.delay_ms.1,
                            "after {failures}: {delay_ms} outside {:?}", delivery.delay_ms);
                    }
                    other => prop_assert!(false, "after {failures}: {other:?}, plan redelivers"),
                }
            }
            let last = plan.deliveries.last().unwrap().number as u64 + plan.more;
            let decided = decide(&s, last as u32, None, &mut rng);
            match (&plan.end, decided) {
                (End::DeadLetter { after, .. }, Decision::DeadLetter) => prop_assert_eq!(*after as u64, last),
                (End::Move { after, address }, Decision::Move(target)) => {
                    prop_assert_eq!(*after as u64, last);
                    prop_assert_eq!(address, &target.address_for("orders"));
                }
                (End::Delete { after }, Decision::Delete) => prop_assert_eq!(*after as u64, last),
                (End::Never, Decision::Redeliver { .. }) => {}
                (end, decided) => prop_assert!(false, "plan ends {end:?}, broker decides {decided:?}"),
            }
        }
    }
}
