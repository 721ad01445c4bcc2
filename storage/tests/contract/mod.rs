//! The [`Store`] contract: what the broker may rely on whatever engine is
//! behind the trait, as tests every engine must pass unchanged.
//!
//! An engine takes part with a [`Harness`] and one line
//! `store_contract!(name, harness_expression);` in `tests/engines.rs`, which
//! instantiates every test below as `name::<test>` (the harness expression
//! is evaluated afresh for each test). What only one engine does (files,
//! crashes, group commit) is tested next to that engine, not here.

mod fixtures;
mod scan;

use std::sync::Arc;

use bytes::Bytes;
use rebound_storage::{
    AddressRecord, DeliveryState, FailureRecord, LARGE_BODY_THRESHOLD, MAX_INLINE_RECORD_BYTES,
    MAX_RECORD_BYTES, MessageRecord, Op, PropertyValue, QueueRecord, RoutingType, StorageError, Store, keys,
    records::property_value,
};

pub use fixtures::large;
pub use scan::*;

/// Opens stores of one engine for one test.
pub trait Harness {
    /// Opens a new, empty store.
    fn open(&mut self) -> Arc<dyn Store>;
    /// Restarts: `store`, the last handle of the store this harness opened
    /// last, goes away (closed or not), and a store over the same data comes
    /// back.
    fn reopen(&mut self, store: Arc<dyn Store>) -> Arc<dyn Store>;
}

/// Instantiates every contract test for one engine, in a module `$engine`.
macro_rules! store_contract {
    ($engine:ident, $harness:expr) => {
        mod $engine {
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
                size_limits_are_those_of_every_engine,
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

/// A message in queue 1 whose key plus encoded record is exactly `size`
/// bytes: a body of `body` bytes, a bytes property for the rest.
fn sized(id: u64, size: usize, body: usize) -> MessageRecord {
    let key = keys::message(1, id).len();
    let mut message = MessageRecord {
        message_id: id,
        body: vec![0xa5; body].into(),
        ..Default::default()
    };
    let mut pad = 0;
    for _ in 0..5 {
        message.properties.insert(
            "pad".into(),
            PropertyValue {
                value: Some(property_value::Value::Bytes(vec![0x5a; pad].into())),
            },
        );
        pad = (pad + size).saturating_sub(key + prost::Message::encoded_len(&message));
    }
    assert_eq!(key + prost::Message::encoded_len(&message), size);
    message
}

/// A message in queue 1 of exactly `size` bytes, all but a few of them body.
fn body_sized(id: u64, size: usize) -> MessageRecord {
    let key = keys::message(1, id).len();
    let mut message = MessageRecord {
        message_id: id,
        ..Default::default()
    };
    for _ in 0..3 {
        let body = (message.body.len() + size).saturating_sub(key + prost::Message::encoded_len(&message));
        message.body = vec![0xa5; body].into();
    }
    assert_eq!(key + prost::Message::encoded_len(&message), size);
    message
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

/// RemoveMessage (an ack) takes the message and its state, and nothing else;
/// removing what is not there is no error.
pub async fn remove_message_removes_the_message_and_its_state(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q1")),
            put(1, 1),
            put(1, 2),
            put_state(1, 1, &state(1)),
            put_state(1, 2, &state(2)),
        ])
        .await
        .unwrap();
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 99 }])
        .await
        .unwrap();
    let check = |store: &dyn Store| {
        assert_eq!(store.read_message(1, 1).unwrap(), None);
        assert_eq!(store.read_state(1, 1).unwrap(), None);
        assert_eq!(store.read_message(1, 2).unwrap(), Some(message(2, 4)));
        assert_eq!(store.read_state(1, 2).unwrap(), Some(state(2)));
        assert_eq!(
            store.stored_messages(1, &[2, 1, 99]).unwrap(),
            [true, false, false]
        );
        let recovered = store.recover().unwrap();
        assert_eq!(recovered.queues[0].messages.len(), 1);
        assert_eq!(recovered.queues[0].messages[0].state, Some(state(2)));
    };
    check(&*store);
    check(&*h.reopen(store));
}

/// RemoveStatelessMessage takes the message and writes nothing for a state: one
/// that exists (a caller's mistake) stays, invisible to recovery.
pub async fn remove_stateless_message_removes_the_message_only(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q1")),
            put(1, 1),
            put(1, 2),
            put_state(1, 2, &state(2)),
        ])
        .await
        .unwrap();
    store
        .commit(vec![
            Op::RemoveStatelessMessage { queue: 1, id: 1 },
            Op::RemoveStatelessMessage { queue: 1, id: 2 },
        ])
        .await
        .unwrap();
    let check = |store: &dyn Store| {
        assert_eq!(store.read_message(1, 1).unwrap(), None);
        assert_eq!(store.read_message(1, 2).unwrap(), None);
        assert_eq!(store.read_state(1, 2).unwrap(), Some(state(2)));
        assert!(store.recover().unwrap().queues[0].messages.is_empty());
    };
    check(&*store);
    check(&*h.reopen(store));
}

/// DeleteQueue removes the queue with its messages and states; other queues
/// keep theirs, and a queue created again under the same id is empty.
pub async fn delete_queue_removes_its_messages_and_states_only(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q1")), Op::PutQueue(queue(2, "q2"))])
        .await
        .unwrap();
    store
        .commit(vec![put(1, 1), put(1, 2), put(2, 1), put(2, 2)])
        .await
        .unwrap();
    store.commit(vec![put_state(1, 1, &state(1))]).await.unwrap();
    store.commit(vec![put_state(2, 2, &state(1))]).await.unwrap();
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }, Op::DeleteQueue(2)])
        .await
        .unwrap();
    store
        .commit(vec![Op::DeleteAddress("orders".into())])
        .await
        .unwrap();
    let store = h.reopen(store);
    assert_eq!(store.read_message(1, 1).unwrap(), None);
    assert_eq!(store.read_state(1, 1).unwrap(), None);
    assert_eq!(store.read_message(2, 1).unwrap(), None);
    assert_eq!(store.read_state(2, 2).unwrap(), None);
    let recovered = store.recover().unwrap();
    assert!(recovered.addresses.is_empty());
    assert_eq!(recovered.queues.len(), 1);
    assert_eq!(ids(&*store, 1), [2]);
    assert_eq!(store.read_message(1, 2).unwrap(), Some(message(2, 4)));

    store
        .commit(vec![Op::PutQueue(queue(2, "q2 again"))])
        .await
        .unwrap();
    assert_eq!(ids(&*store, 2), Vec::<u64>::new());
    // Deleting it in the commit that fills it leaves nothing either.
    store
        .commit(vec![put(2, 3), put_state(2, 3, &state(1)), Op::DeleteQueue(2)])
        .await
        .unwrap();
    assert_eq!(store.read_message(2, 3).unwrap(), None);
    assert_eq!(store.read_state(2, 3).unwrap(), None);
    assert_eq!(store.recover().unwrap().queues.len(), 1);
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

fn put_duplicate_id(address: &str, seq: u64, id: &str) -> Op {
    Op::PutDuplicateId {
        address: address.into(),
        seq,
        id: Bytes::copy_from_slice(id.as_bytes()),
    }
}

/// The entries of every address's duplicate-id cache, as `recover` lists them.
fn duplicate_ids(store: &dyn Store) -> Vec<(String, u64, Bytes)> {
    store
        .recover()
        .unwrap()
        .duplicate_ids
        .into_iter()
        .map(|d| (d.address, d.seq, d.id))
        .collect()
}

/// Duplicate-id cache entries are written with the message they came with,
/// survive a restart, come back one address at a time ascending by seq,
/// leave one by one (the FIFO dropping the oldest) or all together with their
/// address, and touch no other address's entries.
pub async fn duplicate_ids_are_kept_in_order_removed_and_deleted_with_their_address(h: &mut dyn Harness) {
    let store = h.open();
    let orders = AddressRecord {
        name: "orders".into(),
        anycast: true,
        ..Default::default()
    };
    store
        .commit(vec![
            Op::PutAddress(orders),
            Op::PutQueue(queue(1, "q")),
            put(1, 1),
            put_duplicate_id("orders", 2, "b"),
            put_duplicate_id("orders", 1, "a"),
            put_duplicate_id("orders.eu", 1, "a"),
            put_duplicate_id("o", 300, "x"),
        ])
        .await
        .unwrap();
    store
        .commit(vec![
            Op::RemoveDuplicateId {
                address: "orders".into(),
                seq: 1,
                id: Bytes::from_static(b"a"),
            },
            put_duplicate_id("orders", 3, "c"),
            // Removing what is not there is no error.
            Op::RemoveDuplicateId {
                address: "nowhere".into(),
                seq: 1,
                id: Bytes::from_static(b"x"),
            },
        ])
        .await
        .unwrap();
    let store = h.reopen(store);
    let mut found = duplicate_ids(&*store);
    // One address after the other, each ascending by seq.
    let mut seen: Vec<&str> = Vec::new();
    for window in found.windows(2) {
        if window[0].0 == window[1].0 {
            assert!(window[0].1 < window[1].1, "{found:?}");
        }
    }
    for (address, _, _) in &found {
        if seen.last() != Some(&address.as_str()) {
            assert!(
                !seen.contains(&address.as_str()),
                "{address} twice apart: {found:?}"
            );
            seen.push(address);
        }
    }
    found.sort();
    let entry = |a: &str, seq, id: &str| (a.to_owned(), seq, Bytes::copy_from_slice(id.as_bytes()));
    assert_eq!(
        found,
        [
            entry("o", 300, "x"),
            entry("orders", 2, "b"),
            entry("orders", 3, "c"),
            entry("orders.eu", 1, "a"),
        ]
    );
    // Deleting an address deletes its cache, also when the address has no record.
    store
        .commit(vec![
            Op::DeleteAddress("orders".into()),
            Op::DeleteAddress("o".into()),
        ])
        .await
        .unwrap();
    let store = h.reopen(store);
    assert_eq!(duplicate_ids(&*store), [entry("orders.eu", 1, "a")]);
    assert_eq!(ids(&*store, 1), [1]);
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

/// The limits of `MAX_RECORD_BYTES` and `MAX_INLINE_RECORD_BYTES`, with the
/// same error, whatever the engine.
pub async fn size_limits_are_those_of_every_engine(h: &mut dyn Harness) {
    let store = h.open();
    store.commit(vec![Op::PutQueue(queue(1, "q"))]).await.unwrap();
    let key = |id: u64| keys::hex(&keys::message(1, id));

    // A whole message: one byte over is refused, naming key and size ...
    let over = body_sized(1, MAX_RECORD_BYTES + 1);
    match store.commit(vec![put_message(1, &over)]).await {
        Err(StorageError::RecordTooLarge { key: k, size, max }) => {
            assert_eq!((k, size, max), (key(1), MAX_RECORD_BYTES + 1, MAX_RECORD_BYTES));
        }
        other => panic!("{other:?}"),
    }
    // ... the limit itself is not.
    let at = body_sized(2, MAX_RECORD_BYTES);
    store.commit(vec![put_message(1, &at)]).await.unwrap();
    assert_eq!(store.read_message(1, 2).unwrap(), Some(at));
    assert_eq!(
        store.recover().unwrap().queues[0].messages[0].size as usize,
        MAX_RECORD_BYTES - keys::message(1, 2).len()
    );

    // What stays inline (all but a large body) has the smaller limit: a body
    // that could go to a file does not help properties that are too big ...
    let result = store
        .commit(vec![put_message(
            1,
            &sized(3, MAX_INLINE_RECORD_BYTES + (1 << 20), 1 << 20),
        )])
        .await;
    assert!(too_large(result, MAX_INLINE_RECORD_BYTES));
    let result = store
        .commit(vec![put_message(1, &sized(4, MAX_INLINE_RECORD_BYTES + 1, 0))])
        .await;
    match result {
        Err(StorageError::RecordTooLarge { key: k, size, max }) => {
            // The size counted includes room for a large-body marker.
            assert_eq!((k, max), (key(4), MAX_INLINE_RECORD_BYTES));
            assert!(size > MAX_INLINE_RECORD_BYTES, "{size}");
        }
        other => panic!("{other:?}"),
    }
    // ... but a small body that only makes the record too big is fine.
    let moved_out = sized(5, MAX_INLINE_RECORD_BYTES + 1000, 2000);
    store.commit(vec![put_message(1, &moved_out)]).await.unwrap();
    assert_eq!(store.read_message(1, 5).unwrap(), Some(moved_out));
    let at_inline = sized(6, MAX_INLINE_RECORD_BYTES, LARGE_BODY_THRESHOLD);
    store.commit(vec![put_message(1, &at_inline)]).await.unwrap();
    assert_eq!(store.read_message(1, 6).unwrap(), Some(at_inline));

    // Every other record has the inline limit.
    let long = "x".repeat(MAX_INLINE_RECORD_BYTES);
    let address = Op::PutAddress(AddressRecord {
        name: long.clone(),
        ..Default::default()
    });
    let queue_op = Op::PutQueue(QueueRecord {
        filter: long.clone(),
        ..queue(2, "q2")
    });
    let state_op = put_state(
        1,
        2,
        &DeliveryState {
            failures: vec![FailureRecord {
                at_ms: 1,
                reason: long,
            }],
            ..Default::default()
        },
    );
    for op in [address, queue_op, state_op] {
        let result = store.commit(vec![op.clone()]).await;
        assert!(too_large(result, MAX_INLINE_RECORD_BYTES), "{op:?}");
    }
    let store = h.reopen(store);
    let recovered = store.recover().unwrap();
    assert!(recovered.addresses.is_empty());
    assert_eq!(recovered.queues.len(), 1);
    assert_eq!(ids(&*store, 1), [2, 5, 6]);
    assert_eq!(store.read_state(1, 2).unwrap(), None);
}

/// Bodies at and above `LARGE_BODY_THRESHOLD` read back whole at once and
/// after a reopen; recovery reports the full size.
pub async fn large_bodies_round_trip_through_commit_reopen_and_read(h: &mut dyn Harness) {
    let store = h.open();
    let at_threshold = large(1, LARGE_BODY_THRESHOLD);
    let over = large(2, LARGE_BODY_THRESHOLD + 1);
    let mib = large(3, 1 << 20);
    let five = large(4, 5 << 20);
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q1")),
            put_message(1, &at_threshold),
            put_message(1, &over),
            put_message(1, &mib),
            put_message(1, &five),
        ])
        .await
        .unwrap();
    // Readable as soon as the commit resolves ...
    assert_eq!(store.read_message(1, 3).unwrap(), Some(mib.clone()));
    assert_eq!(store.read_message(1, 4).unwrap(), Some(five.clone()));

    // ... and after a reopen without close.
    let store = h.reopen(store);
    let recovered = store.recover().unwrap();
    let entries = &recovered.queues[0].messages;
    let all = [&at_threshold, &over, &mib, &five];
    assert_eq!(entries.len(), 4);
    for (entry, message) in entries.iter().zip(all) {
        assert_eq!(entry.id, message.message_id);
        assert_eq!((entry.priority, entry.expiration_ms), (6, 77));
        // The full size, body included, as the broker computes it.
        assert_eq!(
            entry.size as usize,
            prost::Message::encoded_len(message),
            "id {}",
            entry.id
        );
        assert_eq!(
            store.read_message(1, message.message_id).unwrap().as_ref(),
            Some(message)
        );
    }
}

/// A large message rewritten (large again, then small), moved to another
/// queue, put and removed in one commit, and removed.
pub async fn large_messages_are_rewritten_moved_and_removed(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q1")),
            Op::PutQueue(queue(2, "q2")),
            put_message(1, &large(1, 100 << 10)),
            put_message(1, &large(2, 200 << 10)),
        ])
        .await
        .unwrap();
    let second = MessageRecord {
        body: Bytes::from(vec![9; 150 << 10]),
        ..large(1, 0)
    };
    store.commit(vec![put_message(1, &second)]).await.unwrap();
    assert_eq!(store.read_message(1, 1).unwrap(), Some(second));
    let small = large(1, 10);
    store.commit(vec![put_message(1, &small)]).await.unwrap();
    assert_eq!(store.read_message(1, 1).unwrap(), Some(small.clone()));

    store
        .commit(vec![
            put_message(1, &large(3, 1 << 20)),
            Op::RemoveMessage { queue: 1, id: 3 },
        ])
        .await
        .unwrap();
    assert_eq!(store.read_message(1, 3).unwrap(), None);

    let moved = large(2, 200 << 10);
    store
        .commit(vec![
            Op::RemoveMessage { queue: 1, id: 2 },
            put_message(2, &moved),
        ])
        .await
        .unwrap();
    assert_eq!(store.read_message(1, 2).unwrap(), None);
    let store = h.reopen(store);
    assert_eq!(store.read_message(1, 1).unwrap(), Some(small));
    assert_eq!(store.read_message(2, 2).unwrap(), Some(moved));
    assert_eq!((ids(&*store, 1), ids(&*store, 2)), (vec![1], vec![2]));
    store
        .commit(vec![Op::RemoveMessage { queue: 2, id: 2 }])
        .await
        .unwrap();
    assert_eq!(store.read_message(2, 2).unwrap(), None);
}

/// 64 tasks commit 50 messages each, ids from `generate_id`: every commit is
/// counted, recovered in id order, and still there after a reopen.
pub async fn concurrent_commits_are_all_durable(h: &mut dyn Harness) {
    let store = h.open();
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
    let before = ids(&*store, 1);
    assert_eq!(before.len(), 3200);
    assert!(before.is_sorted());
    let store = h.reopen(store);
    assert_eq!(ids(&*store, 1), before);
}

/// While a writer rewrites, removes and puts back a large message, a reader
/// sees it whole or not at all, never an error.
pub async fn concurrent_readers_see_whole_messages(h: &mut dyn Harness) {
    let store = h.open();
    store.commit(vec![Op::PutQueue(queue(1, "q1"))]).await.unwrap();
    let writer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            for round in 0..40_u64 {
                let body = MessageRecord {
                    body: Bytes::from(vec![round as u8; 100 << 10]),
                    ..large(1, 0)
                };
                store.commit(vec![put_message(1, &body)]).await.unwrap();
                store
                    .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
                    .await
                    .unwrap();
                store.commit(vec![put_message(1, &body)]).await.unwrap();
            }
        })
    };
    let reader = {
        let store = Arc::clone(&store);
        tokio::task::spawn_blocking(move || {
            for _ in 0..2000 {
                if let Some(m) = store.read_message(1, 1).unwrap() {
                    assert_eq!(m.body.len(), 100 << 10);
                    assert!(m.body.iter().all(|b| *b == m.body[0]));
                }
            }
        })
    };
    writer.await.unwrap();
    reader.await.unwrap();
}
