//! Duplicate detection: an id an address remembers is acknowledged and not
//! stored again, across a restart; inside a transaction it fails the commit.
use std::time::Duration;

use rebound_protocol::properties::DUPL_ID;
use rebound_storage::PropertyValue;
use rebound_storage::records::property_value::Value;

use super::*;
use crate::error::BrokerError;

fn with_id(address: &str, body: &str, id: &str) -> MessageRecord {
    let mut m = message(address, body);
    m.properties.insert(
        DUPL_ID.into(),
        PropertyValue {
            value: Some(Value::String(id.into())),
        },
    );
    m
}

fn messages(broker: &Broker, queue: &str) -> u64 {
    broker.queue(queue).unwrap().snapshot().messages
}

#[tokio::test]
async fn a_repeated_id_is_acknowledged_but_stored_once_also_after_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let broker = open("", store.clone()).await;
    let sent = broker
        .send(vec![
            with_id("q", "1", "a"),
            message("q", "plain"),
            with_id("q", "1 again", "a"),
        ])
        .await
        .unwrap();
    assert_eq!(sent.duplicates, [false, false, true]);
    let sent = broker.send(vec![message("q", "no id")]).await.unwrap();
    assert!(sent.duplicates.is_empty(), "no flags without ids");
    assert_eq!(messages(&broker, "q"), 3);
    broker.close().await.unwrap();

    let broker = open("", Arc::new(store.reopen())).await;
    let sent = broker
        .send(vec![with_id("q", "retry", "a"), with_id("q", "new", "b")])
        .await
        .unwrap();
    assert_eq!(sent.duplicates, [true, false]);
    assert_eq!(messages(&broker, "q"), 4);
    // The cache is per address.
    let sent = broker.send(vec![with_id("other", "x", "a")]).await.unwrap();
    assert_eq!(sent.duplicates, [false]);
}

#[tokio::test]
async fn the_cache_forgets_the_oldest_ids_beyond_its_size_also_in_the_store() {
    let config = "[[address-settings]]\nmatch = \"q\"\nid-cache-size = 2\n";
    let store = Arc::new(MemoryStore::new());
    let broker = open(config, store.clone()).await;
    for id in ["a", "b", "c"] {
        broker.send(vec![with_id("q", id, id)]).await.unwrap();
    }
    assert_eq!(store.recover().unwrap().duplicate_ids.len(), 2);
    broker.close().await.unwrap();
    let broker = open(config, Arc::new(store.reopen())).await;
    let sent = broker
        .send(vec![
            with_id("q", "", "c"),
            with_id("q", "", "b"),
            with_id("q", "", "a"),
        ])
        .await
        .unwrap();
    assert_eq!(sent.duplicates, [true, true, false], "a was forgotten");
}

#[tokio::test]
async fn a_smaller_cache_after_a_restart_is_trimmed_and_size_0_turns_detection_off() {
    let store = Arc::new(MemoryStore::new());
    let broker = open("", store.clone()).await;
    for id in ["a", "b", "c"] {
        broker.send(vec![with_id("q", id, id)]).await.unwrap();
    }
    broker.close().await.unwrap();
    let off = "[[address-settings]]\nmatch = \"q\"\nid-cache-size = 0\n";
    let store = Arc::new(store.reopen());
    let broker = open(off, store.clone()).await;
    assert_eq!(store.recover().unwrap().duplicate_ids, []);
    let sent = broker.send(vec![with_id("q", "", "a")]).await.unwrap();
    assert!(sent.duplicates.is_empty());
    assert_eq!(messages(&broker, "q"), 4);
}

#[tokio::test]
async fn a_duplicate_in_a_transaction_fails_the_commit_and_applies_nothing() {
    let (broker, store) = broker("").await;
    broker.send(vec![with_id("q", "first", "a")]).await.unwrap();
    send(&broker, "acked", &["m"]).await;
    let mut sub = broker.subscribe("acked", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let tx = broker.begin_transaction(1).unwrap();
    settle(&broker, &sub, &ids(&got), Settlement::Ack, Some(tx)).await;
    broker
        .send_in_transaction(tx, 1, vec![with_id("q", "new", "b"), with_id("q", "again", "a")])
        .unwrap();
    let err = broker.commit_transaction(tx, 1).await.unwrap_err();
    assert!(matches!(err, BrokerError::DuplicateId { .. }), "{err}");
    assert_eq!(tonic::Status::from(err).code(), tonic::Code::AlreadyExists);
    assert_eq!(messages(&broker, "q"), 1, "no send applied");
    assert_eq!(
        store.recover().unwrap().duplicate_ids.len(),
        1,
        "b not remembered"
    );
    // The ack was rolled back: the message comes again.
    let back = receive(&mut sub, 1).await;
    assert_eq!(back[0].delivery_count, 2);
    // The new id of the failed transaction was not remembered.
    let tx = broker.begin_transaction(1).unwrap();
    broker
        .send_in_transaction(tx, 1, vec![with_id("q", "new", "b")])
        .unwrap();
    broker.commit_transaction(tx, 1).await.unwrap();
    assert_eq!(messages(&broker, "q"), 2);
    assert!(nothing_within(&mut sub, Duration::from_millis(50)).await);
}

#[tokio::test]
async fn a_dead_letter_sent_back_keeps_its_id_and_is_not_taken_for_a_duplicate() {
    let (broker, _store) = broker(WITH_DLQ).await;
    broker.send(vec![with_id("q", "m", "a")]).await.unwrap();
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    let all = crate::engine::Selection {
        queue: "DLQ".into(),
        ..Default::default()
    };
    let retried = broker
        .management()
        .retry_messages(&all, false, 0, None, |_| Ok(()))
        .await
        .unwrap();
    assert_eq!(retried.len(), 1);
    let back = receive(&mut sub, 1).await;
    assert_eq!(body(&back[0]), "m");
    assert!(back[0].record.properties.contains_key(DUPL_ID));
    // A producer's resend is still a duplicate.
    let sent = broker.send(vec![with_id("q", "m", "a")]).await.unwrap();
    assert_eq!(sent.duplicates, [true]);
}
