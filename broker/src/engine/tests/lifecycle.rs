//! Sending, consuming, acking, credit, and a restart in between.
use std::time::Duration;

use super::*;

#[tokio::test]
async fn sent_messages_are_delivered_in_order_and_an_ack_removes_them_for_good() {
    let (broker, store) = broker("").await;
    let sent = send(&broker, "orders", &["a", "b", "c"]).await;
    assert!(sent.windows(2).all(|w| w[0] < w[1]), "ids increase: {sent:?}");
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 3).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert!(got.iter().all(|d| d.delivery_count == 1));
    let done = settle(&broker, &sub, &ids(&got[..2]), Settlement::Ack, None).await;
    assert!(matches!(done, Settled::Done { ref settled, .. } if settled.len() == 2));
    broker.close().await.unwrap();

    // After a restart only the unacked message is there, with its count kept by
    // the redelivery on close (the broker was stopping: not counted as a failure).
    let broker = open("", Arc::new(store.reopen())).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let again = receive(&mut sub, 1).await;
    assert_eq!(body(&again[0]), "c");
    assert!(nothing_within(&mut sub, Duration::from_millis(100)).await);
}

#[tokio::test]
async fn each_delivery_uses_one_credit_and_unknown_ids_are_reported() {
    let (broker, _store) = broker("").await;
    send(&broker, "q", &["1", "2", "3"]).await;
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let first = receive(&mut sub, 1).await;
    assert!(
        nothing_within(&mut sub, Duration::from_millis(100)).await,
        "credit 1"
    );
    let answer = settle(&broker, &sub, &[first[0].delivery_id, 999], Settlement::Ack, None).await;
    let Settled::Done { settled, unknown, .. } = answer else {
        panic!("{answer:?}")
    };
    assert_eq!((settled, unknown), (vec![first[0].delivery_id], vec![999]));
    assert!(
        nothing_within(&mut sub, Duration::from_millis(100)).await,
        "settling grants no credit"
    );
    sub.queue.grant(sub.consumer, 2, u32::MAX);
    assert_eq!(receive(&mut sub, 2).await.len(), 2);
}

#[tokio::test]
async fn a_message_that_vanished_from_storage_gives_its_credit_back() {
    // Stored messages recovered at start-up are read from storage on delivery; one
    // removed behind the broker's back must not hold the consumer's only credit.
    let (broker, store) = broker("").await;
    let sent = send(&broker, "q", &["gone", "next"]).await;
    let queue_id = broker.queue("q").unwrap().id;
    broker.close().await.unwrap();
    let store = Arc::new(store.reopen());
    let broker = open("", store.clone()).await;
    store
        .commit(vec![rebound_storage::Op::RemoveMessage {
            queue: queue_id,
            id: sent[0],
        }])
        .await
        .unwrap();
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    assert_eq!(body(&got[0]), "next");
    let info = broker.queue("q").unwrap().snapshot();
    assert_eq!((info.messages, info.delivering, info.counters.dropped), (1, 1, 1));
}

#[tokio::test]
async fn multicast_gives_every_queue_a_copy_and_filters_choose() {
    let (broker, _store) = broker(
        r##"
[[addresses]]
name = "events"
routing-type = "multicast"
  [[addresses.queues]]
  name = "all"
  [[addresses.queues]]
  name = "severe"
  filter = "severity >= 3"
"##,
    )
    .await;
    let mut low = message("events", "low");
    low.properties.insert("severity".into(), int(1));
    let mut high = message("events", "high");
    high.properties.insert("severity".into(), int(5));
    broker.send(vec![low, high]).await.unwrap();
    assert_eq!(broker.queue("all").unwrap().snapshot().messages, 2);
    let mut severe = broker.subscribe("severe", 10, "").await.unwrap();
    assert_eq!(body(&receive(&mut severe, 1).await[0]), "high");
}

fn int(i: i64) -> rebound_storage::PropertyValue {
    rebound_storage::PropertyValue {
        value: Some(rebound_storage::records::property_value::Value::Int(i)),
    }
}
