//! What a queue holds and hands out: message references ([`Entry`]), deliveries,
//! picks, counters and snapshots.
use std::sync::Arc;

use rebound_storage::{DeliveryState, FailureRecord, MessageId, MessageRecord};
use tokio::sync::mpsc;

use crate::message::bounded_reason;

/// How many failure reasons a message keeps; they travel with it to the DLQ.
pub const MAX_FAILURES_KEPT: usize = 5;

/// Bytes of stored messages a queue keeps in memory as well, so that a queue that
/// keeps up with its producers delivers without reading storage back. A backlog
/// beyond this costs only its index entries: the bodies stay on disk until delivery.
pub const BODY_CACHE_BYTES: u64 = 8 << 20;

/// A message reference held by a queue.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: MessageId,
    pub priority: u8,
    pub expiration_ms: u64,
    /// Encoded size in bytes, for `max-size-bytes` and the queue's byte gauge.
    pub size: u64,
    /// Deliveries so far, the current one included while it is being delivered.
    pub delivery_count: u32,
    /// The last failures, oldest first, at most [`MAX_FAILURES_KEPT`].
    pub failures: Vec<FailureRecord>,
    /// Whether the message is in storage (durable message on a durable queue).
    pub stored: bool,
    /// Whether a delivery state of it may be in storage: false only while none was
    /// written or read back (a new message, scheduled or not), so that its
    /// removal skips the state's delete. Unsure means true; every state write sets it
    /// (the engine's `state_op`, and [`crate::queue::Queue::pick`] when counts are
    /// stored before delivery).
    pub state_stored: bool,
    /// Its message group (`_AMQ_GROUP_ID` or `JMSXGroupID`), see `queue/groups.rs`.
    pub group: Option<Arc<str>>,
    /// The message itself: always when it is not stored; for a stored message a copy
    /// kept while the queue's body cache has room ([`BODY_CACHE_BYTES`]).
    pub record: Option<Arc<MessageRecord>>,
    /// The serving of its queue it was last in memory under (`queue/away.rs`);
    /// `None` until it first is. Taken out under one serving, it does not come
    /// back under the next: the store has it, and that serving reads it there.
    pub serving: Option<u64>,
}

impl Entry {
    /// A stored message read back from storage (recovered or depaged) with its
    /// delivery state, and when it is due (0: now).
    pub fn read_back(record: MessageRecord, state: Option<DeliveryState>) -> (Entry, u64) {
        let state_stored = state.is_some();
        let due_ms = crate::scheduled::stored_due_ms(state.as_ref(), record.scheduled_at_ms);
        let state = state.unwrap_or_default();
        let entry = Entry {
            id: record.message_id,
            priority: record.priority.min(9) as u8,
            expiration_ms: record.expiration_ms,
            size: prost::Message::encoded_len(&record) as u64,
            delivery_count: state.delivery_count,
            failures: state.failures,
            stored: true,
            state_stored,
            group: rebound_storage::records::group_of(&record.properties).map(Arc::from),
            record: Some(Arc::new(record)),
            serving: None,
        };
        (entry, due_ms)
    }

    /// Keeps a failure, its reason cut to [`crate::message::MAX_REASON_BYTES`]:
    /// failures are stored with the message and copied onto its dead letter, and
    /// the store bounds both.
    pub fn record_failure(&mut self, at_ms: u64, reason: &str) {
        if self.failures.len() == MAX_FAILURES_KEPT {
            self.failures.remove(0);
        }
        self.failures.push(FailureRecord {
            at_ms,
            reason: bounded_reason(reason),
        });
    }
}

/// Identifies a consumer attachment on a queue.
pub type ConsumerId = u64;

/// What the queue sends to a consumer's stream.
#[derive(Debug)]
pub struct Dispatched {
    pub delivery_id: u64,
    pub delivery_count: u32,
    pub record: Arc<MessageRecord>,
}

/// Counters since the broker started, and the gauges derived from the state.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub added: u64,
    pub acked: u64,
    pub redelivered: u64,
    pub dead_lettered: u64,
    /// Taken out for good by the broker: nowhere to go, or a schedule's `delete`.
    pub dropped: u64,
    pub expired: u64,
    /// Removed by an operator (remove, purge).
    pub removed: u64,
    /// Moved to another address by an operator (move, retry) or by the
    /// redelivery-schedule's `move` step.
    pub moved_out: u64,
}

/// A point-in-time view of a queue, for stats.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Every message, paged ones included.
    pub messages: u64,
    /// Messages on disk only (paged, `queue/tail.rs`, or scheduled far ahead,
    /// `queue/far.rs`), and their bytes.
    pub paged: u64,
    pub paged_bytes: u64,
    /// Paged messages are still being counted after a restart: `messages`,
    /// `paged` and the bytes are lower bounds until then.
    pub counting: bool,
    pub delivering: u64,
    pub scheduled: u64,
    pub consumers: u32,
    pub bytes: u64,
    /// Message groups kept (those with a message in memory), and what they cost
    /// in memory beyond their messages (`groups.rs`).
    pub groups: u64,
    pub group_bytes: u64,
    pub counters: Counters,
    pub outage: crate::outage::Status,
}

/// A message picked for delivery, not yet sent.
#[derive(Debug)]
pub struct Pick {
    pub consumer_tx: mpsc::UnboundedSender<Vec<Dispatched>>,
    pub consumer: ConsumerId,
    pub delivery_id: u64,
    pub entry: Entry,
}

/// Where a browsed message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowseState {
    Ready,
    Delivering,
    Scheduled(u64),
}

impl BrowseState {
    /// When it is due (0: now), for a message put back where it was.
    pub fn due_ms(self) -> u64 {
        match self {
            BrowseState::Scheduled(at) => at,
            BrowseState::Ready | BrowseState::Delivering => 0,
        }
    }
}
