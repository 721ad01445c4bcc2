//! Scheduled delivery through the real binary: a message sent for later is not
//! delivered before its time and is after it, also across a kill -9; it can be
//! removed or purged before it is due; it never holds up the message behind it.
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rebound_client::{MessageState, OutgoingMessage, Selection};

use crate::messaging::{body, receive};
use crate::redelivery::next;
use crate::support::{Broker, cli};

pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scheduled_message_survives_a_kill9_and_comes_at_its_time_not_before() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    let due = now_ms() + 4000;
    client
        .send(OutgoingMessage::new("jobs", "later").deliver_at_ms(due))
        .await
        .unwrap();
    client.send(OutgoingMessage::new("jobs", "now")).await.unwrap();
    let info = client.queue("jobs").await.unwrap();
    assert_eq!((info.messages, info.scheduled), (2, 1));
    let mut c = client.consume("jobs", 10).await.unwrap();
    // The message behind the scheduled one is not held up.
    let now = next(&mut c).await;
    assert_eq!(body(&now), "now");
    c.ack(&[now.id]).await.unwrap();
    c.flush().await.unwrap();

    broker.kill9();
    broker.restart().await;
    let client = broker.client().await;
    let browsed = client.browse("jobs", 10).await.unwrap();
    assert_eq!(browsed.len(), 1);
    assert_eq!(browsed[0].state, MessageState::Scheduled);
    assert_eq!(browsed[0].scheduled_at_ms, due, "its time was stored with it");
    let shown = cli(&broker, ["queue", "browse", "--queue", "jobs"]).await;
    assert!(
        shown.success().stdout.contains("scheduled until 20"),
        "the time as RFC 3339: {}",
        shown.stdout
    );

    let mut c = client.consume("jobs", 10).await.unwrap();
    let d = c
        .next_timeout(Duration::from_millis(due + 15_000 - now_ms()))
        .await
        .unwrap()
        .expect("delivered after its time");
    let at = now_ms();
    assert_eq!(body(&d), "later");
    assert!(at >= due, "delivered {} ms before its time", due - at);
    assert_eq!(d.delivery_count, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn scheduled_messages_can_be_removed_or_purged_before_they_are_due() {
    let broker = Broker::start().await;
    for args in [["--delay-ms", "60000"], ["--deliver-at", "2035-01-01T00:00:00Z"]] {
        let mut send = vec!["send", "--address", "later", "--body", "x"];
        send.extend(args);
        cli(&broker, send).await.success();
    }
    // More than 3650 days ahead is refused, naming the problem.
    let far = cli(
        &broker,
        [
            "send",
            "--address",
            "later",
            "--deliver-at",
            "9999-01-01T00:00:00Z",
        ],
    )
    .await;
    assert!(
        far.failure(1).stderr.contains("(INVALID_ARGUMENT)"),
        "{}",
        far.stderr
    );
    let client = broker.client().await;
    let browsed = client.browse("later", 10).await.unwrap();
    assert_eq!(browsed.len(), 2);
    assert!(
        browsed.iter().all(|b| b.state == MessageState::Scheduled),
        "{browsed:?}"
    );
    let removed = client
        .remove_messages(&Selection::new("later").message_id(browsed[0].message.message_id))
        .await
        .unwrap();
    assert_eq!(removed, 1);
    assert_eq!(client.purge("later").await.unwrap(), 1);
    assert_eq!(client.queue("later").await.unwrap().messages, 0);
    // A time in the past delivers at once.
    cli(
        &broker,
        [
            "send",
            "--address",
            "later",
            "--body",
            "past",
            "--deliver-at",
            "2001-01-01T00:00:00Z",
        ],
    )
    .await
    .success();
    let mut c = client.consume("later", 10).await.unwrap();
    let got = receive(&mut c, 2, Duration::from_secs(2)).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["past"]);
}

also_on_postgres! {
    /// Scheduled messages and a delayed redelivery beyond a small head wait on
    /// disk (`broker/src/queue/far.rs`), survive a kill -9 there, and still come
    /// at their time, in due order, with their delivery counts.
    #[tokio::test(flavor = "multi_thread")]
    async fn messages_waiting_on_disk_survive_a_kill9_and_come_in_due_order() {
        let mut broker = Broker::start_with_config(
            r##"
[[address-settings]]
match = "#"
max-read-page-messages = 4
redelivery-delay = 7000
"##,
        )
        .await;
        let client = broker.client().await;
        client
            .send(OutgoingMessage::new("jobs", "retried"))
            .await
            .unwrap();
        let mut c = client.consume("jobs", 10).await.unwrap();
        let first = next(&mut c).await;
        c.nack(&[first.id], "not yet").await.unwrap();
        c.flush().await.unwrap();
        drop(c);
        // Sent latest first, so that due order is not send order; all due after the retry.
        let due = now_ms() + 7500;
        for i in (0..30).rev() {
            let message = OutgoingMessage::new("jobs", format!("m{i:02}")).deliver_at_ms(due + i * 20);
            client.send(message).await.unwrap();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while client.queue("jobs").await.unwrap().paged_messages < 20 {
            assert!(std::time::Instant::now() < deadline, "nothing moved to disk");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        broker.kill9();
        broker.restart().await;
        let client = broker.client().await;
        let info = client.queue("jobs").await.unwrap();
        assert_eq!((info.messages, info.scheduled), (31, 31));
        let mut c = client.consume("jobs", 100).await.unwrap();
        let mut got = Vec::new();
        while got.len() < 31 {
            let d = c
                .next_timeout(Duration::from_millis((due + 15_000).saturating_sub(now_ms())))
                .await
                .unwrap()
                .expect("delivered after its time");
            got.push((body(&d).to_owned(), d.delivery_count, now_ms()));
        }
        assert_eq!((got[0].0.as_str(), got[0].1), ("retried", 2));
        let scheduled: Vec<&str> = got[1..].iter().map(|(b, ..)| b.as_str()).collect();
        let expected: Vec<String> = (0..30).map(|i| format!("m{i:02}")).collect();
        assert_eq!(scheduled, expected);
        assert!(
            got[1..].iter().all(|&(_, count, at)| count == 1 && at >= due),
            "{got:?}"
        );
    }
}
