//! Outage mode from a config file: a consumer whose dependency is down for a while
//! makes the queue pause and probe instead of dead-lettering good messages; a poison
//! message among good ones is still dead-lettered; a nack can pause the queue.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::messaging::{body, receive, send_bodies};
use crate::support::{Broker, cli, sample};

const OUTAGE: &str = r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 3
dead-letter-address = "DLQ"
outage-threshold = 5
outage-pause = 200
outage-pause-multiplier = 2.0
max-outage-pause = 1000

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##;

#[tokio::test(flavor = "multi_thread")]
async fn an_outage_pauses_and_probes_and_dead_letters_nothing() {
    let broker = Broker::start_with_config(OUTAGE).await;
    let client = broker.client().await;
    send_bodies(&client, "orders", (0..50).map(|i| format!("m{i}"))).await;
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let started = Instant::now();
    let down_for = Duration::from_secs(3);
    let (mut during_outage, mut acked) = (0, BTreeSet::new());
    let mut seen_in_outage = None;
    while acked.len() < 50 {
        let d = consumer
            .next_timeout(Duration::from_secs(5))
            .await
            .unwrap()
            .expect("a delivery in time");
        if started.elapsed() < down_for {
            during_outage += 1;
            consumer.nack(&[d.id], "database down").await.unwrap();
            if seen_in_outage.is_none() && during_outage > 10 {
                let stat = cli(&broker, ["queue", "stat", "--queue", "orders", "--json"]).await;
                let gauge = sample(
                    &broker.scrape().await,
                    "rebound_queue_outage",
                    &[("queue", "orders")],
                );
                seen_in_outage = Some((stat.success().json_lines()[0].clone(), gauge));
            }
        } else {
            acked.insert(body(&d));
            consumer.ack(&[d.id]).await.unwrap();
        }
    }
    consumer.flush().await.unwrap();
    eprintln!("{during_outage} deliveries during the outage");
    // Without outage mode every message would be delivered 3 times within the 3 s.
    assert!(during_outage < 50, "{during_outage} deliveries during the outage");
    let (stat, gauge) = seen_in_outage.expect("the outage was seen");
    assert_eq!(stat["state"], "outage", "{stat}");
    assert!(stat["outage_since_ms"].as_u64().is_some(), "{stat}");
    assert_eq!(gauge, Some(1.0));
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.dead_lettered, info.messages, info.outage), (0, 0, false));
    assert_eq!(client.queue("DLQ").await.unwrap().messages, 0);
    let log = broker.log();
    assert_eq!(log.matches("queue entered outage mode").count(), 1, "{log}");
    assert_eq!(log.matches("queue left outage mode").count(), 1, "{log}");
    let stat = cli(&broker, ["queue", "stat", "--queue", "orders"]).await;
    assert!(stat.success().stdout.contains("state: normal"), "{}", stat.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_message_among_good_ones_is_still_dead_lettered() {
    let broker = Broker::start_with_config(OUTAGE).await;
    let client = broker.client().await;
    send_bodies(
        &client,
        "orders",
        ["poison".to_owned()]
            .into_iter()
            .chain((0..30).map(|i| format!("m{i}"))),
    )
    .await;
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let mut poison_deliveries = 0;
    while let Some(d) = consumer.next_timeout(Duration::from_millis(800)).await.unwrap() {
        if body(&d) == "poison" {
            poison_deliveries += 1;
            consumer.nack(&[d.id], "bad").await.unwrap();
        } else {
            consumer.ack(&[d.id]).await.unwrap();
        }
    }
    assert_eq!(poison_deliveries, 3);
    let info = client.queue("orders").await.unwrap();
    assert_eq!((info.dead_lettered, info.acked, info.outage), (1, 30, false));
    assert!(!broker.log().contains("queue entered outage mode"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nack_with_a_pause_pauses_the_queue_without_outage_settings() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    send_bodies(&client, "orders", ["a".to_owned(), "b".to_owned()]).await;
    let mut consumer = client.consume("orders", 10).await.unwrap();
    let got = receive(&mut consumer, 2, Duration::from_secs(5)).await;
    let ids: Vec<u64> = got.iter().map(|d| d.id).collect();
    let paused_at = Instant::now();
    consumer
        .nack_pausing_queue(&ids, "database down", Duration::from_millis(1500))
        .await
        .unwrap();
    consumer.flush().await.unwrap();
    assert!(client.queue("orders").await.unwrap().outage);
    let probe = receive(&mut consumer, 1, Duration::from_secs(5)).await;
    assert!(
        paused_at.elapsed() >= Duration::from_millis(1200),
        "{:?}",
        paused_at.elapsed()
    );
    assert_eq!(probe[0].delivery_count, 1, "the paused attempt did not count");
    assert!(
        receive(&mut consumer, 1, Duration::from_millis(300))
            .await
            .is_empty(),
        "one probe at a time"
    );
    consumer.ack(&[probe[0].id]).await.unwrap();
    let rest = receive(&mut consumer, 1, Duration::from_secs(5)).await;
    assert_eq!(rest.len(), 1);
}
