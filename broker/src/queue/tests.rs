//! Unit tests of a queue: credit, order, scheduling, filters, the body cache.
use std::sync::Arc;

use rebound_storage::MessageRecord;

use super::*;

fn queue() -> Queue {
    Queue::new(1, "q".into(), "q".into(), RoutingType::Anycast, true, false, None)
}

fn entry(id: MessageId, priority: u8) -> Entry {
    Entry {
        id,
        priority,
        expiration_ms: 0,
        size: 10,
        delivery_count: 0,
        failures: Vec::new(),
        stored: true,
        state_stored: true,
        group: None,
        record: None,
        serving: None,
    }
}

fn ids(picks: &[Pick]) -> Vec<MessageId> {
    picks.iter().map(|p| p.entry.id).collect()
}

#[test]
fn each_delivery_uses_one_credit() {
    let q = queue();
    q.enqueue((1..=5).map(|id| (entry(id, 4), 0)), 100);
    let _rx = q.attach(7, 2, None).unwrap();
    let (picks, _, _) = q.pick(100, false, &|_, _| true);
    assert_eq!(ids(&picks), vec![1, 2]);
    assert!(q.pick(100, false, &|_, _| true).0.is_empty(), "no credit left");
    let (taken, unknown) = q.take_delivered(7, &[picks[0].delivery_id, 999]);
    assert_eq!(taken.len(), 1);
    assert_eq!(unknown, vec![999]);
    assert!(
        q.pick(100, false, &|_, _| true).0.is_empty(),
        "settling grants no credit"
    );
    q.grant(7, 1, u32::MAX);
    assert_eq!(ids(&q.pick(100, false, &|_, _| true).0), vec![3]);
    q.grant(7, 10, u32::MAX);
    assert_eq!(ids(&q.pick(100, false, &|_, _| true).0), vec![4, 5]);
}

#[test]
fn closing_stops_grants() {
    let q = queue();
    q.enqueue((1..=5).map(|id| (entry(id, 4), 0)), 100);
    let _rx = q.attach(1, 1, None).unwrap();
    assert_eq!(q.pick(100, false, &|_, _| true).0.len(), 1);
    q.stop(1);
    q.grant(1, 5, u32::MAX);
    assert!(
        q.pick(100, false, &|_, _| true).0.is_empty(),
        "no credit after close"
    );
}

#[test]
fn priority_then_send_order_and_returned_messages_keep_their_place() {
    let q = queue();
    q.enqueue([(entry(1, 4), 0), (entry(2, 9), 0), (entry(3, 4), 0)], 100);
    let _rx = q.attach(1, 1, None).unwrap();
    let first = q.pick(100, false, &|_, _| true).0;
    assert_eq!(ids(&first), vec![2]);
    let (taken, _) = q.take_delivered(1, &[first[0].delivery_id]);
    let mut back = taken.into_iter().next().unwrap();
    back.priority = 0;
    q.requeue([(back, 0)], 100);
    let mut order = Vec::new();
    for _ in 0..3 {
        q.grant(1, 1, u32::MAX);
        let p = q.pick(100, false, &|_, _| true).0;
        order.extend(ids(&p));
        q.take_delivered(1, &[p[0].delivery_id]);
    }
    assert_eq!(order, vec![1, 3, 2]);
}

#[test]
fn scheduled_messages_do_not_block_and_come_back_when_due() {
    let q = queue();
    q.enqueue([(entry(1, 4), 500), (entry(2, 4), 0)], 100);
    let _rx = q.attach(1, 10, None).unwrap();
    let (picks, _, next) = q.pick(100, false, &|_, _| true);
    assert_eq!(ids(&picks), vec![2]);
    assert_eq!(next, Some(500));
    assert_eq!(q.snapshot().scheduled, 1);
    assert_eq!(ids(&q.pick(500, false, &|_, _| true).0), vec![1]);
    assert_eq!(q.snapshot().scheduled, 0);
}

#[test]
fn competing_consumers_share_round_robin_and_detach_returns_outstanding() {
    let q = queue();
    q.enqueue((1..=4).map(|id| (entry(id, 4), 0)), 100);
    let _a = q.attach(1, 10, None).unwrap();
    let _b = q.attach(2, 10, None).unwrap();
    let picks = q.pick(100, false, &|_, _| true).0;
    let by = |c| picks.iter().filter(|p| p.consumer == c).count();
    assert_eq!((by(1), by(2)), (2, 2));
    let (back, closing) = q.detach(1);
    assert!(!closing);
    assert_eq!(back.len(), 2);
    assert!(back.iter().all(|e| e.delivery_count == 1));
    assert_eq!(q.snapshot().delivering, 2);
}

#[test]
fn expired_messages_leave_the_queue() {
    let q = queue();
    let mut e = entry(1, 4);
    e.expiration_ms = 150;
    q.enqueue([(e, 0), (entry(2, 4), 0)], 100);
    let (_, expired, next) = q.pick(100, false, &|_, _| true);
    assert!(expired.is_empty());
    assert_eq!(next, Some(150));
    let (_, expired, _) = q.pick(150, false, &|_, _| true);
    assert_eq!(expired.iter().map(|e| e.id).collect::<Vec<_>>(), vec![1]);
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.bytes), (1, 10));
}

#[test]
fn a_filtered_consumer_gets_only_what_matches_and_does_not_block_others() {
    let q = queue();
    q.enqueue((1..=6).map(|id| (entry(id, 4), 0)), 100);
    let even = Arc::new(rebound_selector::Selector::parse("even = TRUE").unwrap());
    let _f = q.attach(1, 10, Some(even)).unwrap();
    let is_even = |e: &Entry, _: &rebound_selector::Selector| e.id.is_multiple_of(2);
    let picks = q.pick(100, false, &is_even).0;
    assert_eq!(ids(&picks), vec![2, 4, 6]);
    let _all = q.attach(2, 10, None).unwrap();
    assert_eq!(ids(&q.pick(100, false, &is_even).0), vec![1, 3, 5]);
}

#[test]
fn stored_bodies_are_cached_only_up_to_the_budget() {
    let q = queue();
    let big = |id| Entry {
        size: BODY_CACHE_BYTES / 2,
        record: Some(Arc::new(MessageRecord::default())),
        serving: None,
        ..entry(id, 4)
    };
    q.enqueue([(big(1), 0), (big(2), 0), (big(3), 0)], 100);
    let _rx = q.attach(1, 10, None).unwrap();
    let picks = q.pick(100, false, &|_, _| true).0;
    let cached: Vec<bool> = picks.iter().map(|p| p.entry.record.is_some()).collect();
    assert_eq!(cached, vec![true, true, false]);
    // An ack frees its share of the budget for the next message.
    q.take_delivered(1, &[picks[0].delivery_id]);
    q.enqueue([(big(4), 0)], 100);
    assert!(q.pick(100, false, &|_, _| true).0[0].entry.record.is_some());
}

#[test]
fn a_forgotten_pick_leaves_the_queue_and_returns_the_credit() {
    let q = queue();
    q.enqueue([(entry(1, 4), 0), (entry(2, 4), 0)], 100);
    let _rx = q.attach(1, 1, None).unwrap();
    let picks = q.pick(100, false, &|_, _| true).0;
    q.forget(&picks[0]);
    let snap = q.snapshot();
    assert_eq!((snap.messages, snap.delivering, snap.counters.dropped), (1, 0, 1));
    assert_eq!(
        ids(&q.pick(100, false, &|_, _| true).0),
        vec![2],
        "the credit came back"
    );
}

#[test]
fn unpick_restores_the_message() {
    let q = queue();
    q.enqueue([(entry(1, 4), 0)], 100);
    let _rx = q.attach(1, 1, None).unwrap();
    let picks = q.pick(100, false, &|_, _| true).0;
    q.unpick(&picks[0]);
    let again = q.pick(100, false, &|_, _| true).0;
    assert_eq!(again[0].entry.delivery_count, 1);
}
