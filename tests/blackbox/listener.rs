//! The listener container: handler outcomes mapped to settlements (retry later,
//! dead-letter, panics), consume-transform-produce in transactions, and a broker
//! restart in the middle of a run.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rebound_client::{Client, HandlerError, Incoming, Listener, OutgoingMessage, RoutingType, proto};

use crate::messaging::{body, receive, send_bodies};
use crate::support::Broker;

const IDLE: Duration = Duration::from_secs(5);
const QUIET: Duration = Duration::from_millis(400);

const DLQ_CONFIG: &str = r##"
[[address-settings]]
match = "#"
max-delivery-attempts = 3
dead-letter-address = "DLQ"

[[addresses]]
name = "DLQ"
[[addresses.queues]]
name = "DLQ"
"##;

fn text(incoming: &Incoming) -> String {
    String::from_utf8_lossy(&incoming.message.body).into_owned()
}

/// Polls `done` until it holds, failing after `limit`.
async fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a test handler saw: per body, the delivery counts of its runs.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<String, Vec<u32>>>>);

impl Seen {
    fn record(&self, incoming: &Incoming) {
        self.0
            .lock()
            .unwrap()
            .entry(text(incoming))
            .or_default()
            .push(incoming.delivery_count);
    }

    fn get(&self) -> HashMap<String, Vec<u32>> {
        self.0.lock().unwrap().clone()
    }
}

/// A successful handler run: body, delivery count, redelivered, when.
type Run = (String, u32, bool, Instant);

#[tokio::test(flavor = "multi_thread")]
async fn temporarily_unavailable_is_retried_later_while_the_other_messages_go_on() {
    let broker = Broker::start_with_config(
        r##"
[[address-settings]]
match = "#"
redelivery-delay = 500
max-delivery-attempts = 5
"##,
    )
    .await;
    let client = broker.client().await;
    client
        .create_queue("jobs", "jobs", RoutingType::Anycast, true)
        .await
        .unwrap();
    send_bodies(
        &client,
        "jobs",
        std::iter::once("flaky".to_owned()).chain((0..9).map(|i| format!("job {i}"))),
    )
    .await;

    let done: Arc<Mutex<Vec<Run>>> = Arc::default();
    let start = Instant::now();
    let listener = Listener::builder(client.clone(), "jobs").concurrency(2).start({
        let done = done.clone();
        move |incoming: Incoming| {
            let done = done.clone();
            async move {
                if text(&incoming) == "flaky" && incoming.delivery_count <= 2 {
                    return Err(HandlerError::temporarily_unavailable("the dependency is down"));
                }
                let entry = (
                    text(&incoming),
                    incoming.delivery_count,
                    incoming.redelivered,
                    Instant::now(),
                );
                done.lock().unwrap().push(entry);
                Ok(())
            }
        }
    });
    eventually(Duration::from_secs(20), "all 10 jobs", || {
        done.lock().unwrap().len() == 10
    })
    .await;
    let stats = listener.stop().await;

    let done = done.lock().unwrap().clone();
    let (last, count, redelivered, at) = done.last().unwrap().clone();
    assert_eq!(
        (last.as_str(), count, redelivered),
        ("flaky", 3, true),
        "{done:?}"
    );
    assert!(
        at - start >= Duration::from_millis(900),
        "two redelivery delays: {:?}",
        at - start
    );
    for (body, count, redelivered, at) in &done[..9] {
        assert_eq!((*count, *redelivered), (1, false), "{body}");
        assert!(
            *at - start < Duration::from_millis(450),
            "{body} did not wait for flaky: {:?}",
            *at - start
        );
    }
    assert_eq!(
        (stats.acked, stats.retried, stats.failed, stats.abandoned),
        (10, 2, 0, 0)
    );
    let info = client.queue("jobs").await.unwrap();
    assert_eq!((info.messages, info.acked), (0, 10));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_handler_dead_letters_its_message_and_the_others_are_processed_once() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    client
        .create_queue("orders", "orders", RoutingType::Anycast, true)
        .await
        .unwrap();
    let bodies: Vec<String> = (0..20)
        .map(|i| {
            if i == 5 {
                "poison".to_owned()
            } else {
                format!("order {i}")
            }
        })
        .collect();
    send_bodies(&client, "orders", bodies.clone()).await;

    let seen = Seen::default();
    let listener = Listener::builder(client.clone(), "orders").concurrency(4).start({
        let seen = seen.clone();
        move |incoming: Incoming| {
            let seen = seen.clone();
            async move {
                seen.record(&incoming);
                if text(&incoming) == "poison" {
                    panic!("cannot digest {}", text(&incoming));
                }
                Ok(())
            }
        }
    });
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let dead = dlq
        .next_timeout(Duration::from_secs(20))
        .await
        .unwrap()
        .expect("the poison is dead-lettered");
    assert_eq!(body(&dead), "poison");
    eventually(IDLE, "all orders", || seen.get().len() == 20).await;
    let stats = listener.stop().await;

    let seen = seen.get();
    assert_eq!(seen["poison"], [1, 2, 3]);
    for b in bodies.iter().filter(|b| *b != "poison") {
        assert_eq!(seen[b], [1], "{b} processed exactly once");
    }
    let Some(proto::property_value::Value::String(failures)) = dead
        .message
        .properties
        .get("_REBOUND_FAILURES")
        .and_then(|p| p.value.clone())
    else {
        panic!("no failure history on {dead:?}");
    };
    assert!(
        failures.contains("handler panicked: cannot digest poison"),
        "{failures}"
    );
    assert_eq!(
        (stats.acked, stats.failed, stats.dead_lettered, stats.abandoned),
        (19, 3, 0, 0)
    );
    assert_eq!(client.queue("orders").await.unwrap().messages, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transacted_listener_commits_what_it_produces_with_the_ack() {
    let broker = Broker::start_with_config(DLQ_CONFIG).await;
    let client = broker.client().await;
    client
        .create_queue("in", "in", RoutingType::Anycast, true)
        .await
        .unwrap();
    client
        .create_queue("out", "out", RoutingType::Anycast, true)
        .await
        .unwrap();
    send_bodies(&client, "in", ["a", "b", "bad", "c", "flaky"].map(String::from)).await;

    let seen = Seen::default();
    let listener = Listener::builder(client.clone(), "in")
        .concurrency(2)
        .transacted(true)
        .start({
            let seen = seen.clone();
            move |incoming: Incoming| {
                let seen = seen.clone();
                async move {
                    seen.record(&incoming);
                    let tx = incoming
                        .transaction()
                        .expect("a transacted listener gives a transaction");
                    let input = text(&incoming);
                    tx.send(OutgoingMessage::new("out", input.to_uppercase())).await?;
                    match input.as_str() {
                        "bad" => Err(HandlerError::permanent("invalid payload")),
                        "flaky" if incoming.delivery_count == 1 => {
                            Err(HandlerError::retry_after("not yet", Duration::from_millis(50)))
                        }
                        _ => Ok(()),
                    }
                }
            }
        });
    let mut dlq = client.consume("DLQ", 1).await.unwrap();
    let dead = dlq
        .next_timeout(IDLE)
        .await
        .unwrap()
        .expect("bad is dead-lettered");
    assert_eq!(body(&dead), "bad");
    eventually(IDLE, "flaky to succeed", || {
        seen.get().get("flaky").is_some_and(|c| c.len() == 2)
    })
    .await;
    let stats = listener.stop().await;

    let mut out: Vec<String> = receive(&mut client.consume("out", 10).await.unwrap(), 10, QUIET)
        .await
        .iter()
        .map(body)
        .collect();
    out.sort();
    assert_eq!(
        out,
        ["A", "B", "C", "FLAKY"],
        "only the committed transactions' sends"
    );
    assert_eq!((stats.acked, stats.retried, stats.dead_lettered), (4, 1, 1));
    assert_eq!(client.queue("in").await.unwrap().messages, 0);
}

async fn restart_loses_nothing(kill9: bool) {
    const N: usize = 200;
    let mut broker = Broker::start().await;
    let client = Client::connect(&broker.url()).await.unwrap();
    client
        .create_queue("work", "work", RoutingType::Anycast, true)
        .await
        .unwrap();
    send_bodies(&client, "work", (0..N).map(|i| format!("w{i}"))).await;

    let seen = Seen::default();
    let listener = Listener::builder(client.clone(), "work").concurrency(4).start({
        let seen = seen.clone();
        move |incoming: Incoming| {
            let seen = seen.clone();
            async move {
                seen.record(&incoming);
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(())
            }
        }
    });
    eventually(IDLE, "a quarter of the work", || seen.get().len() >= N / 4).await;
    let before = broker.addr();
    let handled_before = seen.get().len();
    if kill9 {
        broker.kill9();
    }
    broker.restart_on_same_port().await;
    assert_eq!(broker.addr(), before);
    eventually(Duration::from_secs(60), "all the work", || seen.get().len() == N).await;
    // Settles of the last handlers are pipelined; stop waits for them and closes.
    let stats = listener.stop().await;

    let seen = seen.get();
    let runs: u64 = seen.values().map(|c| c.len() as u64).sum();
    assert!(handled_before < N, "the restart came mid-run");
    assert_eq!(seen.len(), N, "every message handled");
    assert!(stats.reconnects >= 1, "{stats:?}");
    assert_eq!(
        runs,
        stats.acked + stats.abandoned,
        "every run acked once, or abandoned with its stream: {stats:?}"
    );
    assert!(stats.acked >= N as u64, "{stats:?}");
    let info = client.queue("work").await.unwrap();
    assert_eq!(
        (info.messages, info.delivering),
        (0, 0),
        "nothing left, nothing lost: {info:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_restart_during_a_listener_run_loses_no_message() {
    restart_loses_nothing(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_kill9_during_a_listener_run_loses_no_message() {
    restart_loses_nothing(true).await;
}
