//! Redelivery and dead-lettering with Artemis semantics, each from a config file:
//! attempts, delays, non-blocking waits, multicast DLQ copies, retry-after and
//! dead-letter nacks, persisted delivery counts, restarts, expiry, settings merging.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rebound_client::{Client, Consumer, Delivery, OutgoingMessage, proto};

use crate::messaging::{body, receive, send_bodies};
use crate::support::Broker;

const IDLE: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(400);

fn prop<'a>(d: &'a Delivery, key: &str) -> Option<&'a proto::property_value::Value> {
    d.message.properties.get(key).and_then(|p| p.value.as_ref())
}

pub fn text(d: &Delivery, key: &str) -> String {
    match prop(d, key) {
        Some(proto::property_value::Value::String(s)) => s.clone(),
        other => panic!("{key}: expected a string, got {other:?}"),
    }
}

pub fn int(d: &Delivery, key: &str) -> i64 {
    match prop(d, key) {
        Some(proto::property_value::Value::Int(i)) => *i,
        other => panic!("{key}: expected an int, got {other:?}"),
    }
}

pub async fn next(c: &mut Consumer) -> Delivery {
    c.next_timeout(IDLE)
        .await
        .expect("consume")
        .expect("a delivery in time")
}

async fn settings(client: &Client, address: &str) -> BTreeMap<String, (String, String)> {
    client
        .settings(address)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.key, (s.value, s.source)))
        .collect()
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn poison_message_is_delivered_max_attempts_times_then_dead_lettered() {
        let broker = Broker::start_with_config(
            r##"
    [[address-settings]]
    match = "#"
    max-delivery-attempts = 3
    dead-letter-address = "DLQ"

    [[addresses]]
    name = "DLQ"
    [[addresses.queues]]
    name = "DLQ"
    "##,
        )
        .await;
        let client = broker.client().await;
        let sent = client
            .send(OutgoingMessage::new("orders", "poison").property("customer", "acme"))
            .await
            .unwrap();
        let mut c = client.consume("orders", 1).await.unwrap();
        for attempt in 1..=3 {
            let d = next(&mut c).await;
            assert_eq!(d.delivery_count, attempt);
            assert_eq!(d.redelivered, attempt > 1);
            c.nack(&[d.id], &format!("boom {attempt}")).await.unwrap();
        }
        assert!(receive(&mut c, 1, QUIET).await.is_empty(), "no 4th delivery");

        let mut dlq = client.consume("DLQ", 1).await.unwrap();
        let dead = next(&mut dlq).await;
        assert_eq!(body(&dead), "poison");
        assert_ne!(dead.message.message_id, sent, "the dead letter is a new message");
        assert_eq!(dead.delivery_count, 1);
        assert_eq!(text(&dead, "customer"), "acme", "user properties unchanged");
        assert_eq!(text(&dead, "_AMQ_ORIG_ADDRESS"), "orders");
        assert_eq!(text(&dead, "_AMQ_ORIG_QUEUE"), "orders");
        assert_eq!(int(&dead, "_AMQ_ORIG_MESSAGE_ID"), sent as i64);
        assert_eq!(text(&dead, "_AMQ_ORIG_ROUTING_TYPE"), "anycast");
        assert_eq!(
            text(&dead, "_REBOUND_DEAD_LETTER_REASON"),
            "max-delivery-attempts"
        );
        assert_eq!(int(&dead, "_REBOUND_DELIVERY_COUNT"), 3);
        let failures: serde_json::Value = serde_json::from_str(&text(&dead, "_REBOUND_FAILURES")).unwrap();
        let reasons: Vec<&str> = failures
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["reason"].as_str().unwrap())
            .collect();
        assert_eq!(reasons, vec!["boom 1", "boom 2", "boom 3"]);
        let info = client.queue("orders").await.unwrap();
        assert_eq!((info.messages, info.dead_lettered), (0, 1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn redelivery_delays_grow_geometrically_and_are_capped() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "slow"
redelivery-delay = 200
redelivery-delay-multiplier = 2.0
max-redelivery-delay = 1000
max-delivery-attempts = -1
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "slow", ["x".to_string()]).await;
    let mut c = client.consume("slow", 1).await.unwrap();
    let mut last = Instant::now();
    let mut gaps = Vec::new();
    for _ in 0..6 {
        let d = next(&mut c).await;
        let now = Instant::now();
        gaps.push(now - last);
        last = now;
        c.nack(&[d.id], "later").await.unwrap();
    }
    let gaps: Vec<u128> = gaps[1..].iter().map(|g| g.as_millis()).collect();
    for (gap, expected) in gaps.iter().zip([200u128, 400, 800, 1000, 1000]) {
        assert!(
            *gap >= expected - 20,
            "gap {gap} ms should be about {expected}: {gaps:?}"
        );
        assert!(
            *gap < expected + 600,
            "gap {gap} ms should be about {expected}: {gaps:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_waiting_poison_message_blocks_nothing_and_holds_no_credit() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "work"
redelivery-delay = 2000
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "work", (0..10).map(|i| format!("poison-{i}"))).await;
    let mut c = client.consume("work", 10).await.unwrap();
    for d in receive(&mut c, 10, IDLE).await {
        c.nack(&[d.id], "poison").await.unwrap();
    }
    c.flush().await.unwrap();
    assert_eq!(client.queue("work").await.unwrap().scheduled, 10);
    send_bodies(&client, "work", (0..100).map(|i| format!("good-{i}"))).await;
    let started = Instant::now();
    let mut good = 0;
    while good < 100 {
        let d = next(&mut c).await;
        assert!(
            body(&d).starts_with("good-"),
            "poison came back before the good ones: {}",
            body(&d)
        );
        c.ack(&[d.id]).await.unwrap();
        good += 1;
    }
    assert!(
        started.elapsed() < Duration::from_millis(1900),
        "good messages flowed meanwhile"
    );
    let back = receive(&mut c, 10, IDLE).await;
    assert_eq!(back.len(), 10);
    assert!(
        back.iter()
            .all(|d| body(d).starts_with("poison-") && d.delivery_count == 2)
    );
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn a_message_failing_on_two_subscriptions_is_dead_lettered_twice() {
        let broker = Broker::start_with_config(
            r##"
    [[address-settings]]
    match = "#"
    max-delivery-attempts = 1
    dead-letter-address = "DLQ"

    [[addresses]]
    name = "DLQ"
    [[addresses.queues]]
    name = "DLQ"

    [[addresses]]
    name = "events"
    routing-type = "multicast"
    [[addresses.queues]]
    name = "billing"
    [[addresses.queues]]
    name = "audit"
    "##,
        )
        .await;
        let client = broker.client().await;
        send_bodies(&client, "events", ["evt".to_string()]).await;
        for sub in ["billing", "audit"] {
            let mut c = client.consume(sub, 1).await.unwrap();
            let d = next(&mut c).await;
            c.nack(&[d.id], "fails everywhere").await.unwrap();
            c.flush().await.unwrap();
        }
        let mut dlq = client.consume("DLQ", 10).await.unwrap();
        let dead = receive(&mut dlq, 3, IDLE).await;
        let mut queues: Vec<String> = dead.iter().map(|d| text(d, "_AMQ_ORIG_QUEUE")).collect();
        queues.sort();
        assert_eq!(queues, vec!["audit", "billing"]);
        assert!(dead.iter().all(|d| text(d, "_AMQ_ORIG_ADDRESS") == "events"));
        assert!(
            dead.iter()
                .all(|d| text(d, "_AMQ_ORIG_ROUTING_TYPE") == "multicast")
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unlimited_attempts_keep_redelivering_and_no_dla_drops_with_a_warning() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "forever"
max-delivery-attempts = -1

[[address-settings]]
match = "twice"
max-delivery-attempts = 2
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "forever", ["f".to_string()]).await;
    let mut c = client.consume("forever", 1).await.unwrap();
    for attempt in 1..=15 {
        let d = next(&mut c).await;
        assert_eq!(d.delivery_count, attempt);
        c.nack(&[d.id], "again").await.unwrap();
    }
    let sent = client.send(OutgoingMessage::new("twice", "t")).await.unwrap();
    let mut c = client.consume("twice", 1).await.unwrap();
    for _ in 0..2 {
        let d = next(&mut c).await;
        c.nack(&[d.id], "no").await.unwrap();
    }
    c.flush().await.unwrap();
    let line = broker.wait_for_log("dropping message").await;
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains(&sent.to_string()) && line.contains("twice"),
        "{line}"
    );
    let info = client.queue("twice").await.unwrap();
    assert_eq!((info.messages, info.dropped), (0, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn retry_after_and_dead_letter_nacks() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-redelivery-delay = 5000

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "api", ["later".to_string(), "never".to_string()]).await;
    let mut c = client.consume("api", 2).await.unwrap();
    let got = receive(&mut c, 2, IDLE).await;
    let nacked_at = Instant::now();
    c.nack_after(&[got[0].id], "service unavailable", Duration::from_millis(800))
        .await
        .unwrap();
    c.dead_letter(&[got[1].id], "invalid payload").await.unwrap();
    c.flush().await.unwrap();

    let back = next(&mut c).await;
    assert_eq!(body(&back), "later");
    assert_eq!(back.delivery_count, 2, "retry-after still counts as an attempt");
    assert!(
        nacked_at.elapsed() >= Duration::from_millis(780),
        "{:?}",
        nacked_at.elapsed()
    );

    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let dead = next(&mut dlq).await;
    assert_eq!(body(&dead), "never");
    assert_eq!(
        text(&dead, "_REBOUND_DEAD_LETTER_REASON"),
        "rejected: invalid payload"
    );
    assert_eq!(int(&dead, "_REBOUND_DELIVERY_COUNT"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn release_returns_at_once_without_counting() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
redelivery-delay = 10000
max-delivery-attempts = 1
"##,
    )
    .await;
    let client = broker.client().await;
    send_bodies(&client, "shutdown", ["m".to_string()]).await;
    let mut c = client.consume("shutdown", 1).await.unwrap();
    let d = next(&mut c).await;
    c.release(&[d.id]).await.unwrap();
    let again = next(&mut c).await;
    assert_eq!((again.delivery_count, again.redelivered), (1, false));
}

async fn crash_mid_delivery(persist: bool) -> Delivery {
    let mut broker =
        Broker::start_with_config(&format!("persist-delivery-count-before-delivery = {persist}\n")).await;
    let client = broker.client().await;
    send_bodies(&client, "inflight", ["m".to_string()]).await;
    let mut c = client.consume("inflight", 1).await.unwrap();
    let first = next(&mut c).await;
    assert_eq!(first.delivery_count, 1);
    broker.kill9();
    drop(c);
    broker.restart().await;
    let client = broker.client().await;
    let mut c = client.consume("inflight", 1).await.unwrap();
    next(&mut c).await
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn persisted_delivery_count_survives_kill9_mid_delivery() {
        let d = crash_mid_delivery(true).await;
        assert_eq!((d.delivery_count, d.redelivered), (2, true));
        // Without it (the default, as in Artemis), an in-flight first delivery comes back
        // looking like a first delivery.
        let d = crash_mid_delivery(false).await;
        assert_eq!((d.delivery_count, d.redelivered), (1, false));
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn a_scheduled_redelivery_survives_a_restart() {
        let mut broker = Broker::start_with_config(
            r##"
    [[address-settings]]
    match = "#"
    redelivery-delay = 3000
    "##,
        )
        .await;
        let client = broker.client().await;
        send_bodies(&client, "sched", ["m".to_string()]).await;
        let mut c = client.consume("sched", 1).await.unwrap();
        let d = next(&mut c).await;
        let nacked = Instant::now();
        c.nack(&[d.id], "later").await.unwrap();
        c.flush().await.unwrap();
        drop(c);
        broker.kill9();
        broker.restart().await;
        let client = broker.client().await;
        assert_eq!(client.queue("sched").await.unwrap().scheduled, 1);
        let mut c = client.consume("sched", 1).await.unwrap();
        let back = next(&mut c).await;
        assert!(
            nacked.elapsed() >= Duration::from_millis(2900),
            "{:?}",
            nacked.elapsed()
        );
        assert_eq!((back.delivery_count, back.redelivered), (2, true));
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn expired_messages_move_to_the_expiry_address() {
        let broker = Broker::start_with_config(
            r##"
    [[address-settings]]
    match = "#"
    expiry-address = "ExpiryQueue"

    [[address-settings]]
    match = "short.#"
    expiry-delay = 300

    [[addresses]]
    name = "ExpiryQueue"
    [[addresses.queues]]
    name = "ExpiryQueue"
    "##,
        )
        .await;
        let client = broker.client().await;
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        client
            .send(OutgoingMessage::new("orders", "stale").expiration_ms(now_ms + 300))
            .await
            .unwrap();
        client
            .send(OutgoingMessage::new("short.lived", "by-delay"))
            .await
            .unwrap();
        client
            .send(OutgoingMessage::new("orders", "fresh"))
            .await
            .unwrap();
        let mut exp = client.consume("ExpiryQueue", 10).await.unwrap();
        let expired = receive(&mut exp, 2, IDLE).await;
        let mut bodies: Vec<String> = expired.iter().map(body).collect();
        bodies.sort();
        assert_eq!(bodies, vec!["by-delay", "stale"]);
        for d in &expired {
            assert_eq!(text(d, "_REBOUND_DEAD_LETTER_REASON"), "expired");
            assert!(int(d, "_AMQ_ACTUAL_EXPIRY") > 0);
            assert_eq!(d.message.expiration_ms, 0, "the copy does not expire");
        }
        let info = client.queue("orders").await.unwrap();
        assert_eq!((info.messages, info.expired), (1, 1));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_settings_apply_and_more_specific_ones_override_only_their_keys() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 10
redelivery-delay = 0

[[address-settings]]
match = "orders.#"
max-delivery-attempts = 2

[[address-settings]]
match = "orders.eu"
redelivery-delay = 100

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##,
    )
    .await;
    let client = broker.client().await;
    let eu = settings(&client, "orders.eu").await;
    assert_eq!(
        eu["max-delivery-attempts"],
        ("2".into(), "match \"orders.#\"".into())
    );
    assert_eq!(eu["redelivery-delay"].0, "100");
    assert_eq!(
        eu["dead-letter-address"],
        ("\"DLQ\"".into(), "match \"#\"".into())
    );
    assert_eq!(
        eu["max-redelivery-delay"].0, "1000",
        "derived from the merged delay"
    );
    let other = settings(&client, "billing").await;
    assert_eq!(other["max-delivery-attempts"].0, "10");

    send_bodies(&client, "orders.eu", ["x".to_string()]).await;
    let mut c = client.consume("orders.eu", 1).await.unwrap();
    let first = next(&mut c).await;
    c.nack(&[first.id], "1").await.unwrap();
    let started = Instant::now();
    let second = next(&mut c).await;
    assert!(
        started.elapsed() >= Duration::from_millis(90),
        "orders.eu's own delay applies"
    );
    assert_eq!(second.delivery_count, 2);
    c.nack(&[second.id], "2").await.unwrap();
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let dead = next(&mut dlq).await;
    assert_eq!(text(&dead, "_AMQ_ORIG_QUEUE"), "orders.eu");
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_created_dead_letter_queue_holds_only_its_address() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLA"
auto-create-dead-letter-resources = true
max-delivery-attempts = 1
"##,
    )
    .await;
    let client = broker.client().await;
    for address in ["orders", "payments"] {
        send_bodies(&client, address, [address.to_string()]).await;
        let mut c = client.consume(address, 1).await.unwrap();
        let d = next(&mut c).await;
        c.nack(&[d.id], "x").await.unwrap();
        c.flush().await.unwrap();
    }
    for address in ["orders", "payments"] {
        let queue = format!("DLQ.{address}");
        let info = client.queue(&queue).await.unwrap();
        assert_eq!((info.address.as_str(), info.messages), ("DLA", 1), "{queue}");
        let mut c = client.consume(&queue, 1).await.unwrap();
        assert_eq!(body(&next(&mut c).await), address);
    }
}

/// On the embedded default config no broker-side delay is configured; a consumer's
/// own "retry in 1.5 s" must still be honoured (it used to be clamped to the
/// derived max-redelivery-delay of 0 and redelivered at once).
#[tokio::test(flavor = "multi_thread")]
async fn retry_after_is_kept_on_the_default_config() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    send_bodies(&client, "later", ["m".to_string()]).await;
    let mut c = client.consume("later", 1).await.unwrap();
    let got = receive(&mut c, 1, IDLE).await;
    let nacked_at = Instant::now();
    c.nack_after(&[got[0].id], "dependency down", Duration::from_millis(1500))
        .await
        .unwrap();
    c.flush().await.unwrap();
    let back = next(&mut c).await;
    assert_eq!(back.delivery_count, 2);
    assert!(
        nacked_at.elapsed() >= Duration::from_millis(1400),
        "back after {:?}",
        nacked_at.elapsed()
    );
}
