//! Outage mode: the queue pauses, probes one message at a time, resumes on an ack,
//! and does not burn the attempts of the messages that failed during the outage.
use std::time::Duration;

use super::*;
use crate::outage::Status;

const OUTAGE: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 3
outage-threshold = 3
outage-pause = 300
outage-pause-multiplier = 2.0

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

fn nack(pause_queue_ms: Option<u64>) -> Settlement {
    Settlement::Nack {
        reason: "database down".into(),
        retry_after_ms: None,
        pause_queue_ms,
    }
}

fn status(broker: &Arc<Broker>, queue: &str) -> Status {
    broker.queue(queue).unwrap().snapshot().outage
}

#[tokio::test]
async fn failures_of_distinct_messages_pause_the_queue_then_one_probe_at_a_time() {
    let (broker, _store) = broker(OUTAGE).await;
    let bodies: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    send(
        &broker,
        "orders",
        &bodies.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    let mut sub = broker.subscribe("orders", 3, "").await.unwrap();
    let first = receive(&mut sub, 3).await;
    settle(&broker, &sub, &ids(&first), nack(None), None).await;
    assert!(matches!(status(&broker, "orders"), Status::Outage { .. }));
    broker.grant(&sub.queue, sub.consumer, 10);
    // Paused: the credit is there, nothing comes.
    assert!(nothing_within(&mut sub, Duration::from_millis(200)).await);
    // Then exactly one probe; its failure pauses longer (600 ms).
    let probe = receive(&mut sub, 1).await;
    assert!(
        nothing_within(&mut sub, Duration::from_millis(150)).await,
        "a second probe"
    );
    // m0's failure came before the outage showed and counted.
    assert_eq!((body(&probe[0]), probe[0].delivery_count), ("m0", 2));
    settle(&broker, &sub, &ids(&probe), nack(None), None).await;
    assert!(nothing_within(&mut sub, Duration::from_millis(450)).await);
    let probe = receive(&mut sub, 1).await;
    assert_eq!(
        probe[0].delivery_count, 2,
        "the failed probe gave its attempt back"
    );
    settle(&broker, &sub, &ids(&probe), Settlement::Ack, None).await;
    assert_eq!(status(&broker, "orders"), Status::Normal);
    broker.grant(&sub.queue, sub.consumer, 10);
    // Normal again: everything left comes and nothing was dead-lettered.
    let mut left = 9;
    while left > 0 {
        let got = receive(&mut sub, 1).await;
        left -= got.len();
        settle(&broker, &sub, &ids(&got), Settlement::Ack, None).await;
    }
    let orders = broker.queue("orders").unwrap().snapshot();
    assert_eq!((orders.messages, orders.counters.dead_lettered), (0, 0));
}

#[tokio::test]
async fn a_poison_message_among_good_ones_is_still_dead_lettered() {
    let (broker, _store) = broker(OUTAGE).await;
    send(&broker, "orders", &["poison", "a", "b", "c", "d", "e"]).await;
    let mut sub = broker.subscribe("orders", 1, "").await.unwrap();
    let mut poison_failures = 0;
    for _ in 0..20 {
        broker.grant(&sub.queue, sub.consumer, 1);
        let Ok(Some(got)) = tokio::time::timeout(Duration::from_millis(500), sub.deliveries.recv()).await
        else {
            break;
        };
        let how = if body(&got[0]) == "poison" {
            poison_failures += 1;
            nack(None)
        } else {
            Settlement::Ack
        };
        settle(&broker, &sub, &ids(&got), how, None).await;
    }
    assert_eq!(poison_failures, 3);
    let orders = broker.queue("orders").unwrap().snapshot();
    assert_eq!(
        (orders.counters.dead_lettered, orders.outage),
        (1, Status::Normal)
    );
}

#[tokio::test]
async fn a_nack_with_pause_queue_ms_pauses_the_queue_without_outage_settings() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send(&broker, "orders", &["a", "b"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    settle(&broker, &sub, &ids(&got), nack(Some(400)), None).await;
    assert!(matches!(status(&broker, "orders"), Status::Outage { .. }));
    assert!(nothing_within(&mut sub, Duration::from_millis(300)).await);
    let probe = receive(&mut sub, 1).await;
    assert_eq!(probe[0].delivery_count, 1);
    settle(&broker, &sub, &ids(&probe), Settlement::Ack, None).await;
    let rest = receive(&mut sub, 1).await;
    assert_eq!(rest[0].delivery_count, 1);
}
