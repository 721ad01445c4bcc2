//! Acks held for a transaction of another node: what the hold says, and its
//! resolution from what the store holds.
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use rebound_storage::Op;

use super::*;
use crate::engine::{HeldFor, Owner};
use crate::transactions::HeldAcks;

const ORDERS: &str = r#"
[[addresses]]
name = "orders"
  [[addresses.queues]]
  name = "orders"
"#;

/// A node "me" (incarnation 1) serving `orders` under epoch 7.
async fn node() -> (Arc<Broker>, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    let next = AtomicU32::new(1);
    let ids = Box::new(move |_: &str| Ok(next.fetch_add(1, Ordering::Relaxed)));
    let broker = Broker::open_leased(&config(ORDERS), store.clone(), ids)
        .await
        .expect("broker opens");
    let me = Owner {
        node: "me".into(),
        ..Owner::default()
    };
    broker.cluster().set_owners(me, 1, HashMap::new());
    assert!(
        broker
            .cluster()
            .load_queue(broker.cluster().durable_queue_ids()[0], 7)
    );
    (broker, store)
}

fn of(node: &str, incarnation: u64) -> HeldFor {
    HeldFor {
        node: node.into(),
        incarnation,
        transaction: 9,
        user: "alice".into(),
    }
}

/// Acks `got` for transaction 9 of node `a`; returns what is held.
async fn hold(broker: &Arc<Broker>, sub: &Subscription, got: &[Dispatched], a: HeldFor) -> HeldAcks {
    let (tx, rx) = oneshot::channel();
    broker
        .settle_deliveries(
            &sub.queue,
            sub.consumer,
            ids(got),
            Settlement::Ack,
            Some(Joins::Elsewhere(a)),
            move |r| {
                let _ = tx.send(r);
            },
        )
        .expect("a valid settle");
    match rx.await.expect("answered").expect("held") {
        Settled::Done { held: Some(held), .. } => held,
        other => panic!("nothing held: {other:?}"),
    }
}

#[tokio::test]
async fn a_resolved_hold_acks_what_the_commit_removed_and_fails_the_rest() {
    let (broker, store) = node().await;
    let sent = send(&broker, "orders", &["a", "b"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    let held = hold(&broker, &sub, &got, of("a", 1)).await;
    assert_eq!(
        held,
        HeldAcks {
            node: "me".into(),
            queue: sub.queue.id,
            epoch: 7,
            message_ids: sent.clone(),
            transaction: 9,
        }
    );
    assert_eq!(sub.queue.snapshot().delivering, 0, "out of the queue");

    // The other node's commit removed "a" only.
    store
        .commit(vec![Op::RemoveMessage {
            queue: sub.queue.id,
            id: sent[0],
        }])
        .await
        .unwrap();
    broker.cluster().resolve_held("a", 9, "mallory").await.unwrap();
    assert!(
        nothing_within(&mut sub, Duration::from_millis(200)).await,
        "another user's call resolves nothing"
    );
    broker.cluster().resolve_held("a", 9, "alice").await.unwrap();
    let again = receive(&mut sub, 1).await;
    assert_eq!((body(&again[0]), again[0].delivery_count), ("b", 2));
    assert_eq!(sub.queue.snapshot().counters.acked, 1);
    // Resolved once: asking again changes nothing.
    broker.cluster().resolve_held("a", 9, "alice").await.unwrap();
    assert!(nothing_within(&mut sub, Duration::from_millis(200)).await);
}

#[tokio::test]
async fn the_holds_of_a_node_gone_or_started_again_are_resolved_and_a_live_one_s_kept() {
    let (broker, _store) = node().await;
    send(&broker, "orders", &["a", "b"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    hold(&broker, &sub, &got[..1], of("a", 1)).await;
    hold(&broker, &sub, &got[1..], of("b", 1)).await;

    let live = HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 1)]);
    broker.cluster().resolve_held_of_gone(&live).await;
    assert!(nothing_within(&mut sub, Duration::from_millis(200)).await);

    // a started again (a new incarnation), b is gone: both are resolved, and
    // the store still has both messages, so both failed.
    broker
        .cluster()
        .resolve_held_of_gone(&HashMap::from([("a".to_owned(), 2)]))
        .await;
    let mut again: Vec<(&str, u32)> = Vec::new();
    let back = receive(&mut sub, 2).await;
    again.extend(back.iter().map(|d| (body(d), d.delivery_count)));
    again.sort_unstable();
    assert_eq!(again, [("a", 2), ("b", 2)]);
}

#[tokio::test]
async fn a_hold_of_a_queue_served_under_another_lease_since_is_dropped() {
    let (broker, _store) = node().await;
    send(&broker, "orders", &["a"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    hold(&broker, &sub, &got, of("a", 1)).await;
    let id = sub.queue.id;
    assert!(broker.cluster().unload_queue(id));
    assert!(broker.cluster().load_queue(id, 8));
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let read_back = receive(&mut sub, 1).await;
    assert_eq!(body(&read_back[0]), "a", "read back from the store");
    broker.cluster().resolve_held("a", 9, "alice").await.unwrap();
    assert!(
        nothing_within(&mut sub, Duration::from_millis(200)).await,
        "not returned a second time"
    );
}
