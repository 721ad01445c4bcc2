//! The `[limits]` the engine keeps: the quota of auto-created addresses and queues,
//! and the ids of one settle.
use super::*;
use crate::error::BrokerError;

#[track_caller]
fn assert_limit(result: Result<impl std::fmt::Debug, BrokerError>, limit: &str) {
    match result {
        Err(BrokerError::LimitReached { limit: named, .. }) => assert_eq!(named, limit),
        other => panic!("expected {limit} to be reached, got {other:?}"),
    }
}

#[tokio::test]
async fn auto_created_addresses_and_queues_have_a_quota() {
    let (broker, _) = broker("[limits]\nmax-auto-created = 3\n").await;
    // A send auto-creates an address and its queue: 2 of 3.
    send(&broker, "a", &["1"]).await;
    // Another would make 4: refused, and nothing of it was made.
    assert_limit(broker.send(vec![message("b", "1")]).await, "max-auto-created");
    assert!(broker.queue("b").is_err());
    // A consumer's queue is one more (its address is not counted); then none.
    broker.subscribe("c", 1, "").await.unwrap();
    assert_limit(broker.subscribe("d", 1, "").await.map(|_| ()), "max-auto-created");
    assert!(broker.queue("d").is_err());
    // What exists is used as before, and explicit creation does not count.
    send(&broker, "a", &["2"]).await;
    broker
        .create_queue("e", "e", None, true, None, false)
        .await
        .unwrap();
    // Deleting makes room; a reload can raise the quota.
    broker.delete_queue("c").await.unwrap();
    broker.subscribe("d", 1, "").await.unwrap();
    assert_limit(broker.subscribe("f", 1, "").await.map(|_| ()), "max-auto-created");
    broker
        .reload(&config("[limits]\nmax-auto-created = 4\n"))
        .await
        .unwrap();
    broker.subscribe("f", 1, "").await.unwrap();
}

#[tokio::test]
async fn a_settle_names_at_most_max_ids_per_settle() {
    let (broker, _) = broker("[limits]\nmax-ids-per-settle = 2\n").await;
    let sub = broker.subscribe("q", 1, "").await.unwrap();
    let settle = |ids: Vec<u64>| {
        broker.settle_deliveries(&sub.queue, sub.consumer, ids, Settlement::Ack, None, |_| {})
    };
    settle(vec![1, 2]).unwrap();
    match settle(vec![1, 2, 3]) {
        Err(BrokerError::InvalidArgument(message)) => assert_eq!(
            message,
            "a settle names 3 delivery ids, more than max-ids-per-settle 2"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_consumer_holds_at_most_max_consumer_credit() {
    let (broker, _) = broker("[limits]\nmax-consumer-credit = 3\n").await;
    let bodies: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    send(
        &broker,
        "q",
        &bodies.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    // An initial credit of 100 is capped at 3 deliveries.
    let mut sub = broker.subscribe("q", 100, "").await.unwrap();
    let first = receive(&mut sub, 3).await;
    assert!(nothing_within(&mut sub, Duration::from_millis(300)).await);
    // Granting more while 3 are unsettled gives nothing.
    broker.grant(&sub.queue, sub.consumer, 100);
    assert!(nothing_within(&mut sub, Duration::from_millis(300)).await);
    // Settling 2 makes room for 2 more, however much is granted.
    settle(&broker, &sub, &ids(&first)[..2], Settlement::Ack, None).await;
    broker.grant(&sub.queue, sub.consumer, 100);
    assert_eq!(receive(&mut sub, 2).await.len(), 2);
    assert!(nothing_within(&mut sub, Duration::from_millis(300)).await);
}
