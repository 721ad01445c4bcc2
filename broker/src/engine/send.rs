//! Sending: a producer's batch validated, given ids, routed to its queues and
//! stored in one commit, then made visible to consumers.
use std::sync::Arc;

use prost::Message as _;
use rebound_storage::{MessageRecord, Op};

use super::Broker;
use super::addresses::Create;
use crate::error::{BrokerError, Result};
use crate::message;
use crate::queue::{Entry, Queue};
use crate::routing;
use crate::time::now_ms;
use rebound_config::EffectiveSettings;

/// What a send did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The ids given to the messages, in the order sent.
    pub ids: Vec<u64>,
    /// How many messages found no queue (dropped, as in Artemis).
    pub unrouted: u32,
}

impl Broker {
    /// Accepts a batch of new messages: validated, routed, written in one commit, and
    /// visible to consumers once durable.
    pub async fn send(self: &Arc<Self>, batch: Vec<MessageRecord>) -> Result<Sent> {
        let records = self.prepare(batch)?;
        let ids = records.iter().map(|r| r.message_id).collect();
        let unrouted = self.route_sends(records, Vec::new()).await?;
        Ok(Sent { ids, unrouted })
    }

    /// Validates messages a producer sent and gives them their ids, timestamps and
    /// expirations (`expiry-delay`).
    pub fn prepare(&self, batch: Vec<MessageRecord>) -> Result<Vec<MessageRecord>> {
        if batch.is_empty() {
            return Err(BrokerError::InvalidArgument(
                "a send needs at least one message".into(),
            ));
        }
        if self.is_shutting_down() {
            return Err(BrokerError::ShuttingDown);
        }
        let now = now_ms();
        let limits = self.limits();
        let mut records = Vec::with_capacity(batch.len());
        let mut memo = SettingsMemo::default();
        for mut record in batch {
            message::check_new(&record, &limits)?;
            let settings = memo.get(self, &record.address);
            let size = message::counted_bytes(&record);
            let limit = settings.max_message_size;
            if size > limit {
                return Err(BrokerError::MessageTooLarge {
                    address: record.address,
                    size,
                    limit,
                });
            }
            if record.expiration_ms == 0
                && let Some(delay) = settings.expiry_delay_ms
            {
                record.expiration_ms = now.saturating_add(delay);
            }
            record.timestamp_ms = now;
            record.message_id = self.store.generate_id()?;
            records.push(record);
        }
        Ok(records)
    }

    /// Routes prepared messages and commits them together with `ops` (a
    /// transaction's acks), then makes them visible. Returns how many found no queue.
    pub(super) async fn route_sends(
        self: &Arc<Self>,
        records: Vec<MessageRecord>,
        mut ops: Vec<Op>,
    ) -> Result<u32> {
        let mut addresses: Vec<&str> = records.iter().map(|r| r.address.as_str()).collect();
        addresses.sort_unstable();
        addresses.dedup();
        for address in addresses {
            self.ensure_address(address, None, Create::OnSend).await?;
        }
        let mut unrouted = 0;
        let mut arrivals = Vec::new();
        let mut settings = SettingsMemo::default();
        let commit = {
            let reg = self.read();
            for record in records {
                let targets = reg.route(&record);
                if targets.is_empty() {
                    unrouted += 1;
                    continue;
                }
                if let Some(limit) = settings.get(self, &record.address).max_size_bytes {
                    let held: u64 = targets.iter().map(|q| q.bytes()).sum();
                    if held + record.encoded_len() as u64 > limit {
                        return Err(BrokerError::AddressFull {
                            address: record.address,
                            held,
                            limit,
                        });
                    }
                }
                place(record, targets, &mut ops, &mut arrivals);
            }
            self.submit(ops)
        };
        self.commit(commit).await?;
        deliver_arrivals(arrivals, now_ms());
        Ok(unrouted)
    }
}

/// The effective settings of the address a batch's messages go to, looked up
/// once per run of messages to the same address rather than once per message.
#[derive(Default)]
struct SettingsMemo(Option<(String, Arc<EffectiveSettings>)>);

impl SettingsMemo {
    fn get(&mut self, broker: &Broker, address: &str) -> Arc<EffectiveSettings> {
        match &self.0 {
            Some((a, settings)) if a == address => settings.clone(),
            _ => {
                let settings = broker.settings_for(address);
                self.0 = Some((address.to_owned(), settings.clone()));
                settings
            }
        }
    }
}

/// Routes a record to `targets`: one stored record per durable queue (when the
/// message is durable), in-memory copies elsewhere. The last target takes the
/// record itself, so a message to one queue is copied once (for the queue's
/// cache), not twice.
pub(super) fn place(
    mut record: MessageRecord,
    targets: Vec<Arc<Queue>>,
    ops: &mut Vec<Op>,
    arrivals: &mut Vec<(Arc<Queue>, Entry)>,
) {
    let size = record.encoded_len() as u64;
    let mut targets = targets.into_iter().peekable();
    while let Some(queue) = targets.next() {
        let mut record = match targets.peek() {
            Some(_) => record.clone(),
            None => std::mem::take(&mut record),
        };
        record.routing_type = routing::to_store(queue.routing_type);
        let stored = record.durable && queue.durable;
        let entry = Entry {
            id: record.message_id,
            priority: record.priority as u8,
            expiration_ms: record.expiration_ms,
            size,
            delivery_count: 0,
            failures: Vec::new(),
            stored,
            group: rebound_storage::records::group_of(&record.properties).map(Arc::from),
            // Stored or not, the queue may keep it for a delivery without a read.
            record: Some(Arc::new(record.clone())),
        };
        if stored {
            ops.push(Op::PutMessage {
                queue: queue.id,
                message: record,
            });
        }
        arrivals.push((queue, entry));
    }
}

/// Hands new messages to their queues: one lock and one wake-up of the queue's
/// dispatcher per run of arrivals for the same queue, not one per message.
pub(super) fn deliver_arrivals(arrivals: Vec<(Arc<Queue>, Entry)>, now: u64) {
    let mut arrivals = arrivals.into_iter().peekable();
    while let Some((queue, entry)) = arrivals.next() {
        let mut entries = vec![(entry, 0)];
        while let Some((_, entry)) = arrivals.next_if(|(next, _)| Arc::ptr_eq(next, &queue)) {
            entries.push((entry, 0));
        }
        queue.enqueue(entries, now);
    }
}
