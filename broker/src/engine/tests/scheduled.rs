//! Scheduled delivery: a message asking for a later time waits in its queue's
//! timeline, stored as scheduled, without holding up the messages behind it.
use std::time::Duration;

use rebound_protocol::properties::SCHED_DELIVERY;
use rebound_storage::PropertyValue;
use rebound_storage::records::property_value::Value;

use super::*;
use crate::engine::Selection;
use crate::error::BrokerError;
use crate::queue::BrowseState;
use crate::time::now_ms;

/// A selection of every message of `queue`.
fn every_message_of(queue: &str) -> Selection {
    Selection {
        queue: queue.into(),
        ..Selection::default()
    }
}

/// A durable message to `address` asking for delivery at `at` ms since the epoch.
fn scheduled(address: &str, body: &str, at: i64) -> MessageRecord {
    let mut m = message(address, body);
    m.properties.insert(
        SCHED_DELIVERY.into(),
        PropertyValue {
            value: Some(Value::Int(at)),
        },
    );
    m
}

#[tokio::test]
async fn a_scheduled_message_waits_for_its_time_and_lets_the_next_one_pass() {
    let (broker, _store) = broker("").await;
    let due = now_ms() + 700;
    broker
        .send(vec![scheduled("q", "later", due as i64), message("q", "now")])
        .await
        .unwrap();
    let snap = broker.queue("q").unwrap().snapshot();
    assert_eq!((snap.messages, snap.scheduled), (2, 1));
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let first = receive(&mut sub, 1).await;
    assert_eq!(body(&first[0]), "now");
    assert!(now_ms() < due, "the test machine is too slow for this bound");
    let later = receive(&mut sub, 1).await;
    assert_eq!(body(&later[0]), "later");
    assert!(now_ms() >= due, "delivered before its time");
}

#[tokio::test]
async fn a_time_in_the_past_delivers_at_once_and_the_far_future_is_refused() {
    let (broker, _store) = broker("").await;
    broker.send(vec![scheduled("q", "past", 1)]).await.unwrap();
    assert_eq!(broker.queue("q").unwrap().snapshot().scheduled, 0);
    let far = (now_ms() + crate::scheduled::MAX_AHEAD_MS + 60_000) as i64;
    let err = broker.send(vec![scheduled("q", "far", far)]).await.unwrap_err();
    assert!(matches!(err, BrokerError::InvalidArgument(_)), "{err}");
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 1);
}

#[tokio::test]
async fn a_scheduled_message_is_stored_as_scheduled_and_still_waits_after_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let broker = open("", store.clone()).await;
    let due = now_ms() + 60_000;
    let ids = broker
        .send(vec![scheduled("q", "later", due as i64)])
        .await
        .unwrap()
        .ids;
    let queue = broker.queue("q").unwrap();
    let stored = store.read_message(queue.id, ids[0]).unwrap().unwrap();
    assert_eq!(stored.scheduled_at_ms, due);
    assert_eq!(
        store.read_state(queue.id, ids[0]).unwrap(),
        None,
        "no state to write"
    );
    broker.close().await.unwrap();

    let broker = open("", Arc::new(store.reopen())).await;
    let browsed = broker.management().browse("q", "", 10).unwrap();
    assert_eq!(browsed.len(), 1);
    assert_eq!(browsed[0].state, BrowseState::Scheduled(due));
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    assert!(nothing_within(&mut sub, Duration::from_millis(300)).await);
}

#[tokio::test]
async fn a_scheduled_message_moved_elsewhere_is_due_at_once_there_also_after_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let broker = open("", store.clone()).await;
    send(&broker, "other", &["first"]).await;
    let due = (now_ms() + 60_000) as i64;
    broker.send(vec![scheduled("q", "later", due)]).await.unwrap();
    let selection = every_message_of("q");
    assert_eq!(
        broker
            .management()
            .move_messages(&selection, "other")
            .await
            .unwrap(),
        1
    );
    broker.close().await.unwrap();

    let broker = open("", Arc::new(store.reopen())).await;
    let mut sub = broker.subscribe("other", 10, "").await.unwrap();
    let got = receive(&mut sub, 2).await;
    assert_eq!((body(&got[0]), body(&got[1])), ("first", "later"));
}

#[tokio::test]
async fn a_scheduled_message_no_queue_takes_stays_scheduled() {
    let (broker, _store) = broker("").await;
    broker
        .create_queue("picky", "picky", None, true, Some("kind = 'x'"), false)
        .await
        .unwrap();
    let due = now_ms() + 60_000;
    broker
        .send(vec![scheduled("q", "later", due as i64)])
        .await
        .unwrap();
    let selection = every_message_of("q");
    assert_eq!(
        broker
            .management()
            .move_messages(&selection, "picky")
            .await
            .unwrap(),
        0
    );
    let browsed = broker.management().browse("q", "", 10).unwrap();
    assert_eq!(browsed[0].state, BrowseState::Scheduled(due));
}

#[tokio::test]
async fn a_scheduled_message_whose_move_fails_stays_scheduled() {
    let (broker, store) = broker("").await;
    send(&broker, "other", &["first"]).await;
    let due = now_ms() + 60_000;
    broker
        .send(vec![scheduled("q", "later", due as i64)])
        .await
        .unwrap();
    // Every commit fails from here on, the move's too.
    store.close().unwrap();
    let selection = every_message_of("q");
    broker
        .management()
        .move_messages(&selection, "other")
        .await
        .unwrap_err();
    let browsed = broker.management().browse("q", "", 10).unwrap();
    assert_eq!(browsed[0].state, BrowseState::Scheduled(due));
}

#[tokio::test]
async fn a_scheduled_message_can_be_removed_or_purged_before_it_is_due() {
    let (broker, store) = broker("").await;
    let due = (now_ms() + 60_000) as i64;
    let ids = broker
        .send(vec![scheduled("q", "a", due), scheduled("q", "b", due)])
        .await
        .unwrap()
        .ids;
    let removed = broker
        .management()
        .remove_messages(&crate::engine::Selection {
            queue: "q".into(),
            filter: String::new(),
            message_ids: [ids[0]].into(),
        })
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(broker.management().purge("q").await.unwrap(), 1);
    let queue = broker.queue("q").unwrap();
    assert_eq!(queue.snapshot().messages, 0);
    for id in ids {
        assert_eq!(store.read_state(queue.id, id).unwrap(), None);
        assert_eq!(store.read_message(queue.id, id).unwrap(), None);
    }
}

#[tokio::test]
async fn a_delivered_scheduled_message_is_acked_leaving_no_state() {
    let (broker, store) = broker("").await;
    let due = (now_ms() + 100) as i64;
    let ids = broker.send(vec![scheduled("q", "soon", due)]).await.unwrap().ids;
    let queue = broker.queue("q").unwrap().id;
    let mut sub = broker.subscribe("q", 10, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    settle(&broker, &sub, &[got[0].delivery_id], Settlement::Ack, None).await;
    assert_eq!(store.read_state(queue, ids[0]).unwrap(), None);
}

const SMALL_HEAD: &str = r##"
[[address-settings]]
match = "#"
max-read-page-messages = 4
"##;

/// Waits (a few seconds at most) until `check` holds for queue `name`.
async fn until(broker: &Arc<Broker>, name: &str, check: impl Fn(&crate::queue::Snapshot) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !check(&broker.queue(name).unwrap().snapshot()) {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            broker.queue(name).unwrap().snapshot()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How many messages queue "q"'s due-time index names.
fn indexed(store: &MemoryStore, broker: &Broker) -> u64 {
    let batches = store.scan_due(broker.queue("q").unwrap().id, None, 100).unwrap();
    batches.iter().map(|b| b.entries.len() as u64).sum()
}

/// Scheduled messages beyond the head's bound wait on disk (`queue/far.rs`):
/// counted, browsed and removed like any other, found again after a restart,
/// and delivered in due order when their time comes.
#[tokio::test]
async fn scheduled_messages_beyond_the_bound_wait_on_disk_and_come_back_in_time() {
    let store = Arc::new(MemoryStore::new());
    let broker = open(SMALL_HEAD, store.clone()).await;
    let due = now_ms() + 2 * crate::queue::LOOKAHEAD_MS + 2_000;
    // Sent latest first: due order is not id order.
    let batch = (0..20)
        .rev()
        .map(|i| scheduled("q", &format!("m{i}"), (due + i * 10) as i64))
        .collect();
    broker.send(batch).await.unwrap();
    until(&broker, "q", |s| s.paged >= 16).await;
    let snap = broker.queue("q").unwrap().snapshot();
    assert_eq!((snap.messages, snap.scheduled), (20, 20));
    assert_eq!(indexed(&store, &broker), snap.paged);
    let all = every_message_of("q");
    assert_eq!(broker.management().count_messages(&all).unwrap(), 20);
    assert_eq!(broker.management().browse("q", "", 100).unwrap().len(), 20);
    let m19 = broker
        .management()
        .browse("q", "", 100)
        .unwrap()
        .into_iter()
        .find(|b| b.record.body == "m19");
    let one = Selection {
        message_ids: [m19.unwrap().entry.id].into(),
        ..all.clone()
    };
    assert_eq!(broker.management().remove_messages(&one).await.unwrap(), 1);
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 19);

    broker.close().await.unwrap();
    let broker = open(SMALL_HEAD, Arc::new(store.reopen())).await;
    until(&broker, "q", |s| s.messages == 19 && s.paged >= 15 && !s.counting).await;
    // The earlier serving's batches went; this one's name what is far now.
    assert_eq!(
        indexed(&store, &broker),
        broker.queue("q").unwrap().snapshot().paged
    );
    assert_eq!(broker.management().count_messages(&all).unwrap(), 19);

    let mut sub = broker.subscribe("q", 100, "").await.unwrap();
    let early = Duration::from_millis(due.saturating_sub(now_ms() + 100));
    assert!(nothing_within(&mut sub, early).await, "delivered before its time");
    let mut got = Vec::new();
    while got.len() < 19 {
        got.extend(receive(&mut sub, 1).await);
    }
    assert!(now_ms() >= due, "delivered before its time");
    let bodies: Vec<&str> = got.iter().map(body).collect();
    let expected: Vec<String> = (0..19).map(|i| format!("m{i}")).collect();
    assert_eq!(bodies, expected);
    assert_eq!(broker.queue("q").unwrap().snapshot().paged, 0);
}
