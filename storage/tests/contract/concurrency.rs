//! Commits and reads from many tasks at once.

use std::sync::Arc;

use bytes::Bytes;
use rebound_storage::{MessageRecord, Op};

use super::{Harness, ids, large, message, put_message, queue};

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
