//! Scheduled delivery: when a producer's message becomes deliverable.
//!
//! One form inside the broker: Artemis's `_AMQ_SCHED_DELIVERY` property, an absolute
//! time in ms since the Unix epoch. The gRPC edge turns a send's `deliver_at_ms` or
//! `delay_ms` into it ([`requested`]), as Artemis turns AMQP's `x-opt-delivery-time`
//! and `-delay` into it on receipt, so the stored message says when it was meant
//! for whichever way it was asked. The engine turns the property into a due time
//! ([`due_ms`]); a message with one is stored saying when (its record's
//! `scheduled_at_ms`, so that a scheduled send costs no delivery state), and waits
//! in its queue's timeline ([`crate::timeline`]) like a delayed redelivery: it
//! never blocks the messages behind it, and a restart finds it waiting.
//!
//! Only producers' sends are scheduled: a message the broker moves (a dead letter,
//! `queue retry`) keeps the property but is due at once on its new queue.
use rebound_storage::DeliveryState;

use crate::error::{BrokerError, Result};

/// How far ahead a message may be scheduled: 3650 days. Further is almost surely a
/// unit mistake (µs or ns for ms), and would park the message for good.
pub const MAX_AHEAD_MS: u64 = 3650 * 24 * 3600 * 1000;

/// The absolute time a send's fields ask for, for `_AMQ_SCHED_DELIVERY`:
/// `deliver_at_ms` wins over `delay_ms` (as AMQP's delivery time wins over its
/// delay). None when neither is set: a property the producer set stands.
pub fn requested(deliver_at_ms: Option<u64>, delay_ms: Option<u64>, now_ms: u64) -> Option<i64> {
    let at = deliver_at_ms.or_else(|| delay_ms.map(|delay| now_ms.saturating_add(delay)))?;
    Some(i64::try_from(at).unwrap_or(i64::MAX))
}

/// When a message asking for delivery at `at_ms` becomes deliverable: `0` (at once)
/// for a time not in the future; refused beyond [`MAX_AHEAD_MS`].
pub fn due_ms(at_ms: i64, now_ms: u64) -> Result<u64> {
    let Ok(at) = u64::try_from(at_ms) else {
        return Ok(0);
    };
    if at <= now_ms {
        return Ok(0);
    }
    if at - now_ms > MAX_AHEAD_MS {
        return Err(BrokerError::InvalidArgument(format!(
            "scheduled delivery at {at_ms} ms since the epoch is {} days ahead, more than \
             the 3650 allowed (a delay in µs or ns rather than ms?)",
            (at - now_ms) / (24 * 3600 * 1000)
        )));
    }
    Ok(at)
}

/// When a stored message is due (0: now), read back with its delivery state:
/// a state says, once one was written (the message was delivered since);
/// else its record's `scheduled_at_ms`, as its send asked.
pub fn stored_due_ms(state: Option<&DeliveryState>, record_at_ms: u64) -> u64 {
    state.map_or(record_at_ms, |s| s.scheduled_at_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn deliver_at_wins_over_delay_and_neither_leaves_the_property() {
        assert_eq!(requested(Some(5), Some(1000), NOW), Some(5));
        assert_eq!(requested(None, Some(1000), NOW), Some(NOW as i64 + 1000));
        assert_eq!(requested(None, None, NOW), None);
        assert_eq!(requested(None, Some(u64::MAX), NOW), Some(i64::MAX));
        assert_eq!(requested(Some(u64::MAX), None, NOW), Some(i64::MAX));
    }

    #[test]
    fn the_past_is_now_and_the_far_future_is_refused() {
        assert_eq!(due_ms(-1, NOW).unwrap(), 0);
        assert_eq!(due_ms(0, NOW).unwrap(), 0);
        assert_eq!(due_ms(NOW as i64, NOW).unwrap(), 0);
        assert_eq!(due_ms(NOW as i64 + 1, NOW).unwrap(), NOW + 1);
        let limit = (NOW + MAX_AHEAD_MS) as i64;
        assert_eq!(due_ms(limit, NOW).unwrap(), limit as u64);
        let err = due_ms(limit + 1, NOW).unwrap_err();
        assert!(matches!(err, BrokerError::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("3650"), "{err}");
        assert!(due_ms(i64::MAX, NOW).is_err());
    }

    #[test]
    fn a_stored_state_says_when_over_the_record() {
        assert_eq!(stored_due_ms(None, NOW), NOW);
        let redelivered = DeliveryState {
            delivery_count: 1,
            scheduled_at_ms: 0,
            failures: Vec::new(),
        };
        assert_eq!(stored_due_ms(Some(&redelivered), NOW), 0);
    }
}
