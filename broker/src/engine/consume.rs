//! A consumer's side: subscribing to a queue, settles answered once durable, and
//! what happens to its deliveries when it goes away.
//!
//! Credit is AMQP link credit: every delivery uses one, the consumer grants more,
//! and nothing else changes it — a settle the broker refuses leaves its deliveries
//! outstanding and their credit used, so a consumer that grants one credit per
//! settled delivery keeps a steady window. The refusal names those deliveries, so a
//! client that granted their credit when it sent the settle can take it back from
//! its next grants.
//!
//! A consumer's settles are taken from the queue at once, in stream order, and
//! their commits run concurrently as engine tasks (so a consumer that acks every
//! message is not held to one fsync per ack), each answered once durable.
use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::warn;

use super::{Broker, HeldFor, Settlement};
use crate::error::{BrokerError, Result};
use crate::queue::{ConsumerId, Dispatched, Queue};
use crate::transactions::HeldAcks;

/// A consumer attached to a queue.
pub struct Subscription {
    pub queue: Arc<Queue>,
    pub consumer: ConsumerId,
    /// Batches of deliveries; ends when the queue is deleted or moves to
    /// another node ([`queue_gone`] says which).
    pub deliveries: mpsc::UnboundedReceiver<Vec<Dispatched>>,
}

/// The answer to a consumer's settle.
#[derive(Debug)]
pub enum Settled {
    /// Applied, and durable.
    Done {
        /// The delivery ids that were settled.
        settled: Vec<u64>,
        /// Ids that were not outstanding for this consumer.
        unknown: Vec<u64>,
        /// For acks joining a transaction of another node: what this node
        /// holds for it (`cluster/held.rs`).
        held: Option<HeldAcks>,
    },
    /// Not applied (an unknown or finished transaction): nothing was settled, the
    /// deliveries stay outstanding and keep the credit they used.
    Refused {
        error: BrokerError,
        delivery_ids: Vec<u64>,
    },
}

/// The transaction an ack joins.
#[derive(Debug, Clone)]
pub enum Joins {
    /// One of this node's.
    Here(u64),
    /// One of the node that forwarded the consumer here (`cluster/held.rs`).
    Elsewhere(HeldFor),
}

impl Broker {
    /// Attaches a consumer to a queue (auto-created as the settings allow) with
    /// `credit` and an optional selector.
    pub async fn subscribe(self: &Arc<Self>, queue: &str, credit: u32, filter: &str) -> Result<Subscription> {
        let filter = self.client_filter(filter)?.map(Arc::new);
        let queue = self.queue_for_consumer(queue).await?;
        let consumer = self.next_consumer_id();
        let deliveries = queue
            .attach(consumer, credit.min(self.credit_cap()), filter)
            .ok_or_else(|| queue_gone(&queue))?;
        Ok(Subscription {
            queue,
            consumer,
            deliveries,
        })
    }

    /// Grants a consumer more credit, within `max-consumer-credit`: a client that
    /// grants without end cannot make the broker load and hand over a whole queue
    /// that it does not read.
    pub fn grant(&self, queue: &Queue, consumer: ConsumerId, credit: u32) {
        queue.grant(consumer, credit, self.credit_cap());
    }

    fn credit_cap(&self) -> u32 {
        u32::try_from(self.limits().max_consumer_credit).unwrap_or(u32::MAX)
    }

    /// Settles deliveries of `consumer`: they leave the queue now, and the settle's
    /// commit runs as an engine task that calls `answer` once it is durable (or has
    /// failed). An ack that `joins` a transaction joins it instead. A settle
    /// that breaks the protocol (a transactional settle that is not an ack, more ids
    /// than `max-ids-per-settle`) is an error at once, and nothing is settled.
    pub fn settle_deliveries(
        self: &Arc<Self>,
        queue: &Arc<Queue>,
        consumer: ConsumerId,
        delivery_ids: Vec<u64>,
        how: Settlement,
        joins: Option<Joins>,
        answer: impl FnOnce(Result<Settled>) + Send + 'static,
    ) -> Result<()> {
        let limit = self.limits().max_ids_per_settle;
        if delivery_ids.len() as u64 > limit {
            return Err(BrokerError::InvalidArgument(format!(
                "a settle names {} delivery ids, more than max-ids-per-settle {limit}",
                delivery_ids.len()
            )));
        }
        if joins.is_some() && how != Settlement::Ack {
            return Err(BrokerError::InvalidArgument(
                "only an ACK can be part of a transaction".into(),
            ));
        }
        // The room is checked as the settle arrives: settles in flight may take
        // the transaction past max-transaction-messages by at most their ids.
        // (Another node's transaction was checked there.)
        if let Some(Joins::Here(transaction)) = joins
            && let Err(error) = self
                .transactions
                .check_room(transaction, delivery_ids.len(), &self.limits())
        {
            answer(Ok(Settled::Refused { error, delivery_ids }));
            return Ok(());
        }
        let (entries, unknown) = queue.take_delivered(consumer, &delivery_ids);
        let settled: Vec<u64> = if unknown.is_empty() {
            delivery_ids
        } else {
            let unknown: HashSet<u64> = unknown.iter().copied().collect();
            delivery_ids
                .into_iter()
                .filter(|id| !unknown.contains(id))
                .collect()
        };
        let (broker, queue) = (self.clone(), queue.clone());
        self.spawn(async move {
            let result = match joins {
                Some(Joins::Here(transaction)) => {
                    match broker.transactions.add_acks(transaction, &queue, entries) {
                        Ok(()) => Ok(None),
                        // Rolled back meanwhile: the acks count as failed deliveries.
                        Err(entries) => broker
                            .fail(&queue, entries, "transaction ended", None, None)
                            .await
                            .map(|()| None),
                    }
                }
                Some(Joins::Elsewhere(transaction)) => broker
                    .cluster()
                    .hold(transaction, &queue, entries)
                    .await
                    .map(Some),
                None => broker.settle(&queue, entries, how).await.map(|()| None),
            };
            answer(result.map(|held| Settled::Done {
                settled,
                unknown,
                held,
            }));
        });
        Ok(())
    }

    /// A consumer went away: what it held counts as failed deliveries, unless it had
    /// announced a graceful close (then it is released). When the broker itself is
    /// stopping they simply stay where storage has them.
    pub async fn consumer_gone(self: &Arc<Self>, queue: &Arc<Queue>, consumer: ConsumerId) {
        let (entries, closing) = queue.detach(consumer);
        if entries.is_empty() || self.is_shutting_down() {
            return;
        }
        let result = if closing {
            self.release(queue, entries).await
        } else {
            self.fail(queue, entries, "consumer went away", None, None).await
        };
        if let Err(err) = result {
            warn!(queue = %queue.name, %err, "could not return the consumer's messages");
        }
    }
}

/// Why a queue's consumers end or cannot attach: it was deleted, or another
/// node serves it now (several brokers on one database).
pub fn queue_gone(queue: &Queue) -> BrokerError {
    match queue.is_served() || queue.is_closed() {
        true => BrokerError::QueueNotFound(queue.name.clone()),
        false => BrokerError::QueueMoved(queue.name.clone()),
    }
}
