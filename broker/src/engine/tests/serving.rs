//! Queues that move between nodes: unloaded, a queue serves nobody and keeps
//! only what the store has; loaded again, it delivers everything stored, with
//! the delivery counts as stored.
use std::time::Duration;

use rebound_storage::{Commit, Op};

use super::intercepted::{Hook, Intercepted};
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
    assert_eq!(broker.cluster().durable_queue_ids(), [id]);

    assert!(broker.cluster().unload_queue(id));
    let ended = tokio::time::timeout(Duration::from_secs(5), sub.deliveries.recv()).await;
    assert!(matches!(ended, Ok(None)), "the stream ends");
    assert!(matches!(queue_gone(&sub.queue), BrokerError::QueueMoved(_)));
    let refused = broker.subscribe("orders", 10, "").await.err().expect("refused");
    assert!(matches!(refused, BrokerError::QueueMoved(_)), "{refused}");
    send(&broker, "orders", &["c"]).await;
    assert_eq!(sub.queue.snapshot().messages, 0, "stored, not held");
    // A non-durable message would be neither: the send is refused, whole.
    let fleeting = MessageRecord {
        durable: false,
        ..message("orders", "fleeting")
    };
    let refused = broker.send(vec![message("orders", "d"), fleeting]).await;
    let refused = refused.expect_err("refused");
    assert!(
        matches!(&refused, BrokerError::NotKeptHere { queue, owner: None } if queue == "orders"),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .starts_with("no node serves queue 'orders' yet"),
        "{refused}"
    );

    assert!(broker.cluster().load_queue(id, 1));
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
    assert!(!broker.cluster().load_queue(id + 100, 1), "no such queue");
}

/// A depager read or count in flight holds the queue's tail lock: messages
/// are taken from the inbox only once it is done, so that a read never loads
/// one uncounted and the inbox enqueues it again.
#[tokio::test]
async fn messages_are_taken_from_the_inbox_only_between_depager_reads() {
    let (broker, _store) = broker("").await;
    send(&broker, "orders", &["a"]).await;
    let id = broker.cluster().durable_queue_ids()[0];
    let queue = broker.cluster().durable_queue(id).expect("a durable queue");
    let reading = queue.tail.lock().await;
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let taking = tokio::spawn({
        let (broker, started) = (Arc::clone(&broker), Arc::clone(&started));
        async move {
            broker
                .cluster()
                .take_inbox(id, || {
                    started.store(true, std::sync::atomic::Ordering::SeqCst);
                    async { Ok(Vec::new()) }
                })
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !started.load(std::sync::atomic::Ordering::SeqCst),
        "taken during a read"
    );
    drop(reading);
    assert_eq!(taking.await.unwrap().expect("taken"), 0);
    assert!(started.load(std::sync::atomic::Ordering::SeqCst));
}

#[tokio::test]
async fn what_other_nodes_create_and_delete_reaches_the_registry() {
    let (broker, _store) = broker("").await;
    let address = rebound_storage::AddressRecord {
        name: "remote".into(),
        ..Default::default()
    };
    let queue = rebound_storage::QueueRecord {
        id: 77,
        name: "remote".into(),
        address: "remote".into(),
        ..Default::default()
    };
    let other = rebound_storage::AddressRecord {
        name: "other".into(),
        ..Default::default()
    };
    let seen = broker
        .cluster()
        .merge_stored(vec![address, other], vec![queue], &Default::default());
    assert!(seen.queues.contains(&77));
    assert!(broker.read().addresses.contains_key("other"));
    let added = broker.queue("remote").expect("created by another node");
    assert_eq!(added.id, 77);
    assert!(added.is_served(), "a single broker serves what it has");

    // Gone from the store, and known before: deleted by another node.
    let mine = broker
        .create_queue("remote", "mine", None, true, None, false)
        .await;
    let mine = mine.expect("created here");
    let seen = broker.cluster().merge_stored(Vec::new(), Vec::new(), &seen);
    assert!(broker.queue("remote").is_err(), "deleted elsewhere");
    assert!(added.is_closed());
    assert!(
        !broker.read().addresses.contains_key("other"),
        "deleted elsewhere"
    );
    // A queue of this node that a read missed (not committed yet) stays, and
    // so does its address.
    assert!(!seen.queues.contains(&mine.id));
    broker.cluster().merge_stored(Vec::new(), Vec::new(), &seen);
    assert!(broker.queue("mine").is_ok());
    assert!(broker.read().addresses.contains_key("remote"));
}

/// Commits of delivery states only (the counts stored before a delivery)
/// wait until the test opens the gate: the answer of a database the node was
/// cut from, arriving once the cut heals.
struct LateStates {
    gate: Arc<tokio::sync::Semaphore>,
}

impl Hook for LateStates {
    fn commit(&self, inner: &Arc<MemoryStore>, ops: Vec<Op>) -> Commit {
        if !ops.iter().all(|op| matches!(op, Op::PutState { .. })) {
            return inner.commit(ops);
        }
        let (tx, rx) = oneshot::channel();
        let (inner, gate) = (inner.clone(), self.gate.clone());
        tokio::spawn(async move {
            let _open = gate.acquire().await;
            let _ = tx.send(inner.commit(ops).await);
        });
        Commit::from(rx)
    }
}

/// A node that stepped down (its lease ran out while it could not reach the
/// database) while a delivery's count was being stored does not make that
/// delivery once the store answers: the queue's next owner delivers the
/// message, and a late delivery here would be a second consumer holding it.
#[tokio::test]
async fn a_delivery_is_not_made_once_its_queue_moved_while_its_count_was_stored() {
    let hook = LateStates {
        gate: Arc::new(tokio::sync::Semaphore::new(0)),
    };
    let gate = hook.gate.clone();
    let store = Arc::new(Intercepted {
        inner: Arc::new(MemoryStore::new()),
        hook,
    });
    let broker = open("persist-delivery-count-before-delivery = true", store).await;
    send(&broker, "orders", &["a"]).await;
    let mut sub = broker.subscribe("orders", 10, "").await.expect("subscribed");
    let id = sub.queue.id;
    // The count is being stored; the node steps down meanwhile.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(broker.cluster().unload_queue(id));
    gate.add_permits(1);
    let next = tokio::time::timeout(Duration::from_secs(5), sub.deliveries.recv()).await;
    assert!(
        matches!(next, Ok(None)),
        "the stream ends without the delivery: {:?}",
        next.map(|d| d.map(|batch| batch.len()))
    );
}

#[tokio::test]
async fn a_node_s_leases_run_out_by_its_own_clock_until_renewed() {
    let (single, _store) = broker("").await;
    single
        .cluster()
        .leases_hold_until(Some(std::time::Instant::now()));
    assert!(
        !single.cluster().leases_ran_out(),
        "a single broker has no leases"
    );
    let ids = Box::new(|_: &str| Ok(1));
    let broker = Broker::open_leased(&config(""), Arc::new(MemoryStore::new()), ids)
        .await
        .expect("broker opens");
    let cluster = broker.cluster();
    assert!(!cluster.leases_ran_out(), "no renewal yet: nothing to run out");
    cluster.leases_hold_until(Some(std::time::Instant::now() + Duration::from_secs(60)));
    assert!(!cluster.leases_ran_out());
    cluster.leases_hold_until(Some(std::time::Instant::now()));
    assert!(cluster.leases_ran_out(), "a stall past the deadline");
    cluster.leases_hold_until(None);
    assert!(!cluster.leases_ran_out(), "stopped serving: nothing runs out");
}
