//! Unit tests of paging (`tail.rs`): the head's bound, the cursor, and the race
//! between commits, enqueues and depager reads.
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rebound_storage::{MessageRecord, ScannedMessage};

use super::*;

/// A durable queue whose head holds `limit` messages (also for `far.rs`'s and
/// `away.rs`'s tests).
pub(super) fn queue(limit: u64) -> Queue {
    let q = Queue::new(1, "q".into(), "q".into(), RoutingType::Anycast, true, false, None);
    q.set_read_limit(ReadLimit {
        messages: limit,
        bytes: u64::MAX,
    });
    q
}

fn record(id: MessageId) -> MessageRecord {
    MessageRecord {
        message_id: id,
        durable: true,
        body: format!("m{id}").into_bytes().into(),
        ..Default::default()
    }
}

pub(super) fn arrival(id: MessageId) -> (Entry, u64) {
    (Entry::read_back(record(id), None).0, 0)
}

fn scanned(store: &BTreeMap<MessageId, ()>, after: MessageId, max: u64) -> Vec<ScannedMessage> {
    store
        .range(after + 1..)
        .take(max as usize)
        .map(|(&id, _)| ScannedMessage {
            record: record(id),
            state: None,
        })
        .collect()
}

/// Takes every idle message in memory out (as consumers would), in queue order.
fn drain(q: &Queue) -> Vec<MessageId> {
    let mut ids: Vec<MessageId> = q.purge().into_iter().map(|e| e.id).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn arrivals_beyond_the_bound_are_paged_and_read_back_in_order() {
    let q = queue(4);
    let store: BTreeMap<MessageId, ()> = (1..=10).map(|id| (id, ())).collect();
    q.arriving(1..=10);
    q.enqueue((1..=10).map(arrival), 0);
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.paged), (10, 6));
    assert_eq!(q.bytes(), (1..=10).map(|id| arrival(id).0.size).sum::<u64>());
    assert_eq!(q.start_read(), None, "the head is full");
    assert_eq!(drain(&q), vec![1, 2, 3, 4]);
    let (after, max, _) = q.start_read().expect("the head is empty");
    assert_eq!((after, max), (4, 4));
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 4);
    assert_eq!(q.snapshot().paged, 2);
    assert_eq!(drain(&q), vec![5, 6, 7, 8]);
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 2);
    assert_eq!(drain(&q), vec![9, 10]);
    let snap = q.snapshot();
    assert_eq!(
        (snap.messages, snap.paged, snap.paged_bytes, q.bytes()),
        (0, 0, 0, 0)
    );
}

#[test]
fn the_depager_never_passes_a_message_committed_but_not_yet_enqueued() {
    let q = queue(2);
    let mut store = BTreeMap::new();
    q.arriving(1..=4);
    for id in [1, 2, 4] {
        store.insert(id, ());
    }
    q.enqueue([1, 2, 4].map(arrival), 0);
    assert_eq!(q.snapshot().paged, 1, "4 is paged");
    // 3 is committed, its enqueue still to come.
    store.insert(3, ());
    assert_eq!(drain(&q), vec![1, 2]);
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 0, "3 is pending");
    q.enqueue([arrival(3)], 0);
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 2);
    assert_eq!(drain(&q), vec![3, 4], "each once");
}

#[test]
fn a_message_paged_during_a_read_that_missed_it_stops_the_cursor() {
    let q = queue(2);
    let mut store = BTreeMap::new();
    q.arriving([1, 2, 4]);
    for id in [1, 2, 4] {
        store.insert(id, ());
    }
    q.enqueue([1, 2, 4].map(arrival), 0);
    assert_eq!(drain(&q), vec![1, 2]);
    let (after, max, _) = q.start_read().unwrap();
    let read = scanned(&store, after, max);
    // 3 got its id before the read started but was placed, committed and
    // enqueued only after the read passed it.
    q.arriving([3]);
    store.insert(3, ());
    q.enqueue([arrival(3)], 0);
    assert_eq!(q.finish_read(read, 0), 0);
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 2);
    assert_eq!(drain(&q), vec![3, 4]);
}

#[test]
fn messages_coming_back_stay_in_memory_and_a_failed_commit_unblocks_the_depager() {
    let q = queue(1);
    let store: BTreeMap<MessageId, ()> = [(1, ()), (2, ())].into();
    q.arriving([1, 2, 3]);
    q.enqueue([1, 2].map(arrival), 0);
    q.abandon([3]);
    let taken = q.take_idle(1).unwrap();
    q.requeue([(taken, 0)], 0);
    assert_eq!(q.snapshot().paged, 1);
    assert_eq!(drain(&q), vec![1]);
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 1);
    assert_eq!(drain(&q), vec![2]);
}

#[test]
fn after_a_restart_the_tail_is_counted_and_read() {
    let q = queue(2);
    let store: BTreeMap<MessageId, ()> = (1..=6).map(|id| (id, ())).collect();
    q.requeue([1, 2].map(arrival), 0);
    q.recovered_more(100);
    assert!(q.snapshot().counting);
    let size = arrival(3).0.size;
    assert_eq!(q.start_count(), Some((2, 100)));
    q.counted(&rebound_storage::QueueCount {
        messages: 2,
        bytes: 2 * size,
        last: 4,
        more: true,
    });
    assert_eq!(drain(&q), vec![1, 2]);
    // The depager reads into what is not counted yet.
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 2);
    assert_eq!(drain(&q), vec![3, 4]);
    assert_eq!(q.start_count(), Some((4, 100)));
    q.counted(&rebound_storage::QueueCount {
        messages: 2,
        bytes: 2 * size,
        last: 6,
        more: false,
    });
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.paged, snap.counting), (2, 2, false));
    let (after, max, _) = q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 2);
    assert_eq!(drain(&q), vec![5, 6]);
    assert_eq!((q.snapshot().messages, q.bytes()), (0, 0));
}

#[derive(Debug, Clone)]
enum Step {
    /// A send gets its id and is placed.
    Place,
    /// The n-th placed message's commit completes (or fails).
    Commit(usize, bool),
    /// The n-th committed message is enqueued.
    Enqueue(usize),
    StartRead,
    FinishRead,
    /// Consumers take what is in memory (acked: removed from the store).
    Drain,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Place),
        3 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(i, ok)| Step::Commit(i, ok)),
        3 => any::<usize>().prop_map(Step::Enqueue),
        2 => Just(Step::StartRead),
        2 => Just(Step::FinishRead),
        1 => Just(Step::Drain),
    ]
}

proptest! {
    /// Whatever the interleaving of commits finishing out of order, enqueues,
    /// depager reads and consumption, every enqueued message is consumed exactly
    /// once, and the queue's figures match the store.
    #[test]
    fn no_interleaving_loses_or_duplicates_a_message(steps in prop::collection::vec(step(), 1..200), limit in 1u64..6) {
        let q = queue(limit);
        let mut store = BTreeMap::new();
        let mut next = 1;
        let mut placed: Vec<MessageId> = Vec::new();
        let mut committed: Vec<MessageId> = Vec::new();
        let mut enqueued = BTreeSet::new();
        let mut read: Option<Vec<ScannedMessage>> = None;
        let mut consumed = Vec::new();
        let consume = |q: &Queue, store: &mut BTreeMap<MessageId, ()>, consumed: &mut Vec<MessageId>| {
            for id in drain(q) {
                store.remove(&id);
                consumed.push(id);
            }
        };
        for step in steps {
            match step {
                Step::Place => {
                    q.arriving([next]);
                    placed.push(next);
                    next += 1;
                }
                Step::Commit(i, ok) if !placed.is_empty() => {
                    let id = placed.remove(i % placed.len());
                    if ok {
                        store.insert(id, ());
                        committed.push(id);
                    } else {
                        q.abandon([id]);
                    }
                }
                Step::Enqueue(i) if !committed.is_empty() => {
                    let id = committed.remove(i % committed.len());
                    q.enqueue([arrival(id)], 0);
                    enqueued.insert(id);
                }
                Step::StartRead if read.is_none() => {
                    if let Some((after, max, _)) = q.start_read() {
                        read = Some(scanned(&store, after, max));
                    }
                }
                Step::FinishRead => {
                    if let Some(r) = read.take() {
                        q.finish_read(r, 0);
                    }
                }
                Step::Drain if read.is_none() => consume(&q, &mut store, &mut consumed),
                _ => {}
            }
        }
        // Everything in flight completes; then the queue drains.
        if let Some(r) = read.take() {
            q.finish_read(r, 0);
        }
        for id in placed.drain(..) {
            store.insert(id, ());
            committed.push(id);
        }
        for id in committed.drain(..) {
            q.enqueue([arrival(id)], 0);
            enqueued.insert(id);
        }
        prop_assert_eq!(q.snapshot().messages, store.len() as u64);
        for _ in 0..10_000 {
            consume(&q, &mut store, &mut consumed);
            match q.start_read() {
                Some((after, max, _)) => {
                    let r = scanned(&store, after, max);
                    q.finish_read(r, 0);
                }
                None => break,
            }
        }
        let snap = q.snapshot();
        prop_assert_eq!((snap.messages, snap.paged, q.bytes()), (0, 0, 0));
        let mut sorted = consumed.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), consumed.len(), "a message was consumed twice");
        prop_assert_eq!(sorted.into_iter().collect::<BTreeSet<_>>(), enqueued);
    }
}

#[test]
fn messages_due_later_do_not_hold_back_those_behind_them() {
    let q = queue(2);
    let store: BTreeMap<MessageId, ()> = (1..=5).map(|id| (id, ())).collect();
    q.arriving(1..=5);
    // Two due far ahead, then three ready: the first two ready ones fit the head.
    q.enqueue([1, 2].map(|id| (arrival(id).0, 1_000_000)), 0);
    q.enqueue([3, 4, 5].map(arrival), 0);
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.scheduled, snap.paged), (5, 2, 1));
    assert!(q.take_idle(3).is_some() && q.take_idle(4).is_some());
    let (after, max, _) = q.start_read().expect("the ready part of the head is empty");
    assert_eq!(q.finish_read(scanned(&store, after, max), 0), 1);
    assert!(q.take_idle(5).is_some());
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.scheduled, snap.paged), (2, 2, 0));
    assert_eq!(drain(&q), vec![1, 2]);
    assert_eq!(q.bytes(), 0);
}

#[test]
fn a_consumer_with_credit_and_nothing_ready_has_paged_messages_read_while_the_head_has_room() {
    use futures::FutureExt;

    let q = queue(10);
    q.arriving(1..=20);
    q.enqueue((1..=6).map(arrival), 0);
    // Sent past `max-size-bytes`: paged whatever room the head has.
    q.enqueue_to_disk((7..=20).map(arrival), 0);
    assert_eq!(q.snapshot().paged, 14);
    assert_eq!(q.start_read(), None, "above half its bound, and nobody waits");
    let _rx = q.attach(1, 20, None).unwrap();
    assert_eq!(q.start_read(), None, "the consumer has messages ready");
    while q.depage.notified().now_or_never().is_some() {}
    assert_eq!(q.pick(0, false, &|_, _| true).0.len(), 6);
    assert!(
        q.depage.notified().now_or_never().is_some(),
        "credit left and nothing ready: the depager is woken"
    );
    let (after, messages, _) = q.start_read().expect("the head has room");
    assert_eq!((after, messages), (6, 4), "as much as the head has room for");
    q.abort_read();
    // A full head reads nothing, whoever waits.
    let store: BTreeMap<MessageId, ()> = (1..=20).map(|id| (id, ())).collect();
    q.start_read().unwrap();
    assert_eq!(q.finish_read(scanned(&store, 6, 4), 0), 4);
    assert_eq!(q.pick(0, false, &|_, _| true).0.len(), 4);
    assert_eq!(q.start_read(), None);
}

#[test]
fn an_arrival_whose_inbox_row_a_takeover_deleted_is_enqueued_by_its_sender() {
    let q = queue(4);
    q.arriving([1, 2]);
    // The node took the queue over and emptied its inbox: 2's row (and 3's,
    // which is no arrival of this node) went.
    q.emptied_from_inbox([2, 3]);
    assert!(q.leaves_to_inbox(1), "still in the inbox: drained from there");
    assert!(
        !q.leaves_to_inbox(2),
        "no drain brings it: its sender enqueues it"
    );
    q.enqueue([arrival(2)], 0);
    assert_eq!(drain(&q), vec![2]);
    assert!(q.arriving_now().is_empty(), "neither is waited for any more");
}
