//! What acks and queue deletes take with them, and what they leave.

use rebound_storage::{Op, Store};

use super::{Harness, ids, message, put, put_state, queue, state};

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
