//! Message groups through the engine: a failed message holds its group across its
//! redelivery delay, its transaction and a restart; its dead letter says what it held.
use std::time::Duration;

use rebound_storage::PropertyValue;
use rebound_storage::records::property_value::Value;

use super::*;
use crate::dead_letter;

const DELAYED: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 2
redelivery-delay = 60000

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

async fn send_grouped(broker: &Arc<Broker>, messages: &[(&str, &str)]) {
    let batch = messages
        .iter()
        .map(|(group, text)| {
            let mut m = message("orders", text);
            m.properties.insert(
                rebound_protocol::properties::GROUP_ID.into(),
                PropertyValue {
                    value: Some(Value::String((*group).into())),
                },
            );
            m
        })
        .collect();
    broker.send(batch).await.expect("send");
}

fn nack() -> Settlement {
    Settlement::Nack {
        reason: "boom".into(),
        retry_after_ms: None,
        pause_queue_ms: None,
    }
}

#[tokio::test]
async fn a_delayed_redelivery_holds_its_group_across_a_restart() {
    let (broker, store) = broker(DELAYED).await;
    send_grouped(&broker, &[("a", "a1"), ("a", "a2"), ("b", "b1")]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["a1", "b1"]);
    settle(&broker, &sub, &ids(&got[..1]), nack(), None).await;
    settle(&broker, &sub, &ids(&got[1..]), Settlement::Ack, None).await;
    assert!(
        nothing_within(&mut sub, Duration::from_millis(200)).await,
        "a2 waits"
    );
    broker.close().await.unwrap();

    let broker = open(DELAYED, Arc::new(store.reopen())).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    assert!(
        nothing_within(&mut sub, Duration::from_millis(200)).await,
        "a2 still waits behind a1's stored redelivery"
    );
    send_grouped(&broker, &[("c", "c1")]).await;
    assert_eq!(body(&receive(&mut sub, 1).await[0]), "c1");
}

#[tokio::test]
async fn a_rolled_back_ack_holds_its_group_until_it_commits() {
    let (broker, _store) = broker("").await;
    send_grouped(&broker, &[("a", "a1"), ("a", "a2")]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let first = receive(&mut sub, 1).await;
    let tx = broker.begin_transaction(1).unwrap();
    settle(&broker, &sub, &ids(&first), Settlement::Ack, Some(tx)).await;
    assert!(
        nothing_within(&mut sub, Duration::from_millis(100)).await,
        "held by the open transaction"
    );
    broker.rollback_transaction(tx, 1).await.unwrap();
    let again = receive(&mut sub, 1).await;
    assert_eq!((body(&again[0]), again[0].delivery_count), ("a1", 2));
    let tx = broker.begin_transaction(1).unwrap();
    settle(&broker, &sub, &ids(&again), Settlement::Ack, Some(tx)).await;
    broker.commit_transaction(tx, 1).await.unwrap();
    assert_eq!(body(&receive(&mut sub, 1).await[0]), "a2");
}

#[tokio::test]
async fn a_dead_lettered_message_frees_its_group_and_says_how_many_waited() {
    let (broker, _store) = broker(WITH_DLQ).await;
    send_grouped(&broker, &[("a", "a1"), ("a", "a2"), ("a", "a3")]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    for _ in 0..3 {
        let got = receive(&mut sub, 1).await;
        assert_eq!(body(&got[0]), "a1");
        settle(&broker, &sub, &ids(&got), nack(), None).await;
    }
    assert_eq!(body(&receive(&mut sub, 1).await[0]), "a2");
    let dead = broker.management().browse("DLQ", "", 10).unwrap();
    let prop = |key: &str| dead[0].record.properties.get(key).and_then(|p| p.value.clone());
    assert_eq!(prop(dead_letter::GROUP_HELD), Some(Value::Int(2)));
    assert_eq!(
        prop(rebound_protocol::properties::GROUP_ID),
        Some(Value::String("a".into()))
    );
}
