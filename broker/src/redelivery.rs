//! The redelivery policy: what happens to a message after a failed delivery.
//!
//! This is the one place that decides between "deliver again now", "deliver again
//! later", "dead-letter" and the terminal steps of a redelivery schedule. It is pure:
//! the broker feeds it the queue's effective address-settings and the message's
//! delivery count and carries the decision out.
//!
//! The rules are Artemis's (`QueueImpl.checkRedelivery` and
//! `calculateRedeliveryDelay`):
//! - `max-delivery-attempts` counts deliveries, the first included: with 3 the message
//!   is delivered 3 times and dead-lettered after the 3rd failure;
//! - the delay after the n-th failed delivery is
//!   `redelivery-delay × multiplier^(n−1)`, randomised by ± factor × delay when
//!   `redelivery-collision-avoidance-factor` is set, then capped at
//!   `max-redelivery-delay` (the cap applies after the jitter, as in Artemis);
//! - with no `redelivery-delay` the message is redelivered at once.
//!
//! Beyond Artemis: a `redelivery-schedule` (the JMS binding component's
//! `5:1000; 10:5000; 50:move(queue:dlq$oops)` format) replaces the formula when set,
//! and a consumer may ask for its own delay (`retry-after`), capped by
//! `max-retry-after` (default 1 h) rather than by the broker-side delays: a broker
//! that configures no delay must not turn a consumer's "retry in 30 s" into "now".
//! Whichever terminal step comes first wins: the attempts limit is checked before
//! the schedule.
use rand::Rng;
use rebound_config::{EffectiveSettings, MoveTarget, StepAction};

/// What to do with a message whose delivery failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Deliver again after `delay_ms` (0: at once).
    Redeliver { delay_ms: u64 },
    /// Move to the dead-letter address: `max-delivery-attempts` was reached.
    DeadLetter,
    /// A schedule's `move(...)` step: move to this target instead of delivering again.
    Move(MoveTarget),
    /// A schedule's `delete` step: drop the message.
    Delete,
}

/// What the policy does after a failure, before chance: the jitter and a consumer's
/// own delay are applied by [`decide`]; the explainer ([`crate::explain`]) shows it
/// as a schedule. Both go through here, so they cannot disagree.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Redeliver(Delay),
    DeadLetter,
    Move(MoveTarget),
    Delete,
}

/// A redelivery delay before jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delay {
    /// A schedule step's delay: exact.
    Step(u64),
    /// The geometric formula's delay, before the jitter and the cap.
    Formula(u64),
}

/// The policy's verdict on a message that has now failed `delivery_count` deliveries.
pub fn verdict(settings: &EffectiveSettings, delivery_count: u32) -> Verdict {
    if settings
        .max_delivery_attempts
        .is_some_and(|max| delivery_count >= max)
    {
        return Verdict::DeadLetter;
    }
    let scheduled = settings
        .redelivery_schedule
        .as_ref()
        .and_then(|schedule| schedule.step_for(delivery_count.saturating_add(1)));
    Verdict::Redeliver(match scheduled {
        Some(StepAction::Delete) => return Verdict::Delete,
        Some(StepAction::Move(target)) => return Verdict::Move(target.clone()),
        Some(StepAction::Delay(ms)) => Delay::Step(*ms),
        None if settings.redelivery_schedule.is_some() => Delay::Step(0),
        None => Delay::Formula(formula_delay(settings, delivery_count)),
    })
}

/// Decides the fate of a message that has now failed `delivery_count` deliveries.
///
/// `retry_after_ms` is the consumer's own delay, if its nack carried one.
pub fn decide(
    settings: &EffectiveSettings,
    delivery_count: u32,
    retry_after_ms: Option<u64>,
    rng: &mut impl Rng,
) -> Decision {
    let delay = match verdict(settings, delivery_count) {
        Verdict::Redeliver(delay) => delay,
        Verdict::DeadLetter => return Decision::DeadLetter,
        Verdict::Move(target) => return Decision::Move(target),
        Verdict::Delete => return Decision::Delete,
    };
    let delay_ms = match retry_after_ms {
        Some(ms) => ms.min(settings.max_retry_after_ms),
        None => delay.draw(settings, rng),
    };
    Decision::Redeliver { delay_ms }
}

/// The cap a consumer's `retry-after` of `asked_ms` is shortened to, if it is.
pub fn retry_after_cap(settings: &EffectiveSettings, asked_ms: u64) -> Option<u64> {
    (asked_ms > settings.max_retry_after_ms).then_some(settings.max_retry_after_ms)
}

/// Artemis's redelivery delay after the `delivery_count`-th failed delivery.
pub fn delay_after_failure(settings: &EffectiveSettings, delivery_count: u32, rng: &mut impl Rng) -> u64 {
    Delay::Formula(formula_delay(settings, delivery_count)).draw(settings, rng)
}

/// `redelivery-delay × multiplier^(n−1)`, before the jitter and the cap.
fn formula_delay(settings: &EffectiveSettings, delivery_count: u32) -> u64 {
    let exponent = delivery_count.saturating_sub(1).min(i32::MAX as u32) as i32;
    // `as` saturates: an overflowing power becomes u64::MAX and is then capped.
    (settings.redelivery_delay_ms as f64 * settings.redelivery_delay_multiplier.powi(exponent)) as u64
}

impl Delay {
    /// The delay a message gets: a formula delay randomised by ± factor × delay
    /// and then capped (as in Artemis).
    pub fn draw(self, settings: &EffectiveSettings, rng: &mut impl Rng) -> u64 {
        let delay = match self {
            Delay::Step(ms) => return ms,
            Delay::Formula(0) => return 0,
            Delay::Formula(ms) => ms,
        };
        let factor = settings.redelivery_collision_avoidance_factor;
        let delay = if factor > 0.0 {
            let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let variance = sign * factor * rng.random::<f64>();
            (delay as f64 + delay as f64 * variance) as u64
        } else {
            delay
        };
        delay.min(settings.max_redelivery_delay_ms)
    }

    /// The least and the greatest delay [`draw`](Self::draw) can give.
    pub fn range(self, settings: &EffectiveSettings) -> (u64, u64) {
        let delay = match self {
            Delay::Step(ms) => return (ms, ms),
            Delay::Formula(ms) => ms,
        };
        let cap = settings.max_redelivery_delay_ms;
        let factor = settings.redelivery_collision_avoidance_factor;
        let at = |variance: f64| ((delay as f64 + delay as f64 * variance) as u64).min(cap);
        (at(-factor), at(factor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng};
    use rebound_config::{RedeliverySchedule, SettingsRepository};

    fn settings(delay: u64, multiplier: f64, max: Option<u64>) -> EffectiveSettings {
        let mut s = SettingsRepository::default().effective("any");
        s.redelivery_delay_ms = delay;
        s.redelivery_delay_multiplier = multiplier;
        s.max_redelivery_delay_ms = max.unwrap_or(delay * 10);
        s
    }

    fn delays(s: &EffectiveSettings, failures: u32) -> Vec<u64> {
        let mut rng = StdRng::seed_from_u64(1);
        (1..=failures)
            .map(|n| delay_after_failure(s, n, &mut rng))
            .collect()
    }

    #[test]
    fn formula_matches_hand_computed_table() {
        // (delay, multiplier, max) → delays after failures 1..=6; from the Artemis
        // docs and MultipliedDelayedMessageTest.
        let table: &[(u64, f64, Option<u64>, [u64; 6])] = &[
            (5000, 1.0, None, [5000; 6]),
            (5000, 2.0, Some(15000), [5000, 10000, 15000, 15000, 15000, 15000]),
            (100, 2.0, Some(1000), [100, 200, 400, 800, 1000, 1000]),
            (1000, 3.0, None, [1000, 3000, 9000, 10000, 10000, 10000]),
            (60000, 1.0, Some(10000), [10000; 6]),
            (200, 2.0, Some(1000), [200, 400, 800, 1000, 1000, 1000]),
            (0, 2.0, Some(1000), [0; 6]),
        ];
        for (delay, multiplier, max, expected) in table {
            let s = settings(*delay, *multiplier, *max);
            assert_eq!(delays(&s, 6), expected, "{delay}/{multiplier}/{max:?}");
        }
    }

    #[test]
    fn huge_exponent_saturates_at_the_cap() {
        let s = settings(1000, 10.0, Some(60_000));
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(delay_after_failure(&s, u32::MAX, &mut rng), 60_000);
    }

    #[test]
    fn jitter_stays_within_the_factor_and_under_the_cap() {
        let mut s = settings(1000, 1.0, Some(15000));
        s.redelivery_collision_avoidance_factor = 0.5;
        let mut rng = StdRng::seed_from_u64(7);
        let seen: Vec<u64> = (0..1000).map(|_| delay_after_failure(&s, 1, &mut rng)).collect();
        assert!(seen.iter().all(|d| (500..=1500).contains(d)), "{seen:?}");
        assert!(seen.iter().any(|&d| d < 1000) && seen.iter().any(|&d| d > 1000));
        s.max_redelivery_delay_ms = 1100;
        assert!((0..1000).all(|_| delay_after_failure(&s, 1, &mut rng) <= 1100));
    }

    #[test]
    fn dead_letters_when_attempts_are_used_up() {
        let mut s = settings(100, 1.0, None);
        s.max_delivery_attempts = Some(3);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            decide(&s, 1, None, &mut rng),
            Decision::Redeliver { delay_ms: 100 }
        );
        assert_eq!(
            decide(&s, 2, None, &mut rng),
            Decision::Redeliver { delay_ms: 100 }
        );
        assert_eq!(decide(&s, 3, None, &mut rng), Decision::DeadLetter);
        s.max_delivery_attempts = None;
        assert_eq!(
            decide(&s, 10_000, None, &mut rng),
            Decision::Redeliver { delay_ms: 100 }
        );
    }

    #[test]
    fn retry_after_overrides_and_is_clamped() {
        let mut s = settings(100, 2.0, Some(5000));
        s.max_retry_after_ms = 5000;
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            decide(&s, 1, Some(2500), &mut rng),
            Decision::Redeliver { delay_ms: 2500 }
        );
        assert_eq!(
            decide(&s, 1, Some(60_000), &mut rng),
            Decision::Redeliver { delay_ms: 5000 }
        );
    }

    #[test]
    fn retry_after_is_kept_when_no_broker_side_delay_is_configured() {
        // The default config: no redelivery-delay, so max-redelivery-delay is 0.
        let s = SettingsRepository::default().effective("any");
        assert_eq!(s.max_redelivery_delay_ms, 0);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            decide(&s, 1, Some(30_000), &mut rng),
            Decision::Redeliver { delay_ms: 30_000 }
        );
        assert_eq!(retry_after_cap(&s, 30_000), None);
        assert_eq!(retry_after_cap(&s, 7_200_000), Some(3_600_000));
    }

    #[test]
    fn schedule_gives_delays_and_terminal_steps() {
        let mut s = settings(0, 1.0, Some(100_000));
        s.max_delivery_attempts = None;
        s.redelivery_schedule =
            Some(RedeliverySchedule::parse("5:1000; 10:5000; 50:move(queue:dlq$oops)").unwrap());
        let mut rng = StdRng::seed_from_u64(1);
        // delivery_count failed deliveries → the next delivery is number count + 1.
        let expect = |count: u32| decide(&s, count, None, &mut StdRng::seed_from_u64(count as u64));
        for count in 1..=3 {
            assert_eq!(
                expect(count),
                Decision::Redeliver { delay_ms: 0 },
                "count {count}"
            );
        }
        for count in 4..=8 {
            assert_eq!(
                expect(count),
                Decision::Redeliver { delay_ms: 1000 },
                "count {count}"
            );
        }
        for count in 9..=48 {
            assert_eq!(
                expect(count),
                Decision::Redeliver { delay_ms: 5000 },
                "count {count}"
            );
        }
        match decide(&s, 49, None, &mut rng) {
            Decision::Move(target) => assert_eq!(target.address_for("Queue1"), "dlqQueue1oops"),
            other => panic!("expected a move, got {other:?}"),
        }
    }

    #[test]
    fn attempts_limit_beats_a_later_schedule_step() {
        let mut s = settings(0, 1.0, None);
        s.max_delivery_attempts = Some(3);
        s.redelivery_schedule = Some(RedeliverySchedule::parse("2:100; 4:delete").unwrap());
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(
            decide(&s, 1, None, &mut rng),
            Decision::Redeliver { delay_ms: 100 }
        );
        assert_eq!(decide(&s, 3, None, &mut rng), Decision::DeadLetter);
        s.max_delivery_attempts = Some(10);
        assert_eq!(decide(&s, 3, None, &mut rng), Decision::Delete);
    }
}
