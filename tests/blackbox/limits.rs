//! The `[limits]`: a hostile client meets a clear refusal or backpressure, and the
//! broker keeps serving everyone else.
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rebound_client::proto::{self, consume_request::Kind, messaging_client::MessagingClient};
use rebound_client::{Client, Code, OutgoingMessage, Selection};

use crate::support::{Broker, cli, frame_counted_channel, one_per_frame, other_call, until_stuck};

/// Far above anything the broker hands out, so every id is unknown.
const UNKNOWN_ID: u64 = 1 << 50;

fn settle(ids: impl IntoIterator<Item = u64>) -> proto::ConsumeRequest {
    proto::ConsumeRequest {
        kind: Some(Kind::Settle(proto::Settle {
            delivery_ids: ids.into_iter().collect(),
            outcome: proto::Outcome::Ack.into(),
            ..Default::default()
        })),
    }
}

fn subscribe(queue: &str) -> proto::ConsumeRequest {
    proto::ConsumeRequest {
        kind: Some(Kind::Subscribe(proto::Subscribe {
            queue: queue.into(),
            ..Default::default()
        })),
    }
}

async fn rss(client: &Client) -> u64 {
    client.server_info().await.unwrap().rss_bytes
}

/// Another client is served at once: a message goes through send, consume and ack.
async fn served_promptly(client: &Client, queue: &str) {
    let round_trip = async {
        client
            .send(OutgoingMessage::new(queue, "still here"))
            .await
            .unwrap();
        let mut consumer = client.consumer(queue).open().await.unwrap();
        let delivery = consumer.next().await.unwrap().expect("a delivery");
        consumer.ack(&[delivery.id]).await.unwrap();
        consumer.close().await.unwrap();
    };
    tokio::time::timeout(Duration::from_secs(20), round_trip)
        .await
        .expect("another client is served while the hostile one is connected");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_never_reads_its_answers_is_pushed_back_on() {
    const SETTLES: usize = 100_000;
    let broker = Broker::start().await;
    let client = broker.client().await;
    let before = rss(&client).await;

    // 100k settles of 100 unknown ids each (~70 MB of requests), none of whose
    // answers is ever read. Counting what the client library pulls from the request
    // stream shows how far the broker read.
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let settles = futures::stream::iter(0..SETTLES).map(move |i| {
        counter.fetch_add(1, Ordering::Relaxed);
        let first = UNKNOWN_ID + 100 * i as u64;
        settle(first..first + 100)
    });
    let requests = futures::stream::iter([subscribe("hostile")]).chain(settles);
    let mut messaging = MessagingClient::connect(broker.url()).await.unwrap();
    let unread = messaging.consume(requests).await.unwrap();

    // Wait until the client is stuck (nothing pulled for 2 s) or has sent everything.
    until_stuck(&pulled, SETTLES, Duration::from_secs(120)).await;
    let sent = pulled.load(Ordering::Relaxed);
    assert!(
        sent < SETTLES / 2,
        "the broker read {sent} of {SETTLES} settles whose answers were never read"
    );
    let grown = rss(&client).await.saturating_sub(before);
    assert!(grown < 48 << 20, "the broker grew by {grown} bytes");

    served_promptly(&client, "other").await;
    drop(unread);
}

/// The same with settles of one id each, one per HTTP/2 DATA frame: h2 closes a
/// connection on which the server holds more small frames unread than half its
/// connection window allows, so the paused stream must not kill its connection.
#[tokio::test(flavor = "multi_thread")]
async fn tiny_settles_never_read_are_pushed_back_on_and_the_connection_lives() {
    const SETTLES: usize = 30_000;
    let broker = Broker::start().await;
    let (channel, data) = frame_counted_channel(&broker).await;
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let settles = futures::stream::iter(0..SETTLES).map(move |i| {
        counter.fetch_add(1, Ordering::Relaxed);
        settle([UNKNOWN_ID + i as u64])
    });
    let requests = one_per_frame(futures::stream::iter([subscribe("hostile")]).chain(settles));
    let unread = MessagingClient::new(channel.clone())
        .consume(requests)
        .await
        .unwrap();

    until_stuck(&pulled, SETTLES, Duration::from_secs(60)).await;
    if let Err(e) = other_call(channel).await {
        let consumer = unread.into_inner().message().await;
        panic!("the other call failed: {e}; the consumer's stream: {consumer:?}");
    }
    let sent = pulled.load(Ordering::Relaxed);
    assert!(sent < SETTLES / 2, "the broker read {sent} of {SETTLES} settles");
    let (frames, bytes) = (
        data.frames.load(Ordering::Relaxed),
        data.bytes.load(Ordering::Relaxed),
    );
    assert!(frames > 3_000, "{frames} DATA frames");
    assert!(bytes / frames < 32, "{bytes} bytes in {frames} DATA frames");
    drop(unread);
}

#[tokio::test(flavor = "multi_thread")]
async fn settles_are_bounded_in_ids_and_the_largest_is_answered_quickly() {
    let broker = Broker::start().await;
    let client = broker.client().await;

    // The most ids a settle may name, all unknown: answered quickly.
    let mut consumer = client.consumer("ids").open().await.unwrap();
    let ids: Vec<u64> = (UNKNOWN_ID..UNKNOWN_ID + 10_000).collect();
    let started = Instant::now();
    consumer.ack(&ids).await.unwrap();
    let unknown = tokio::time::timeout(Duration::from_secs(20), consumer.flush())
        .await
        .expect("answered")
        .unwrap();
    assert_eq!(unknown, ids);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    served_promptly(&client, "other").await;

    // One more is refused, naming the limit; the broker is fine.
    let too_many: Vec<u64> = (UNKNOWN_ID..=UNKNOWN_ID + 10_000).collect();
    consumer.ack(&too_many).await.unwrap();
    let err = consumer.flush().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}");
    assert!(err.to_string().contains("max-ids-per-settle 10000"), "{err}");
    served_promptly(&client, "other").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn transactions_are_bounded_in_number_and_size() {
    let broker =
        Broker::start_with_config("[limits]\nmax-open-transactions = 2\nmax-transaction-messages = 3\n")
            .await;
    let client = broker.client().await;
    let session = client.session().await.unwrap();
    let first = session.begin().await.unwrap();
    let _second = session.begin().await.unwrap();
    let err = session.begin().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(err.to_string().contains("max-open-transactions is 2"), "{err}");

    for body in ["a", "b", "c"] {
        first.send(OutgoingMessage::new("out", body)).await.unwrap();
    }
    let err = first.send(OutgoingMessage::new("out", "d")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(err.to_string().contains("max-transaction-messages is 3"), "{err}");
    // The refused send left the transaction as it was, and open.
    assert_eq!(first.commit().await.unwrap().sent, 3);
    assert_eq!(client.queue("out").await.unwrap().messages, 3);
    // A finished transaction makes room for another.
    session.begin().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_creation_stops_at_its_quota() {
    let broker = Broker::start_with_config("[limits]\nmax-auto-created = 2\n").await;
    let client = broker.client().await;
    client
        .send(OutgoingMessage::new("a", "made a and its queue"))
        .await
        .unwrap();
    let err = client.send(OutgoingMessage::new("b", "x")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(err.to_string().contains("max-auto-created is 2"), "{err}");
    let err = client.consumer("c").open().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    // What exists still works.
    client.send(OutgoingMessage::new("a", "again")).await.unwrap();
    assert_eq!(client.queue("a").await.unwrap().messages, 2);
}

/// A consumer of a name nothing has yet creates it as a send to that name does:
/// the same auto-create settings, the same flag, counted against the same quota.
#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_auto_creates_as_a_send_does() {
    let config = "[limits]\nmax-auto-created = 3\n\
                  [[address-settings]]\nmatch = \"fixed.#\"\nauto-create-addresses = false\n";
    let broker = Broker::start_with_config(config).await;
    let client = broker.client().await;
    let _consumer = client.consume("c", 1).await.unwrap();
    assert!(client.address("c").await.unwrap().auto_created);
    assert!(client.queue("c").await.unwrap().auto_created);
    // Address and queue of `c` count: neither a send nor a consumer makes two more.
    let sent = client.send(OutgoingMessage::new("d", "x")).await.unwrap_err();
    let consumed = client.consume("e", 1).await.unwrap_err();
    for err in [&sent, &consumed] {
        assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
        assert!(
            err.to_string()
                .contains("auto-creating would make 4 auto-created addresses and queues"),
            "{err}"
        );
    }
    // Where a send may not create the address, a consumer may not either.
    let sent = client
        .send(OutgoingMessage::new("fixed.a", "x"))
        .await
        .unwrap_err();
    let consumed = client.consume("fixed.a", 1).await.unwrap_err();
    assert_eq!(sent.code(), Some(Code::NotFound), "{sent}");
    assert_eq!(consumed.code(), Some(Code::NotFound), "{consumed}");
    assert_eq!(client.list_addresses().await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_connection_opens_at_most_its_consume_streams() {
    let broker = Broker::start_with_config("[limits]\nmax-consume-streams-per-connection = 2\n").await;
    let client = broker.client().await;
    let first = client.consumer("a").open().await.unwrap();
    let _second = client.consumer("b").open().await.unwrap();
    let err = client.consumer("c").open().await.unwrap_err();
    assert_eq!(err.code(), Some(Code::ResourceExhausted), "{err}");
    assert!(
        err.to_string()
            .contains("max-consume-streams-per-connection is 2"),
        "{err}"
    );
    // Another connection has its own; a closed stream makes room.
    broker.client().await.consumer("c").open().await.unwrap();
    first.close().await.unwrap();
    let reopened = async {
        loop {
            match client.consumer("c").open().await {
                Ok(consumer) => break consumer,
                // The session ends just after the client saw its stream end.
                Err(err) if err.code() == Some(Code::ResourceExhausted) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(err) => panic!("{err}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), reopened)
        .await
        .expect("room once a stream closed");
}

/// A refusal is `code`, names `key`, and leaves the broker serving with what it
/// stored: `kept` (sent before the refusal) is still there, received after it.
async fn refused_and_intact(client: &Client, err: rebound_client::Error, code: Code, key: &str) {
    assert_eq!(err.code(), Some(code), "{err}");
    assert!(err.to_string().contains(key), "names {key}: {err}");
    let mut consumer = client.consume("kept", 1).await.unwrap();
    let delivery = consumer
        .next_timeout(Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the message sent before the refusal");
    assert_eq!(delivery.message.body.as_ref(), b"before");
    consumer.ack(&[delivery.id]).await.unwrap();
    consumer.close().await.unwrap();
}

async fn keep_one(client: &Client) {
    client.send(OutgoingMessage::new("kept", "before")).await.unwrap();
}

fn with_properties(count: usize) -> OutgoingMessage {
    (0..count).fold(OutgoingMessage::new("props", "x"), |m, i| {
        m.property(format!("p{i}"), "v")
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn properties_are_bounded_in_number_and_bytes_and_a_reload_changes_the_bounds() {
    let broker = Broker::start_with_config("").await;
    let client = broker.client().await;
    keep_one(&client).await;
    client.send(with_properties(256)).await.unwrap();
    let err = client.send(with_properties(257)).await.unwrap_err();
    refused_and_intact(
        &client,
        err,
        Code::InvalidArgument,
        "max-properties-per-message 256",
    )
    .await;

    // Lowered by a reload: 10 properties, 200 bytes of them.
    broker.rewrite_config("[limits]\nmax-properties-per-message = 10\nmax-properties-bytes = 200\n");
    broker.hup();
    broker.wait_for_log("config reloaded").await;
    keep_one(&client).await;
    client.send(with_properties(10)).await.unwrap();
    let err = client.send(with_properties(11)).await.unwrap_err();
    refused_and_intact(
        &client,
        err,
        Code::InvalidArgument,
        "max-properties-per-message 10",
    )
    .await;
    keep_one(&client).await;
    // One property of a 1-byte name: 200 bytes encoded is a value of 188 bytes
    // (12 of framing: map entry tag and length, key tag, length and name, the
    // value's tags and lengths).
    let sized = |len: usize| OutgoingMessage::new("props", "x").property("k", "v".repeat(len));
    client.send(sized(188)).await.unwrap();
    let err = client.send(sized(189)).await.unwrap_err();
    refused_and_intact(&client, err, Code::InvalidArgument, "max-properties-bytes 200").await;
    assert_eq!(client.queue("props").await.unwrap().messages, 3);
}

/// A filter of exactly `len` bytes that matches every message.
fn filter_of(len: usize) -> String {
    format!("{:<len$}", "JMSPriority >= 0")
}

#[tokio::test(flavor = "multi_thread")]
async fn filters_are_bounded_by_max_selector_length() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    keep_one(&client).await;
    client.send(OutgoingMessage::new("sel", "s")).await.unwrap();

    let longest = filter_of(4096);
    let over = filter_of(4097);
    let consumer = client
        .consumer("sel")
        .filter(longest.clone())
        .open()
        .await
        .unwrap();
    consumer.close().await.unwrap();
    let err = client
        .consumer("sel")
        .filter(over.clone())
        .open()
        .await
        .unwrap_err();
    refused_and_intact(&client, err, Code::InvalidArgument, "max-selector-length 4096").await;

    keep_one(&client).await;
    let selection = |filter: &str| Selection::new("sel").filter(filter);
    assert_eq!(client.count_messages(&selection(&longest)).await.unwrap(), 1);
    let err = client.count_messages(&selection(&over)).await.unwrap_err();
    refused_and_intact(&client, err, Code::InvalidArgument, "max-selector-length 4096").await;
    for args in [
        ["queue", "browse", "--queue", "sel"],
        ["queue", "remove", "--queue", "sel"],
    ] {
        let out = cli(&broker, args.iter().copied().chain(["--filter", &over])).await;
        out.failure(1);
        assert!(out.stderr.contains("max-selector-length 4096"), "{}", out.stderr);
    }
    assert_eq!(client.queue("sel").await.unwrap().messages, 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn names_are_at_most_255_bytes() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    keep_one(&client).await;
    let longest = "n".repeat(255);
    client.send(OutgoingMessage::new(&longest, "x")).await.unwrap();
    assert_eq!(client.queue(&longest).await.unwrap().messages, 1);
    let err = client
        .send(OutgoingMessage::new("n".repeat(256), "x"))
        .await
        .unwrap_err();
    refused_and_intact(&client, err, Code::InvalidArgument, "must be at most 255 bytes").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_gets_at_most_max_consumer_credit_over_grpc() {
    let broker = Broker::start_with_config("[limits]\nmax-consumer-credit = 3\n").await;
    let client = broker.client().await;
    for i in 0..10 {
        client
            .send(OutgoingMessage::new("credit", i.to_string()))
            .await
            .unwrap();
    }
    // Credit 100 asked for; 3 delivered, then nothing until it settles.
    let mut consumer = client.consume_manual_credit("credit", 100).await.unwrap();
    let mut ids = Vec::new();
    while let Some(d) = consumer.next_timeout(Duration::from_secs(2)).await.unwrap() {
        ids.push(d.id);
    }
    assert_eq!(ids.len(), 3, "{ids:?}");
    consumer.grant(100).await.unwrap();
    assert!(
        consumer
            .next_timeout(Duration::from_millis(500))
            .await
            .unwrap()
            .is_none()
    );
    consumer.ack(&ids).await.unwrap();
    consumer.flush().await.unwrap();
    consumer.grant(100).await.unwrap();
    let mut more = 0;
    while consumer
        .next_timeout(Duration::from_secs(2))
        .await
        .unwrap()
        .is_some()
    {
        more += 1;
    }
    assert_eq!(more, 3);
    assert_eq!(client.queue("credit").await.unwrap().messages, 7);
}
