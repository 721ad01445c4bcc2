//! A queue's dispatcher: the task that hands messages to consumers.
//!
//! One task per queue sleeps until something changes — a message arrives or comes
//! back, a consumer grants credit or settles, or the next scheduled redelivery or
//! expiration falls due — then picks what it can deliver and sends it. A message
//! waiting for a delayed redelivery therefore costs a timer entry, not CPU, and never
//! stands in the way of the messages behind it.
//!
//! With `persist-delivery-count-before-delivery` the incremented delivery counts are
//! committed before the deliveries leave, so a crash mid-delivery cannot make a
//! redelivery look like a first delivery.
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, warn};

use super::Broker;
use crate::message::Selectable;
use crate::queue::{Dispatched, Pick, Queue};
use crate::time::now_ms;

impl Broker {
    /// Starts a queue's dispatcher as one of the engine's tasks.
    pub(super) fn spawn_dispatcher(self: &Arc<Self>, queue: Arc<Queue>) {
        self.spawn(run(self.clone(), queue));
    }
}

async fn run(broker: Arc<Broker>, queue: Arc<Queue>) {
    loop {
        if queue.is_closed() || broker.is_shutting_down() {
            return;
        }
        let now = now_ms();
        // A selector may need a body that only storage has: read under the queue's
        // lock, which is why a filtered consumer's scan is bounded.
        let matches = |entry: &_, filter: &rebound_selector::Selector| match broker.load(&queue, entry) {
            Ok(Some(record)) => filter.matches(&Selectable(&record)),
            _ => false,
        };
        // Read once: a picked entry that will get its count stored must know it has a state.
        let persist = broker.persists_counts_before_delivery();
        let (picks, expired, next_due) = queue.pick(now, persist, &matches);
        if !expired.is_empty()
            && let Err(err) = broker.expire(&queue, expired).await
        {
            error!(queue = %queue.name, %err, "expiring messages failed");
        }
        if !picks.is_empty() {
            hand_over(&broker, &queue, picks, persist).await;
        }
        let sleep = next_due.map(|due| Duration::from_millis(due.saturating_sub(now)));
        tokio::select! {
            _ = queue.wake.notified() => {}
            _ = sleep_for(sleep) => {}
            _ = broker.shutdown().cancelled() => return,
        }
    }
}

async fn sleep_for(duration: Option<Duration>) {
    match duration {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Sends picked messages to their consumers, one batch per consumer.
async fn hand_over(broker: &Broker, queue: &Queue, mut picks: Vec<Pick>, persist: bool) {
    if persist
        && let Err(err) = broker
            .persist_counts(queue, picks.iter_mut().map(|p| &mut p.entry))
            .await
    {
        error!(queue = %queue.name, %err, "could not persist delivery counts; not delivering");
        picks.iter().for_each(|p| queue.unpick(p));
        return;
    }
    let mut batches: Vec<(Vec<Dispatched>, Vec<Pick>)> = Vec::new();
    let now = now_ms();
    for pick in picks {
        let record = match broker.load(queue, &pick.entry) {
            Ok(Some(record)) => record,
            Ok(None) => {
                // Gone from storage behind the queue's back: it cannot be delivered
                // again either, so it leaves the queue and the credit is given back.
                warn!(queue = %queue.name, message = pick.entry.id, "message vanished from storage; dropping it");
                queue.forget(&pick);
                continue;
            }
            Err(err) => {
                error!(queue = %queue.name, message = pick.entry.id, %err, "cannot read message");
                queue.unpick(&pick);
                continue;
            }
        };
        // End-to-end latency: from the send to the first delivery.
        if pick.entry.delivery_count == 1 {
            let waited_ms = now.saturating_sub(record.timestamp_ms);
            broker.metrics.delivery_latency.observe(waited_ms as f64 / 1000.0);
        }
        let dispatched = Dispatched {
            delivery_id: pick.delivery_id,
            delivery_count: pick.entry.delivery_count,
            record,
        };
        match batches.iter_mut().find(|(_, p)| p[0].consumer == pick.consumer) {
            Some((batch, members)) => {
                batch.push(dispatched);
                members.push(pick);
            }
            None => batches.push((vec![dispatched], vec![pick])),
        }
    }
    for (batch, members) in batches {
        if members[0].consumer_tx.send(batch).is_err() {
            // The consumer is gone; its detach already took back what it held.
            members.iter().for_each(|p| queue.unpick(p));
        }
    }
}
