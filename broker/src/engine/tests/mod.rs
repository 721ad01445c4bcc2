//! Engine tests on the in-memory store: the engine's operations without a binary,
//! a socket or a disk. The black-box tests in `tests/` cover the same ground
//! through the real daemon; these pin down the engine's own contract.
mod address_full;
mod creation;
mod declare;
mod duplicates;
mod groups;
mod held;
mod intercepted;
mod lifecycle;
mod limits;
mod manage;
mod outage;
mod paging;
mod random_input;
mod redelivery;
mod refusals;
mod scheduled;
mod serving;
mod shutdown;
mod states;
mod transactions;

use std::sync::Arc;
use std::time::Duration;

use rebound_config::Config;
use rebound_storage::{MemoryStore, MessageRecord, Store};
use tokio::sync::oneshot;

use super::{Broker, Joins, Settled, Settlement, Subscription};
use crate::queue::Dispatched;

/// A config with a DLQ, as most tests want.
const WITH_DLQ: &str = r##"
[[address-settings]]
match = "#"
dead-letter-address = "DLQ"
max-delivery-attempts = 3

[[addresses]]
name = "DLQ"
  [[addresses.queues]]
  name = "DLQ"
"##;

fn config(text: &str) -> Config {
    Config::parse(text, "test.toml").expect("test config")
}

async fn open(text: &str, store: Arc<dyn Store>) -> Arc<Broker> {
    Broker::open(&config(text), store).await.expect("broker opens")
}

async fn broker(text: &str) -> (Arc<Broker>, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    (open(text, store.clone()).await, store)
}

fn message(address: &str, body: &str) -> MessageRecord {
    MessageRecord {
        address: address.into(),
        body: body.as_bytes().to_vec().into(),
        durable: true,
        priority: crate::message::DEFAULT_PRIORITY,
        ..Default::default()
    }
}

async fn send(broker: &Arc<Broker>, address: &str, bodies: &[&str]) -> Vec<u64> {
    let batch = bodies.iter().map(|b| message(address, b)).collect();
    broker.send(batch).await.expect("send").ids
}

/// The next `n` deliveries, waiting at most a few seconds for them.
async fn receive(sub: &mut Subscription, n: usize) -> Vec<Dispatched> {
    let mut got = Vec::new();
    while got.len() < n {
        let batch = tokio::time::timeout(Duration::from_secs(5), sub.deliveries.recv())
            .await
            .unwrap_or_else(|_| panic!("{} of {n} deliveries after 5 s", got.len()))
            .expect("the queue is still there");
        got.extend(batch);
    }
    got
}

/// Whether anything is delivered within `wait`.
async fn nothing_within(sub: &mut Subscription, wait: Duration) -> bool {
    tokio::time::timeout(wait, sub.deliveries.recv()).await.is_err()
}

/// Settles and waits for the answer.
async fn settle(
    broker: &Arc<Broker>,
    sub: &Subscription,
    ids: &[u64],
    how: Settlement,
    transaction: Option<u64>,
) -> Settled {
    let (tx, rx) = oneshot::channel();
    broker
        .settle_deliveries(
            &sub.queue,
            sub.consumer,
            ids.to_vec(),
            how,
            transaction.map(Joins::Here),
            move |r| {
                let _ = tx.send(r);
            },
        )
        .expect("a valid settle");
    rx.await.expect("answered").expect("durable")
}

fn body(d: &Dispatched) -> &str {
    std::str::from_utf8(&d.record.body).unwrap()
}

fn ids(deliveries: &[Dispatched]) -> Vec<u64> {
    deliveries.iter().map(|d| d.delivery_id).collect()
}
