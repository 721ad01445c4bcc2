//! The broker core over gRPC: routing, competing consumers, credit, ack, nack,
//! consumer disconnect, durability across `kill -9`, and bad input.
use std::time::Duration;

use rebound_client::{Client, Code, Consumer, Delivery, OutgoingMessage, RoutingType};

use crate::support::Broker;

/// Receives up to `n` deliveries, waiting at most `idle` for each.
pub async fn receive(consumer: &mut Consumer, n: usize, idle: Duration) -> Vec<Delivery> {
    let mut got = Vec::new();
    while got.len() < n {
        match consumer.next_timeout(idle).await.expect("consume") {
            Some(d) => got.push(d),
            None => break,
        }
    }
    got
}

pub fn body(d: &Delivery) -> String {
    String::from_utf8_lossy(&d.message.body).into_owned()
}

pub async fn send_bodies(client: &Client, address: &str, bodies: impl IntoIterator<Item = String>) {
    let batch = bodies
        .into_iter()
        .map(|b| OutgoingMessage::new(address, b))
        .collect();
    client.send_batch(batch).await.expect("send");
}

const IDLE: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(500);

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn anycast_sends_each_message_to_one_queue_multicast_to_all() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        client
            .create_queue("work", "w1", RoutingType::Anycast, true)
            .await
            .unwrap();
        client
            .create_queue("work", "w2", RoutingType::Anycast, true)
            .await
            .unwrap();
        client
            .create_queue("news", "s1", RoutingType::Multicast, true)
            .await
            .unwrap();
        client
            .create_queue("news", "s2", RoutingType::Multicast, true)
            .await
            .unwrap();
        send_bodies(&client, "work", (0..10).map(|i| format!("w{i}"))).await;
        send_bodies(&client, "news", (0..10).map(|i| format!("n{i}"))).await;

        let w1 = client.queue("w1").await.unwrap().messages;
        let w2 = client.queue("w2").await.unwrap().messages;
        assert_eq!(w1 + w2, 10, "each anycast message lands in exactly one queue");
        assert!(w1 > 0 && w2 > 0, "anycast spreads over the queues: {w1}/{w2}");
        for sub in ["s1", "s2"] {
            let mut c = client.consume(sub, 100).await.unwrap();
            let got = receive(&mut c, 10, IDLE).await;
            let bodies: Vec<String> = got.iter().map(body).collect();
            assert_eq!(
                bodies,
                (0..10).map(|i| format!("n{i}")).collect::<Vec<_>>(),
                "{sub}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sending_to_an_address_without_queues_drops_and_counts() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client
        .create_address("nobody", RoutingType::Multicast)
        .await
        .unwrap();
    let response = client
        .send_batch(vec![
            OutgoingMessage::new("nobody", "x"),
            OutgoingMessage::new("nobody", "y"),
        ])
        .await
        .unwrap();
    assert_eq!(response.unrouted, 2);
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn competing_consumers_share_a_queue_without_duplicates() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        let mut a = client.consume("jobs", 5).await.unwrap();
        let mut b = client.consume("jobs", 5).await.unwrap();
        send_bodies(&client, "jobs", (0..40).map(|i| i.to_string())).await;
        let mut seen = Vec::new();
        let (mut from_a, mut from_b) = (0, 0);
        while seen.len() < 40 {
            tokio::select! {
                d = a.next_timeout(IDLE) => {
                    let d = d.unwrap().expect("a delivery");
                    a.ack(&[d.id]).await.unwrap();
                    from_a += 1;
                    seen.push(body(&d));
                }
                d = b.next_timeout(IDLE) => {
                    let d = d.unwrap().expect("a delivery");
                    b.ack(&[d.id]).await.unwrap();
                    from_b += 1;
                    seen.push(body(&d));
                }
            }
        }
        seen.sort_by_key(|s| s.parse::<u32>().unwrap());
        assert_eq!(seen, (0..40).map(|i| i.to_string()).collect::<Vec<_>>());
        assert!(
            from_a > 0 && from_b > 0,
            "both consumers got work: {from_a}/{from_b}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn credit_bounds_unsettled_deliveries() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    send_bodies(&client, "credit", (0..10).map(|i| i.to_string())).await;
    let mut c = client.consume("credit", 3).await.unwrap();
    let got = receive(&mut c, 10, QUIET).await;
    assert_eq!(got.len(), 3, "never more than the credit outstanding");
    assert_eq!(client.queue("credit").await.unwrap().delivering, 3);
    c.ack(&[got[0].id]).await.unwrap();
    let more = receive(&mut c, 10, QUIET).await;
    assert_eq!(more.len(), 1, "one settled, one more delivered");
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn ack_removes_the_message_for_good() {
        let mut broker = Broker::start().await;
        let client = broker.client().await;
        send_bodies(&client, "acks", ["one".to_string(), "two".to_string()]).await;
        let mut c = client.consume("acks", 10).await.unwrap();
        let got = receive(&mut c, 2, IDLE).await;
        c.ack(&[got[0].id, got[1].id]).await.unwrap();
        assert!(c.flush().await.unwrap().is_empty());
        let info = client.queue("acks").await.unwrap();
        assert_eq!((info.messages, info.acked), (0, 2));
        drop(c);
        broker.kill9();
        broker.restart().await;
        let client = broker.client().await;
        assert_eq!(
            client.queue("acks").await.unwrap().messages,
            0,
            "acked messages stay gone"
        );
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn nack_and_disconnect_return_the_message_counted() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        send_bodies(&client, "flaky", ["m".to_string()]).await;

        let mut c = client.consume("flaky", 1).await.unwrap();
        let first = c.next_timeout(IDLE).await.unwrap().unwrap();
        assert_eq!((first.delivery_count, first.redelivered), (1, false));
        c.nack(&[first.id], "try again").await.unwrap();
        let second = c.next_timeout(IDLE).await.unwrap().unwrap();
        assert_eq!((second.delivery_count, second.redelivered), (2, true));

        // The consumer's connection goes away without settling.
        drop(c);
        drop(client);
        let other = broker.client().await;
        let mut c = other.consume("flaky", 1).await.unwrap();
        let third = c.next_timeout(IDLE).await.unwrap().unwrap();
        assert_eq!((third.delivery_count, third.redelivered), (3, true));
        assert_eq!(body(&third), "m");
        assert!(other.queue("flaky").await.unwrap().redelivered >= 2);
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn durable_messages_survive_kill9_and_non_durable_ones_do_not() {
        let mut broker = Broker::start().await;
        let client = broker.client().await;
        client
            .send_batch(vec![
                OutgoingMessage::new("keep", "durable-1"),
                OutgoingMessage::new("keep", "transient").durable(false),
                OutgoingMessage::new("keep", "durable-2").property("n", 7i64),
            ])
            .await
            .unwrap();
        broker.kill9();
        broker.restart().await;
        let client = broker.client().await;
        let mut c = client.consume("keep", 10).await.unwrap();
        let got = receive(&mut c, 3, QUIET).await;
        let bodies: Vec<String> = got.iter().map(body).collect();
        assert_eq!(bodies, vec!["durable-1", "durable-2"]);
        assert!(got.iter().all(|d| d.message.durable && d.delivery_count == 1));
        assert!(got[1].message.properties.contains_key("n"));
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn browse_does_not_consume_and_purge_empties() {
        let broker = Broker::start().await;
        let client = broker.client().await;
        send_bodies(&client, "look", (0..5).map(|i| i.to_string())).await;
        let browsed = client.browse("look", 3).await.unwrap();
        assert_eq!(browsed.len(), 3);
        assert!(browsed.iter().all(|b| b.delivery_count == 0));
        assert_eq!(client.queue("look").await.unwrap().messages, 5);
        assert_eq!(client.purge("look").await.unwrap(), 5);
        assert_eq!(client.queue("look").await.unwrap().messages, 0);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_a_clear_error_and_loses_nothing() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
max-message-size = 1000
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "safe", ["kept".to_string()]).await;

    let err = client.queue("nope").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound));
    assert!(err.to_string().contains("nope"), "{err}");

    let err = client.send(OutgoingMessage::new("", "x")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));

    let err = client
        .send(OutgoingMessage::new("safe", "x").property("", 1i64))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));

    let err = client
        .send(OutgoingMessage::new("safe", "x").property("_AMQ_ORIG_QUEUE", "forged"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));

    let err = client
        .send(OutgoingMessage::new("safe", vec![0u8; 5000]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));
    assert!(err.to_string().contains("1000"), "the limit is named: {err}");

    // A batch with one bad message is refused whole.
    let err = client
        .send_batch(vec![
            OutgoingMessage::new("safe", "ok"),
            OutgoingMessage::new("bad name", "x"),
        ])
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument));

    let err = client
        .create_queue("safe", "safe", RoutingType::Anycast, true)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(Code::AlreadyExists));

    let info = client.queue("safe").await.unwrap();
    assert_eq!(info.messages, 1, "nothing was lost or added");
    let mut c = client.consume("safe", 10).await.unwrap();
    let got = receive(&mut c, 2, QUIET).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), vec!["kept"]);
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn sigterm_shuts_down_cleanly_and_keeps_messages() {
        let mut broker = Broker::start().await;
        let client = broker.client().await;
        send_bodies(&client, "stop", ["a".to_string()]).await;
        let mut c = client.consume("stop", 10).await.unwrap();
        let d = c.next_timeout(IDLE).await.unwrap().unwrap();
        assert_eq!(d.delivery_count, 1);
        let status = broker.terminate().await;
        assert!(status.success(), "exit status {status:?}");
        broker.restart().await;
        let client = broker.client().await;
        let mut c = client.consume("stop", 10).await.unwrap();
        let again = c.next_timeout(IDLE).await.unwrap().unwrap();
        assert_eq!(body(&again), "a");
    }
}
