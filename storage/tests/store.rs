//! Behaviour of `SledStore` through the `Store` trait: what is committed is
//! recovered, removals remove, batches are atomic, commits are grouped.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use rebound_storage::{
    AddressRecord, DeliveryState, FailureRecord, MAX_RECORD_BYTES, MessageRecord, Op, QueueRecord,
    RoutingType, SledStore, StorageError, Store,
};

fn queue(id: u32, name: &str) -> QueueRecord {
    QueueRecord {
        id,
        name: name.into(),
        address: "orders".into(),
        routing_type: RoutingType::Anycast.into(),
        filter: String::new(),
        auto_created: false,
    }
}

fn message(id: u64, priority: u32) -> MessageRecord {
    MessageRecord {
        message_id: id,
        address: "orders".into(),
        body: Bytes::from(format!("body {id}")),
        durable: true,
        priority,
        expiration_ms: id * 10,
        ..Default::default()
    }
}

fn put(queue: u32, id: u64) -> Op {
    Op::PutMessage {
        queue,
        message: message(id, 4),
    }
}

fn ids(store: &dyn Store, queue: u32) -> Vec<u64> {
    let recovered = store.recover().unwrap();
    let queue = recovered
        .queues
        .iter()
        .find(|q| q.record.id == queue)
        .expect("queue recovered");
    queue.messages.iter().map(|m| m.id).collect()
}

fn reopen(dir: &Path) -> Arc<dyn Store> {
    Arc::new(SledStore::open(dir).unwrap())
}

#[test]
fn store_is_dyn_compatible_and_commit_is_a_send_unpin_future() {
    fn future<F: std::future::Future<Output = Result<(), StorageError>> + Send + Unpin>() {}
    future::<rebound_storage::Commit>();
    let dir = tempfile::tempdir().unwrap();
    let _store: Arc<dyn Store> = reopen(dir.path());
}

#[tokio::test]
async fn committed_data_is_recovered_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    let address = AddressRecord {
        name: "orders".into(),
        anycast: true,
        multicast: false,
        auto_created: true,
    };
    let state = DeliveryState {
        delivery_count: 2,
        scheduled_at_ms: 99,
        failures: vec![FailureRecord {
            at_ms: 98,
            reason: "consumer closed".into(),
        }],
    };
    store
        .commit(vec![
            Op::PutAddress(address.clone()),
            Op::PutQueue(queue(7, "q7")),
        ])
        .await
        .unwrap();
    // Out of order on purpose: recovery must return ascending ids.
    store
        .commit(vec![
            Op::PutMessage {
                queue: 7,
                message: message(30, 9),
            },
            put(7, 10),
            put(7, 20),
        ])
        .await
        .unwrap();
    store
        .commit(vec![Op::PutState {
            queue: 7,
            id: 20,
            state: state.clone(),
        }])
        .await
        .unwrap();
    store.close().unwrap();
    drop(store);

    let store = reopen(dir.path());
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.addresses, vec![address]);
    assert_eq!(recovered.queues.len(), 1);
    let q = &recovered.queues[0];
    assert_eq!(q.record, queue(7, "q7"));
    assert_eq!(q.messages.iter().map(|m| m.id).collect::<Vec<_>>(), [10, 20, 30]);
    assert_eq!((q.messages[2].priority, q.messages[2].expiration_ms), (9, 300));
    assert_eq!(q.messages[0].state, None);
    assert_eq!(q.messages[1].state.as_ref(), Some(&state));
    assert!(q.messages.iter().all(|m| m.size > 0));
    assert_eq!(store.read_message(7, 30).unwrap(), Some(message(30, 9)));
    assert_eq!(store.read_state(7, 20).unwrap(), Some(state));
    assert_eq!(store.read_message(7, 31).unwrap(), None);
}

#[tokio::test]
async fn reopen_after_drop_without_close_keeps_commits() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    store
        .commit(vec![Op::PutQueue(queue(1, "q1")), put(1, 1), put(1, 2)])
        .await
        .unwrap();
    drop(store);
    assert_eq!(ids(&*reopen(dir.path()), 1), [1, 2]);
}

#[tokio::test]
async fn remove_message_and_delete_queue_really_remove() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    let state = DeliveryState {
        delivery_count: 1,
        ..Default::default()
    };
    store
        .commit(vec![Op::PutQueue(queue(1, "q1")), Op::PutQueue(queue(2, "q2"))])
        .await
        .unwrap();
    store
        .commit(vec![put(1, 1), put(1, 2), put(2, 1), put(2, 2)])
        .await
        .unwrap();
    store
        .commit(vec![Op::PutState {
            queue: 1,
            id: 1,
            state: state.clone(),
        }])
        .await
        .unwrap();
    store
        .commit(vec![Op::PutState {
            queue: 2,
            id: 2,
            state,
        }])
        .await
        .unwrap();

    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }, Op::DeleteQueue(2)])
        .await
        .unwrap();
    store
        .commit(vec![Op::DeleteAddress("orders".into())])
        .await
        .unwrap();
    drop(store);

    let store = reopen(dir.path());
    assert_eq!(store.read_message(1, 1).unwrap(), None);
    assert_eq!(store.read_state(1, 1).unwrap(), None);
    assert_eq!(store.read_message(2, 1).unwrap(), None);
    assert_eq!(store.read_state(2, 2).unwrap(), None);
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.queues.len(), 1);
    assert_eq!(ids(&*store, 1), [2]);

    // Re-creating queue 2 finds it empty: DeleteQueue removed its messages.
    store
        .commit(vec![Op::PutQueue(queue(2, "q2 again"))])
        .await
        .unwrap();
    assert_eq!(ids(&*store, 2), Vec::<u64>::new());
}

#[tokio::test]
async fn messages_of_an_unknown_queue_are_not_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    store.commit(vec![put(5, 1)]).await.unwrap();
    assert_eq!(store.recover().unwrap().queues, vec![]);
}

#[tokio::test]
async fn dlq_move_is_one_atomic_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    let state = DeliveryState {
        delivery_count: 5,
        ..Default::default()
    };
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q")),
            Op::PutQueue(queue(2, "dlq")),
            put(1, 1),
        ])
        .await
        .unwrap();
    store
        .commit(vec![Op::PutState {
            queue: 1,
            id: 1,
            state: state.clone(),
        }])
        .await
        .unwrap();

    // A move that cannot be written leaves both queues as they were ...
    let huge = MessageRecord {
        body: vec![0; MAX_RECORD_BYTES].into(),
        ..message(1, 4)
    };
    let failed = store
        .commit(vec![
            Op::RemoveMessage { queue: 1, id: 1 },
            Op::PutMessage {
                queue: 2,
                message: huge,
            },
        ])
        .await;
    assert!(matches!(failed, Err(StorageError::RecordTooLarge { .. })));
    assert_eq!((ids(&*store, 1), ids(&*store, 2)), (vec![1], vec![]));
    assert_eq!(store.read_state(1, 1).unwrap(), Some(state));

    // ... and a good one moves message and drops the state in one step.
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }, put(2, 1)])
        .await
        .unwrap();
    drop(store);
    let store = reopen(dir.path());
    assert_eq!((ids(&*store, 1), ids(&*store, 2)), (vec![], vec![1]));
    assert_eq!(store.read_state(1, 1).unwrap(), None);
}

#[tokio::test]
async fn ops_apply_in_order_within_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q")),
            put(1, 1),
            Op::RemoveMessage { queue: 1, id: 1 },
            put(1, 2),
        ])
        .await
        .unwrap();
    store
        .commit(vec![
            put(1, 3),
            Op::DeleteQueue(1),
            Op::PutQueue(queue(1, "q")),
            put(1, 4),
        ])
        .await
        .unwrap();
    assert_eq!(ids(&*store, 1), [4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    store.commit(vec![Op::PutQueue(queue(1, "q"))]).await.unwrap();
    let tasks: Vec<_> = (0..64_u64)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in 0..50 {
                    let id = store.generate_id().unwrap();
                    store
                        .commit(vec![Op::PutMessage {
                            queue: 1,
                            message: message(id, (task + i) as u32 % 10),
                        }])
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let stats = store.stats();
    assert_eq!(stats.commits, 1 + 64 * 50);
    assert_eq!(stats.ops, 1 + 64 * 50);
    assert!(stats.syncs < stats.commits / 2, "{stats:?}");
    assert!(stats.disk_bytes > 0);
    let ids = ids(&*store, 1);
    assert_eq!(ids.len(), 3200);
    assert!(ids.is_sorted());
}

#[tokio::test]
async fn generated_ids_increase_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    let first = store.generate_id().unwrap();
    let second = store.generate_id().unwrap();
    assert!(second > first);
    drop(store);
    assert!(reopen(dir.path()).generate_id().unwrap() > second);
}

#[tokio::test]
async fn commits_after_close_fail_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let store = reopen(dir.path());
    store.commit(vec![Op::PutQueue(queue(1, "q"))]).await.unwrap();
    store.close().unwrap();
    store.close().unwrap();
    assert!(matches!(
        store.commit(vec![put(1, 1)]).await,
        Err(StorageError::Closed)
    ));
    assert_eq!(store.stats().commits, 1);
}
