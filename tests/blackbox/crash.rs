//! Durability under load: `kill -9` the broker at a random moment while
//! producers and consumers run, restart it on the same data dir, and check
//! what the clients were told against what the broker has.
//!
//! The clients keep a ledger: a send is recorded once the broker acknowledged
//! it, an ack once [`Consumer::flush`] confirmed it durable. The promises
//! checked after every crash are that an acknowledged send is never lost (it
//! was delivered and confirmed-acked, or it is still queued), a confirmed ack
//! is never undone (the message never comes back), and no body is corrupted:
//! each body is derived from its id and ends in a checksum, so a torn or mixed
//! up record is caught. Sends or acks that were in flight at the kill may go
//! either way (an ack sent but not confirmed may have removed its message);
//! that is the only freedom the broker has.
//!
//! The broker runs with 64 KiB journal segments (`journal-file-size`), so
//! that it moves journaled writes into the message store many times per run
//! and the kills also land in the middle of those checkpoints. A second run
//! also keeps at most 10 messages of the queue in memory
//! (`max-read-page-messages`), so that the kills land while messages are paged
//! in and out.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rebound_client::{Client, OutgoingMessage, RoutingType};

use crate::support::Broker;

const QUEUE: &str = "crash";
/// Crashes per test run.
const KILLS: usize = 6;
/// The broker runs under load for a random time in this range (ms) before each kill.
const UPTIME_MS: std::ops::Range<u64> = 150..1200;
/// Messages per send call, and per consumer ack.
const BATCH: usize = 20;
/// Journal segments small enough to checkpoint every few hundred messages.
const CONFIG: &str = "journal-file-size = 65536";
/// The same, with a queue that pages beyond 10 messages.
const PAGING_CONFIG: &str = r##"
journal-file-size = 65536

[[address-settings]]
match = "crash"
max-read-page-messages = 10
"##;
/// How long a client task may take to notice the broker is gone.
const NOTICE: Duration = Duration::from_secs(10);

/// What the broker told the clients.
#[derive(Default)]
struct Ledger {
    /// Ids handed to producers so far; no message may have an id at or above it.
    issued: AtomicU64,
    /// Sends the broker acknowledged.
    acknowledged: Mutex<HashSet<u64>>,
    /// Acks sent, confirmed or not: one in flight at a crash may have taken effect.
    ack_sent: Mutex<HashSet<u64>>,
    /// Acks the broker confirmed durable.
    confirmed: Mutex<HashSet<u64>>,
}

/// The body of message `id`: the id, bytes derived from it (a length that
/// varies with it), and an FNV-1a checksum of all that.
fn body(id: u64) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..16 + id % 97 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.push(x as u8);
    }
    let sum = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    body.extend(sum.to_le_bytes());
    body
}

/// The id of an intact body issued by this test, or what is wrong with it.
fn check(ledger: &Ledger, received: &[u8]) -> Result<u64, String> {
    let id = received
        .get(..8)
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| format!("body of {} bytes has no id", received.len()))?;
    if id >= ledger.issued.load(Ordering::SeqCst) {
        return Err(format!("message {id} was never sent"));
    }
    if received != body(id) {
        return Err(format!("message {id}: corrupted body {received:?}"));
    }
    Ok(id)
}

/// Sends batches until the broker goes away, recording acknowledged sends.
async fn produce(url: String, ledger: Arc<Ledger>) {
    let Ok(client) = Client::connect(&url).await else {
        return;
    };
    loop {
        let first = ledger.issued.fetch_add(BATCH as u64, Ordering::SeqCst);
        let ids = first..first + BATCH as u64;
        let batch = ids
            .clone()
            .map(|id| OutgoingMessage::new(QUEUE, body(id)))
            .collect();
        match client.send_batch(batch).await {
            Ok(response) => {
                assert_eq!(response.unrouted, 0, "queue {QUEUE} exists");
                ledger.acknowledged.lock().unwrap().extend(ids);
            }
            Err(_) => return,
        }
    }
}

/// Consumes, checks and acks until the broker goes away, recording confirmed
/// acks; an error is a broken promise.
async fn consume(url: String, ledger: Arc<Ledger>) -> Result<(), String> {
    let Ok(client) = Client::connect(&url).await else {
        return Ok(());
    };
    let Ok(mut consumer) = client.consume(QUEUE, 100).await else {
        return Ok(());
    };
    loop {
        let Ok(Some(first)) = consumer.next().await else {
            return Ok(());
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match consumer.next_timeout(Duration::ZERO).await {
                Ok(Some(d)) => batch.push(d),
                _ => break,
            }
        }
        let mut ids = Vec::new();
        for d in &batch {
            let id = check(&ledger, &d.message.body)?;
            if ledger.confirmed.lock().unwrap().contains(&id) {
                return Err(format!("message {id} came back after its ack was confirmed"));
            }
            ids.push(id);
        }
        let delivery_ids: Vec<u64> = batch.iter().map(|d| d.id).collect();
        ledger.ack_sent.lock().unwrap().extend(&ids);
        if consumer.ack(&delivery_ids).await.is_err() {
            return Ok(());
        }
        match consumer.flush().await {
            Ok(unknown) if unknown.is_empty() => ledger.confirmed.lock().unwrap().extend(ids),
            Ok(unknown) => return Err(format!("acks of deliveries {unknown:?} were refused")),
            Err(_) => return Ok(()),
        }
    }
}

also_on_postgres! {
    #[tokio::test(flavor = "multi_thread")]
    async fn kill9_under_load_loses_no_acknowledged_send_and_undoes_no_confirmed_ack() {
        kill9_under_load(CONFIG).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill9_while_paging_in_and_out_loses_nothing_acknowledged() {
    kill9_under_load(PAGING_CONFIG).await;
}

/// The queue's message count, once the broker has counted what start-up left
/// on disk (`counting`: until then the count is a lower bound).
async fn counted(client: &Client) -> u64 {
    let deadline = tokio::time::Instant::now() + NOTICE;
    loop {
        let info = client.queue(QUEUE).await.unwrap();
        if !info.counting {
            return info.messages;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still counting after {NOTICE:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn kill9_under_load(config: &str) {
    let mut broker = Broker::start_with_config(config).await;
    broker
        .client()
        .await
        .create_queue(QUEUE, QUEUE, RoutingType::Anycast, true)
        .await
        .unwrap();
    let ledger = Arc::new(Ledger::default());

    for round in 1..=KILLS {
        let url = broker.url();
        let producers: Vec<_> = (0..2)
            .map(|_| tokio::spawn(produce(url.clone(), ledger.clone())))
            .collect();
        let consumers: Vec<_> = (0..2)
            .map(|_| tokio::spawn(consume(url.clone(), ledger.clone())))
            .collect();
        let uptime = rand::random_range(UPTIME_MS);
        tokio::time::sleep(Duration::from_millis(uptime)).await;
        broker.kill9();
        eprintln!(
            "crash {round}: killed after {uptime} ms; {} sends acknowledged, {} acks confirmed so far",
            ledger.acknowledged.lock().unwrap().len(),
            ledger.confirmed.lock().unwrap().len()
        );
        for producer in producers {
            tokio::time::timeout(NOTICE, producer)
                .await
                .expect("a producer notices the crash")
                .unwrap();
        }
        for consumer in consumers {
            let outcome = tokio::time::timeout(NOTICE, consumer)
                .await
                .expect("a consumer notices the crash")
                .unwrap();
            if let Err(broken) = outcome {
                panic!("round {round}: {broken}");
            }
        }
        broker.restart().await;
    }

    // Everything acknowledged and never acked must still be queued, once.
    let client = broker.client().await;
    let queued = counted(&client).await;
    let mut consumer = client.consume(QUEUE, 1000).await.unwrap();
    let mut left = HashSet::new();
    while let Some(d) = consumer.next_timeout(Duration::from_secs(2)).await.unwrap() {
        let id = check(&ledger, &d.message.body).unwrap();
        assert!(
            !ledger.confirmed.lock().unwrap().contains(&id),
            "message {id} came back after its ack was confirmed"
        );
        assert!(left.insert(id), "message {id} is queued twice");
        consumer.ack(&[d.id]).await.unwrap();
    }
    consumer.close().await.unwrap();
    assert_eq!(
        left.len() as u64,
        queued,
        "the queue's count matches what it delivers"
    );

    let acknowledged = ledger.acknowledged.lock().unwrap();
    let confirmed = ledger.confirmed.lock().unwrap();
    let ack_sent = ledger.ack_sent.lock().unwrap();
    let mut lost: Vec<_> = acknowledged
        .iter()
        .filter(|id| !ack_sent.contains(id) && !left.contains(id))
        .copied()
        .collect();
    lost.sort_unstable();
    assert!(
        lost.is_empty(),
        "{} acknowledged sends lost, first: {:?}",
        lost.len(),
        &lost[..lost.len().min(20)]
    );
    assert!(
        !acknowledged.is_empty() && !confirmed.is_empty(),
        "the load ran: {} sent, {} acked",
        acknowledged.len(),
        confirmed.len()
    );
}
