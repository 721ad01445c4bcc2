//! Unit tests of message groups in a queue: one delivery at a time per group, send
//! order across failures and delays, binding to a consumer, cheap picks.
use std::collections::HashMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;

fn queue() -> Queue {
    Queue::new(1, "q".into(), "q".into(), RoutingType::Anycast, true, false, None)
}

fn entry(id: MessageId, group: Option<&str>) -> Entry {
    Entry {
        id,
        priority: 4,
        expiration_ms: 0,
        size: 10,
        delivery_count: 0,
        failures: Vec::new(),
        stored: true,
        state_stored: true,
        group: group.map(Arc::from),
        record: None,
        serving: None,
    }
}

fn pick(q: &Queue, now: u64) -> Vec<Pick> {
    q.pick(now, false, &|_, _| true).0
}

fn ids(picks: &[Pick]) -> Vec<MessageId> {
    picks.iter().map(|p| p.entry.id).collect()
}

/// Settles picks as an ack does: taken, then gone for good.
fn ack(q: &Queue, consumer: ConsumerId, picks: &[Pick]) {
    let dids: Vec<u64> = picks.iter().map(|p| p.delivery_id).collect();
    let (taken, _) = q.take_delivered(consumer, &dids);
    q.finish(&taken);
}

#[test]
fn a_group_delivers_one_message_at_a_time_and_others_flow() {
    let q = queue();
    q.enqueue(
        [(1, "a"), (2, "a"), (3, "b"), (4, "a")]
            .map(|(id, g)| (entry(id, Some(g)), 0))
            .into_iter()
            .chain([(entry(5, None), 0)]),
        100,
    );
    let _rx = q.attach(7, 10, None).unwrap();
    let first = pick(&q, 100);
    assert_eq!(ids(&first), vec![1, 3, 5], "one per group, ungrouped as usual");
    assert!(pick(&q, 100).is_empty());
    ack(&q, 7, &first[..1]);
    assert_eq!(ids(&pick(&q, 100)), vec![2]);
}

#[test]
fn a_failed_message_holds_its_group_while_it_waits_for_its_delay() {
    let q = queue();
    q.enqueue([1, 2, 3].map(|id| (entry(id, Some("a")), 0)), 100);
    q.enqueue([(entry(4, Some("b")), 0)], 100);
    let _rx = q.attach(7, 10, None).unwrap();
    let picks = pick(&q, 100);
    assert_eq!(ids(&picks), vec![1, 4]);
    // Message 1 fails: it is taken to be settled, then comes back with a delay.
    let (taken, _) = q.take_delivered(7, &[picks[0].delivery_id]);
    assert!(pick(&q, 100).is_empty(), "held while its settle is under way");
    q.requeue(taken.into_iter().map(|e| (e, 1000)), 100);
    assert!(pick(&q, 500).is_empty(), "2 and 3 wait behind 1");
    ack(&q, 7, &picks[1..]);
    q.enqueue([(entry(5, Some("b")), 0)], 500);
    assert_eq!(ids(&pick(&q, 500)), vec![5], "group b flows");
    let again = pick(&q, 1000);
    assert_eq!(ids(&again), vec![1]);
    assert_eq!(again[0].entry.delivery_count, 2);
    ack(&q, 7, &again);
    assert_eq!(ids(&pick(&q, 1000)), vec![2]);
}

#[test]
fn a_removed_front_lets_its_group_move_on_and_says_who_waited() {
    let q = queue();
    q.enqueue([1, 2, 3].map(|id| (entry(id, Some("a")), 0)), 100);
    let _rx = q.attach(7, 10, None).unwrap();
    let picks = pick(&q, 100);
    let (taken, _) = q.take_delivered(7, &[picks[0].delivery_id]);
    assert_eq!(q.held_behind(&taken[0]), Some(2));
    // Dead-lettered: gone for good.
    q.finish(&taken);
    assert_eq!(ids(&pick(&q, 100)), vec![2]);
    // An operator removes a waiting message, then the delivering one fails to the
    // timeline and is removed there: the group moves on each time.
    let (taken, _) = q.take_delivered(7, &[2]);
    q.requeue(taken.into_iter().map(|e| (e, 5000)), 100);
    assert!(pick(&q, 100).is_empty());
    assert!(q.take_idle(2).is_some());
    assert_eq!(ids(&pick(&q, 100)), vec![3]);
}

#[test]
fn a_group_sticks_to_its_consumer_and_moves_when_it_leaves() {
    let q = queue();
    let _rx1 = q.attach(1, 10, None).unwrap();
    let _rx2 = q.attach(2, 10, None).unwrap();
    q.enqueue([(entry(1, Some("a")), 0)], 100);
    let first = pick(&q, 100);
    let owner = first[0].consumer;
    ack(&q, owner, &first);
    for id in 2..6 {
        q.enqueue([(entry(id, Some("a")), 0)], 100);
        let p = pick(&q, 100);
        assert_eq!(p[0].consumer, owner, "message {id}");
        ack(&q, owner, &p);
    }
    q.enqueue([(entry(6, Some("a")), 0), (entry(7, Some("a")), 0)], 100);
    let held = pick(&q, 100);
    assert_eq!((ids(&held), held[0].consumer), (vec![6], owner));
    // The owner leaves holding 6: it comes back first, to the other consumer.
    let (back, _) = q.detach(owner);
    q.requeue(back.into_iter().map(|e| (e, 0)), 100);
    let moved = pick(&q, 100);
    assert_eq!(ids(&moved), vec![6]);
    assert_ne!(moved[0].consumer, owner);
}

#[test]
fn a_bound_groups_front_waits_for_its_consumers_credit_without_blocking_others() {
    let q = queue();
    let _rx1 = q.attach(1, 1, None).unwrap();
    // Attached before a's bucket is idle: a consumer that attaches frees idle buckets.
    let _rx2 = q.attach(2, 10, None).unwrap();
    q.enqueue([(entry(1, Some("a")), 0)], 100);
    let p = pick(&q, 100);
    ack(&q, 1, &p);
    q.enqueue([(entry(2, Some("a")), 0), (entry(3, None), 0)], 100);
    let p = pick(&q, 100);
    assert_eq!(ids(&p), vec![3], "a's next waits for consumer 1's credit");
    q.grant(1, 1, u32::MAX);
    assert_eq!(ids(&pick(&q, 100)), vec![2]);
}

#[test]
fn within_a_group_send_order_beats_priority() {
    let q = queue();
    let mut urgent = entry(2, Some("a"));
    urgent.priority = 9;
    q.enqueue([(entry(1, Some("a")), 0), (urgent, 0)], 100);
    let _rx = q.attach(7, 10, None).unwrap();
    let p = pick(&q, 100);
    assert_eq!(ids(&p), vec![1]);
    ack(&q, 7, &p);
    assert_eq!(ids(&pick(&q, 100)), vec![2]);
}

#[test]
fn a_message_scheduled_at_send_joins_its_group_when_due() {
    let q = queue();
    q.enqueue([(entry(1, Some("a")), 5000), (entry(2, Some("a")), 0)], 100);
    let _rx = q.attach(7, 10, None).unwrap();
    assert_eq!(ids(&pick(&q, 100)), vec![2], "not held by a message not yet due");
}

#[test]
fn a_restart_keeps_the_held_message_first() {
    // As recovery hands them back: ascending ids, the failed front due later.
    let q = queue();
    let mut failed = entry(1, Some("a"));
    failed.delivery_count = 1;
    q.requeue(
        [(failed, 1000), (entry(2, Some("a")), 0), (entry(3, Some("b")), 0)],
        100,
    );
    let _rx = q.attach(7, 10, None).unwrap();
    assert_eq!(ids(&pick(&q, 100)), vec![3]);
    assert_eq!(ids(&pick(&q, 1000)), vec![1]);
}

#[test]
fn a_blocked_group_of_many_costs_a_pick_nothing() {
    let q = queue();
    q.enqueue((1..=100_000).map(|id| (entry(id, Some("a")), 0)), 100);
    let _rx = q.attach(7, u32::MAX, None).unwrap();
    assert_eq!(ids(&pick(&q, 100)), vec![1]);
    let start = std::time::Instant::now();
    for id in 100_001..=101_000 {
        q.enqueue([(entry(id, None), 0)], 100);
        assert_eq!(ids(&pick(&q, 100)), vec![id]);
    }
    // 1000 picks past a blocked group of 100k; a scan would take seconds.
    assert!(
        start.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}

#[derive(Debug, Clone)]
enum Step {
    Send(u8),
    Ack(usize),
    Nack(usize, bool),
    Tick,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..4).prop_map(Step::Send),
        any::<usize>().prop_map(Step::Ack),
        (any::<usize>(), any::<bool>()).prop_map(|(i, delayed)| Step::Nack(i, delayed)),
        Just(Step::Tick),
    ]
}

proptest! {
    /// For random sends, acks and (delayed) nacks in random groups, each group's
    /// messages are processed (acked) in send order, and no two messages of one
    /// group are ever delivering at once.
    #[test]
    fn groups_keep_send_order_across_failures(steps in prop::collection::vec(step(), 1..200)) {
        let q = queue();
        let _rx1 = q.attach(1, 3, None).unwrap();
        let _rx2 = q.attach(2, 3, None).unwrap();
        let mut now = 100;
        let mut next_id = 1;
        let mut sent: HashMap<String, Vec<MessageId>> = HashMap::new();
        let mut acked: HashMap<String, Vec<MessageId>> = HashMap::new();
        let mut out: Vec<Pick> = Vec::new();
        let group_of = |p: &Pick| p.entry.group.as_deref().unwrap().to_owned();
        for step in steps.into_iter().chain(std::iter::repeat_n(Step::Tick, 10)) {
            match step {
                Step::Send(g) => {
                    let g = format!("g{g}");
                    q.enqueue([(entry(next_id, Some(&g)), 0)], now);
                    sent.entry(g).or_default().push(next_id);
                    next_id += 1;
                }
                Step::Ack(_) | Step::Nack(..) if out.is_empty() => {}
                Step::Ack(i) => {
                    let p = out.remove(i % out.len());
                    let (taken, _) = q.take_delivered(p.consumer, &[p.delivery_id]);
                    q.finish(&taken);
                    acked.entry(group_of(&p)).or_default().push(p.entry.id);
                    q.grant(p.consumer, 1, 3);
                }
                Step::Nack(i, delayed) => {
                    let p = out.remove(i % out.len());
                    let (taken, _) = q.take_delivered(p.consumer, &[p.delivery_id]);
                    let due = if delayed { now + 50 } else { 0 };
                    q.requeue(taken.into_iter().map(|e| (e, due)), now);
                    q.grant(p.consumer, 1, 3);
                }
                Step::Tick => now += 30,
            }
            out.extend(pick(&q, now));
            let mut delivering: Vec<String> = out.iter().map(group_of).collect();
            delivering.sort();
            let n = delivering.len();
            delivering.dedup();
            prop_assert_eq!(delivering.len(), n, "two of one group delivering at once");
        }
        for (group, acked) in &acked {
            let order = &sent[group];
            prop_assert_eq!(&order[..acked.len()], &acked[..], "group {}", group);
        }
    }
}

#[test]
fn a_group_is_forgotten_when_its_last_message_leaves_and_keeps_its_consumer() {
    let q = queue();
    let _rx7 = q.attach(7, 10, None).unwrap();
    let _rx8 = q.attach(8, 10, None).unwrap();
    q.enqueue([(entry(1, Some("a")), 0)], 100);
    let first = pick(&q, 100);
    assert_eq!(first[0].consumer, 7);
    assert_eq!(q.snapshot().groups, 1);
    ack(&q, 7, &first);
    assert_eq!(q.snapshot().groups, 0, "no message left: forgotten");
    // Its next message finds the consumer its bucket is bound to, on 8's turn.
    q.enqueue([(entry(2, Some("a")), 0)], 100);
    let again = pick(&q, 100);
    assert_eq!((again[0].consumer, again[0].entry.id), (7, 2));
    ack(&q, 7, &again);
    // Removed (expired, moved) rather than acked: forgotten too.
    q.enqueue([(entry(3, Some("b")), 0)], 100);
    assert_eq!(q.snapshot().groups, 1);
    assert!(q.take_idle(3).is_some());
    assert_eq!(q.snapshot().groups, 0);
    // Its consumer gone, the group goes to any consumer.
    q.detach(7);
    q.enqueue([(entry(4, Some("a")), 0)], 100);
    let moved = pick(&q, 100);
    assert_eq!(moved[0].consumer, 8);
    ack(&q, 8, &moved);
    q.detach(8);
    let snap = q.snapshot();
    assert_eq!((snap.groups, snap.group_bytes), (0, 0));
}
