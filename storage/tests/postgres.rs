//! What only [`PostgresStore`] does: the database going away and coming
//! back. The store reaches the test database through a proxy
//! ([`DatabaseProxy`]) that the test cuts and resumes.

mod pg;

use std::time::{Duration, Instant};

use bytes::Bytes;
use pg::{DatabaseProxy, TestSchema};
use rebound_storage::{MessageRecord, Op, PostgresOptions, PostgresStore, QueueRecord, StorageError, Store};

fn put(id: u64) -> Op {
    Op::PutMessage {
        queue: 1,
        message: MessageRecord {
            message_id: id,
            body: Bytes::from_static(b"body"),
            durable: true,
            ..Default::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_fail_unavailable_while_the_database_is_away_and_work_again_once_it_is_back() {
    let Some(schema) = TestSchema::create("postgres outage") else {
        return;
    };
    let mut proxy = DatabaseProxy::start(&schema).await;
    let store = PostgresStore::open(&PostgresOptions::new(proxy.url())).unwrap();
    store
        .commit(vec![
            Op::PutQueue(QueueRecord {
                id: 1,
                name: "q".into(),
                ..Default::default()
            }),
            put(1),
        ])
        .await
        .unwrap();

    proxy.cut().await;
    let failed = store.commit(vec![put(2)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");
    let failed = store.commit(vec![put(3)]).await;
    assert!(matches!(failed, Err(StorageError::Unavailable(_))), "{failed:?}");

    proxy.resume().await;
    // The same store, not reopened: the next group connects again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match store.commit(vec![put(4)]).await {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("not yet: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("still failing once the database is back: {e}"),
        }
    }
    let store2 = std::sync::Arc::new(store);
    let recovered = tokio::task::spawn_blocking(move || store2.recover())
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<u64> = recovered.queues[0].messages.iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 4], "what failed is not stored");
}
