//! What `SledStore` does beyond the store contract (`tests/contract/`, run
//! for every store by `tests/stores.rs`): concurrent commits share journal
//! syncs (group commit).

use std::sync::Arc;

use bytes::Bytes;
use rebound_storage::{MessageRecord, Op, QueueRecord, SledStore, StorageError, Store};

#[test]
fn store_is_dyn_compatible_and_commit_is_a_send_unpin_future() {
    fn future<F: std::future::Future<Output = Result<(), StorageError>> + Send + Unpin>() {}
    future::<rebound_storage::Commit>();
    let dir = tempfile::tempdir().unwrap();
    let _store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_commits_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
    store
        .commit(vec![Op::PutQueue(QueueRecord {
            id: 1,
            ..Default::default()
        })])
        .await
        .unwrap();
    let tasks: Vec<_> = (0..64_u64)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in 0..50 {
                    let id = store.generate_id().unwrap();
                    let message = MessageRecord {
                        message_id: id,
                        body: Bytes::from(format!("body {id}")),
                        priority: (task + i) as u32 % 10,
                        ..Default::default()
                    };
                    store
                        .commit(vec![Op::PutMessage { queue: 1, message }])
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
    assert!(stats.syncs < stats.commits / 2, "{stats:?}");
    assert!(stats.disk_bytes > 0);
}
