//! The size limits every store refuses the same commits with, and large
//! bodies (kept in files by the stores that do) read back whole.

use bytes::Bytes;
use rebound_storage::{
    AddressRecord, DeliveryState, FailureRecord, LARGE_BODY_THRESHOLD, MAX_INLINE_RECORD_BYTES,
    MAX_RECORD_BYTES, MessageRecord, Op, PropertyValue, QueueRecord, StorageError, keys,
    records::property_value,
};

use super::{Harness, ids, large, put_message, put_state, queue, too_large};

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

/// The limits of `MAX_RECORD_BYTES` and `MAX_INLINE_RECORD_BYTES`, with the
/// same error, whatever the store.
pub async fn size_limits_are_those_of_every_store(h: &mut dyn Harness) {
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
