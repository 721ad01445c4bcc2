//! Shutting down while settles are in flight: every settle already taken is
//! finished before the store closes, so nothing is lost or half-applied.
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rebound_storage::{Commit, Op, StorageError};

use super::intercepted::{Hook, Intercepted};
use super::*;
use crate::dead_letter;

/// Commits that take a while, as a disk's do: each is applied to the memory store
/// 20 ms after it was handed over. Like the real engine, `close` finishes the
/// commits it was already given, and refuses later ones.
#[derive(Default)]
struct Slow {
    closed: AtomicBool,
    in_flight: Arc<AtomicUsize>,
}

impl Hook for Slow {
    fn commit(&self, inner: &Arc<MemoryStore>, ops: Vec<Op>) -> Commit {
        if self.closed.load(Ordering::SeqCst) {
            return Commit::ready(Err(StorageError::Closed));
        }
        let (tx, rx) = oneshot::channel();
        let (inner, in_flight) = (inner.clone(), self.in_flight.clone());
        in_flight.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = tx.send(inner.commit(ops).await);
            in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        Commit::from(rx)
    }

    fn close(&self, inner: &MemoryStore) -> Result<(), StorageError> {
        self.closed.store(true, Ordering::SeqCst);
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        inner.close()
    }
}

/// The DLQ is created by the first dead letter: that settle makes two commits.
const AUTO_DLQ: &str = "[[address-settings]]\nmatch = \"#\"\ndead-letter-address = \"DLQ\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_waits_for_settles_in_flight() {
    let memory = Arc::new(MemoryStore::new());
    let slow = Arc::new(Intercepted {
        inner: memory.clone(),
        hook: Slow::default(),
    });
    let broker = open(AUTO_DLQ, slow).await;
    let bodies: Vec<String> = (0..100).map(|i| i.to_string()).collect();
    let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
    send(&broker, "orders", &bodies).await;
    let mut sub = broker.subscribe("orders", 100, "").await.unwrap();
    let got = receive(&mut sub, 100).await;

    // Ack the even messages and dead-letter the odd ones, one settle each, and
    // shut down before any of them can have reached the store.
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    for d in &got {
        let how = if body(d).parse::<u32>().unwrap() % 2 == 0 {
            Settlement::Ack
        } else {
            Settlement::DeadLetter { reason: "bad".into() }
        };
        let answers = answers.clone();
        broker
            .settle_deliveries(
                &sub.queue,
                sub.consumer,
                vec![d.delivery_id],
                how,
                None,
                move |r| {
                    answers
                        .lock()
                        .unwrap()
                        .push(r.map(|s| matches!(s, Settled::Done { .. })));
                },
            )
            .unwrap();
    }
    broker.close().await.unwrap();
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    assert_eq!(
        answers.len(),
        100,
        "every settle was answered before close returned"
    );
    assert!(answers.iter().all(|a| matches!(a, Ok(true))), "{answers:?}");

    // After a restart: no message left in orders, each odd one exactly once in
    // the DLQ, pointing back at its original.
    let broker = open(AUTO_DLQ, Arc::new(memory.reopen())).await;
    assert_eq!(broker.queue("orders").unwrap().snapshot().messages, 0);
    let dead = broker.management().browse("DLQ", "", 1000).unwrap();
    let mut originals: Vec<u64> = dead
        .iter()
        .map(
            |b| match &b.record.properties[dead_letter::ORIG_MESSAGE_ID].value {
                Some(rebound_storage::records::property_value::Value::Int(id)) => *id as u64,
                other => panic!("{other:?}"),
            },
        )
        .collect();
    originals.sort_unstable();
    let mut odd: Vec<u64> = got
        .iter()
        .filter(|d| body(d).parse::<u32>().unwrap() % 2 == 1)
        .map(|d| d.record.message_id)
        .collect();
    odd.sort_unstable();
    assert_eq!(originals, odd);
}
