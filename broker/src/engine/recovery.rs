//! Start-up: the registry of addresses and queues rebuilt from what the store
//! recovered, the head of each queue's index in place (bodies stay on disk),
//! delivery counts and scheduled redeliveries as they were stored. The rest of
//! a deep queue stays paged (`queue/tail.rs`): its depager counts it and reads
//! it in later, so start-up does not grow with the backlog.
use std::sync::Arc;

use rebound_config::EffectiveSettings;
use rebound_storage::{MessageId, QueueRecord, Recovered};
use tracing::warn;

use super::parse_filter;
use crate::postoffice::{Address, Registry};
use crate::queue::{Entry, Queue};
use crate::routing;
use crate::scheduled;
use crate::time::now_ms;

/// Messages recovered per queue at start-up: the default `max-read-page-messages`.
/// A queue whose bound differs starts above it (new arrivals are paged until it
/// drains below) or below it (its depager reads the rest at once).
pub(super) fn head() -> usize {
    EffectiveSettings::default().max_read_page_messages as usize
}

/// What [`rebuild`] made.
pub(super) struct Rebuilt {
    pub registry: Registry,
    /// The highest queue id in use; new queues get higher ones.
    pub max_queue_id: u32,
    /// Messages restored, for the start-up log line.
    pub messages: usize,
}

/// `horizon`: an id above every stored one.
pub(super) fn rebuild(recovered: Recovered, horizon: MessageId) -> Rebuilt {
    let mut registry = Registry::default();
    for record in recovered.addresses {
        registry
            .addresses
            .insert(record.name.clone(), Address::from_record(record));
    }
    let now = now_ms();
    let mut max_queue_id = 0;
    let mut messages = 0usize;
    for rq in recovered.queues {
        max_queue_id = max_queue_id.max(rq.record.id);
        let queue = queue_from_record(rq.record);
        let routing = queue.routing_type;
        messages += rq.messages.len();
        queue.requeue(
            rq.messages.into_iter().map(|m| {
                let state_stored = m.state.is_some();
                let due_ms = scheduled::stored_due_ms(m.state.as_ref(), m.scheduled_at_ms);
                let state = m.state.unwrap_or_default();
                let entry = Entry {
                    id: m.id,
                    priority: m.priority.min(9) as u8,
                    expiration_ms: m.expiration_ms,
                    size: m.size as u64,
                    delivery_count: state.delivery_count,
                    failures: state.failures,
                    stored: true,
                    state_stored,
                    group: m.group.map(Arc::from),
                    record: None,
                    serving: None,
                };
                (entry, due_ms)
            }),
            now,
        );
        if rq.more {
            queue.recovered_more(horizon);
        }
        registry
            .addresses
            .entry(queue.address.clone())
            .or_insert_with(|| Address::new(queue.address.clone(), routing, true));
        registry.bind(queue);
    }
    Rebuilt {
        registry,
        max_queue_id,
        messages,
    }
}

/// A durable queue as its stored record describes it, holding nothing yet.
pub(super) fn queue_from_record(record: QueueRecord) -> Arc<Queue> {
    let filter = parse_filter(&record.filter).unwrap_or_else(|err| {
        warn!(queue = %record.name, %err, "stored filter no longer parses; ignoring it");
        None
    });
    Arc::new(Queue::new(
        record.id,
        record.name,
        record.address,
        routing::from_store(record.routing_type),
        true,
        record.auto_created,
        filter,
    ))
}
