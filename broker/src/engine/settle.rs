//! Settling: what happens to deliveries once a consumer has answered for them, or
//! has gone without answering.
//!
//! An ack removes the message. A nack, a rolled-back ack and a consumer that dies
//! holding a delivery all count as a failed attempt and go through the redelivery
//! policy (`redelivery.rs`): back at once, back after a delay (waiting in the
//! queue's timeline), or on to the dead-letter address (`moves.rs`). A release is
//! not an attempt: the message is back at once with its count restored.
//!
//! Outage mode (`outage.rs`) sees every outcome first: acks end an outage, failures
//! may start one, and a failure during one is not the message's attempt.
use std::sync::Arc;

use tracing::info;

use super::Broker;
use super::moves::Exit;
use super::ops::{removal_ops, state_op};
use crate::dead_letter::Reason;
use crate::error::Result;
use crate::message::bounded_reason;
use crate::outage::{self, Change};
use crate::queue::{Entry, Queue};
use crate::redelivery::{self, Decision};
use crate::time::now_ms;

/// How a consumer settled its deliveries.
#[derive(Debug, Clone, PartialEq)]
pub enum Settlement {
    Ack,
    /// Failed: counts as an attempt; redelivered or dead-lettered per the settings.
    Nack {
        reason: String,
        retry_after_ms: Option<u64>,
        /// The consumer's dependency is down: pause the queue this long
        /// (outage mode, `outage.rs`).
        pause_queue_ms: Option<u64>,
    },
    /// Not processed: back at once, not counted.
    Release,
    /// Will never succeed: straight to the dead-letter address.
    DeadLetter {
        reason: String,
    },
}

impl Broker {
    /// Carries out a settlement of deliveries already taken from the queue.
    pub async fn settle(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
        how: Settlement,
    ) -> Result<()> {
        match how {
            Settlement::Ack => {
                let n = entries.len();
                self.remove(queue, entries).await?;
                self.acked(queue, n);
                Ok(())
            }
            Settlement::Release => self.release(queue, entries).await,
            Settlement::Nack {
                reason,
                retry_after_ms,
                pause_queue_ms,
            } => {
                self.fail(queue, entries, &reason, retry_after_ms, pause_queue_ms)
                    .await
            }
            Settlement::DeadLetter { reason } => {
                queue.outage(|o| entries.iter().for_each(|e| o.returned(e.id)));
                let reason = Reason::Rejected(bounded_reason(&reason));
                let items = entries
                    .into_iter()
                    .map(|e| (e, Exit::DeadLetter(reason.clone())))
                    .collect();
                self.leave(queue, items).await
            }
        }
    }

    /// Counts `n` acks of `queue`'s messages, which also end an outage.
    pub(super) fn acked(&self, queue: &Queue, n: usize) {
        queue.count(|c| c.acked += n as u64);
        let policy = outage::Policy::of(&self.settings_for(&queue.address));
        if let Some(change) = queue.outage(|o| o.succeeded(now_ms(), n, &policy)) {
            log_outage(queue, change);
        }
    }

    /// Removes entries taken from `queue` for good (acked, dropped). If storage
    /// refuses, they are back in the queue as they were: they are still stored, and
    /// a message that is stored but in no queue would show up only after a restart.
    ///
    /// Nothing waits on the removal of ungrouped messages, so their commit may
    /// wait briefly to share a sync ([`rebound_storage::Store::commit_patient`]).
    /// A grouped message's removal releases the group's next message: it does
    /// not wait.
    pub(super) async fn remove(&self, queue: &Queue, entries: Vec<Entry>) -> Result<()> {
        let ops = removal_ops(queue, &entries);
        let commit = match entries.iter().any(|e| e.group.is_some()) {
            true => self.submit(ops),
            false => self.submit_patient(ops),
        };
        let result = self.commit(commit).await;
        match result {
            Ok(()) => queue.finish(&entries),
            Err(_) => {
                queue.outage(|o| entries.iter().for_each(|e| o.returned(e.id)));
                queue.requeue(entries.into_iter().map(|e| (e, 0)), now_ms());
            }
        }
        result
    }

    /// Back at once, and the delivery does not count.
    pub(super) async fn release(self: &Arc<Self>, queue: &Queue, entries: Vec<Entry>) -> Result<()> {
        let now = now_ms();
        let persist = self.cluster().persists_counts_before_delivery();
        queue.outage(|o| entries.iter().for_each(|e| o.returned(e.id)));
        let mut ops = Vec::new();
        let back: Vec<(Entry, u64)> = entries
            .into_iter()
            .map(|mut e| {
                e.delivery_count = e.delivery_count.saturating_sub(1);
                if e.stored && persist {
                    ops.push(state_op(queue, &mut e, 0));
                }
                (e, 0)
            })
            .collect();
        let result = self.commit(self.submit(ops)).await;
        queue.requeue(back, now);
        result
    }

    /// Applies the redelivery policy to failed deliveries taken from `queue`,
    /// after outage mode (`outage.rs`) has seen them: a failure during an outage
    /// gives the message its attempt back (unless `outage-counts-attempts`) and
    /// puts it back at once, the queue's pause holding it.
    pub(super) async fn fail(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        entries: Vec<Entry>,
        reason: &str,
        retry_after_ms: Option<u64>,
        pause_queue_ms: Option<u64>,
    ) -> Result<()> {
        let settings = self.settings_for(&queue.address);
        if let Some(asked) = retry_after_ms
            && let Some(cap) = redelivery::retry_after_cap(&settings, asked)
        {
            info!(
                queue = %queue.name,
                asked_ms = asked,
                max_retry_after_ms = cap,
                "a consumer's retry-after is longer than max-retry-after; redelivering after max-retry-after"
            );
        }
        let now = now_ms();
        let policy = outage::Policy::of(&settings);
        let (in_outage, changes) = queue.outage(|o| {
            let mut changes = Vec::new();
            let mut in_outage: Vec<bool> = entries
                .iter()
                .map(|e| {
                    let failure = o.failed(now, e.id, &policy);
                    changes.extend(failure.change);
                    failure.in_outage
                })
                .collect();
            if let Some(ms) = pause_queue_ms {
                changes.extend(o.pause(now, ms, &policy));
                in_outage.fill(true);
            }
            (in_outage, changes)
        });
        for change in changes {
            log_outage(queue, change);
        }
        let reason = if reason.is_empty() { "nack" } else { reason };
        let mut ops = Vec::new();
        let mut back = Vec::new();
        let mut exits = Vec::new();
        {
            let mut rng = rand::rng();
            for (mut entry, in_outage) in entries.into_iter().zip(in_outage) {
                entry.record_failure(now, reason);
                if in_outage && !policy.counts_attempts {
                    entry.delivery_count = entry.delivery_count.saturating_sub(1);
                    if entry.stored {
                        ops.push(state_op(queue, &mut entry, 0));
                    }
                    back.push((entry, 0));
                    continue;
                }
                match redelivery::decide(&settings, entry.delivery_count, retry_after_ms, &mut rng) {
                    Decision::Redeliver { delay_ms } => {
                        let due = if delay_ms > 0 {
                            now.saturating_add(delay_ms)
                        } else {
                            0
                        };
                        if entry.stored {
                            ops.push(state_op(queue, &mut entry, due));
                        }
                        back.push((entry, due));
                    }
                    Decision::DeadLetter => {
                        exits.push((entry, Exit::DeadLetter(Reason::MaxDeliveryAttempts)))
                    }
                    Decision::Move(target) => exits.push((entry, Exit::Move(target))),
                    Decision::Delete => exits.push((entry, Exit::Delete)),
                }
            }
        }
        let result = self.commit(self.submit(ops)).await;
        queue.requeue(back, now);
        self.leave(queue, exits).await?;
        result
    }

    /// Stores the delivery counts of messages about to be delivered
    /// (`persist-delivery-count-before-delivery`).
    pub(super) async fn persist_counts(
        &self,
        queue: &Queue,
        entries: impl Iterator<Item = &mut Entry>,
    ) -> Result<()> {
        let ops = entries
            .filter(|e| e.stored)
            .map(|e| state_op(queue, e, 0))
            .collect();
        self.commit(self.submit(ops)).await
    }
}

/// The one line an outage gets on entering and on leaving.
pub(super) fn log_outage(queue: &Queue, change: Change) {
    match change {
        Change::Entered {
            pause_ms,
            by_consumer,
        } => info!(
            queue = %queue.name,
            pause_ms,
            asked_by_consumer = by_consumer,
            "queue entered outage mode: delivery paused, then one probe message"
        ),
        Change::Left { lasted_ms } => {
            info!(queue = %queue.name, lasted_ms, "queue left outage mode: delivery resumed")
        }
    }
}
