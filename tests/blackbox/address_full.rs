//! `address-full-policy` through the real binary: what a producer sees when an
//! address holds `max-size-bytes` (or the broker `global-max-size`), and what
//! `address stat`, `/metrics` and the log show.
use std::time::Duration;

use rebound_client::{Client, Code, OutgoingMessage};
use serde_json::Value;

use crate::support::{Broker, cli, rebound, sample, temp_file};

/// Two messages of this body never fit in 1500 bytes; one always does.
fn body() -> String {
    "x".repeat(1000)
}

/// Address `q` with its queue, limited to 1500 bytes under `policy`.
fn config(policy: &str, extra: &str) -> String {
    format!(
        "[[address-settings]]\nmatch = \"q\"\nmax-size-bytes = 1500\naddress-full-policy = \"{policy}\"\n{extra}\n\
         [[addresses]]\nname = \"q\"\n  [[addresses.queues]]\n  name = \"q\"\n"
    )
}

async fn send(client: &Client, address: &str) -> rebound_client::Result<u64> {
    client.send(OutgoingMessage::new(address, body())).await
}

async fn address_stat(broker: &Broker, address: &str) -> Value {
    cli(broker, ["address", "stat", "--name", address, "--json"])
        .await
        .success()
        .json_lines()
        .remove(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn block_holds_producers_until_a_consumer_drains() {
    let broker = Broker::start_with_config(&config("BLOCK", "max-block-time = 30000")).await;
    let client = broker.client().await;
    send(&client, "q").await.unwrap();
    // A Send and a Publish stream's send both wait.
    let blocked_send = tokio::spawn({
        let client = client.clone();
        async move { send(&client, "q").await }
    });
    let publisher = client.publisher();
    let blocked_publish =
        tokio::spawn(async move { publisher.send(OutgoingMessage::new("q", body())).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !blocked_send.is_finished() && !blocked_publish.is_finished(),
        "full: the sends wait"
    );

    // Both reach the broker (bounded: a loaded machine may be slow to send them).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let stat = loop {
        let stat = address_stat(&broker, "q").await;
        if stat["blocked_sends"] == 2 || std::time::Instant::now() > deadline {
            break stat;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(stat["address_full_policy"], "BLOCK");
    assert_eq!(
        (stat["max_size_bytes"].as_u64(), stat["blocked_sends"].as_u64()),
        (Some(1500), Some(2))
    );
    let metrics = broker.scrape().await;
    assert_eq!(
        sample(&metrics, "rebound_address_blocked_sends", &[("address", "q")]),
        Some(2.0)
    );
    assert_eq!(sample(&metrics, "rebound_blocked_sends", &[]), Some(2.0));
    broker.wait_for_log("sends block until consumers make room").await;

    // A consumer drains: each ack makes room for one more.
    let mut consumer = client.consumer("q").open().await.unwrap();
    for _ in 0..3 {
        let delivery = consumer
            .next_timeout(Duration::from_secs(10))
            .await
            .unwrap()
            .expect("a delivery");
        consumer.ack(&[delivery.id]).await.unwrap();
    }
    let wait = Duration::from_secs(10);
    tokio::time::timeout(wait, blocked_send)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    tokio::time::timeout(wait, blocked_publish)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(address_stat(&broker, "q").await["blocked_sends"], 0);
    assert_eq!(
        broker.log().matches("sends block until").count(),
        1,
        "one WARN, not one per send"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn block_gives_up_after_max_block_time_with_the_address_its_size_and_the_limit() {
    let broker = Broker::start_with_config(&config("BLOCK", "max-block-time = 300")).await;
    let client = broker.client().await;
    send(&client, "q").await.unwrap();
    let started = std::time::Instant::now();
    let err = send(&client, "q").await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    let text = err.to_string();
    assert!(text.contains("address 'q' is full: it holds "), "{text}");
    assert!(
        text.contains("bytes and max-size-bytes is 1500; the send waited "),
        "{text}"
    );
    assert!(text.contains("(max-block-time)"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn fail_refuses_with_resource_exhausted() {
    let broker = Broker::start_with_config(&config("FAIL", "")).await;
    let client = broker.client().await;
    send(&client, "q").await.unwrap();
    let held = address_stat(&broker, "q").await["bytes"].as_u64().unwrap();
    let err = send(&client, "q").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "address 'q' is full: it holds {held} bytes and max-size-bytes is 1500"
        )),
        "{err}"
    );
    // A transaction's commit meets the same policy.
    let session = client.session().await.unwrap();
    let tx = session.begin().await.unwrap();
    tx.send(OutgoingMessage::new("q", body())).await.unwrap();
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn drop_acknowledges_and_counts_what_it_discards() {
    let broker = Broker::start_with_config(&config("DROP", "")).await;
    let client = broker.client().await;
    for _ in 0..3 {
        send(&client, "q").await.expect("DROP acknowledges");
    }
    let stat = address_stat(&broker, "q").await;
    assert_eq!(
        (stat["messages"].as_u64(), stat["dropped_messages"].as_u64()),
        (Some(1), Some(2))
    );
    let metrics = broker.scrape().await;
    assert_eq!(
        sample(
            &metrics,
            "rebound_address_dropped_messages_total",
            &[("address", "q")]
        ),
        Some(2.0)
    );
    let log = broker.wait_for_log("address-full-policy DROP discards").await;
    assert_eq!(
        log.matches("address-full-policy DROP discards").count(),
        1,
        "once per episode"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn page_is_the_default_and_accepts_past_max_size_bytes() {
    let text = config("PAGE", "").replace("address-full-policy = \"PAGE\"\n", "");
    let broker = Broker::start_with_config(&text).await;
    let client = broker.client().await;
    for _ in 0..3 {
        send(&client, "q").await.unwrap();
    }
    let stat = address_stat(&broker, "q").await;
    assert_eq!(stat["address_full_policy"], "PAGE");
    assert_eq!(stat["messages"], 3);
    assert!(stat["bytes"].as_u64().unwrap() > 1500);
}

#[tokio::test(flavor = "multi_thread")]
async fn global_max_size_applies_the_policy_across_addresses() {
    let broker = Broker::start_with_config(
        "global-max-size = 2500\n[[address-settings]]\nmatch = \"#\"\naddress-full-policy = \"FAIL\"\n",
    )
    .await;
    let client = broker.client().await;
    send(&client, "a").await.unwrap();
    send(&client, "b").await.unwrap();
    let err = send(&client, "c").await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(err.to_string().contains("global-max-size is 2500"), "{err}");
    let metrics = broker.scrape().await;
    assert_eq!(
        sample(&metrics, "rebound_global_max_size_bytes", &[]),
        Some(2500.0)
    );
    assert!(sample(&metrics, "rebound_global_size_bytes", &[]).unwrap() > 2000.0);
    // Consuming from one address makes room for another.
    let mut consumer = client.consumer("a").open().await.unwrap();
    let delivery = consumer.next().await.unwrap().expect("a delivery");
    consumer.ack(&[delivery.id]).await.unwrap();
    consumer.flush().await.unwrap();
    send(&client, "c").await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_lands_in_a_full_dead_letter_address() {
    let broker = Broker::start_with_config(
        "[[address-settings]]\nmatch = \"#\"\ndead-letter-address = \"DLQ\"\n\
         [[address-settings]]\nmatch = \"DLQ\"\nmax-size-bytes = 1500\naddress-full-policy = \"FAIL\"\n\
         [[addresses]]\nname = \"DLQ\"\n  [[addresses.queues]]\n  name = \"DLQ\"\n",
    )
    .await;
    let client = broker.client().await;
    send(&client, "DLQ").await.unwrap();
    assert!(
        send(&client, "DLQ").await.is_err(),
        "the DLQ is full for producers"
    );
    send(&client, "work").await.unwrap();
    let mut consumer = client.consumer("work").open().await.unwrap();
    let delivery = consumer.next().await.unwrap().expect("a delivery");
    consumer.dead_letter(&[delivery.id], "poison").await.unwrap();
    consumer.flush().await.unwrap();
    let stat = address_stat(&broker, "DLQ").await;
    assert_eq!(stat["messages"], 2, "the dead letter landed: {stat}");
}

#[tokio::test(flavor = "multi_thread")]
async fn config_resolve_shows_the_policy_keys() {
    let (_dir, path) = temp_file("rebound.toml", &config("BLOCK", ""));
    let path = path.to_str().unwrap();
    let resolved = rebound(["config", "resolve", "--config", path, "--address", "q"]).await;
    let out = &resolved.success().stdout;
    for key in [
        "address-full-policy  BLOCK",
        "max-block-time",
        "max-size-bytes  1500",
    ] {
        assert!(
            out.lines().any(|l| l
                .split_whitespace()
                .collect::<Vec<_>>()
                .join("  ")
                .starts_with(key)),
            "{key}: {out}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_that_raises_the_limit_frees_a_blocked_send() {
    let broker = Broker::start_with_config(&config("BLOCK", "max-block-time = 30000")).await;
    let client = broker.client().await;
    send(&client, "q").await.unwrap();
    let blocked = tokio::spawn({
        let client = client.clone();
        async move { send(&client, "q").await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!blocked.is_finished());
    broker.rewrite_config(&config("BLOCK", "max-block-time = 30000").replace("1500", "5000"));
    broker.hup();
    tokio::time::timeout(Duration::from_secs(10), blocked)
        .await
        .expect("the reload freed the send")
        .unwrap()
        .unwrap();
    assert_eq!(address_stat(&broker, "q").await["max_size_bytes"], 5000);
}
