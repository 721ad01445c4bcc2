//! The [`Store`] contract: what the broker may rely on whatever store is
//! behind the trait, as tests every store must pass unchanged.
//!
//! A store takes part with a [`Harness`] and one line
//! `store_contract!(name, harness_expression);` in `tests/stores.rs`, which
//! instantiates every test below as `name::<test>` (the harness expression
//! is evaluated afresh for each test). What only one store does (files,
//! crashes, group commit) is tested next to that store, not here.

mod concurrency;
mod duplicate_ids;
mod fixtures;
mod removals;
mod scan;
mod sizes;

use std::sync::Arc;

use bytes::Bytes;
use rebound_storage::{
    AddressRecord, DeliveryState, FailureRecord, MAX_RECORD_BYTES, MessageRecord, Op, PropertyValue,
    QueueRecord, RoutingType, StorageError, Store, records::property_value,
};

pub use concurrency::*;
pub use duplicate_ids::*;
pub use fixtures::large;
pub use removals::*;
pub use scan::*;
pub use sizes::*;

/// Opens stores of one kind for one test.
pub trait Harness {
    /// Opens a new, empty store.
    fn open(&mut self) -> Arc<dyn Store>;
    /// Restarts: `store`, the last handle of the store this harness opened
    /// last, goes away (closed or not), and a store over the same data comes
    /// back.
    fn reopen(&mut self, store: Arc<dyn Store>) -> Arc<dyn Store>;
}

/// Instantiates every contract test for one store, in a module `$store`.
macro_rules! store_contract {
    ($store:ident, $harness:expr) => {
        mod $store {
            use super::*;

            store_contract!(@tests $harness, #[tokio::test];
                a_failed_commit_changes_nothing,
                ops_apply_in_order_within_a_commit,
                committed_data_is_recovered_in_order_after_reopen,
                reopen_after_drop_without_close_keeps_commits,
                patient_commits_are_commits,
                remove_message_removes_the_message_and_its_state,
                remove_stateless_message_removes_the_message_only,
                delete_queue_removes_its_messages_and_states_only,
                messages_of_an_unknown_queue_are_not_recovered,
                states_are_put_replaced_and_read,
                duplicate_ids_are_kept_in_order_removed_and_deleted_with_their_address,
                generated_ids_increase_also_across_reopen,
                commits_after_close_fail_with_closed_and_reads_keep_working,
                stats_count_durable_commits_and_their_ops,
                size_limits_are_those_of_every_store,
                large_bodies_round_trip_through_commit_reopen_and_read,
                large_messages_are_rewritten_moved_and_removed,
                scans_read_a_queue_in_order_after_a_cursor,
                scans_merge_old_and_recent_writes_in_chunks,
                counts_and_recovered_heads_agree_with_the_index,
                the_due_index_scans_batches_by_their_earliest_entry
            );
            store_contract!(@tests $harness, #[tokio::test(flavor = "multi_thread", worker_threads = 2)];
                concurrent_commits_are_all_durable,
                concurrent_readers_see_whole_messages
            );
        }
    };
    (@tests $harness:expr, #[$runtime:meta]; $($test:ident),+) => {
        $(
            #[$runtime]
            async fn $test() {
                $crate::contract::$test(&mut $harness).await
            }
        )+
    };
}

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
        // Distinct per message, also for ids of the time-ordered format.
        expiration_ms: id % 1_000_000_000 * 10,
        ..Default::default()
    }
}

fn put(queue: u32, id: u64) -> Op {
    Op::PutMessage {
        queue,
        message: message(id, 4),
    }
}

fn put_message(queue: u32, message: &MessageRecord) -> Op {
    Op::PutMessage {
        queue,
        message: message.clone(),
    }
}

fn state(delivery_count: u32) -> DeliveryState {
    DeliveryState {
        delivery_count,
        ..Default::default()
    }
}

fn put_state(queue: u32, id: u64, state: &DeliveryState) -> Op {
    Op::PutState {
        queue,
        id,
        state: state.clone(),
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

fn too_large(result: Result<(), StorageError>, max: usize) -> bool {
    matches!(result, Err(StorageError::RecordTooLarge { max: m, .. }) if m == max)
}

/// A commit with one record too large is refused whole: a DLQ move that
/// cannot be written leaves both queues as they were, also after a reopen.
pub async fn a_failed_commit_changes_nothing(h: &mut dyn Harness) {
    let store = h.open();
    let state = state(5);
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q")),
            Op::PutQueue(queue(2, "dlq")),
            put(1, 1),
        ])
        .await
        .unwrap();
    store.commit(vec![put_state(1, 1, &state)]).await.unwrap();

    let huge = MessageRecord {
        body: vec![0; MAX_RECORD_BYTES].into(),
        ..message(1, 4)
    };
    let failed = store
        .commit(vec![
            Op::RemoveMessage { queue: 1, id: 1 },
            Op::PutMessage {
                queue: 2,
                message: huge.clone(),
            },
        ])
        .await;
    assert!(too_large(failed, MAX_RECORD_BYTES));
    assert_eq!((ids(&*store, 1), ids(&*store, 2)), (vec![1], vec![]));
    assert_eq!(store.read_state(1, 1).unwrap(), Some(state.clone()));
    // Every kind of op before the bad record is dropped too.
    let failed = store
        .commit(vec![
            Op::PutAddress(AddressRecord {
                name: "new".into(),
                ..Default::default()
            }),
            Op::PutQueue(queue(3, "new")),
            put(3, 5),
            put_state(3, 5, &state),
            Op::DeleteQueue(2),
            Op::DeleteAddress("orders".into()),
            Op::PutMessage {
                queue: 3,
                message: huge,
            },
        ])
        .await;
    assert!(too_large(failed, MAX_RECORD_BYTES));
    let recovered = store.recover().unwrap();
    assert!(recovered.addresses.is_empty());
    assert_eq!(recovered.queues.len(), 2);
    assert_eq!(store.read_message(3, 5).unwrap(), None);
    assert_eq!(store.read_state(3, 5).unwrap(), None);
    assert_eq!(store.stats().commits, 2);

    // A good move takes the message and drops the state in one step.
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }, put(2, 1)])
        .await
        .unwrap();
    let store = h.reopen(store);
    assert_eq!((ids(&*store, 1), ids(&*store, 2)), (vec![], vec![1]));
    assert_eq!(store.read_state(1, 1).unwrap(), None);
    assert_eq!(store.recover().unwrap().queues.len(), 2);
}

/// Ops apply one after another, as if each were its own commit.
pub async fn ops_apply_in_order_within_a_commit(h: &mut dyn Harness) {
    let store = h.open();
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

    store
        .commit(vec![
            put_state(1, 4, &state(1)),
            Op::RemoveMessage { queue: 1, id: 4 },
            put(1, 4),
            put_state(1, 4, &state(2)),
            put_state(1, 4, &state(3)),
            Op::PutQueue(queue(1, "renamed")),
            Op::DeleteAddress("orders".into()),
            Op::PutAddress(AddressRecord {
                name: "orders".into(),
                multicast: true,
                ..Default::default()
            }),
        ])
        .await
        .unwrap();
    let store = h.reopen(store);
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.addresses.len(), 1);
    assert!(recovered.addresses[0].multicast);
    assert_eq!(recovered.queues[0].record.name, "renamed");
    assert_eq!(recovered.queues[0].messages[0].state, Some(state(3)));
}

/// Addresses, queues, messages and states come back, ordered as
/// `Recovered` documents: addresses by name, queues by id, messages by id.
pub async fn committed_data_is_recovered_in_order_after_reopen(h: &mut dyn Harness) {
    let store = h.open();
    let address = AddressRecord {
        name: "orders".into(),
        anycast: true,
        multicast: false,
        auto_created: true,
    };
    let other = AddressRecord {
        name: "billing".into(),
        multicast: true,
        ..Default::default()
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
    // In a group, and scheduled: recovery says which, and when.
    let mut grouped = message(30, 9);
    grouped.scheduled_at_ms = 12_345;
    grouped.properties.insert(
        "JMSXGroupID".into(),
        PropertyValue {
            value: Some(property_value::Value::String("g".into())),
        },
    );
    // Out of order on purpose: recovery must sort.
    store
        .commit(vec![
            Op::PutMessage {
                queue: 7,
                message: grouped.clone(),
            },
            put(7, 10),
            put(7, 20),
            Op::PutAddress(other.clone()),
            Op::PutQueue(queue(3, "q3")),
            put(3, 300),
            put(3, 2),
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

    let store = h.reopen(store);
    let recovered = store.recover().unwrap();
    assert_eq!(recovered.addresses, vec![other, address]);
    let queues: Vec<u32> = recovered.queues.iter().map(|q| q.record.id).collect();
    assert_eq!(queues, [3, 7]);
    assert_eq!(recovered.queues[0].record, queue(3, "q3"));
    assert_eq!(ids(&*store, 3), [2, 300]);
    let q = &recovered.queues[1];
    assert_eq!(q.record, queue(7, "q7"));
    assert_eq!(q.messages.iter().map(|m| m.id).collect::<Vec<_>>(), [10, 20, 30]);
    assert_eq!((q.messages[0].priority, q.messages[0].expiration_ms), (4, 100));
    assert_eq!((q.messages[2].priority, q.messages[2].expiration_ms), (9, 300));
    assert_eq!(q.messages[0].state, None);
    assert_eq!(q.messages[1].state.as_ref(), Some(&state));
    assert_eq!(
        (q.messages[0].group.as_deref(), q.messages[2].group.as_deref()),
        (None, Some("g"))
    );
    assert_eq!(
        (q.messages[0].scheduled_at_ms, q.messages[2].scheduled_at_ms),
        (0, 12_345)
    );
    for entry in &q.messages {
        let stored = store.read_message(7, entry.id).unwrap().unwrap();
        assert_eq!(entry.size as usize, prost::Message::encoded_len(&stored));
    }
    assert_eq!(store.read_message(7, 30).unwrap(), Some(grouped));
    assert_eq!(store.read_state(7, 20).unwrap(), Some(state));
    assert_eq!(store.read_message(7, 31).unwrap(), None);
}

pub async fn reopen_after_drop_without_close_keeps_commits(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q1")), put(1, 1), put(1, 2)])
        .await
        .unwrap();
    store.commit(vec![put_state(1, 2, &state(1))]).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(ids(&*store, 1), [1, 2]);
    assert_eq!(store.read_state(1, 2).unwrap(), Some(state(1)));
}

/// A patient commit (an ack's) resolves alone too, once durable, and applies
/// in order with the commits around it.
pub async fn patient_commits_are_commits(h: &mut dyn Harness) {
    let store = h.open();
    let mut setup = vec![Op::PutQueue(queue(1, "q1"))];
    setup.extend((1..=3).map(|id| put(1, id)));
    store.commit(setup).await.unwrap();
    let alone = Op::RemoveMessage { queue: 1, id: 1 };
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        store.commit_patient(vec![alone]),
    )
    .await
    .expect("a patient commit alone resolves")
    .unwrap();
    let patient = store.commit_patient(vec![Op::RemoveMessage { queue: 1, id: 2 }]);
    let after = store.commit(vec![put(1, 2)]);
    let (patient, after) = tokio::join!(patient, after);
    patient.unwrap();
    after.unwrap();
    assert_eq!(ids(&*store, 1), [2, 3]);
    let store = h.reopen(store);
    assert_eq!(ids(&*store, 1), [2, 3]);
}

pub async fn messages_of_an_unknown_queue_are_not_recovered(h: &mut dyn Harness) {
    let store = h.open();
    store.commit(vec![put(5, 1)]).await.unwrap();
    assert_eq!(store.recover().unwrap().queues, vec![]);
}

/// PutState creates or replaces a state; read_state and recover see the
/// latest; a state without a message is readable but not recovered.
pub async fn states_are_put_replaced_and_read(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q")), put(1, 1), put(1, 2)])
        .await
        .unwrap();
    assert_eq!(store.read_state(1, 1).unwrap(), None);
    store.commit(vec![put_state(1, 1, &state(1))]).await.unwrap();
    assert_eq!(store.read_state(1, 1).unwrap(), Some(state(1)));
    let later = DeliveryState {
        delivery_count: 2,
        scheduled_at_ms: 1234,
        failures: vec![FailureRecord {
            at_ms: 1000,
            reason: "timeout".into(),
        }],
    };
    store.commit(vec![put_state(1, 1, &later)]).await.unwrap();
    store.commit(vec![put_state(1, 7, &state(9))]).await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.read_state(1, 1).unwrap(), Some(later.clone()));
    assert_eq!(store.read_state(1, 2).unwrap(), None);
    assert_eq!(store.read_state(2, 1).unwrap(), None);
    assert_eq!(store.read_state(1, 7).unwrap(), Some(state(9)));
    let recovered = store.recover().unwrap();
    let states: Vec<_> = recovered.queues[0]
        .messages
        .iter()
        .map(|m| (m.id, m.state.clone()))
        .collect();
    assert_eq!(states, [(1, Some(later)), (2, None)]);
}

pub async fn generated_ids_increase_also_across_reopen(h: &mut dyn Harness) {
    let store = h.open();
    let mut last = 0;
    for _ in 0..1000 {
        let id = store.generate_id().unwrap();
        assert!(id > last, "{id} after {last}");
        last = id;
    }
    let store = h.reopen(store);
    let after_drop = store.generate_id().unwrap();
    assert!(after_drop > last, "{after_drop} after {last}");
    store.close().unwrap();
    let store = h.reopen(store);
    assert!(store.generate_id().unwrap() > after_drop);
}

/// Closing is idempotent; commits after it fail with `Closed` and write
/// nothing; reads keep working.
pub async fn commits_after_close_fail_with_closed_and_reads_keep_working(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q")),
            put(1, 1),
            put_state(1, 1, &state(1)),
        ])
        .await
        .unwrap();
    store.close().unwrap();
    store.close().unwrap();
    assert!(matches!(
        store.commit(vec![put(1, 2)]).await,
        Err(StorageError::Closed)
    ));
    assert_eq!(store.stats().commits, 1);
    assert_eq!(store.read_message(1, 1).unwrap(), Some(message(1, 4)));
    assert_eq!(store.read_state(1, 1).unwrap(), Some(state(1)));
    assert_eq!(store.read_message(1, 2).unwrap(), None);
    assert_eq!(ids(&*store, 1), [1]);
    let store = h.reopen(store);
    assert_eq!(ids(&*store, 1), [1]);
}

/// Commits and ops are counted once durable; refused commits are not.
pub async fn stats_count_durable_commits_and_their_ops(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q")), put(1, 1), put(1, 2)])
        .await
        .unwrap();
    store.commit(vec![put(1, 3)]).await.unwrap();
    let huge = MessageRecord {
        body: vec![0; MAX_RECORD_BYTES].into(),
        ..message(4, 4)
    };
    assert!(too_large(
        store.commit(vec![put(1, 4), put_message(1, &huge)]).await,
        MAX_RECORD_BYTES
    ));
    let stats = store.stats();
    assert_eq!((stats.commits, stats.ops), (2, 4));
    assert!((1..=2).contains(&stats.syncs), "{stats:?}");
}
