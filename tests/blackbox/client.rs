//! The Rust client against a real broker: credit, settle confirmations, errors.
//!
//! The CLI tests cover the admin calls and the message formats; these cover what
//! only a program sees: the consumer's credit modes and its settle bookkeeping.

use std::time::Duration;

use rebound_client::{Client, Code, OutgoingMessage, RoutingType};

use crate::support::Broker;

/// Long enough for a delivery on a loaded machine; tests wait this long only when
/// they expect a delivery.
const ARRIVAL: Duration = Duration::from_secs(10);

/// Long enough to conclude that nothing is coming.
const SILENCE: Duration = Duration::from_millis(300);

async fn queue_with_messages(client: &Client, queue: &str, count: usize) {
    client
        .create_queue(queue, queue, RoutingType::Anycast, true)
        .await
        .unwrap();
    let batch = (0..count)
        .map(|i| OutgoingMessage::new(queue, format!("m{i}")))
        .collect();
    let response = client.send_batch(batch).await.unwrap();
    assert_eq!((response.message_ids.len(), response.unrouted), (count, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_consumer_replenishes_its_credit() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    queue_with_messages(&client, "window", 5).await;

    let mut consumer = client.consume("window", 2).await.unwrap();
    assert_eq!((consumer.queue(), consumer.address()), ("window", "window"));
    for i in 0..5 {
        let delivery = consumer
            .next_timeout(ARRIVAL)
            .await
            .unwrap()
            .expect("credit was replenished");
        assert_eq!(delivery.message.body, format!("m{i}"));
        consumer.ack(&[delivery.id]).await.unwrap();
    }
    assert_eq!(consumer.flush().await.unwrap(), Vec::<u64>::new());
    consumer.close().await.unwrap();

    let info = client.queue("window").await.unwrap();
    assert_eq!((info.messages, info.acked, info.consumers), (0, 5, 0), "{info:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_manual_credit_consumer_gets_only_what_it_granted() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    queue_with_messages(&client, "manual", 3).await;

    let mut consumer = client.consume_manual_credit("manual", 2).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        ids.push(
            consumer
                .next_timeout(ARRIVAL)
                .await
                .unwrap()
                .expect("initial credit")
                .id,
        );
    }
    consumer.ack(&ids).await.unwrap();
    assert!(
        consumer.next_timeout(SILENCE).await.unwrap().is_none(),
        "no credit left"
    );
    consumer.grant(1).await.unwrap();
    let third = consumer
        .next_timeout(ARRIVAL)
        .await
        .unwrap()
        .expect("granted one more");
    assert_eq!(third.message.body, "m2");
    consumer.ack(&[third.id]).await.unwrap();
    consumer.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn flush_reports_unknown_delivery_ids() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    queue_with_messages(&client, "twice", 1).await;

    let mut consumer = client.consume("twice", 1).await.unwrap();
    let delivery = consumer.next_timeout(ARRIVAL).await.unwrap().unwrap();
    consumer.ack(&[delivery.id]).await.unwrap();
    consumer.ack(&[delivery.id, 999_999]).await.unwrap();
    let mut unknown = consumer.flush().await.unwrap();
    unknown.sort();
    assert_eq!(unknown, [delivery.id, 999_999]);
    assert_eq!(
        consumer.flush().await.unwrap(),
        Vec::<u64>::new(),
        "reported once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn broker_refusals_carry_their_status_code() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let err = client.queue("nope").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound), "{err}");
    let err = client.send(OutgoingMessage::new("", "x")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    client
        .create_queue("dup", "dup", RoutingType::Anycast, true)
        .await
        .unwrap();
    let err = client
        .create_queue("dup", "dup", RoutingType::Anycast, true)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::AlreadyExists), "{err}");
}

/// A settle the broker refuses takes no credit back: a consumer that grants one
/// credit per settled delivery (as the proto says) keeps receiving after one.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_settle_keeps_the_credit_of_a_consumer_that_follows_the_proto() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    queue_with_messages(&client, "refused", 5).await;
    let session = client.session().await.unwrap();
    let finished = session.begin().await.unwrap();
    finished.commit().await.unwrap();

    let mut consumer = client.consume_manual_credit("refused", 1).await.unwrap();
    let first = consumer
        .next_timeout(ARRIVAL)
        .await
        .unwrap()
        .expect("credit 1")
        .id;
    let refused = consumer.ack_in(&finished, &[first]).await;
    assert!(refused.is_err(), "an ack in a finished transaction is refused");
    consumer.ack(&[first]).await.unwrap();
    consumer.flush().await.unwrap();
    consumer.grant(1).await.unwrap();
    assert!(
        consumer.next_timeout(ARRIVAL).await.unwrap().is_some(),
        "one credit per settled delivery keeps a window of 1"
    );

    // A window consumer grants a settle's credit when it sends it, so a refused
    // settle lets one more delivery in; the window takes that credit back from its
    // next grant instead of growing for good.
    let mut window = client.consume("refused", 1).await.unwrap();
    let second = window.next_timeout(ARRIVAL).await.unwrap().expect("window 1").id;
    assert!(window.ack_in(&finished, &[second]).await.is_err());
    let third = window
        .next_timeout(ARRIVAL)
        .await
        .unwrap()
        .expect("the overshoot")
        .id;
    window.ack(&[second]).await.unwrap();
    window.flush().await.unwrap();
    assert!(
        window.next_timeout(SILENCE).await.unwrap().is_none(),
        "the window is back to 1: the second's credit paid the debt"
    );
    window.ack(&[third]).await.unwrap();
    assert!(window.next_timeout(ARRIVAL).await.unwrap().is_some());
}
