//! A store that refuses a commit: whatever the operation (ack, nack, dead
//! letter, move, retry, remove, purge), the message stays in its queue as it was,
//! visible and deliverable, and the caller gets the storage error; a dispatcher
//! refused its delivery counts backs off.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rebound_storage::{Commit, Op, StorageError};

use super::intercepted::{Hook, Intercepted};
use super::*;
use crate::engine::Selection;
use crate::error::BrokerError;

/// Refuses every commit while `refuse` is set, counting them.
#[derive(Default)]
struct Refuse {
    refuse: AtomicBool,
    refused: AtomicUsize,
}

impl Hook for Refuse {
    fn commit(&self, inner: &Arc<MemoryStore>, ops: Vec<Op>) -> Commit {
        if self.refuse.load(Ordering::SeqCst) {
            self.refused.fetch_add(1, Ordering::SeqCst);
            return Commit::ready(Err(StorageError::Closed));
        }
        inner.commit(ops)
    }
}

type Refusing = Intercepted<Refuse>;

/// With a DLQ, a parking address, and no storage write on delivery (so that only
/// the operation under test meets the refusal).
const CONFIG: &str = r##"
persist-delivery-count-before-delivery = false

[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 2

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"

[[addresses]]
name = "parked"
  [[addresses.queues]]
  name = "parked"
"##;

async fn refusing() -> (Arc<Broker>, Arc<Refusing>) {
    refusing_with(CONFIG).await
}

async fn refusing_with(config: &str) -> (Arc<Broker>, Arc<Refusing>) {
    let store = Arc::new(Intercepted {
        inner: Arc::default(),
        hook: Refuse::default(),
    });
    (open(config, store.clone()).await, store)
}

/// Settles and returns the engine's answer.
async fn try_settle(
    broker: &Arc<Broker>,
    sub: &Subscription,
    ids: &[u64],
    how: Settlement,
) -> Result<(), BrokerError> {
    let (tx, rx) = oneshot::channel();
    broker
        .settle_deliveries(&sub.queue, sub.consumer, ids.to_vec(), how, None, move |r| {
            let _ = tx.send(r);
        })
        .expect("a valid settle");
    rx.await.expect("answered").map(drop)
}

/// `queue` holds exactly the message `body`, nothing went anywhere else, and it
/// is stored (a restart would find it too).
fn still_there(broker: &Arc<Broker>, store: &Refusing, queue: &str, body: &str, after: &str) {
    let browsed = broker.management().browse(queue, "", 10).unwrap();
    let bodies: Vec<_> = browsed.iter().map(|b| b.record.body.clone()).collect();
    assert_eq!(bodies, [body.as_bytes()], "{queue} after a refused {after}");
    assert!(broker.management().browse("DLQ", "", 10).unwrap().is_empty());
    assert!(broker.management().browse("parked", "", 10).unwrap().is_empty());
    let snap = broker.queue(queue).unwrap().snapshot();
    let c = &snap.counters;
    assert_eq!((c.acked, c.dead_lettered, c.dropped), (0, 0, 0));
    let q = broker.queue(queue).unwrap();
    assert!(
        store
            .inner
            .read_message(q.id, browsed[0].entry.id)
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn refused_settles_leave_the_message_deliverable() {
    let (broker, store) = refusing().await;
    send(&broker, "orders", &["m"]).await;
    let mut sub = broker.subscribe("orders", 100, "").await.unwrap();
    let nack = Settlement::Nack {
        reason: "boom".into(),
        retry_after_ms: None,
        pause_queue_ms: None,
    };
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    // The second nack would dead-letter it (max-delivery-attempts = 2).
    for how in [nack.clone(), nack, dead, Settlement::Ack] {
        let got = receive(&mut sub, 1).await;
        store.hook.refuse.store(true, Ordering::SeqCst);
        let err = try_settle(&broker, &sub, &ids(&got), how.clone()).await;
        assert!(matches!(err, Err(BrokerError::Storage(_))), "{how:?}: {err:?}");
        still_there(&broker, &store, "orders", "m", &format!("{how:?}"));
        store.hook.refuse.store(false, Ordering::SeqCst);
    }
    // And it is delivered again; now the ack sticks.
    let got = receive(&mut sub, 1).await;
    assert_eq!(body(&got[0]), "m");
    settle(&broker, &sub, &ids(&got), Settlement::Ack, None).await;
    assert!(broker.management().browse("orders", "", 10).unwrap().is_empty());
}

#[tokio::test]
async fn refused_management_operations_leave_the_message_where_it_was() {
    let (broker, store) = refusing().await;
    send(&broker, "orders", &["m"]).await;
    let all = Selection {
        queue: "orders".into(),
        ..Default::default()
    };
    store.hook.refuse.store(true, Ordering::SeqCst);
    let err = broker.management().move_messages(&all, "parked").await;
    assert!(matches!(err, Err(BrokerError::Storage(_))), "{:?}", err.map(drop));
    still_there(&broker, &store, "orders", "m", "move");
    assert!(broker.management().remove_messages(&all).await.is_err());
    still_there(&broker, &store, "orders", "m", "remove");
    assert!(broker.management().purge("orders").await.is_err());
    still_there(&broker, &store, "orders", "m", "purge");

    // A dead letter that cannot go back stays on the DLQ.
    store.hook.refuse.store(false, Ordering::SeqCst);
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let dead = Settlement::DeadLetter { reason: "bad".into() };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    store.hook.refuse.store(true, Ordering::SeqCst);
    let dlq = Selection {
        queue: "DLQ".into(),
        ..Default::default()
    };
    assert!(
        broker
            .management()
            .retry_messages(&dlq, false, 0, None, |_| Ok(()))
            .await
            .is_err()
    );
    assert_eq!(broker.management().browse("DLQ", "", 10).unwrap().len(), 1);
    assert!(broker.management().browse("orders", "", 10).unwrap().is_empty());
}

/// Readiness follows the store: a refused commit makes the broker say it is
/// failing (`/health/ready` answers 503), the next commit that succeeds clears it.
#[tokio::test]
async fn a_refused_commit_marks_the_store_failing_until_one_succeeds() {
    let (broker, store) = refusing().await;
    assert!(!broker.store_failing());
    store.hook.refuse.store(true, Ordering::SeqCst);
    let refused = broker.send(vec![message("orders", "a")]).await;
    assert!(refused.is_err(), "{refused:?}");
    assert!(broker.store_failing());
    store.hook.refuse.store(false, Ordering::SeqCst);
    send(&broker, "orders", &["b"]).await;
    assert!(!broker.store_failing());
}

/// Retrying at once would spin while the store is away: the dispatcher waits
/// 100 ms, then 200, 400, ... between rounds, and delivers once it can store
/// the count, which the failed rounds did not raise.
#[tokio::test]
async fn a_dispatcher_refused_its_delivery_counts_backs_off() {
    let persisting = CONFIG.replace("before-delivery = false", "before-delivery = true");
    let (broker, store) = refusing_with(&persisting).await;
    send(&broker, "orders", &["m"]).await;
    store.hook.refuse.store(true, Ordering::SeqCst);
    let mut sub = broker.subscribe("orders", 10, "").await.unwrap();
    assert!(nothing_within(&mut sub, Duration::from_millis(1000)).await);
    let refused = store.hook.refused.load(Ordering::SeqCst);
    assert!((2..=5).contains(&refused), "{refused} refused rounds in 1 s");
    store.hook.refuse.store(false, Ordering::SeqCst);
    let got = receive(&mut sub, 1).await;
    assert_eq!((body(&got[0]), got[0].delivery_count), ("m", 1));
}
