//! Queues that move between nodes: unloaded, a queue serves nobody and keeps
//! only what the store has; loaded again, it delivers everything stored, with
//! the delivery counts as stored.
use std::time::Duration;

use super::*;
use crate::engine::queue_gone;
use crate::error::BrokerError;

#[tokio::test]
async fn an_unloaded_queue_ends_its_consumers_and_a_loaded_one_delivers_what_was_stored() {
    let (broker, _store) = broker("persist-delivery-count-before-delivery = true").await;
    send(&broker, "orders", &["a", "b"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.expect("subscribed");
    assert_eq!(receive(&mut sub, 2).await.len(), 2);
    let id = sub.queue.id;
    assert_eq!(broker.durable_queue_ids(), [id]);

    assert!(broker.unload_queue(id));
    let ended = tokio::time::timeout(Duration::from_secs(5), sub.deliveries.recv()).await;
    assert!(matches!(ended, Ok(None)), "the stream ends");
    assert!(matches!(queue_gone(&sub.queue), BrokerError::QueueMoved(_)));
    let refused = broker.subscribe("orders", 10, "").await.err().expect("refused");
    assert!(matches!(refused, BrokerError::QueueMoved(_)), "{refused}");
    send(&broker, "orders", &["c"]).await;
    assert_eq!(sub.queue.snapshot().messages, 0, "stored, not held");

    assert!(broker.load_queue(id));
    let mut sub = broker
        .subscribe("orders", 10, "")
        .await
        .expect("subscribed again");
    let got = receive(&mut sub, 3).await;
    let mut bodies: Vec<(&str, u32)> = got.iter().map(|d| (body(d), d.delivery_count)).collect();
    bodies.sort_unstable();
    assert_eq!(
        bodies,
        [("a", 2), ("b", 2), ("c", 1)],
        "the first two were delivered before"
    );
    assert!(!broker.load_queue(id + 100), "no such queue");
}
