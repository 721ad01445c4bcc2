//! Message groups (`_AMQ_GROUP_ID`): one consumer at a time, in send order, and —
//! beyond Artemis — in order across failed deliveries and redelivery delays, while
//! other groups keep flowing; a dead-lettered message lets its group move on; a
//! group with no message left costs no memory, and group ids are bounded.
use std::time::{Duration, Instant};

use rebound_client::{Client, Code, Consumer, Delivery, OutgoingMessage};

use crate::messaging::body;
use crate::redelivery::{int, next, text};
use crate::support::{Broker, cli, sample};

const QUIET: Duration = Duration::from_millis(400);

const CONFIG: &str = r##"
[[address-settings]]
match = "#"
redelivery-delay = 300
max-delivery-attempts = 3
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##;

/// `count` messages in each group, interleaved: A-0, B-0, C-0, A-1, ...
fn interleaved(address: &str, groups: &[&str], count: usize) -> Vec<OutgoingMessage> {
    (0..count)
        .flat_map(|i| groups.iter().map(move |g| (g, i)))
        .map(|(g, i)| OutgoingMessage::new(address, format!("{g}-{i}")).group(*g))
        .collect()
}

fn seq(d: &Delivery) -> usize {
    body(d).split_once('-').unwrap().1.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_message_holds_its_group_and_only_its_group() {
    const N: usize = 6;
    let broker = Broker::start_with_config(CONFIG).await;
    let client = broker.client().await;
    client
        .send_batch(interleaved("orders", &["A", "B", "C"], N))
        .await
        .unwrap();
    let mut c = client.consume("orders", 20).await.unwrap();
    let mut processed: Vec<String> = Vec::new();
    let mut failed = Vec::new();
    let start = Instant::now();
    while processed.len() < 3 * N {
        let d = next(&mut c).await;
        let b = body(&d);
        if b.starts_with("A-") && seq(&d) > 1 {
            assert!(
                processed.contains(&"A-1".to_string()),
                "{b} delivered before A-1 succeeded: {processed:?}"
            );
        }
        // A-1 fails twice (each time waiting 300 ms for its redelivery), then succeeds.
        if b == "A-1" && failed.len() < 2 {
            failed.push(start.elapsed());
            c.nack(&[d.id], "downstream hiccup").await.unwrap();
            continue;
        }
        if b == "A-1" {
            assert_eq!(d.delivery_count, 3);
            assert!(start.elapsed() - failed[0] >= Duration::from_millis(550));
        }
        c.ack(&[d.id]).await.unwrap();
        processed.push(b);
    }
    for g in ["A", "B", "C"] {
        let order: Vec<&String> = processed.iter().filter(|b| b.starts_with(g)).collect();
        let sent: Vec<String> = (0..N).map(|i| format!("{g}-{i}")).collect();
        assert_eq!(order, sent.iter().collect::<Vec<_>>(), "group {g} in send order");
    }
    let a1 = processed.iter().position(|b| b == "A-1").unwrap();
    let last_other = processed.iter().rposition(|b| !b.starts_with('A')).unwrap();
    assert!(last_other < a1, "B and C finish while A waits: {processed:?}");
    assert!(next_quietly(&mut c).await.is_none());
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.messages, info.dead_lettered), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_sticks_to_its_consumer_and_moves_when_it_leaves() {
    let broker = Broker::start_with_config(CONFIG).await;
    let (client1, client2) = (broker.client().await, broker.client().await);
    let mut c1 = client1.consume("jobs", 10).await.unwrap();
    let mut c2 = client2.consume("jobs", 10).await.unwrap();
    let sender = broker.client().await;
    sender.send_batch(interleaved("jobs", &["g"], 6)).await.unwrap();
    let first = tokio::select! {
        d = c1.next_timeout(Duration::from_secs(5)) => (1, d.unwrap().unwrap()),
        d = c2.next_timeout(Duration::from_secs(5)) => (2, d.unwrap().unwrap()),
    };
    assert_eq!(body(&first.1), "g-0");
    let (owner, other) = match first.0 {
        1 => (&mut c1, &mut c2),
        _ => (&mut c2, &mut c1),
    };
    owner.ack(&[first.1.id]).await.unwrap();
    for i in 1..6 {
        let d = next(owner).await;
        assert_eq!(body(&d), format!("g-{i}"));
        owner.ack(&[d.id]).await.unwrap();
    }
    assert!(
        next_quietly(other).await.is_none(),
        "the group stuck to its consumer"
    );
    sender
        .send_batch(
            (6..9)
                .map(|i| OutgoingMessage::new("jobs", format!("g-{i}")).group("g"))
                .collect(),
        )
        .await
        .unwrap();
    let held = next(owner).await;
    assert_eq!(body(&held), "g-6");
    // The owner goes without settling g-6: it comes back first (a failed attempt,
    // after the redelivery delay), and the group moves to the other consumer.
    let (mut survivor, gone) = match first.0 {
        1 => (c2, (c1, client1)),
        _ => (c1, (c2, client2)),
    };
    drop(gone);
    for i in 6..9 {
        let d = next(&mut survivor).await;
        assert_eq!(body(&d), format!("g-{i}"));
        assert_eq!(d.delivery_count, if i == 6 { 2 } else { 1 });
        survivor.ack(&[d.id]).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_lettered_message_lets_its_group_move_on_and_says_which_it_held() {
    let broker = Broker::start_with_config(CONFIG).await;
    let client = broker.client().await;
    client
        .send_batch(interleaved("payments", &["p"], 4))
        .await
        .unwrap();
    let mut c = client.consume("payments", 10).await.unwrap();
    let start = Instant::now();
    for attempt in 1..=3 {
        let d = next(&mut c).await;
        assert_eq!((body(&d), d.delivery_count), ("p-0".to_string(), attempt));
        c.nack(&[d.id], "poison").await.unwrap();
    }
    for i in 1..4 {
        let d = next(&mut c).await;
        assert_eq!(body(&d), format!("p-{i}"));
        c.ack(&[d.id]).await.unwrap();
    }
    assert!(
        start.elapsed() >= Duration::from_millis(550),
        "held for both delays"
    );
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let dead = next(&mut dlq).await;
    assert_eq!(body(&dead), "p-0");
    assert_eq!(text(&dead, "_AMQ_GROUP_ID"), "p");
    assert_eq!(int(&dead, "_REBOUND_GROUP_HELD"), 3, "three waited behind it");
    assert_eq!(
        text(&dead, "_REBOUND_DEAD_LETTER_REASON"),
        "max-delivery-attempts"
    );
}

async fn next_quietly(c: &mut Consumer) -> Option<Delivery> {
    c.next_timeout(QUIET).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_sends_into_a_group() {
    let broker = Broker::start().await;
    cli(
        &broker,
        ["send", "--address", "cli-groups", "--group", "g7", "--body", "x"],
    )
    .await
    .success();
    let client = broker.client().await;
    let mut c = client.consume("cli-groups", 1).await.unwrap();
    assert_eq!(text(&next(&mut c).await, "_AMQ_GROUP_ID"), "g7");
}

/// The broker's resident memory (`VmRSS`), in bytes.
fn rss(broker: &Broker) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", broker.pid())).unwrap();
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).unwrap();
    let kib: u64 = line.trim().strip_suffix("kB").unwrap().trim().parse().unwrap();
    kib << 10
}

/// Sends one message in each of the groups `groups` (1 KB ids), then takes and
/// acks them all.
async fn one_per_group(client: &Client, consumer: &mut Consumer, groups: std::ops::Range<usize>) {
    let batch: Vec<OutgoingMessage> = groups
        .map(|n| {
            OutgoingMessage::new("orders", "o")
                .group(format!("{n:08}-{}", "x".repeat(1015)))
                .durable(false)
        })
        .collect();
    let count = batch.len();
    client.send_batch(batch).await.unwrap();
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        ids.push(next(consumer).await.id);
    }
    consumer.ack(&ids).await.unwrap();
    consumer.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_with_no_message_left_costs_no_memory() {
    const GROUPS: usize = 50_000;
    const BATCH: usize = 200;
    let broker = Broker::start().await;
    let client = broker.client().await;
    let mut consumer = client.consume("orders", BATCH as u32).await.unwrap();
    // A first round, so that the broker's pools are in use before the measure.
    for start in (0..2 * BATCH).step_by(BATCH) {
        one_per_group(&client, &mut consumer, start..start + BATCH).await;
    }
    let before = rss(&broker);
    let started = Instant::now();
    for start in (2 * BATCH..GROUPS).step_by(BATCH) {
        one_per_group(&client, &mut consumer, start..start + BATCH).await;
    }
    let grown = rss(&broker).saturating_sub(before);
    assert!(
        grown < 16 << 20,
        "{GROUPS} groups of 1 KB ids, each with no message left, grew the broker by {} MiB (in {:?})",
        grown >> 20,
        started.elapsed()
    );
    let metrics = broker.scrape().await;
    let labels = [("queue", "orders")];
    assert_eq!(sample(&metrics, "rebound_queue_groups", &labels), Some(0.0));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_id_longer_than_1024_bytes_is_refused_naming_the_limit() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    for property in ["_AMQ_GROUP_ID", "JMSXGroupID"] {
        let err = client
            .send(OutgoingMessage::new("orders", "o").property(property, "g".repeat(1025)))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
        assert!(err.to_string().contains("at most 1024 bytes"), "{err}");
    }
    client
        .send(OutgoingMessage::new("orders", "o").group("g".repeat(1024)))
        .await
        .unwrap();
}
