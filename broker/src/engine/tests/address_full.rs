//! `address-full-policy` and the limits it applies: BLOCK waits and is woken by
//! what makes room (or a reload), times out with a clear error; FAIL refuses;
//! DROP discards and counts; PAGE accepts and pages, and reads back what a
//! consumer with credit wants; `global-max-size` spans addresses; messages the
//! broker moves itself (dead letters) are never refused.
use super::*;
use crate::error::BrokerError;

/// A body of 1000 bytes: two messages never fit in 1500 bytes, one always does.
const BODY: &str = concat!(
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
);

fn full_config(policy: &str, extra: &str) -> String {
    format!(
        "[[address-settings]]\nmatch = \"q\"\nmax-size-bytes = 1500\naddress-full-policy = \"{policy}\"\n{extra}"
    )
}

#[track_caller]
fn assert_full(result: Result<impl std::fmt::Debug, BrokerError>, text: &str) {
    match result {
        Err(e @ BrokerError::AddressFull { .. }) => assert!(e.to_string().contains(text), "{e}"),
        other => panic!("expected the address to be full, got {other:?}"),
    }
}

#[tokio::test]
async fn block_waits_until_an_ack_makes_room() {
    let (broker, _) = broker(&full_config("BLOCK", "max-block-time = 10000\n")).await;
    send(&broker, "q", &[BODY]).await;
    let blocked = tokio::spawn({
        let broker = broker.clone();
        async move { broker.send(vec![message("q", BODY)]).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!blocked.is_finished(), "the address is full: the send waits");
    let view = broker.management().address("q").unwrap();
    assert_eq!((view.size.blocked(), broker.management().broker_size().1), (1, 1));
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let first = receive(&mut sub, 1).await;
    assert!(!blocked.is_finished(), "delivered is still held");
    settle(&broker, &sub, &ids(&first), Settlement::Ack, None).await;
    let sent = tokio::time::timeout(Duration::from_secs(5), blocked)
        .await
        .expect("the ack woke the send")
        .unwrap();
    assert_eq!(sent.unwrap().ids.len(), 1);
    assert_eq!(broker.management().address("q").unwrap().size.blocked(), 0);
    broker.grant(&sub.queue, sub.consumer, 1);
    assert_eq!(receive(&mut sub, 1).await.len(), 1);
}

#[tokio::test]
async fn block_gives_up_after_max_block_time() {
    let (broker, _) = broker(&full_config("BLOCK", "max-block-time = 200\n")).await;
    send(&broker, "q", &[BODY]).await;
    let started = std::time::Instant::now();
    let result = broker.send(vec![message("q", BODY)]).await;
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_full(result, "and max-size-bytes is 1500; the send waited ");
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 1);
}

#[tokio::test]
async fn a_reload_that_raises_the_limit_frees_blocked_sends() {
    let (broker, _) = broker(&full_config("BLOCK", "max-block-time = 10000\n")).await;
    send(&broker, "q", &[BODY]).await;
    let blocked = tokio::spawn({
        let broker = broker.clone();
        async move { broker.send(vec![message("q", BODY)]).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!blocked.is_finished());
    let raised = full_config("BLOCK", "").replace("1500", "5000");
    broker.reload(&config(&raised)).await.unwrap();
    let sent = tokio::time::timeout(Duration::from_secs(5), blocked).await;
    assert!(sent.expect("the reload woke the send").unwrap().is_ok());
}

#[tokio::test]
async fn fail_refuses_naming_the_address_its_size_and_the_limit() {
    let (broker, _) = broker(&full_config("FAIL", "")).await;
    send(&broker, "q", &[BODY]).await;
    let held = broker.queue("q").unwrap().bytes();
    assert_full(
        broker.send(vec![message("q", BODY)]).await,
        &format!("address 'q' is full: it holds {held} bytes and max-size-bytes is 1500"),
    );
    // A batch is refused whole.
    let fresh = broker_with_empty_q("FAIL").await;
    assert_full(fresh.send(vec![message("q", BODY), message("q", BODY)]).await, "");
    assert_eq!(fresh.queue("q").unwrap().snapshot().messages, 0);
}

async fn broker_with_empty_q(policy: &str) -> Arc<Broker> {
    let (broker, _) = broker(&full_config(
        policy,
        "[[addresses]]\nname = \"q\"\n  [[addresses.queues]]\n  name = \"q\"\n",
    ))
    .await;
    broker
}

#[tokio::test]
async fn drop_acknowledges_discards_and_counts() {
    let broker = broker_with_empty_q("DROP").await;
    let sent = broker
        .send(vec![message("q", BODY), message("q", BODY), message("q", BODY)])
        .await
        .expect("DROP succeeds");
    assert_eq!(sent.ids.len(), 3);
    assert_eq!(broker.queue("q").unwrap().snapshot().messages, 1);
    send(&broker, "q", &[BODY]).await;
    let view = broker.management().address("q").unwrap();
    assert_eq!(view.size.dropped(), 3);
    assert_eq!(view.size.bytes(), broker.queue("q").unwrap().bytes());
}

#[tokio::test]
async fn a_dropped_message_keeps_the_duplicate_flags_in_the_order_sent() {
    use rebound_protocol::properties::DUPL_ID;
    use rebound_storage::PropertyValue;
    use rebound_storage::records::property_value::Value;

    let broker = broker_with_empty_q("DROP").await;
    let mut again = message("other", "once");
    again.properties.insert(
        DUPL_ID.into(),
        PropertyValue {
            value: Some(Value::String("id-1".into())),
        },
    );
    broker.send(vec![again.clone()]).await.unwrap();
    send(&broker, "q", &[BODY]).await;
    let sent = broker
        .send(vec![message("q", BODY), again, message("other", "new")])
        .await
        .unwrap();
    assert_eq!(sent.duplicates, [false, true, false]);
    assert_eq!(broker.queue("other").unwrap().snapshot().messages, 2);
}

#[tokio::test]
async fn page_accepts_past_the_limit_and_pages_what_is_past_it() {
    let broker = broker_with_empty_q("PAGE").await;
    send(&broker, "q", &[BODY, BODY, BODY]).await;
    let snap = broker.queue("q").unwrap().snapshot();
    // The first fits; the two past max-size-bytes went to disk, not to memory.
    assert_eq!((snap.messages, snap.paged), (3, 2));
}

#[tokio::test]
async fn what_page_paged_reaches_a_consumer_with_credit_before_it_acks() {
    let broker = broker_with_empty_q("PAGE").await;
    send(&broker, "q", &[BODY; 5]).await;
    assert_eq!(broker.queue("q").unwrap().snapshot().paged, 4);
    let mut sub = broker.subscribe("q", 5, "").await.unwrap();
    assert_eq!(receive(&mut sub, 5).await.len(), 5);
    assert_eq!(broker.queue("q").unwrap().snapshot().paged, 0);
}

#[tokio::test]
async fn global_max_size_applies_each_address_policy_across_addresses() {
    let (broker, _) = broker(
        "global-max-size = 2500\n[[address-settings]]\nmatch = \"#\"\naddress-full-policy = \"FAIL\"\n",
    )
    .await;
    send(&broker, "a", &[BODY]).await;
    send(&broker, "b", &[BODY]).await;
    assert_full(
        broker.send(vec![message("c", BODY)]).await,
        "the broker's addresses hold",
    );
    // Deleting a queue gives its bytes back.
    broker.delete_queue("a").await.unwrap();
    assert_eq!(
        broker.management().broker_size().0,
        broker.queue("b").unwrap().bytes()
    );
    send(&broker, "c", &[BODY]).await;
}

#[tokio::test]
async fn a_dead_letter_lands_in_a_full_dead_letter_address() {
    let (broker, _) = broker(&format!(
        "{WITH_DLQ}\n[[address-settings]]\nmatch = \"DLQ\"\nmax-size-bytes = 1500\naddress-full-policy = \"FAIL\"\n"
    ))
    .await;
    send(&broker, "DLQ", &[BODY]).await;
    send(&broker, "q", &[BODY]).await;
    let mut sub = broker.subscribe("q", 1, "").await.unwrap();
    let got = receive(&mut sub, 1).await;
    let dead = Settlement::DeadLetter {
        reason: "poison".into(),
    };
    settle(&broker, &sub, &ids(&got), dead, None).await;
    assert_eq!(broker.queue("DLQ").unwrap().snapshot().messages, 2);
    assert!(broker.management().address("DLQ").unwrap().size.bytes() > 1500);
}

#[tokio::test]
async fn sizes_are_the_queues_bytes_through_a_purge_and_a_restart() {
    let (broker, store) = broker("").await;
    send(&broker, "a", &[BODY, BODY]).await;
    send(&broker, "b", &[BODY]).await;
    let bytes = |broker: &Arc<Broker>, name: &str| broker.queue(name).unwrap().bytes();
    let size = |broker: &Arc<Broker>, name: &str| broker.management().address(name).unwrap().size.bytes();
    assert_eq!(size(&broker, "a"), bytes(&broker, "a"));
    assert_eq!(
        broker.management().broker_size().0,
        bytes(&broker, "a") + bytes(&broker, "b")
    );
    broker.close().await.unwrap();
    let broker = open("", Arc::new(store.reopen())).await;
    assert!(size(&broker, "a") > 2000, "recovered messages count");
    assert_eq!(
        broker.management().broker_size().0,
        bytes(&broker, "a") + bytes(&broker, "b")
    );
    broker.management().purge("a").await.unwrap();
    assert_eq!(
        (size(&broker, "a"), broker.management().broker_size().0),
        (0, bytes(&broker, "b"))
    );
}

#[tokio::test]
async fn a_multicast_message_counts_once_per_queue_it_is_stored_in() {
    let (broker, _) = broker(
        "[[address-settings]]\nmatch = \"events\"\nmax-size-bytes = 2500\naddress-full-policy = \"FAIL\"\n\
         [[addresses]]\nname = \"events\"\nrouting-type = \"multicast\"\n  [[addresses.queues]]\n  name = \"one\"\n  [[addresses.queues]]\n  name = \"two\"\n",
    )
    .await;
    // One message makes two copies (about 2100 bytes); a second would be 4200.
    send(&broker, "events", &[BODY]).await;
    assert_full(
        broker.send(vec![message("events", BODY)]).await,
        "max-size-bytes is 2500",
    );
    // A batch is measured the same way: the two messages are 4200 bytes.
    broker.management().purge("one").await.unwrap();
    broker.management().purge("two").await.unwrap();
    assert_full(
        broker
            .send(vec![message("events", BODY), message("events", BODY)])
            .await,
        "",
    );
    assert_eq!(broker.management().address("events").unwrap().size.bytes(), 0);
}
