//! Delivery states in storage: a message that never had one is removed without a
//! state delete, and every path that writes or recovers one removes it with the
//! message, so that no state record outlives its message across restarts.
use rebound_storage::Op;

use super::*;
use crate::engine::ops::removal_ops;

const PERSIST_COUNTS: &str = "persist-delivery-count-before-delivery = true\n";

fn nack() -> Settlement {
    Settlement::Nack {
        reason: "boom".into(),
        retry_after_ms: None,
        pause_queue_ms: None,
    }
}

#[tokio::test]
async fn a_message_delivered_once_and_acked_is_removed_without_a_state_delete() {
    let (broker, _store) = broker("").await;
    send(&broker, "q", &["m"]).await;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let queue = broker.queue("q").unwrap();
    let (entries, _) = queue.take_delivered(sub.consumer, &ids(&got));
    let ops = removal_ops(&queue, &entries);
    assert!(matches!(ops[..], [Op::RemoveStatelessMessage { .. }]), "{ops:?}");
}

#[tokio::test]
async fn a_redelivered_then_acked_message_leaves_no_state_also_across_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let broker = open("", store.clone()).await;
    let sent = send(&broker, "q", &["now", "after restart"]).await;
    let queue = broker.queue("q").unwrap().id;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    settle(&broker, &sub, &ids(&got), nack(), None).await;
    assert!(
        store.read_state(queue, sent[0]).unwrap().is_some(),
        "the nack stored a state"
    );
    let again = receive(&mut sub, 2).await;
    let first = again.iter().find(|d| body(d) == "now").unwrap();
    settle(&broker, &sub, &[first.delivery_id], Settlement::Ack, None).await;
    assert_eq!(store.read_state(queue, sent[0]).unwrap(), None);
    broker.close().await.unwrap();

    // The other one's state is only known from recovery.
    let store = Arc::new(store.reopen());
    let broker = open("", store.clone()).await;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    assert_eq!((body(&got[0]), got[0].delivery_count), ("after restart", 2));
    settle(&broker, &sub, &ids(&got), Settlement::Ack, None).await;
    assert_eq!(store.read_state(queue, sent[1]).unwrap(), None);
}

#[tokio::test]
async fn a_count_stored_before_delivery_is_removed_with_the_message() {
    let (broker, store) = broker(PERSIST_COUNTS).await;
    let sent = send(&broker, "q", &["m"]).await;
    let queue = broker.queue("q").unwrap().id;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    assert!(
        store.read_state(queue, sent[0]).unwrap().is_some(),
        "the count is stored"
    );
    settle(&broker, &sub, &ids(&got), Settlement::Ack, None).await;
    assert_eq!(store.read_state(queue, sent[0]).unwrap(), None);
}

#[tokio::test]
async fn a_released_message_sent_to_the_dead_letter_address_leaves_no_state() {
    let (broker, store) = broker(&format!("{PERSIST_COUNTS}{WITH_DLQ}")).await;
    let sent = send(&broker, "orders", &["m"]).await;
    let queue = broker.queue("orders").unwrap().id;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    settle(&broker, &sub, &ids(&got), Settlement::Release, None).await;
    let got = receive(&mut sub, 1).await;
    let how = Settlement::DeadLetter {
        reason: "invalid".into(),
    };
    settle(&broker, &sub, &ids(&got), how, None).await;
    assert_eq!(store.read_state(queue, sent[0]).unwrap(), None);
    assert_eq!(broker.management().browse("DLQ", "", 10).unwrap().len(), 1);
}
