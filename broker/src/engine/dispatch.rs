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
//!
//! When storage fails a round (storing those counts, or moving expired messages
//! on), the messages stay where they were and the dispatcher waits before the next
//! round, longer after each failure up to [`MAX_BACKOFF`]: retrying at once would
//! spin on a database that is away. A commit that succeeds after failures ends
//! the wait (`commit_health.rs`), so that a short recovery is not slept through. One WARN says when such an episode starts, one
//! INFO when it ends.
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use tracing::{error, info, warn};

use super::Broker;
use crate::error::{BrokerError, Result};
use crate::message::Selectable;
use crate::queue::{Dispatched, Pick, Queue};
use crate::redelivery::geometric;
use crate::time::now_ms;

/// The wait after the first failed round; it doubles with each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between rounds that storage fails: what delivery may lag
/// behind the storage's return.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Broker {
    /// Starts a queue's dispatcher as one of the engine's tasks.
    pub(super) fn spawn_dispatcher(self: &Arc<Self>, queue: Arc<Queue>) {
        self.spawn(run(self.clone(), queue));
    }
}

async fn run(broker: Arc<Broker>, queue: Arc<Queue>) {
    let mut failing = Failing::default();
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
        let persist = broker.cluster().persists_counts_before_delivery();
        let (picks, expired, next_due) = queue.pick(now, persist, &matches);
        let tried = !picks.is_empty() || !expired.is_empty();
        let mut failed = None;
        if !expired.is_empty()
            && let Err(err) = broker.expire(&queue, expired).await
        {
            failed = Some(("moving expired messages on", err));
        }
        if !picks.is_empty()
            && let Err(err) = hand_over(&broker, &queue, picks, persist).await
        {
            failed = Some(("storing delivery counts", err));
        }
        match failed {
            Some((what, err)) => {
                let wait = failing.failed(&queue, what, &err);
                if !back_off(&broker, &queue, wait).await {
                    return;
                }
                continue;
            }
            None if tried => failing.ended(&queue),
            None => {}
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

/// Rounds of a dispatcher that storage failed, in a row.
#[derive(Default)]
struct Failing {
    rounds: u32,
}

impl Failing {
    /// Counts a failed round, logging the first of an episode; returns how long to
    /// wait before the next.
    fn failed(&mut self, queue: &Queue, what: &str, err: &BrokerError) -> Duration {
        if self.rounds == 0 {
            warn!(
                queue = %queue.name,
                %err,
                "{what} failed: delivery waits, and is retried after a growing pause"
            );
        }
        self.rounds = self.rounds.saturating_add(1);
        let ms = geometric(FIRST_BACKOFF.as_millis() as u64, 2.0, self.rounds);
        Duration::from_millis(ms).min(MAX_BACKOFF)
    }

    /// A round that storage did not fail: the end of an episode, if one was on.
    fn ended(&mut self, queue: &Queue) {
        if self.rounds > 0 {
            info!(queue = %queue.name, failed_attempts = self.rounds, "storage works again: delivery resumed");
            self.rounds = 0;
        }
    }
}

/// Waits `wait` whatever wakes the queue (the failed round's messages coming back
/// do), or, once [`FIRST_BACKOFF`] has passed, until a commit succeeds after
/// failures; false if the dispatcher is to stop instead. Not at once: a round
/// that storage fails for this queue alone (its lease gone) would otherwise
/// be tried again after each success of the other queues' commits.
async fn back_off(broker: &Broker, queue: &Queue, wait: Duration) -> bool {
    let now = tokio::time::Instant::now();
    let until = now + wait;
    let mut recovered = pin!(async {
        let recovered = broker.commits_recovered();
        tokio::time::sleep_until(now + FIRST_BACKOFF).await;
        recovered.await
    });
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(until) => return true,
            _ = &mut recovered => return true,
            _ = queue.wake.notified() => {
                if queue.is_closed() {
                    return false;
                }
            }
            _ = broker.shutdown().cancelled() => return false,
        }
    }
}

/// Sends picked messages to their consumers, one batch per consumer. If their
/// delivery counts cannot be stored, none goes and they are back in the queue.
async fn hand_over(broker: &Broker, queue: &Queue, mut picks: Vec<Pick>, persist: bool) -> Result<()> {
    if persist
        && let Err(err) = broker
            .persist_counts(queue, picks.iter_mut().map(|p| &mut p.entry))
            .await
    {
        picks.iter().for_each(|p| queue.unpick(p));
        return Err(err);
    }
    // The node stepped down while the counts were stored (a database that
    // answered late), and maybe took the queue again since: the queue's next
    // serving delivers them, and a delivery from here would be a second
    // consumer holding the message. One round's picks share their serving
    // (picked under one lock), so the first speaks for all: one lock, not one
    // per pick.
    if picks.first().is_some_and(|p| !queue.serves(&p.entry)) {
        return Ok(());
    }
    let mut batches: Vec<(Vec<Dispatched>, Vec<Pick>)> = Vec::new();
    let now = now_ms();
    for pick in picks {
        let record = match broker.load(queue, &pick.entry) {
            Ok(Some(record)) => record,
            Ok(None) => {
                // Gone from storage behind the queue's back: it cannot be delivered
                // again either, so it leaves the queue and the credit is given back.
                warn!(queue = %queue.name, message_id = pick.entry.id, "message vanished from storage; dropping it");
                queue.forget(&pick);
                continue;
            }
            Err(err) => {
                error!(queue = %queue.name, message_id = pick.entry.id, %err, "cannot read message");
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
    Ok(())
}
