//! Failed deliveries: counts, delays, consumer-chosen delays, dead letters.
use std::time::Duration;

use super::*;
use crate::dead_letter;
use crate::queue::BrowseState;
use crate::time::now_ms;

fn nack(reason: &str, retry_after_ms: Option<u64>) -> Settlement {
    Settlement::Nack {
        reason: reason.into(),
        retry_after_ms,
        pause_queue_ms: None,
    }
}

#[tokio::test]
async fn a_nacked_message_comes_back_counted_and_is_dead_lettered_after_max_attempts() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["poison"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    for attempt in 1..=3 {
        let got = receive(&mut sub, 1).await;
        assert_eq!(got[0].delivery_count, attempt);
        settle(&broker, &sub, &ids(&got), nack("boom", None), None).await;
    }
    let mut dlq = broker.subscribe("DLQ", 10, "").await.unwrap();
    let dead = receive(&mut dlq, 1).await;
    assert_eq!(body(&dead[0]), "poison");
    let prop = |key: &str| dead[0].record.properties.get(key).cloned();
    assert_eq!(prop(dead_letter::ORIG_QUEUE), Some(string("orders")));
    assert_eq!(prop(dead_letter::REASON), Some(string("max-delivery-attempts")));
    let orders = broker.queue("orders").unwrap().snapshot();
    assert_eq!((orders.messages, orders.counters.dead_lettered), (0, 1));
}

#[tokio::test]
async fn a_dead_letter_settle_goes_straight_to_the_dlq_with_its_reason() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["bad"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let how = Settlement::DeadLetter {
        reason: "invalid".into(),
    };
    settle(&broker, &sub, &ids(&got), how, None).await;
    let dead = broker.management().browse("DLQ", "", 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(
        dead[0].record.properties.get(dead_letter::REASON),
        Some(&string("rejected: invalid"))
    );
}

#[tokio::test]
async fn a_dlq_on_its_own_dead_letter_address_keeps_what_fails_there() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["poison"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    let mut dlq = broker.subscribe("DLQ", 10, "").await.unwrap();
    let mut got = receive(&mut dlq, 1).await;
    let first = got[0].record.message_id;
    for attempt in 1..=4 {
        assert_eq!(
            (got[0].record.message_id, got[0].delivery_count),
            (first, attempt)
        );
        let how = match attempt {
            4 => Settlement::DeadLetter { reason: "no".into() },
            _ => nack("boom", None),
        };
        settle(&broker, &dlq, &ids(&got), how, None).await;
        got = receive(&mut dlq, 1).await;
    }
    let kept = got;
    assert_eq!((kept[0].record.message_id, kept[0].delivery_count), (first, 5));
    let prop = |key: &str| kept[0].record.properties.get(key).cloned();
    assert_eq!(prop(dead_letter::ORIG_QUEUE), Some(string("orders")));
    let stored = broker.management().message("DLQ", first).unwrap().entry.failures;
    let reasons: Vec<&str> = stored.iter().map(|f| f.reason.as_str()).collect();
    assert_eq!(reasons, ["boom", "boom", "boom", "rejected: no"]);
    let snapshot = broker.queue("DLQ").unwrap().snapshot();
    let counters = snapshot.counters;
    assert_eq!(
        (snapshot.messages, counters.dead_lettered, counters.dropped),
        (1, 0, 0)
    );
}

#[tokio::test]
async fn a_release_is_not_an_attempt() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["m"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    for _ in 0..5 {
        let got = receive(&mut sub, 1).await;
        assert_eq!(got[0].delivery_count, 1);
        settle(&broker, &sub, &ids(&got), Settlement::Release, None).await;
    }
}

#[tokio::test]
async fn a_consumers_retry_after_is_kept_on_a_broker_without_delays() {
    // The default config has no redelivery-delay, so max-redelivery-delay is 0; a
    // consumer's explicit delay used to be clamped to it and vanish.
    let (broker, _store) = broker("").await;
    send(&broker, "api", &["later"]).await;
    let mut sub = broker.subscribe("api", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let before = now_ms();
    settle(&broker, &sub, &ids(&got), nack("down", Some(30_000)), None).await;
    let browsed = broker.management().browse("api", "", 10).unwrap();
    let BrowseState::Scheduled(due) = browsed[0].state else {
        panic!("not scheduled: {:?}", browsed[0].state)
    };
    assert!(due >= before + 29_000, "due in {} ms", due - before);
    assert!(nothing_within(&mut sub, Duration::from_millis(200)).await);
}

#[tokio::test]
async fn a_consumers_retry_after_is_capped_by_max_retry_after() {
    let (broker, _store) = broker("[[address-settings]]\nmatch = \"#\"\nmax-retry-after = 50\n").await;
    send(&broker, "api", &["soon"]).await;
    let mut sub = broker.subscribe("api", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    settle(&broker, &sub, &ids(&got), nack("down", Some(3_600_000)), None).await;
    let back = receive(&mut sub, 1).await;
    assert_eq!(back[0].delivery_count, 2);
}

#[tokio::test]
async fn a_consumer_that_goes_away_fails_what_it_held_unless_it_closed() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "q", &["x", "y"]).await;
    let mut crashed = broker.subscribe("q", 1, "").await.unwrap();
    receive(&mut crashed, 1).await;
    broker.consumer_gone(&crashed.queue, crashed.consumer).await;
    let mut closing = broker.subscribe("q", 2, "").await.unwrap();
    let got = receive(&mut closing, 2).await;
    let count = |b: &str| got.iter().find(|d| body(d) == b).unwrap().delivery_count;
    assert_eq!(
        (count("x"), count("y")),
        (2, 1),
        "the crash counted as an attempt"
    );
    closing.queue.stop(closing.consumer);
    broker.consumer_gone(&closing.queue, closing.consumer).await;
    let mut last = broker.subscribe("q", 2, "").await.unwrap();
    let again = receive(&mut last, 2).await;
    let count = |b: &str| again.iter().find(|d| body(d) == b).unwrap().delivery_count;
    assert_eq!(
        (count("x"), count("y")),
        (2, 1),
        "a graceful close is not an attempt"
    );
}

fn string(s: &str) -> rebound_storage::PropertyValue {
    rebound_storage::PropertyValue {
        value: Some(rebound_storage::records::property_value::Value::String(s.into())),
    }
}
