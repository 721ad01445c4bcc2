//! Paging through the engine: a queue over its `max-read-page-messages` keeps
//! the rest on disk and still delivers everything in order, management sees
//! the paged messages, and a restart recovers heads and counts the rest.
use rebound_storage::records::property_value::Value;
use rebound_storage::{MessageRecord, PropertyValue};

use super::*;
use crate::engine::Selection;

const PAGING: &str = r##"
[[address-settings]]
match = "#"
max-read-page-messages = 10
dead-letter-address = "DLQ"
max-delivery-attempts = 2

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

fn numbered(n: i64) -> MessageRecord {
    let mut m = message("orders", &format!("m{n}"));
    m.properties.insert(
        "n".into(),
        PropertyValue {
            value: Some(Value::Int(n)),
        },
    );
    m
}

async fn send_numbered(broker: &Arc<Broker>, range: std::ops::Range<i64>) {
    let all: Vec<i64> = range.collect();
    for chunk in all.chunks(7) {
        broker
            .send(chunk.iter().map(|&n| numbered(n)).collect())
            .await
            .expect("send");
    }
}

/// Receives and acks `n` messages; their bodies in delivery order.
async fn consume(broker: &Arc<Broker>, sub: &mut Subscription, n: usize) -> Vec<String> {
    let mut bodies = Vec::new();
    while bodies.len() < n {
        let got = receive(sub, 1).await;
        bodies.extend(got.iter().map(|d| body(d).to_owned()));
        settle(broker, sub, &ids(&got), Settlement::Ack, None).await;
        broker.grant(&sub.queue, sub.consumer, got.len() as u32);
    }
    bodies
}

fn expected(range: std::ops::Range<i64>) -> Vec<String> {
    range.map(|n| format!("m{n}")).collect()
}

#[tokio::test]
async fn a_paged_queue_delivers_everything_once_in_order() {
    let (broker, _store) = broker(PAGING).await;
    broker.subscribe("orders", 0, "").await.unwrap();
    send_numbered(&broker, 0..300).await;
    let queue = broker.queue("orders").unwrap();
    let snap = queue.snapshot();
    assert_eq!(snap.messages, 300);
    assert!(snap.paged >= 280, "{} paged", snap.paged);
    assert!(snap.paged_bytes > 0 && queue.bytes() > snap.paged_bytes);
    let mut sub = broker.subscribe("orders", 25, "").await.unwrap();
    assert_eq!(consume(&broker, &mut sub, 300).await, expected(0..300));
    let snap = queue.snapshot();
    assert_eq!(
        (snap.messages, snap.paged, snap.paged_bytes, queue.bytes()),
        (0, 0, 0, 0)
    );
}

#[tokio::test]
async fn failures_of_depaged_messages_count_and_dead_letter() {
    let (broker, _store) = broker(PAGING).await;
    broker.subscribe("orders", 0, "").await.unwrap();
    send_numbered(&broker, 0..40).await;
    let mut sub = broker.subscribe("orders", 40, "").await.unwrap();
    let nack = || Settlement::Nack {
        reason: "no".into(),
        retry_after_ms: None,
        pause_queue_ms: None,
    };
    let mut attempts = std::collections::HashMap::<String, u32>::new();
    while attempts.values().filter(|&&a| a == 2).count() < 40 {
        let got = receive(&mut sub, 1).await;
        for d in &got {
            let seen = attempts.entry(body(d).to_owned()).or_default();
            *seen += 1;
            assert_eq!(d.delivery_count, *seen, "{}", body(d));
        }
        settle(&broker, &sub, &ids(&got), nack(), None).await;
        broker.grant(&sub.queue, sub.consumer, got.len() as u32);
    }
    let dlq = broker.management().browse("DLQ", "", 100).unwrap();
    assert_eq!(dlq.len(), 40);
    assert_eq!(broker.queue("orders").unwrap().snapshot().messages, 0);
}

#[tokio::test]
async fn management_covers_paged_messages() {
    let (broker, _store) = broker(PAGING).await;
    broker.subscribe("orders", 0, "").await.unwrap();
    send_numbered(&broker, 0..100).await;
    let queue = broker.queue("orders").unwrap();
    assert!(queue.snapshot().paged >= 80);
    let browsed: Vec<u64> = broker
        .management()
        .browse("orders", "", 1000)
        .unwrap()
        .iter()
        .map(|b| b.entry.id)
        .collect();
    assert_eq!(browsed.len(), 100);
    assert!(browsed.windows(2).all(|w| w[0] < w[1]), "in id order");
    assert!(
        broker
            .management()
            .browse("orders", "", 1000)
            .unwrap()
            .iter()
            .filter(|b| b.paged)
            .count()
            >= 80
    );
    let last = broker.management().message("orders", browsed[99]).unwrap();
    assert_eq!(last.record.body.as_ref(), b"m99");
    let select = |filter: &str| Selection {
        queue: "orders".into(),
        filter: filter.into(),
        ..Default::default()
    };
    assert_eq!(
        broker.management().count_messages(&select("n >= 50")).unwrap(),
        50
    );
    assert_eq!(
        broker
            .management()
            .remove_messages(&select("n >= 90"))
            .await
            .unwrap(),
        10
    );
    assert_eq!(
        broker
            .management()
            .move_messages(&select("n >= 80"), "elsewhere")
            .await
            .unwrap(),
        10
    );
    let snap = queue.snapshot();
    assert_eq!(snap.messages, 80);
    assert_eq!(broker.management().purge("orders").await.unwrap(), 80);
    let snap = queue.snapshot();
    assert_eq!((snap.messages, snap.paged, queue.bytes()), (0, 0, 0));
    // The moved ones arrived, in order.
    let mut sub = broker.subscribe("elsewhere", 5, "").await.unwrap();
    assert_eq!(consume(&broker, &mut sub, 10).await, expected(80..90));
}

#[tokio::test]
async fn a_restart_recovers_the_heads_and_counts_the_rest() {
    let (broker, store) = broker(PAGING).await;
    broker.subscribe("orders", 0, "").await.unwrap();
    let total = super::super::recovery::head() as i64 + 2_000;
    let all: Vec<MessageRecord> = (0..total).map(numbered).collect();
    for chunk in all.chunks(1000) {
        broker.send(chunk.to_vec()).await.expect("send");
    }
    broker.close().await.unwrap();
    let broker = open(PAGING, Arc::new(store.reopen())).await;
    let queue = broker.queue("orders").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while queue.snapshot().counting {
        assert!(std::time::Instant::now() < deadline, "still counting");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(queue.snapshot().messages, total as u64);
    let mut sub = broker.subscribe("orders", 500, "").await.unwrap();
    assert_eq!(
        consume(&broker, &mut sub, total as usize).await,
        expected(0..total)
    );
    assert_eq!((queue.snapshot().messages, queue.bytes()), (0, 0));
}
