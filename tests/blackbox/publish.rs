//! The Publish stream and the client's `Publisher`: acknowledgements in order, a
//! refused request that does not end the stream, flow control against a producer
//! that never reads, a broker killed mid-stream, and natural batching.
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rebound_client::proto::{self, messaging_client::MessagingClient, publish_response::Result as Answer};
use rebound_client::{Client, Code, Error, OutgoingMessage, PublisherOptions, RoutingType};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::support::{Broker, frame_counted_channel, one_per_frame, other_call, until_stuck};

fn request(sequence: u64, queue: &str, bodies: &[&str]) -> proto::PublishRequest {
    proto::PublishRequest {
        sequence,
        messages: bodies
            .iter()
            .map(|body| OutgoingMessage::new(queue, body.to_string()).into())
            .collect(),
    }
}

async fn stored(client: &Client, queue: &str) -> u64 {
    client.queue(queue).await.unwrap().messages
}

/// Every message of `queue`, by id, read by a consumer (acked).
async fn drain(client: &Client, queue: &str) -> HashSet<u64> {
    let mut consumer = client.consume(queue, 1000).await.unwrap();
    let mut ids = HashSet::new();
    while let Some(d) = consumer.next_timeout(Duration::from_secs(2)).await.unwrap() {
        ids.insert(d.message.message_id);
        consumer.ack(&[d.id]).await.unwrap();
    }
    consumer.close().await.unwrap();
    ids
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledgements_come_in_request_order() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client
        .create_queue("ordered", "ordered", RoutingType::Anycast, true)
        .await
        .unwrap();
    // 300 requests of 1 to 3 messages, all sent before any answer is read; every
    // other one is not durable, so it is done before the fsync of the one before.
    let requests: Vec<_> = (1..=300u64)
        .map(|seq| {
            let mut request = request(seq, "ordered", &["a", "b", "c"][..1 + (seq % 3) as usize]);
            for message in &mut request.messages {
                message.durable = Some(seq % 2 == 0);
            }
            request
        })
        .collect();
    let total: usize = requests.iter().map(|r| r.messages.len()).sum();
    let mut messaging = MessagingClient::connect(broker.url()).await.unwrap();
    let mut answers = messaging
        .publish(futures::stream::iter(requests.clone()))
        .await
        .unwrap()
        .into_inner();
    let mut last_id = 0;
    for sent in &requests {
        let answer = answers.message().await.unwrap().expect("an answer per request");
        assert_eq!(answer.sequence, sent.sequence, "answers in request order");
        let Some(Answer::Sent(ok)) = answer.result else {
            panic!("request {} refused: {answer:?}", sent.sequence)
        };
        assert_eq!(ok.message_ids.len(), sent.messages.len());
        // Ids are given in request order too.
        for id in ok.message_ids {
            assert!(id > last_id, "id {id} after {last_id}");
            last_id = id;
        }
    }
    assert!(
        answers.message().await.unwrap().is_none(),
        "the stream ends after the last answer"
    );
    assert_eq!(stored(&client, "ordered").await, total as u64);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_request_gets_its_error_and_the_stream_carries_on() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let too_large = "x".repeat(2 << 20);
    let reserved: proto::OutgoingMessage = OutgoingMessage::new("mixed", "r")
        .property("_AMQ_FORGED", "1")
        .into();
    let requests = vec![
        request(1, "mixed", &["one"]),
        request(2, "mixed", &[too_large.as_str()]),
        request(3, "mixed", &["two", "three"]),
        proto::PublishRequest {
            sequence: 4,
            messages: vec![OutgoingMessage::new("mixed", "fine").into(), reserved],
        },
        request(5, "bad name", &["x"]),
        request(6, "mixed", &[]),
        request(7, "mixed", &["four"]),
    ];
    let mut messaging = MessagingClient::connect(broker.url()).await.unwrap();
    let answers: Vec<_> = messaging
        .publish(futures::stream::iter(requests))
        .await
        .unwrap()
        .into_inner()
        .map(|a| a.unwrap())
        .collect()
        .await;
    let outcome: Vec<_> = answers
        .iter()
        .map(|a| match &a.result {
            Some(Answer::Sent(ok)) => (a.sequence, Ok(ok.message_ids.len())),
            Some(Answer::Error(e)) => (a.sequence, Err(Code::from_i32(e.code))),
            None => panic!("an empty answer"),
        })
        .collect();
    assert_eq!(
        outcome,
        [
            (1, Ok(1)),
            (2, Err(Code::InvalidArgument)),
            (3, Ok(2)),
            (4, Err(Code::InvalidArgument)),
            (5, Err(Code::InvalidArgument)),
            (6, Err(Code::InvalidArgument)),
            (7, Ok(1)),
        ]
    );
    let Some(Answer::Error(e)) = &answers[1].result else {
        unreachable!()
    };
    assert!(e.message.contains("max-message-size"), "{}", e.message);
    // Nothing of a refused request is stored, everything after it is.
    assert_eq!(stored(&client, "mixed").await, 4);

    // Through the publisher, a refused message among many concurrent ones fails
    // alone: the others of its frame are stored.
    let publisher = client.publisher();
    let sends = (0..100).map(|i| {
        let publisher = publisher.clone();
        async move {
            let message = OutgoingMessage::new("shared", format!("{i}"));
            let message = if i == 50 {
                message.property("_REBOUND_X", 1)
            } else {
                message
            };
            publisher.send(message).await
        }
    });
    let results = futures::future::join_all(sends).await;
    for (i, result) in results.iter().enumerate() {
        match (i, result) {
            (50, Err(err)) => assert_eq!(err.code(), Some(Code::InvalidArgument), "{err}"),
            (50, Ok(_)) => panic!("the reserved property was accepted"),
            (_, result) => assert!(result.is_ok(), "send {i}: {result:?}"),
        }
    }
    assert_eq!(stored(&client, "shared").await, 99);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_producer_that_never_reads_its_acknowledgements_is_stopped_at_the_bound() {
    const REQUESTS: usize = 150_000;
    let broker =
        Broker::start_with_config("[limits]\nmax-publish-in-flight = 8\nmax-unread-responses = 8\n").await;
    let client = broker.client().await;
    client
        .create_queue("flood", "flood", RoutingType::Anycast, true)
        .await
        .unwrap();
    // 150,000 requests of 1 KiB (~150 MB), made as the client library pulls them:
    // counting them shows how far the transport took them.
    let body = "x".repeat(1024);
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let requests = futures::stream::iter(1..=REQUESTS as u64).map(move |seq| {
        counter.fetch_add(1, Ordering::Relaxed);
        request(seq, "flood", &[body.as_str()])
    });
    // A stream receive window of 64 KiB: it takes some 3,000 unread answers
    // (about 20 bytes each), where the default 2 MiB would take about as many as
    // are sent. (The connection's window stays large: h2 closes a connection
    // that holds more small frames unread than half of it allows.)
    let channel = tonic::transport::Endpoint::from_shared(broker.url())
        .unwrap()
        .initial_stream_window_size(64 << 10)
        .connect()
        .await
        .unwrap();
    let mut messaging = MessagingClient::new(channel);
    let mut answers = messaging.publish(requests).await.unwrap().into_inner();

    // Wait until the producer is stuck: nothing pulled for 2 s.
    until_stuck(&pulled, REQUESTS, Duration::from_secs(120)).await;
    // The broker read only what the bounds allow: 8 in flight, 8 answers in its
    // buffer, and the answers the client's HTTP/2 receive window took unread;
    // then it stopped reading, and the producer stopped with the transport's
    // buffers full.
    let held = stored(&client, "flood").await;
    assert!(
        held < REQUESTS as u64 / 2,
        "the broker read {held} requests whose answers were never read"
    );
    let sent = pulled.load(Ordering::Relaxed);
    assert!(
        sent < REQUESTS * 3 / 4,
        "the transport took {sent} of {REQUESTS} requests"
    );

    // Reading the answers lets it carry on, in order.
    for seq in 1..=1000 {
        let answer = answers.message().await.unwrap().expect("an answer");
        assert_eq!(answer.sequence, seq);
        assert!(matches!(answer.result, Some(Answer::Sent(_))), "{answer:?}");
    }
    assert!(stored(&client, "flood").await >= 1000);
}

/// Tiny requests, one per HTTP/2 DATA frame, whose acknowledgements are not read:
/// flow control pauses the producer as it does for large ones. (h2 closes a
/// connection on which the server holds more small frames unread than half its
/// connection window allows, so the broker's stream window must be small enough.)
#[tokio::test(flavor = "multi_thread")]
async fn a_producer_of_tiny_requests_that_never_reads_is_paused_and_its_connection_lives() {
    const REQUESTS: u64 = 30_000;
    let broker = Broker::start().await;
    let client = broker.client().await;
    client
        .create_queue("tiny", "tiny", RoutingType::Anycast, true)
        .await
        .unwrap();
    let (channel, data) = frame_counted_channel(&broker).await;
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let requests = one_per_frame(futures::stream::iter(1..=REQUESTS).map(move |seq| {
        counter.fetch_add(1, Ordering::Relaxed);
        request(seq, "tiny", &["x"])
    }));
    let mut answers = MessagingClient::new(channel.clone())
        .publish(requests)
        .await
        .unwrap()
        .into_inner();

    // Wait until the producer is stuck: nothing pulled for 2 s.
    until_stuck(&pulled, REQUESTS as usize, Duration::from_secs(60)).await;
    if let Err(e) = other_call(channel).await {
        let producer = answers.message().await;
        panic!("the other call failed: {e}; the producer's stream: {producer:?}");
    }
    let sent = pulled.load(Ordering::Relaxed);
    assert!(
        sent < REQUESTS as usize / 2,
        "the producer was not paused: {sent} requests taken"
    );
    // They went out as many small frames, more than h2's default allowance
    // (about 2,200 of this size) for small frames held unread.
    let (frames, bytes) = (
        data.frames.load(Ordering::Relaxed),
        data.bytes.load(Ordering::Relaxed),
    );
    assert!(frames > 3_000, "{frames} DATA frames");
    assert!(bytes / frames < 32, "{bytes} bytes in {frames} DATA frames");

    // Reading the answers lets it carry on: every request stored, once.
    let mut ids = HashSet::new();
    let read_all = async {
        for seq in 1..=REQUESTS {
            let answer = answers.message().await.unwrap().expect("an answer");
            assert_eq!(answer.sequence, seq);
            let Some(Answer::Sent(ok)) = answer.result else {
                panic!("request {seq} refused: {answer:?}")
            };
            assert_eq!(ok.message_ids.len(), 1);
            assert!(
                ids.insert(ok.message_ids[0]),
                "id {} given twice",
                ok.message_ids[0]
            );
        }
        assert!(answers.message().await.unwrap().is_none());
    };
    tokio::time::timeout(Duration::from_secs(120), read_all)
        .await
        .expect("every request answered");
    assert_eq!(stored(&client, "tiny").await, REQUESTS);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_killed_mid_stream_keeps_every_acknowledged_message() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    client
        .create_queue("crash", "crash", RoutingType::Anycast, true)
        .await
        .unwrap();
    let publisher = client.publisher();
    let acked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (failed_tx, mut failed_rx) = mpsc::unbounded_channel();
    // 32 producers sending one message after another until a send fails.
    let producers: Vec<_> = (0..32)
        .map(|p| {
            let (publisher, acked, failed) = (publisher.clone(), acked.clone(), failed_tx.clone());
            tokio::spawn(async move {
                for i in 0.. {
                    match publisher
                        .send(OutgoingMessage::new("crash", format!("{p}-{i}")))
                        .await
                    {
                        Ok(id) => acked.lock().unwrap().push(id),
                        Err(err) => {
                            failed.send(err).unwrap();
                            return;
                        }
                    }
                }
            })
        })
        .collect();
    drop(failed_tx);
    // Let some be acknowledged, then crash.
    while acked.lock().unwrap().len() < 500 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    broker.kill9();
    for producer in producers {
        tokio::time::timeout(Duration::from_secs(30), producer)
            .await
            .expect("every send is answered once the broker is gone")
            .unwrap();
    }
    // Each producer's last send failed, saying whether it may have been stored.
    let mut failures = Vec::new();
    while let Some(err) = failed_rx.recv().await {
        failures.push(err);
    }
    assert_eq!(failures.len(), 32);
    for err in &failures {
        let clear = match err {
            // Sent, not answered.
            Error::Unconfirmed(why) => !why.is_empty(),
            // Not sent: no stream could be opened (connection refused or reset,
            // as a unary call would say).
            Error::Status { message, .. } => !message.is_empty(),
            _ => false,
        };
        assert!(clear, "{err}");
    }
    let unconfirmed = failures
        .iter()
        .find(|e| matches!(e, Error::Unconfirmed(_)))
        .expect("some sends were in flight");
    assert!(
        unconfirmed
            .to_string()
            .contains("may or may not have been stored"),
        "{unconfirmed}"
    );

    broker.restart().await;
    let client = broker.client().await;
    let stored = drain(&client, "crash").await;
    let acked = acked.lock().unwrap().clone();
    let lost: Vec<_> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_sends_share_frames() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    client
        .create_queue("coalesced", "coalesced", RoutingType::Anycast, true)
        .await
        .unwrap();
    let before = client.server_info().await.unwrap();
    let publisher = client.publisher();
    let tasks: Vec<_> = (0..200)
        .map(|t| {
            let publisher = publisher.clone();
            tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..50 {
                    let message = OutgoingMessage::new("coalesced", format!("{t}-{i}"));
                    ids.push(publisher.send(message).await.unwrap());
                }
                ids
            })
        })
        .collect();
    let mut ids = HashSet::new();
    for task in tasks {
        for id in task.await.unwrap() {
            assert!(ids.insert(id), "id {id} given twice");
        }
    }
    assert_eq!(ids.len(), 10_000);
    assert_eq!(stored(&client, "coalesced").await, 10_000);
    let frames = publisher.frames_sent();
    let after = client.server_info().await.unwrap();
    let commits = after.store_commits - before.store_commits;
    // 200 senders, at most 2 frames in flight: the frames carry many messages each.
    assert!(frames < 10_000 / 10, "{frames} frames for 10,000 messages");
    assert!(
        commits < 10_000 / 10,
        "{commits} store commits for 10,000 messages"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_publisher_sends_at_once_and_a_stopping_broker_answers_what_it_took() {
    let mut broker = Broker::start().await;
    let client = broker.client().await;
    let publisher = client.publisher();
    // Idle: one send goes alone and is answered promptly (no linger).
    let started = Instant::now();
    publisher.send(OutgoingMessage::new("idle", "one")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(publisher.frames_sent(), 1);

    // A graceful stop with sends in flight: every send is answered, and the
    // acknowledged ones are stored.
    let sends: Vec<_> = (0..2000)
        .map(|i| {
            let publisher = publisher.clone();
            tokio::spawn(async move { publisher.send(OutgoingMessage::new("idle", format!("{i}"))).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    broker.terminate().await;
    let mut acked = Vec::new();
    for send in sends {
        let result = tokio::time::timeout(Duration::from_secs(30), send)
            .await
            .expect("answered")
            .unwrap();
        if let Ok(id) = result {
            acked.push(id);
        }
    }
    broker.restart().await;
    let stored = drain(&broker.client().await, "idle").await;
    assert!(
        acked.iter().all(|id| stored.contains(id)),
        "an acknowledged message was lost"
    );
}

#[tokio::test]
async fn the_stream_ends_when_the_producer_closes_its_side() {
    // The shape the client uses: requests from a channel, answers as they come.
    let broker = Broker::start().await;
    let (tx, rx) = mpsc::channel(4);
    let mut messaging = MessagingClient::connect(broker.url()).await.unwrap();
    tx.send(request(1, "chan", &["a"])).await.unwrap();
    let mut answers = messaging
        .publish(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(answers.message().await.unwrap().unwrap().sequence, 1);
    tx.send(request(2, "chan", &["b"])).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().sequence, 2);
    drop(tx);
    assert!(answers.message().await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_linger_gathers_sends_into_one_frame() {
    let broker = Broker::start().await;
    let client = broker.client().await;
    let publisher = client.publisher_with(PublisherOptions {
        linger: Duration::from_millis(500),
        ..PublisherOptions::default()
    });
    // Sends 50 ms apart, well within the linger: one frame.
    let sends: Vec<_> = (0..5)
        .map(|i| {
            let publisher = publisher.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(50 * i)).await;
                publisher
                    .send(OutgoingMessage::new("lingered", format!("{i}")))
                    .await
            })
        })
        .collect();
    for send in sends {
        send.await.unwrap().unwrap();
    }
    assert_eq!(publisher.frames_sent(), 1);
    assert_eq!(stored(&client, "lingered").await, 5);
}
