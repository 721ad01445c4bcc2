//! Ordered reads of one queue ([`Store::scan_queue`], [`Store::count_queue`],
//! [`Store::recover_head`]): what the broker's paging reads its backlog with;
//! and the due-time index ([`Store::scan_due`]) that scheduled messages kept out
//! of memory wait in.

use rebound_storage::{Due, DueBatch, Op, ScannedMessage, Store};

use super::{Harness, large, message, put, put_message, put_state, queue, state};

fn scanned_ids(scanned: &[ScannedMessage]) -> Vec<u64> {
    scanned.iter().map(|m| m.record.message_id).collect()
}

/// Ascending by id whatever the commit order, after a cursor, within the
/// limits, with states, deletes hidden, other queues apart; the same after a
/// reopen.
pub async fn scans_read_a_queue_in_order_after_a_cursor(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q")), Op::PutQueue(queue(2, "other"))])
        .await
        .unwrap();
    for id in (1..=20).rev() {
        store.commit(vec![put(1, id), put(2, id + 100)]).await.unwrap();
    }
    store
        .commit(vec![
            put_state(1, 5, &state(3)),
            Op::RemoveMessage { queue: 1, id: 12 },
        ])
        .await
        .unwrap();
    check_scans(&*store);
    let store = h.reopen(store);
    check_scans(&*store);
}

fn check_scans(store: &dyn Store) {
    let expected: Vec<u64> = (1..=20).filter(|&id| id != 12).collect();
    let all = store.scan_queue(1, 0, 100, u64::MAX).unwrap();
    assert_eq!(scanned_ids(&all), expected);
    assert_eq!(all[0].record, message(1, 4));
    assert_eq!(all[4].state, Some(state(3)));
    assert_eq!(all.iter().filter(|m| m.state.is_some()).count(), 1);
    let some = store.scan_queue(1, 10, 3, u64::MAX).unwrap();
    assert_eq!(scanned_ids(&some), vec![11, 13, 14]);
    // The byte limit stops after the message that reaches it, never before the first.
    assert_eq!(scanned_ids(&store.scan_queue(1, 0, 100, 1).unwrap()), vec![1]);
    let two = prost::Message::encoded_len(&message(1, 4)) as u64 + 1;
    assert_eq!(
        scanned_ids(&store.scan_queue(1, 0, 100, two).unwrap()),
        vec![1, 2]
    );
    assert!(store.scan_queue(1, 20, 100, u64::MAX).unwrap().is_empty());
    assert!(store.scan_queue(1, u64::MAX, 100, u64::MAX).unwrap().is_empty());
    assert!(store.scan_queue(3, 0, 100, u64::MAX).unwrap().is_empty());
}

/// A backlog partly checkpointed and partly only journaled (for stores that
/// have a journal), larger than any internal batch, read whole in chunks.
pub async fn scans_merge_old_and_recent_writes_in_chunks(h: &mut dyn Harness) {
    let store = h.open();
    store.commit(vec![Op::PutQueue(queue(1, "q"))]).await.unwrap();
    for chunk in (1..=6000u64).collect::<Vec<_>>().chunks(1000) {
        store
            .commit(chunk.iter().map(|&id| put(1, id)).collect())
            .await
            .unwrap();
    }
    let store = h.reopen(store);
    // Recent writes: every third old message removed, new ones after them.
    let removed = (1..=6000u64).filter(|id| id % 3 == 0);
    store
        .commit(removed.map(|id| Op::RemoveMessage { queue: 1, id }).collect())
        .await
        .unwrap();
    store
        .commit((6001..=9000).map(|id| put(1, id)).collect())
        .await
        .unwrap();
    let expected: Vec<u64> = (1..=9000).filter(|id| *id > 6000 || id % 3 != 0).collect();
    let mut read = Vec::new();
    let mut after = 0;
    loop {
        let chunk = store.scan_queue(1, after, 700, u64::MAX).unwrap();
        let Some(last) = chunk.last() else { break };
        after = last.record.message_id;
        read.extend(scanned_ids(&chunk));
    }
    assert_eq!(read, expected);
    let count = store.count_queue(1, 0, u64::MAX, usize::MAX).unwrap();
    assert_eq!(
        (count.messages, count.last, count.more),
        (expected.len() as u64, 9000, false)
    );
}

/// Counting agrees with what recovery says of each message, honours both
/// bounds and its limit; a bounded recovery returns the head and says more follow.
pub async fn counts_and_recovered_heads_agree_with_the_index(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![
            Op::PutQueue(queue(1, "q")),
            put(1, 1),
            put(1, 2),
            put_message(1, &large(3, 100_000)),
            put(1, 4),
            put(1, 5),
        ])
        .await
        .unwrap();
    let full = store.recover().unwrap().queues[0].clone();
    assert!(!full.more);
    let size = |id: u64| full.messages.iter().find(|m| m.id == id).unwrap().size as u64;
    let count = store.count_queue(1, 1, 5, usize::MAX).unwrap();
    assert_eq!((count.messages, count.last, count.more), (3, 4, false));
    assert_eq!(count.bytes, size(2) + size(3) + size(4));
    let count = store.count_queue(1, 0, u64::MAX, 2).unwrap();
    assert_eq!((count.messages, count.last, count.more), (2, 2, true));
    let none = store.count_queue(1, 5, 6, 10).unwrap();
    assert_eq!((none.messages, none.last), (0, 5));
    let scanned = store.scan_queue(1, 2, 1, u64::MAX).unwrap();
    assert_eq!(scanned[0].record, large(3, 100_000));

    let head = store.recover_head(2).unwrap().queues[0].clone();
    assert_eq!(head.messages, full.messages[..2].to_vec());
    assert!(head.more);
    assert!(!store.recover_head(5).unwrap().queues[0].more);
}

/// A queue's due-time index: batches ascending by their earliest entry
/// whatever the commit order, after a position, within the limit, replaced by
/// a batch of the same key, removed one by one or with their queue, other
/// queues apart; kept across a reopen, and left alone by a message's removal
/// (the index is the broker's).
pub async fn the_due_index_scans_batches_by_their_earliest_entry(h: &mut dyn Harness) {
    let store = h.open();
    store
        .commit(vec![Op::PutQueue(queue(1, "q")), Op::PutQueue(queue(2, "other"))])
        .await
        .unwrap();
    let due = |at_ms, id| Due { at_ms, id };
    let batches = [
        vec![due(300, 1), due(900, 5)],
        vec![due(100, 7), due(100, 2)],
        vec![due(200, 3)],
        vec![due(5_000_000, 4)],
    ];
    for entries in &batches {
        store
            .commit(vec![
                put(1, entries[0].id),
                Op::PutDues {
                    queue: 1,
                    entries: entries.clone(),
                },
                Op::PutDues {
                    queue: 2,
                    entries: entries.iter().map(|d| due(d.at_ms, d.id + 100)).collect(),
                },
            ])
            .await
            .unwrap();
    }
    store
        .commit(vec![
            Op::RemoveDues {
                queue: 1,
                first: due(200, 3),
            },
            Op::RemoveMessage { queue: 1, id: 1 },
            // A batch with the same earliest entry replaces it; an empty one is nothing.
            Op::PutDues {
                queue: 1,
                entries: vec![due(100, 2), due(400, 6)],
            },
            Op::PutDues {
                queue: 1,
                entries: Vec::new(),
            },
        ])
        .await
        .unwrap();
    let check = |store: &dyn rebound_storage::Store| {
        let all = [
            DueBatch {
                first: due(100, 2),
                entries: vec![due(100, 2), due(400, 6)],
            },
            DueBatch {
                first: due(300, 1),
                entries: vec![due(300, 1), due(900, 5)],
            },
            DueBatch {
                first: due(5_000_000, 4),
                entries: vec![due(5_000_000, 4)],
            },
        ];
        assert_eq!(store.scan_due(1, None, 100).unwrap(), all);
        assert_eq!(store.scan_due(1, None, 2).unwrap(), all[..2]);
        assert_eq!(store.scan_due(1, Some(due(100, 2)), 1).unwrap(), all[1..2]);
        assert_eq!(store.scan_due(1, Some(due(150, 0)), 100).unwrap(), all[1..]);
        assert!(
            store
                .scan_due(1, Some(due(5_000_000, 4)), 100)
                .unwrap()
                .is_empty()
        );
        assert!(store.scan_due(1, None, 0).unwrap().is_empty());
        assert!(store.scan_due(3, None, 100).unwrap().is_empty());
        assert_eq!(store.scan_due(2, None, 100).unwrap().len(), 4);
    };
    check(&*store);
    let store = h.reopen(store);
    check(&*store);
    store.commit(vec![Op::DeleteQueue(1)]).await.unwrap();
    assert!(store.scan_due(1, None, 100).unwrap().is_empty());
    assert_eq!(store.scan_due(2, None, 100).unwrap().len(), 4);
}
