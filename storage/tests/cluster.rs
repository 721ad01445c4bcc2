//! What [`PostgresStore`] does for several brokers on one database:
//! membership, queue leases, queue ids, and fencing (a node that lost a
//! queue's lease cannot write as its owner, and that fails none of the
//! other commits it groups with), and duplicate ids shared by the nodes.

mod pg;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use pg::TestSchema;
use rebound_storage::{
    DeliveryState, MessageRecord, Op, PostgresOptions, PostgresStore, QueueRecord, StorageError, Store,
};

const LEASE: Duration = Duration::from_secs(30);
/// A lease that has run out by the time the next statement runs.
const EXPIRED: Duration = Duration::from_millis(1);

fn open(schema: &TestSchema) -> PostgresStore {
    PostgresStore::open(&PostgresOptions::new(schema.url())).unwrap()
}

fn queue(id: u32) -> Op {
    Op::PutQueue(QueueRecord {
        id,
        name: format!("q{id}"),
        ..Default::default()
    })
}

fn put(queue: u32, id: u64) -> Op {
    Op::PutMessage {
        queue,
        message: MessageRecord {
            message_id: id,
            body: Bytes::from_static(b"body"),
            durable: true,
            ..Default::default()
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_is_held_by_one_node_until_released_or_run_out() {
    let Some(schema) = TestSchema::create("cluster leases") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    let a_incarnation = a
        .register_node("a", "127.0.0.2:1", Some("127.0.0.2:8161"))
        .await
        .unwrap();
    let b_incarnation = b.register_node("b", "127.0.0.3:1", None).await.unwrap();
    let live = b.live_nodes(LEASE).await.unwrap();
    let ids: Vec<_> = live
        .iter()
        .map(|n| (n.id.as_str(), n.advertise.as_str(), n.http_advertise.as_deref()))
        .collect();
    assert_eq!(
        ids,
        [
            ("a", "127.0.0.2:1", Some("127.0.0.2:8161")),
            ("b", "127.0.0.3:1", None)
        ]
    );

    assert_eq!(a.acquire("a", 1, LEASE).await.unwrap(), Some(1));
    assert_eq!(b.acquire("b", 1, LEASE).await.unwrap(), None, "held by a");
    let heartbeat = a.heartbeat("a", a_incarnation, LEASE).await.unwrap();
    assert_eq!(heartbeat.leases, [(1, 1)]);
    // The database's clock, read again: the same machine's here.
    let clock = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
    let database = a.clock().now_ms();
    assert!(database.abs_diff(clock) < 5_000, "{database} at {clock}");
    assert_eq!(b.heartbeat("b", b_incarnation, LEASE).await.unwrap().leases, []);
    // Its holder may take it again, under a new epoch.
    assert_eq!(a.acquire("a", 1, LEASE).await.unwrap(), Some(2));

    a.release("a", 1).await.unwrap();
    assert_eq!(b.acquire("b", 1, EXPIRED).await.unwrap(), Some(3), "released");
    tokio::time::sleep(Duration::from_millis(20)).await;
    let leases = a.leases().await.unwrap();
    assert_eq!((leases[0].node.as_deref(), leases[0].live), (Some("b"), false));
    assert_eq!(a.acquire("a", 1, LEASE).await.unwrap(), Some(4), "ran out");
    // A heartbeat renews what the node still holds, and tells it what it lost.
    assert_eq!(b.heartbeat("b", b_incarnation, LEASE).await.unwrap().leases, []);

    // The same id registered again (a restart) replaces the old process.
    let again = open(&schema);
    assert_eq!(
        again.register_node("a", "127.0.0.2:1", None).await.unwrap(),
        a_incarnation + 1
    );
    let replaced = a.heartbeat("a", a_incarnation, LEASE).await;
    assert!(
        matches!(replaced, Err(StorageError::NodeReplaced { .. })),
        "{replaced:?}"
    );
    assert_eq!(
        again.acquire("a", 1, LEASE).await.unwrap(),
        Some(5),
        "its own lease, at once"
    );
}

/// Message ids follow the database's clock across nodes: a send stored by
/// one node after another node's is ordered after it (as one producer sending
/// through both, one answer at a time, needs), and no id is handed out twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ids_of_two_nodes_follow_the_database_s_clock() {
    let Some(schema) = TestSchema::create("ids across nodes") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    let mut ids = Vec::new();
    for turn in 0..20 {
        let store = if turn % 2 == 0 { &a } else { &b };
        ids.push(store.generate_id().unwrap());
        // Further apart than the two stores' readings of the clock can be.
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    assert!(ids.is_sorted(), "{ids:?}");
    let unique: std::collections::BTreeSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_ids_are_one_per_name_across_nodes_and_above_every_stored_queue() {
    let Some(schema) = TestSchema::create("cluster queue ids") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(41)]).await.unwrap();
    // Both nodes create the same twenty queues at once.
    let allocate = |store: PostgresStore| {
        std::thread::spawn(move || {
            let ids: Vec<u32> = (0..20)
                .map(|i| store.allocate_queue_id(&format!("q{i}")).unwrap())
                .collect();
            (store, ids)
        })
    };
    let (x, y) = (allocate(a), allocate(b));
    let ((a, from_a), (_b, from_b)) = (x.join().unwrap(), y.join().unwrap());
    assert_eq!(from_a, from_b, "one id per name");
    assert!(from_a.iter().all(|&id| id > 41), "{from_a:?}");
    let mut unique = from_a.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 20);
    // A queue deleted gives its name back: created again, it is a new queue.
    a.commit(vec![Op::DeleteQueue(from_a[0])]).await.unwrap();
    let again = tokio::task::spawn_blocking(move || a.allocate_queue_id("q0").unwrap())
        .await
        .unwrap();
    assert!(!from_a.contains(&again), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_writes_need_the_lease_and_new_messages_do_not() {
    let Some(schema) = TestSchema::create("cluster owner writes") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(1), put(1, 1), put(1, 2)]).await.unwrap();
    a.register_node("a", "a:1", None).await.unwrap();
    b.register_node("b", "b:1", None).await.unwrap();
    a.acquire("a", 1, LEASE).await.unwrap().unwrap();

    // b stores into a's queue, but may not ack or redeliver there.
    b.commit(vec![put(1, 3)]).await.unwrap();
    let refused = b.commit(vec![Op::RemoveMessage { queue: 1, id: 1 }]).await;
    assert!(
        matches!(refused, Err(StorageError::Fenced { queue: 1 })),
        "{refused:?}"
    );
    a.commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();

    // Once a lets it go, its own acks are refused before they are sent.
    a.release("a", 1).await.unwrap();
    let refused = a.commit(vec![Op::RemoveMessage { queue: 1, id: 2 }]).await;
    assert!(
        matches!(refused, Err(StorageError::Fenced { queue: 1 })),
        "{refused:?}"
    );
    let ids: Vec<u64> = a.recover().unwrap().queues[0]
        .messages
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(ids, [2, 3]);
}

/// b removes messages of a queue a serves when its commit claims a's lease
/// under the epoch a holds it with (a transaction of b acking what a holds
/// aside for it), together with b's own writes; under any other epoch or
/// node, or once another node took the queue over, nothing of that commit
/// is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_the_owner_s_lease_lets_another_node_remove_its_messages() {
    let Some(schema) = TestSchema::create("cluster claims") else {
        return;
    };
    let (a, b, c) = (open(&schema), open(&schema), open(&schema));
    a.commit(vec![queue(1), queue(2), put(1, 1), put(1, 2), put(1, 3)])
        .await
        .unwrap();
    for (store, node) in [(&a, "a"), (&b, "b"), (&c, "c")] {
        store
            .register_node(node, &format!("{node}:1"), None)
            .await
            .unwrap();
    }
    let epoch = a.acquire("a", 1, LEASE).await.unwrap().unwrap();
    b.acquire("b", 2, LEASE).await.unwrap().unwrap();
    let claim = |node: &str, epoch| Op::Claim {
        queue: 1,
        node: node.into(),
        epoch,
    };
    let remove = |id| Op::RemoveMessage { queue: 1, id };
    for wrong in [claim("a", epoch + 1), claim("c", epoch)] {
        let refused = b.commit(vec![wrong, remove(1), put(2, 10)]).await;
        assert!(
            matches!(refused, Err(StorageError::Fenced { queue: 1 })),
            "{refused:?}"
        );
    }
    b.commit(vec![claim("a", epoch), remove(1), put(2, 11)])
        .await
        .unwrap();
    let stored = |store: &PostgresStore| {
        let mut all: Vec<(u32, u64)> = store
            .recover()
            .unwrap()
            .queues
            .iter()
            .flat_map(|q| q.messages.iter().map(move |m| (q.record.id, m.id)))
            .collect();
        all.sort_unstable();
        all
    };
    assert_eq!(stored(&b), [(1, 2), (1, 3), (2, 11)]);

    // a gives the queue up and c takes it: a's epoch no longer holds.
    a.release("a", 1).await.unwrap();
    c.acquire("c", 1, LEASE).await.unwrap().unwrap();
    let refused = b.commit(vec![claim("a", epoch), remove(2)]).await;
    assert!(
        matches!(refused, Err(StorageError::Fenced { queue: 1 })),
        "{refused:?}"
    );
    assert_eq!(stored(&b), [(1, 2), (1, 3), (2, 11)]);
}

/// a holds queues 1 and 2; b takes 1 over (a's lease ran out) without a
/// noticing. a's next commits, grouped together, ack in both queues: the
/// ack in 1 is refused and changes nothing, the one in 2 is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_epoch_fails_its_commit_only_and_changes_nothing() {
    let Some(schema) = TestSchema::create("cluster fencing") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    let mut setup = vec![queue(1), queue(2)];
    for id in 1..=20 {
        setup.extend([put(1, id), put(2, id)]);
    }
    a.commit(setup).await.unwrap();
    a.register_node("a", "a:1", None).await.unwrap();
    b.register_node("b", "b:1", None).await.unwrap();
    assert_eq!(a.acquire("a", 1, EXPIRED).await.unwrap(), Some(1));
    assert_eq!(a.acquire("a", 2, LEASE).await.unwrap(), Some(1));
    a.commit(vec![Op::RemoveMessage { queue: 1, id: 1 }])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.acquire("b", 1, LEASE).await.unwrap(), Some(2), "taken over");

    let state = DeliveryState {
        delivery_count: 3,
        ..Default::default()
    };
    // Queued without waiting, so that the committer groups them.
    let mut commits = Vec::new();
    for id in 2..=10 {
        commits.push((1, a.commit(vec![Op::RemoveMessage { queue: 1, id }])));
        commits.push((2, a.commit(vec![Op::RemoveMessage { queue: 2, id }])));
        commits.push((
            1,
            a.commit(vec![Op::PutState {
                queue: 1,
                id: id + 10,
                state: state.clone(),
            }]),
        ));
    }
    for (queue, commit) in commits {
        match (queue, commit.await) {
            (1, Err(StorageError::Fenced { queue: 1 })) | (2, Ok(())) => {}
            (queue, other) => panic!("queue {queue}: {other:?}"),
        }
    }
    // The new owner writes as usual.
    b.commit(vec![Op::RemoveMessage { queue: 1, id: 20 }])
        .await
        .unwrap();

    let recovered = b.recover().unwrap();
    let ids = |q: usize| -> Vec<u64> { recovered.queues[q].messages.iter().map(|m| m.id).collect() };
    assert_eq!(
        ids(0),
        (2..=19).collect::<Vec<_>>(),
        "only a's ack under its epoch and b's"
    );
    assert!(recovered.queues[0].messages.iter().all(|m| m.state.is_none()));
    assert_eq!(ids(1), [1].into_iter().chain(11..=20).collect::<Vec<_>>());
}

/// b stores a message for a queue a holds: it goes to a's inbox, with one
/// notification, and reaches a's scans only once a takes it from there; the
/// commit names it, so that b does not take it into its memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_stored_for_another_nodes_queue_reaches_it_through_the_inbox() {
    let Some(schema) = TestSchema::create("cluster inbox") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(1), queue(2), put(1, 1)]).await.unwrap();
    a.register_node("a", "a:1", None).await.unwrap();
    b.register_node("b", "b:1", None).await.unwrap();
    a.acquire("a", 1, LEASE).await.unwrap().unwrap();
    b.acquire("b", 2, LEASE).await.unwrap().unwrap();
    let mut notices = a.inbox_notices();
    // The listener connects in the background: notify until it hears.
    let state = DeliveryState {
        scheduled_at_ms: 42,
        ..Default::default()
    };
    let mut id = 10;
    let heard = loop {
        id += 1;
        let scheduled = Op::PutState {
            queue: 1,
            id,
            state: state.clone(),
        };
        let commit = b.commit(vec![put(1, id), scheduled, put(2, id)]);
        // Named to the sender, which must leave them to the queue's owner.
        assert_eq!(commit.inboxed(), [(1, id)]);
        commit.await.unwrap();
        match tokio::time::timeout(Duration::from_millis(200), notices.recv()).await {
            Ok(notice) => break notice.unwrap(),
            Err(_) => assert!(id < 60, "no notification heard"),
        }
    };
    assert_eq!(
        heard,
        rebound_storage::InboxNotice::Queues(vec![1]),
        "only the queue b does not hold"
    );

    let scan = |store: &PostgresStore| -> Vec<u64> {
        store
            .scan_queue(1, 0, 100, u64::MAX)
            .unwrap()
            .iter()
            .map(|m| m.record.message_id)
            .collect()
    };
    assert_eq!(scan(&a), [1], "not scanned while in the inbox");
    assert_eq!(a.inbox_queues(vec![1, 2]).await.unwrap(), [1]);
    let refused = b.drain_inbox(1).await;
    assert!(
        matches!(refused, Err(StorageError::Fenced { queue: 1 })),
        "{refused:?}"
    );
    let drained = a.drain_inbox(1).await.unwrap();
    let ids: Vec<u64> = drained.iter().map(|m| m.record.message_id).collect();
    assert_eq!(ids, (11..=id).collect::<Vec<_>>());
    assert!(
        drained
            .iter()
            .all(|m| m.state.as_ref().is_some_and(|s| s.scheduled_at_ms == 42))
    );
    assert!(a.drain_inbox(1).await.unwrap().is_empty(), "taken once");
    assert_eq!(scan(&a).len(), 1 + ids.len(), "then in the queue as any message");
    assert!(a.inbox_queues(vec![1, 2]).await.unwrap().is_empty());
}

/// a stores a message for the queue it holds while b's message for it waits
/// in the inbox: a's joins the inbox behind b's (the commit names it once
/// it resolved), so that a takes both in the order they were sent, rather
/// than its own first. With the inbox empty, a's message goes straight to
/// its queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_message_joins_its_queue_s_inbox_while_other_nodes_messages_wait_there() {
    let Some(schema) = TestSchema::create("cluster inbox join") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(1), queue(2)]).await.unwrap();
    a.register_node("a", "a:1", None).await.unwrap();
    b.register_node("b", "b:1", None).await.unwrap();
    a.acquire("a", 1, LEASE).await.unwrap().unwrap();
    a.acquire("a", 2, LEASE).await.unwrap().unwrap();

    let mut own = a.commit(vec![put(1, 5)]);
    (&mut own).await.unwrap();
    assert!(own.inboxed().is_empty(), "an empty inbox: straight to the queue");

    b.commit(vec![put(1, 10)]).await.unwrap();
    let mut own = a.commit(vec![put(1, 11), put(2, 11)]);
    assert!(own.inboxed().is_empty(), "known only once the database answered");
    (&mut own).await.unwrap();
    assert_eq!(
        own.inboxed(),
        [(1, 11)],
        "behind b's message; queue 2's inbox is empty"
    );

    let drained = a.drain_inbox(1).await.unwrap();
    let ids: Vec<u64> = drained.iter().map(|m| m.record.message_id).collect();
    assert_eq!(ids, [10, 11], "taken in the order they were sent");
    let mut own = a.commit(vec![put(1, 12)]);
    (&mut own).await.unwrap();
    assert!(
        own.inboxed().is_empty(),
        "the inbox taken: straight to the queue again"
    );
}

fn dup_id(seq: u64, id: &'static str) -> Op {
    Op::PutDuplicateId {
        address: "orders".into(),
        seq,
        id: Bytes::from_static(id.as_bytes()),
    }
}

fn stored_messages(store: &PostgresStore) -> Vec<u64> {
    let recovered = store.recover().unwrap();
    let mut ids: Vec<u64> = recovered.queues[0].messages.iter().map(|m| m.id).collect();
    ids.sort_unstable();
    ids
}

/// An id one node stored fails the commit of another node storing it (the
/// commits grouped with it are written), whatever the seqs; the id the
/// first stored stays, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_id_another_node_stored_fails_that_commit_only() {
    let Some(schema) = TestSchema::create("cluster duplicate ids") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(1), put(1, 1), dup_id(0, "x")]).await.unwrap();
    // Queued without waiting, so that the committer groups them.
    let mut commits = Vec::new();
    for id in 2..=11 {
        let ops = match id {
            5 => vec![put(1, id), dup_id(0, "x")],
            _ => vec![
                put(1, id),
                Op::PutDuplicateId {
                    address: "orders".into(),
                    seq: id,
                    id: Bytes::from(format!("new {id}")),
                },
            ],
        };
        commits.push((id, b.commit(ops)));
    }
    for (id, commit) in commits {
        match (id, commit.await) {
            (5, Err(StorageError::DuplicateIds { ids })) => {
                assert_eq!(ids, [("orders".to_owned(), Bytes::from_static(b"x"))]);
            }
            (5, other) => panic!("the duplicate: {other:?}"),
            (_, result) => result.unwrap(),
        }
    }
    assert_eq!(stored_messages(&a), [1, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
    let recovered = b.recover().unwrap();
    let x: Vec<_> = recovered
        .duplicate_ids
        .iter()
        .filter(|d| &d.id[..] == b"x")
        .collect();
    assert_eq!(x.len(), 1, "{:?}", recovered.duplicate_ids);

    // An id deleted and stored again in one group is no conflict.
    a.commit(vec![
        Op::RemoveDuplicateId {
            address: "orders".into(),
            seq: 0,
            id: Bytes::from_static(b"x"),
        },
        put(1, 12),
        dup_id(20, "x"),
    ])
    .await
    .unwrap();
    assert!(stored_messages(&a).contains(&12));
}

/// Two nodes storing one id at once: one commit is written, the other is
/// refused as a duplicate, and one message is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_storing_one_id_at_once_store_it_once() {
    let Some(schema) = TestSchema::create("cluster duplicate race") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.commit(vec![queue(1)]).await.unwrap();
    for round in 0..20_u64 {
        let id: &'static str = Box::leak(format!("race {round}").into_boxed_str());
        let first = a.commit(vec![put(1, 2 * round + 1), dup_id(round, id)]);
        let second = b.commit(vec![put(1, 2 * round + 2), dup_id(round, id)]);
        let (first, second) = tokio::join!(first, second);
        match (&first, &second) {
            (Ok(()), Err(StorageError::DuplicateIds { .. }))
            | (Err(StorageError::DuplicateIds { .. }), Ok(())) => {}
            other => panic!("round {round}: {other:?}"),
        }
    }
    assert_eq!(stored_messages(&a).len(), 20);
}

/// Two commits of one node storing one id, queued while the committer waits
/// for a group in the database (a producer's retry behind its first attempt,
/// which the broker gave up on while the database was away): the committer
/// takes them together, and still one is written and the other refused as a
/// duplicate, one message stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_nodes_commits_storing_one_id_store_it_once_however_grouped() {
    let Some(schema) = TestSchema::create("cluster duplicate retry") else {
        return;
    };
    // A name of its own, to find this store's connections among the suite's.
    let name = format!("rebound_retry_{}", std::process::id());
    let store = PostgresStore::open(&PostgresOptions::new(format!(
        "{}&application_name={name}",
        schema.url()
    )))
    .unwrap();
    store.commit(vec![queue(1)]).await.unwrap();
    // A transaction of its own inserting "held" keeps the group storing it
    // waiting in the database, and the groups of the same address behind it.
    let (holder, connection) = tokio_postgres::connect(&schema.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    holder
        .batch_execute("BEGIN; INSERT INTO duplicate_ids VALUES ('orders', 0, 'held')")
        .await
        .unwrap();
    let held = store.commit(vec![put(1, 1), dup_id(0, "held")]);
    let waits = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}' AND wait_event_type = 'Lock'"
    );
    while holder.query_one(&waits, &[]).await.unwrap().get::<_, i64>(0) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Taken by the committer, which then waits with it for the held group.
    let behind = store.commit(vec![put(1, 2), dup_id(1, "other")]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Queued meanwhile, so that the committer takes them together.
    let first = store.commit(vec![put(1, 3), dup_id(2, "x")]);
    let retry = store.commit(vec![put(1, 4), dup_id(3, "x")]);
    holder.batch_execute("ROLLBACK").await.unwrap();
    held.await.unwrap();
    behind.await.unwrap();
    first.await.unwrap();
    match retry.await {
        Err(StorageError::DuplicateIds { ids }) => {
            assert_eq!(ids, [("orders".to_owned(), Bytes::from_static(b"x"))]);
        }
        other => panic!("the retry: {other:?}"),
    }
    assert_eq!(stored_messages(&store), [1, 2, 3]);
}

/// The sizes a node publishes are read by the other nodes while it holds the
/// queues' leases, and no longer once it gave a lease back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn published_sizes_are_read_by_the_other_nodes_while_the_lease_holds() {
    let Some(schema) = TestSchema::create("cluster sizes") else {
        return;
    };
    let (a, b) = (open(&schema), open(&schema));
    a.register_node("a", "a:1", None).await.unwrap();
    b.register_node("b", "b:1", None).await.unwrap();
    assert_eq!(a.acquire("a", 1, LEASE).await.unwrap(), Some(1));
    assert_eq!(a.acquire("a", 2, LEASE).await.unwrap(), Some(1));
    a.publish_sizes("a", vec![(1, 1500), (2, 0)]).await.unwrap();
    a.publish_sizes("a", vec![(1, 2000)]).await.unwrap();
    let seen = b.sizes_elsewhere("b").await.unwrap();
    assert_eq!((seen.get(&1), seen.get(&2)), (Some(&2000), Some(&0)));
    assert!(
        a.sizes_elsewhere("a").await.unwrap().is_empty(),
        "its own are not elsewhere"
    );
    a.release("a", 1).await.unwrap();
    let seen = b.sizes_elsewhere("b").await.unwrap();
    assert_eq!((seen.get(&1), seen.len()), (None, 1), "a gave queue 1 back");
}
