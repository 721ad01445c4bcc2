//! Duplicate detection through the real binary: a producer's retry with the same
//! duplicate id is acknowledged as a duplicate and stored once, also across a
//! kill -9; in a transaction it fails the commit; the cache keeps only the last
//! `id-cache-size` ids.
use std::time::Duration;

use rebound_client::OutgoingMessage;
use tonic::Code;

use crate::messaging::{body, receive};
use crate::support::{Broker, cli};

const QUIET: Duration = Duration::from_millis(500);

fn order(body: &str, id: &str) -> OutgoingMessage {
    OutgoingMessage::new("orders", body.to_owned()).duplicate_id(id)
}

#[tokio::test(flavor = "multi_thread")]
async fn duplicate_sends_across_a_kill9_are_stored_once_and_answered_as_duplicates() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    let first = client.send_outcome(order("1", "order-1")).await.unwrap();
    assert!(!first.duplicate);
    let retry = client.send_outcome(order("1 again", "order-1")).await.unwrap();
    assert!(retry.duplicate, "a retry with the same id is a duplicate");
    let out = cli(
        &broker,
        [
            "send",
            "--address",
            "orders",
            "--duplicate-id",
            "order-2",
            "--count",
            "3",
        ],
    )
    .await;
    assert!(
        out.success().stdout.contains("2 of them were duplicates"),
        "{}",
        out.stdout
    );

    broker.kill9();
    broker.restart().await;
    let client = broker.client().await;
    let after = client
        .send_outcome(order("1 after the crash", "order-1"))
        .await
        .unwrap();
    assert!(after.duplicate, "the id was remembered across the kill -9");
    assert!(client.send_outcome(order("", "order-2")).await.unwrap().duplicate);
    assert!(
        !client
            .send_outcome(order("3", "order-3"))
            .await
            .unwrap()
            .duplicate
    );
    let mut c = client.consume("orders", 10).await.unwrap();
    let got = receive(&mut c, 10, QUIET).await;
    assert_eq!(got.iter().map(body).collect::<Vec<_>>(), ["1", "", "3"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_in_a_transaction_fails_the_commit_and_applies_nothing() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client.send(order("first", "a")).await.unwrap();
    let tx = client.session().await.unwrap().begin().await.unwrap();
    tx.send(order("new", "b")).await.unwrap();
    tx.send(order("again", "a")).await.unwrap();
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::AlreadyExists), "{err}");
    assert!(err.to_string().contains("duplicate id 'a'"), "{err}");
    assert_eq!(client.queue("orders").await.unwrap().messages, 1);
    // Nothing of it was remembered either: b is new.
    assert!(!client.send_outcome(order("b", "b")).await.unwrap().duplicate);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cache_keeps_the_last_id_cache_size_ids() {
    let config = "[[address-settings]]\nmatch = \"orders\"\nid-cache-size = 2\n";
    let mut broker = Broker::start_with_config(config).await;
    let client = broker.client().await;
    for id in ["a", "b", "c"] {
        assert!(!client.send_outcome(order(id, id)).await.unwrap().duplicate);
    }
    broker.kill9();
    broker.restart().await;
    let client = broker.client().await;
    assert!(client.send_outcome(order("", "c")).await.unwrap().duplicate);
    assert!(client.send_outcome(order("", "b")).await.unwrap().duplicate);
    assert!(
        !client
            .send_outcome(order("a again", "a"))
            .await
            .unwrap()
            .duplicate,
        "the oldest id was forgotten"
    );
    assert_eq!(client.queue("orders").await.unwrap().messages, 4);
}
