//! Large messages in `SledStore`: bodies above `LARGE_BODY_THRESHOLD` live
//! in files under `<dir>/large/`, are deleted with their records, shared by
//! hard links, and orphans are swept at open. That they round-trip is part
//! of the store contract (`tests/contract/`).

#[path = "contract/fixtures.rs"]
mod fixtures;

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use fixtures::large as message;
use rebound_storage::large::LARGE_DIR;
use rebound_storage::{
    DeliveryState, LARGE_BODY_THRESHOLD, MessageRecord, Op, QueueRecord, RoutingType, SledStore,
    StorageError, Store,
};

fn queue(id: u32) -> Op {
    Op::PutQueue(QueueRecord {
        id,
        name: format!("q{id}"),
        ..Default::default()
    })
}

fn put(queue: u32, message: &MessageRecord) -> Op {
    Op::PutMessage {
        queue,
        message: message.clone(),
    }
}

fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join(LARGE_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(LARGE_DIR).join(name)
}

fn names(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

/// Only bodies above the threshold become files, whole, and they stay so
/// across a reopen; sled gets no blobs. (That the messages read back whole
/// is the contract's `large_bodies_round_trip_through_commit_reopen_and_read`.)
#[tokio::test]
async fn bodies_above_the_threshold_are_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store
        .commit(vec![
            queue(1),
            put(1, &message(1, LARGE_BODY_THRESHOLD)),
            put(1, &message(2, LARGE_BODY_THRESHOLD + 1)),
            put(1, &message(3, 1 << 20)),
            put(1, &message(4, 5 << 20)),
        ])
        .await
        .unwrap();
    assert_eq!(
        files(dir.path()),
        names(&["q1-m2.body", "q1-m3.body", "q1-m4.body"])
    );
    assert_eq!(
        std::fs::metadata(file(dir.path(), "q1-m4.body")).unwrap().len(),
        5 << 20
    );
    assert!(store.stats().disk_bytes > 6 << 20);
    drop(store);

    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(store.recover().unwrap().queues[0].messages.len(), 4);
    assert_eq!(files(dir.path()).len(), 3);
    assert!(
        !dir.path().join("blobs").exists()
            || std::fs::read_dir(dir.path().join("blobs")).unwrap().count() == 0
    );
}

#[tokio::test]
async fn remove_message_deletes_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let big = message(1, 300 << 10);
    store
        .commit(vec![queue(1), put(1, &big), put(1, &message(2, 200 << 10))])
        .await
        .unwrap();
    store
        .commit(vec![Op::PutState {
            queue: 1,
            id: 1,
            state: DeliveryState {
                delivery_count: 1,
                ..Default::default()
            },
        }])
        .await
        .unwrap();
    assert_eq!(files(dir.path()).len(), 2);
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();
    assert_eq!(files(dir.path()), names(&["q1-m2.body"]));
    assert_eq!(store.read_message(1, 1).unwrap(), None);

    // Put and remove (one that never had a state) in one commit: no file is ever left.
    store
        .commit(vec![
            put(1, &message(3, 1 << 20)),
            Op::RemoveStatelessMessage { queue: 1, id: 3 },
        ])
        .await
        .unwrap();
    assert_eq!(files(dir.path()), names(&["q1-m2.body"]));

    // A DLQ move: the body follows the record to the other queue.
    store.commit(vec![queue(2)]).await.unwrap();
    let moved = message(2, 200 << 10);
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 2 }, put(2, &moved)])
        .await
        .unwrap();
    assert_eq!(files(dir.path()), names(&["q2-m2.body"]));
    drop(store);
    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(store.read_message(2, 2).unwrap(), Some(moved));
    assert_eq!(files(dir.path()), names(&["q2-m2.body"]));
}

#[tokio::test]
async fn rewriting_a_large_message_uses_a_new_file_and_drops_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store
        .commit(vec![queue(1), put(1, &message(1, 100 << 10))])
        .await
        .unwrap();
    let second = MessageRecord {
        body: Bytes::from(vec![9; 150 << 10]),
        ..message(1, 0)
    };
    store.commit(vec![put(1, &second)]).await.unwrap();
    assert_eq!(files(dir.path()), names(&["q1-m1.g1.body"]));
    assert_eq!(store.read_message(1, 1).unwrap(), Some(second));
    // Back to a small body: no file at all.
    let small = message(1, 10);
    store.commit(vec![put(1, &small)]).await.unwrap();
    assert!(files(dir.path()).is_empty());
    assert_eq!(store.read_message(1, 1).unwrap(), Some(small));
}

/// The committer looks up the body file of a record it replaces only while
/// `large/` may hold one: a reopened store counts the files it kept, and one
/// whose files are all gone notices the next.
#[tokio::test]
async fn bodies_are_dropped_after_a_reopen_and_after_the_directory_was_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store
        .commit(vec![queue(1), put(1, &message(1, 100 << 10))])
        .await
        .unwrap();
    drop(store);

    let store = SledStore::open(dir.path()).unwrap();
    let second = MessageRecord {
        body: Bytes::from(vec![9; 150 << 10]),
        ..message(1, 0)
    };
    store.commit(vec![put(1, &second)]).await.unwrap();
    assert_eq!(files(dir.path()), names(&["q1-m1.g1.body"]));
    assert_eq!(store.read_message(1, 1).unwrap(), Some(second));
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();
    assert!(files(dir.path()).is_empty());

    store.commit(vec![put(1, &message(2, 100 << 10))]).await.unwrap();
    assert_eq!(files(dir.path()), names(&["q1-m2.body"]));
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 2 }])
        .await
        .unwrap();
    assert!(files(dir.path()).is_empty());
}

#[tokio::test]
async fn fan_out_hard_links_one_body_and_delete_queue_removes_its_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store.commit(vec![queue(1), queue(2), queue(3)]).await.unwrap();
    // As the broker routes: one record per queue, clones sharing the body.
    let routed = message(10, 1 << 20);
    let per_queue = |q: u32| Op::PutMessage {
        queue: q,
        message: MessageRecord {
            routing_type: RoutingType::Multicast.into(),
            ..routed.clone()
        },
    };
    let other = message(11, 70 << 10);
    store
        .commit(vec![per_queue(1), per_queue(2), per_queue(3), put(1, &other)])
        .await
        .unwrap();
    assert_eq!(
        files(dir.path()),
        names(&["q1-m10.body", "q1-m11.body", "q2-m10.body", "q3-m10.body"])
    );
    let meta = |name: &str| std::fs::metadata(file(dir.path(), name)).unwrap();
    assert_eq!(meta("q1-m10.body").ino(), meta("q3-m10.body").ino());
    assert_eq!(meta("q1-m10.body").nlink(), 3);
    assert_eq!(meta("q1-m11.body").nlink(), 1);
    // Hard links count once.
    assert!(store.stats().disk_bytes < (1 << 20) + (70 << 10) + (64 << 20));

    store.commit(vec![Op::DeleteQueue(1)]).await.unwrap();
    assert_eq!(files(dir.path()), names(&["q2-m10.body", "q3-m10.body"]));
    assert_eq!(meta("q2-m10.body").nlink(), 2);
    store
        .commit(vec![Op::RemoveMessage { queue: 2, id: 10 }])
        .await
        .unwrap();
    drop(store);

    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(store.read_message(1, 10).unwrap(), None);
    assert_eq!(store.read_message(2, 10).unwrap(), None);
    let read = store.read_message(3, 10).unwrap().unwrap();
    assert_eq!(read.body, routed.body);
    assert_eq!(files(dir.path()), names(&["q3-m10.body"]));
    store.commit(vec![Op::DeleteQueue(3)]).await.unwrap();
    assert!(files(dir.path()).is_empty());
}

#[tokio::test]
async fn orphans_are_deleted_at_open_and_referenced_files_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    let big = message(1, 100 << 10);
    store
        .commit(vec![queue(1), put(1, &big), put(1, &message(2, 10))])
        .await
        .unwrap();
    store.close().unwrap();
    drop(store);
    // What a crash can leave: a body whose commit never landed, a stale
    // generation, a body of a small message, a body of a deleted queue.
    for orphan in ["q1-m99.body", "q1-m1.g7.body", "q1-m2.body", "q5-m1.body"] {
        std::fs::write(file(dir.path(), orphan), b"orphan").unwrap();
    }
    std::fs::write(file(dir.path(), "notes.txt"), b"not ours").unwrap();

    let store = SledStore::open(dir.path()).unwrap();
    assert_eq!(files(dir.path()), names(&["notes.txt", "q1-m1.body"]));
    assert_eq!(store.read_message(1, 1).unwrap(), Some(big));
}

#[tokio::test]
async fn a_missing_body_file_is_corrupt_on_read_but_still_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(dir.path()).unwrap();
    store
        .commit(vec![
            queue(1),
            put(1, &message(1, 1 << 20)),
            put(1, &message(2, 1 << 20)),
        ])
        .await
        .unwrap();
    drop(store);
    std::fs::remove_file(file(dir.path(), "q1-m1.body")).unwrap();
    // A truncated file is caught too.
    std::fs::write(file(dir.path(), "q1-m2.body"), b"short").unwrap();

    let store: Arc<dyn Store> = Arc::new(SledStore::open(dir.path()).unwrap());
    let ids: Vec<u64> = store.recover().unwrap().queues[0]
        .messages
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, [1, 2]);
    let key = |id: u64| format!("0100000001{id:016x}");
    match store.read_message(1, 1) {
        Err(StorageError::Corrupt { key: k, reason }) => {
            assert_eq!(k, key(1));
            assert!(reason.contains("q1-m1.body"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.read_message(1, 2),
        Err(StorageError::Corrupt { key: k, .. }) if k == key(2)
    ));
    // The broker can still get rid of it.
    store
        .commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();
    assert_eq!(store.read_message(1, 1).unwrap(), None);
}
