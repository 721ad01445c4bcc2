//! Paging on the real broker: queues forced to page with a tiny
//! `max-read-page-messages` keep their order, priorities within the head,
//! consumer selectors, redelivery counts and dead-lettering; management
//! operations and the figures cover the paged messages; a restart with a paged
//! backlog keeps everything; a deep queue is deleted a chunk at a time; what
//! `max-size-bytes` paged reaches a consumer with credit before it acks.
use std::collections::HashSet;
use std::time::Duration;

use rebound_client::{Client, Consumer, OutgoingMessage, RoutingType, Selection};

use crate::messaging::body;
use crate::support::{Broker, cli, sample};

/// Every queue keeps at most 10 messages in memory.
const PAGING: &str = r##"
[[address-settings]]
match = "#"
max-read-page-messages = 10
max-delivery-attempts = 2
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

const IDLE: Duration = Duration::from_secs(10);

async fn paging_broker() -> (Broker, Client) {
    let broker = Broker::start_with_config(PAGING).await;
    let client = broker.client().await;
    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    (broker, client)
}

async fn send_numbered(client: &Client, range: std::ops::Range<u64>) {
    let all: Vec<u64> = range.collect();
    for chunk in all.chunks(97) {
        let batch = chunk
            .iter()
            .map(|n| {
                OutgoingMessage::new("orders", format!("m{n}"))
                    .property("n", *n as i64)
                    .property("kind", if n % 2 == 0 { "even" } else { "odd" })
            })
            .collect();
        client.send_batch(batch).await.expect("send");
    }
}

/// Receives and acks `n` messages; their bodies in delivery order.
async fn drain(consumer: &mut Consumer, n: usize) -> Vec<String> {
    let mut bodies = Vec::new();
    while bodies.len() < n {
        let d = consumer
            .next_timeout(IDLE)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{} of {n} messages", bodies.len()));
        bodies.push(body(&d));
        consumer.ack(&[d.id]).await.unwrap();
    }
    consumer.flush().await.unwrap();
    bodies
}

fn numbered(range: std::ops::Range<u64>) -> Vec<String> {
    range.map(|n| format!("m{n}")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn thousands_of_paged_messages_arrive_once_in_order_and_the_figures_show_them() {
    let (broker, client) = paging_broker().await;
    send_numbered(&client, 0..3000).await;
    let info = client.queue("orders").await.unwrap();
    assert_eq!(info.messages, 3000);
    assert_eq!(info.paged_messages, 2990, "all but the head");
    assert!(info.paged_bytes > 0 && info.paged_bytes < info.bytes);
    let stat = cli(&broker, ["queue", "stat", "--queue", "orders", "--json"]).await;
    let json = &stat.success().json_lines()[0];
    assert_eq!(json["paged_messages"], 2990);
    assert_eq!(json["counting"], false);
    let metrics = broker.scrape().await;
    let labels = [("queue", "orders")];
    assert_eq!(
        sample(&metrics, "rebound_queue_paged_messages", &labels),
        Some(2990.0)
    );
    assert!(sample(&metrics, "rebound_queue_paged_bytes", &labels).unwrap() > 0.0);

    let mut consumer = client.consume("orders", 50).await.unwrap();
    assert_eq!(drain(&mut consumer, 3000).await, numbered(0..3000));
    assert!(
        consumer
            .next_timeout(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.messages, info.paged_messages, info.bytes), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn priorities_act_within_the_head_and_selectors_reach_paged_messages() {
    let (_broker, client) = paging_broker().await;
    // The head holds 10: the urgent message among them overtakes the rest; the
    // one deep in the paged part waits for the head to reach it.
    let batch = (0..30)
        .map(|n| {
            let m = OutgoingMessage::new("orders", format!("m{n}"));
            if n == 5 || n == 25 { m.priority(9) } else { m }
        })
        .collect();
    client.send_batch(batch).await.unwrap();
    let mut consumer = client.consume("orders", 1).await.unwrap();
    let got = drain(&mut consumer, 30).await;
    assert_eq!(got[0], "m5", "the urgent message in the head goes first");
    let paged_urgent = got.iter().position(|b| b == "m25").unwrap();
    assert!(paged_urgent > 10, "the paged urgent one waits: {got:?}");
    consumer.close().await.unwrap();

    // Two selector consumers share a paged queue: each gets exactly its own, in order.
    send_numbered(&client, 0..400).await;
    let mut even = client
        .consumer("orders")
        .window(20)
        .filter("kind = 'even'")
        .open()
        .await
        .unwrap();
    let mut odd = client
        .consumer("orders")
        .window(20)
        .filter("kind = 'odd'")
        .open()
        .await
        .unwrap();
    let (evens, odds) = tokio::join!(drain(&mut even, 200), drain(&mut odd, 200));
    assert_eq!(
        evens,
        (0..400).step_by(2).map(|n| format!("m{n}")).collect::<Vec<_>>()
    );
    assert_eq!(
        odds,
        (1..400).step_by(2).map(|n| format!("m{n}")).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn paged_messages_are_redelivered_with_their_counts_and_dead_lettered() {
    let (_broker, client) = paging_broker().await;
    send_numbered(&client, 0..60).await;
    let mut consumer = client.consume("orders", 20).await.unwrap();
    let mut seen = std::collections::HashMap::<String, u32>::new();
    while seen.values().filter(|&&c| c == 2).count() < 60 {
        let d = consumer.next_timeout(IDLE).await.unwrap().expect("a delivery");
        let count = seen.entry(body(&d)).or_default();
        *count += 1;
        assert_eq!(d.delivery_count, *count, "{}", body(&d));
        consumer.nack(&[d.id], "no").await.unwrap();
    }
    consumer.close().await.unwrap();
    let deadline = std::time::Instant::now() + IDLE;
    while client.queue("DLQ").await.unwrap().messages < 60 {
        assert!(std::time::Instant::now() < deadline, "dead letters arrive");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(client.queue("orders").await.unwrap().messages, 0);
    // The DLQ pages too; retrying all of it brings each back once.
    assert!(client.queue("DLQ").await.unwrap().paged_messages > 0);
    let retried = client
        .retry_messages(&Selection::new("DLQ"), false, 0)
        .await
        .unwrap();
    assert_eq!((retried.moved, retried.skipped), (60, 0));
    let mut consumer = client.consume("orders", 20).await.unwrap();
    let mut back: Vec<String> = drain(&mut consumer, 60).await;
    back.sort_by_key(|b| b[1..].parse::<u64>().unwrap());
    assert_eq!(back, numbered(0..60));
}

#[tokio::test(flavor = "multi_thread")]
async fn management_operations_cover_paged_messages() {
    let (_broker, client) = paging_broker().await;
    send_numbered(&client, 0..500).await;
    let browsed = client.browse("orders", 1000).await.unwrap();
    assert_eq!(browsed.len(), 500);
    assert_eq!(
        browsed
            .iter()
            .map(|b| String::from_utf8_lossy(&b.message.body).into_owned())
            .collect::<Vec<_>>(),
        numbered(0..500)
    );
    let deep = browsed[450].message.message_id;
    let one = client
        .count_messages(&Selection::new("orders").message_id(deep))
        .await
        .unwrap();
    assert_eq!(one, 1);
    let select = |filter: &str| Selection::new("orders").filter(filter);
    assert_eq!(client.count_messages(&select("n >= 400")).await.unwrap(), 100);
    assert_eq!(client.remove_messages(&select("n >= 450")).await.unwrap(), 50);
    assert_eq!(
        client
            .move_messages(&select("n >= 400"), "elsewhere")
            .await
            .unwrap(),
        50
    );
    let info = client.queue("orders").await.unwrap();
    assert_eq!(info.messages, 400);
    assert_eq!(client.purge("orders").await.unwrap(), 400);
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.messages, info.paged_messages, info.bytes), (0, 0, 0));
    let mut consumer = client.consume("elsewhere", 10).await.unwrap();
    assert_eq!(drain(&mut consumer, 50).await, numbered(400..450));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_with_a_paged_backlog_keeps_everything() {
    let (mut broker, client) = paging_broker().await;
    // More than the head a restart reads, so the rest is counted after it.
    send_numbered(&client, 0..12_000).await;
    drop(client);
    broker.restart().await;
    let client = broker.client().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let info = client.queue("orders").await.unwrap();
        if !info.counting {
            assert_eq!(info.messages, 12_000);
            break;
        }
        assert!(info.messages <= 12_000);
        assert!(std::time::Instant::now() < deadline, "still counting");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut consumer = client.consume("orders", 200).await.unwrap();
    let got = drain(&mut consumer, 12_000).await;
    let unique: HashSet<&String> = got.iter().collect();
    assert_eq!(unique.len(), 12_000);
    assert_eq!(got, numbered(0..12_000));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deep_queue_is_deleted_a_chunk_at_a_time_and_stays_deleted() {
    let (mut broker, client) = paging_broker().await;
    // Two and a half of the embedded store's 10,000-message chunks.
    send_numbered(&client, 0..25_000).await;
    // Some out to a consumer when the queue goes.
    let mut consumer = client.consume("orders", 5).await.unwrap();
    consumer.next_timeout(IDLE).await.unwrap().expect("a delivery");
    let before = client.server_info().await.unwrap().store_commits;
    client.delete_queue("orders").await.unwrap();
    let commits = client.server_info().await.unwrap().store_commits - before;
    assert!(
        commits >= 4,
        "three chunks and the queue itself, in {commits} commits"
    );
    assert!(client.queue("orders").await.is_err());

    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    drop((consumer, client));
    broker.restart().await;
    let client = broker.client().await;
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.messages, info.paged_messages), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn forcing_the_deletion_of_an_address_deletes_its_deep_queue_a_chunk_at_a_time() {
    let (_broker, client) = paging_broker().await;
    send_numbered(&client, 0..25_000).await;
    let before = client.server_info().await.unwrap().store_commits;
    client.delete_address("orders", true).await.unwrap();
    let commits = client.server_info().await.unwrap().store_commits - before;
    assert!(
        commits >= 4,
        "three chunks and the queue itself, in {commits} commits"
    );
    assert!(client.queue("orders").await.is_err());
    assert!(client.address("orders").await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_with_credit_gets_what_max_size_bytes_paged_before_it_acks() {
    // The default policy, PAGE: past 5000 bytes the messages go to disk.
    let broker =
        Broker::start_with_config("[[address-settings]]\nmatch = \"#\"\nmax-size-bytes = 5000\n").await;
    let client = broker.client().await;
    for n in 0..20 {
        let body = format!("m{n}-{}", "x".repeat(1024));
        client.send(OutgoingMessage::new("orders", body)).await.unwrap();
    }
    let info = client.queue("orders").await.unwrap();
    assert_eq!(info.messages, 20);
    assert!(info.paged_messages >= 15, "{info:?}");
    // A consumer that takes all 20 before it acks (a batch, a transaction).
    let mut consumer = client.consume_manual_credit("orders", 20).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 20 {
        let d = consumer
            .next_timeout(IDLE)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("only {} of 20 arrived without an ack", got.len()));
        got.push(d);
    }
    let bodies: Vec<String> = got
        .iter()
        .map(|d| body(d).split('-').next().unwrap().to_owned())
        .collect();
    assert_eq!(bodies, numbered(0..20));
    let ids: Vec<u64> = got.iter().map(|d| d.id).collect();
    consumer.ack(&ids).await.unwrap();
    consumer.flush().await.unwrap();
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.messages, info.paged_messages, info.bytes), (0, 0, 0));
}
