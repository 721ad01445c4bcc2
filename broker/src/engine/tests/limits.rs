//! The `[limits]` the engine keeps: the quota of auto-created addresses and queues,
//! the ids of one settle, the credit of a consumer and the length of a filter.
use super::*;
use crate::engine::Selection;
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
    let (broker, _) = broker("[limits]\nmax-auto-created = 4\n").await;
    // A send auto-creates an address and its queue: 2 of 4.
    send(&broker, "a", &["1"]).await;
    // A consumer of a new name, as a send does: 4 of 4.
    broker.subscribe("c", 1, "").await.unwrap();
    // Another of either would make 6: refused, and nothing of it was made.
    assert_limit(broker.send(vec![message("b", "1")]).await, "max-auto-created");
    assert!(broker.queue("b").is_err());
    assert_limit(broker.subscribe("d", 1, "").await.map(|_| ()), "max-auto-created");
    assert!(broker.queue("d").is_err() && broker.management().address("d").is_err());
    // What exists is used as before, and explicit creation does not count.
    send(&broker, "a", &["2"]).await;
    broker
        .create_queue("e", "e", None, true, None, false)
        .await
        .unwrap();
    // Deleting makes room: on the address that stays, a consumer's queue alone
    // counts. A reload can raise the quota.
    broker.delete_queue("c").await.unwrap();
    broker.subscribe("c", 1, "").await.unwrap();
    assert_limit(broker.subscribe("f", 1, "").await.map(|_| ()), "max-auto-created");
    broker
        .reload(&config("[limits]\nmax-auto-created = 6\n"))
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

#[tokio::test]
async fn filters_from_clients_are_bounded_by_max_selector_length() {
    let (broker, _) = broker("[limits]\nmax-selector-length = 20\n").await;
    send(&broker, "q", &["1"]).await;
    // 20 bytes is the most; one more is refused before it is parsed.
    let longest = "JMSPriority >= 0    ";
    let over = format!("{longest} ");
    let refused = |result: Result<(), BrokerError>| match result {
        Err(BrokerError::InvalidArgument(message)) => assert_eq!(
            message,
            "the filter is 21 bytes long, more than max-selector-length 20"
        ),
        other => panic!("{other:?}"),
    };
    let selection = |filter: &str| Selection {
        queue: "q".into(),
        filter: filter.into(),
        message_ids: Default::default(),
    };
    assert_eq!(broker.management().browse("q", longest, 10).unwrap().len(), 1);
    refused(broker.management().browse("q", &over, 10).map(|_| ()));
    assert_eq!(
        broker.management().count_messages(&selection(longest)).unwrap(),
        1
    );
    refused(broker.management().count_messages(&selection(&over)).map(|_| ()));
    refused(
        broker
            .management()
            .remove_messages(&selection(&over))
            .await
            .map(|_| ()),
    );
    refused(
        broker
            .management()
            .move_messages(&selection(&over), "elsewhere")
            .await
            .map(|_| ()),
    );
    refused(
        broker
            .management()
            .retry_messages(&selection(&over), true, 0, None, |_| Ok(()))
            .await
            .map(|_| ()),
    );
    refused(broker.subscribe("q", 1, &over).await.map(|_| ()));
    let mut sub = broker.subscribe("q", 1, longest).await.unwrap();
    assert_eq!(receive(&mut sub, 1).await.len(), 1);
}
