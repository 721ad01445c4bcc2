//! Dead letters that fail or move again, on the documented example config (every
//! address, the DLQ too, dead-letters to `DLQ` after 10 attempts): a dead letter
//! keeps where it first came from and its failures through every later move and
//! dead-lettering, so `queue retry` sends it back to the queue it first failed on;
//! and the DLQ, whose dead-letter address is its own, keeps a message that fails
//! there rather than dead-lettering it into itself.
use std::time::{Duration, Instant};

use rebound_client::{Client, Consumer, Delivery, OutgoingMessage};

use crate::messaging::body;
use crate::redelivery::{int, next, text};
use crate::support::{Broker, cli, root};

/// The example config of docs/configuration.md, with `extra` appended.
fn example_with(extra: &str) -> String {
    let example = std::fs::read_to_string(root().join("config/examples/rebound.toml")).unwrap();
    format!("{example}\n{extra}")
}

/// Sends `body` to `jobs` and fails it `attempts` times, the n-th failure's
/// reason `jobs n`; returns the id it was sent with.
async fn fail_on_jobs(client: &Client, body: &str, attempts: u32) -> u64 {
    let sent = client
        .send(OutgoingMessage::new("jobs", body.to_owned()))
        .await
        .unwrap();
    let mut jobs = client.consume("jobs", 1).await.unwrap();
    fail(&mut jobs, "jobs", attempts).await;
    jobs.close().await.unwrap();
    sent
}

/// Receives and nacks the next delivery `times` times, with reasons `what n`.
async fn fail(consumer: &mut Consumer, what: &str, times: u32) -> Delivery {
    let mut last = None;
    for n in 1..=times {
        let d = next(consumer).await;
        consumer.nack(&[d.id], &format!("{what} {n}")).await.unwrap();
        last = Some(d);
    }
    consumer.flush().await.unwrap();
    last.expect("at least one failure")
}

/// The reasons of a dead letter's `_REBOUND_FAILURES`, oldest first.
fn failure_reasons(d: &Delivery) -> Vec<String> {
    let failures: serde_json::Value = serde_json::from_str(&text(d, "_REBOUND_FAILURES")).unwrap();
    failures
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["reason"].as_str().unwrap().to_owned())
        .collect()
}

fn assert_from_jobs(d: &Delivery, sent: u64) {
    assert_eq!(text(d, "_AMQ_ORIG_ADDRESS"), "jobs");
    assert_eq!(text(d, "_AMQ_ORIG_QUEUE"), "jobs");
    assert_eq!(int(d, "_AMQ_ORIG_MESSAGE_ID"), sent as i64);
    assert_eq!(text(d, "_AMQ_ORIG_ROUTING_TYPE"), "anycast");
}

async fn retry_to_jobs(broker: &Broker, client: &Client, from: &str, body_was: &str) {
    let retried = cli(broker, ["queue", "retry", "--queue", from]).await;
    assert_eq!(
        retried.success().stdout,
        format!("moved 1 messages from {from}, skipped 0\n")
    );
    let mut jobs = client.consume("jobs", 1).await.unwrap();
    let d = next(&mut jobs).await;
    assert_eq!((body(&d).as_str(), d.delivery_count), (body_was, 1));
    jobs.ack(&[d.id]).await.unwrap();
    jobs.flush().await.unwrap();
    assert_eq!(client.queue("DLQ").await.unwrap().messages, 0);
    assert_eq!(client.queue(from).await.unwrap().messages, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_dead_lettered_again_keeps_its_first_origin_and_failures() {
    // The DLQ's own failures go on to a second address.
    let broker = Broker::start_with_config(&example_with(
        "[[address-settings]]\nmatch = \"DLQ\"\ndead-letter-address = \"graveyard\"\nmax-delivery-attempts = 3\n",
    ))
    .await;
    let client = broker.client().await;
    let sent = fail_on_jobs(&client, "poison", 10).await;
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    fail(&mut dlq, "dlq", 3).await;
    dlq.close().await.unwrap();

    let mut graveyard = client.consume("graveyard", 1).await.unwrap();
    let dead = next(&mut graveyard).await;
    graveyard.release(&[dead.id]).await.unwrap();
    graveyard.close().await.unwrap();
    assert_from_jobs(&dead, sent);
    assert_eq!(
        text(&dead, "_REBOUND_DEAD_LETTER_REASON"),
        "max-delivery-attempts"
    );
    assert_eq!(int(&dead, "_REBOUND_DELIVERY_COUNT"), 3);
    assert_eq!(
        failure_reasons(&dead),
        ["jobs 9", "jobs 10", "dlq 1", "dlq 2", "dlq 3"],
        "the history goes on, the last 5 kept"
    );
    retry_to_jobs(&broker, &client, "graveyard", "poison").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_parked_and_retried_later_go_back_to_their_first_queue() {
    let broker = Broker::start_with_config(&example_with("")).await;
    let client = broker.client().await;
    let sent = fail_on_jobs(&client, "park me", 10).await;
    let moved = cli(
        &broker,
        ["queue", "move", "--queue", "DLQ", "--to-address", "parked"],
    )
    .await;
    assert!(moved.success().stdout.contains("moved 1"), "{}", moved.stdout);

    let mut parked = client.consume("parked", 1).await.unwrap();
    let d = next(&mut parked).await;
    parked.release(&[d.id]).await.unwrap();
    parked.close().await.unwrap();
    assert_from_jobs(&d, sent);
    assert_eq!(
        failure_reasons(&d),
        ["jobs 6", "jobs 7", "jobs 8", "jobs 9", "jobs 10"]
    );
    retry_to_jobs(&broker, &client, "parked", "park me").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dlq_whose_dead_letter_address_is_its_own_keeps_what_fails_there() {
    // A redelivery delay on the DLQ: a message kept there waits it.
    let broker = Broker::start_with_config(&example_with(
        "[[address-settings]]\nmatch = \"DLQ\"\nredelivery-delay = 300\n",
    ))
    .await;
    let client = broker.client().await;
    let sent = fail_on_jobs(&client, "stuck", 10).await;
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let tenth = fail(&mut dlq, "dlq", 10).await;
    assert_eq!(tenth.delivery_count, 10);
    let failed_at = Instant::now();

    let kept = next(&mut dlq).await;
    let waited = failed_at.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "redelivered after {waited:?}"
    );
    assert_eq!(
        (kept.message.message_id, kept.delivery_count),
        (tenth.message.message_id, 11),
        "the same message, not a new dead letter"
    );
    assert_from_jobs(&kept, sent);
    // A dead-letter nack there keeps it too.
    dlq.dead_letter(&[kept.id], "cannot be handled").await.unwrap();
    let again = next(&mut dlq).await;
    assert_eq!(again.message.message_id, tenth.message.message_id);
    dlq.release(&[again.id]).await.unwrap();
    dlq.close().await.unwrap();

    let info = client.queue("DLQ").await.unwrap();
    assert_eq!((info.messages, info.dead_lettered, info.dropped), (1, 0, 0));
    let log = broker.wait_for_log("its dead-letter address is its own").await;
    assert_eq!(
        log.matches("its dead-letter address is its own").count(),
        2,
        "one WARN per time it would have been dead-lettered: {log}"
    );
    retry_to_jobs(&broker, &client, "DLQ", "stuck").await;
}
