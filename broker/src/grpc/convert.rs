//! The wire types of `rebound.v1` to and from the engine's: messages, routing
//! types, selections, settle outcomes, deliveries and queue counters. The only file
//! that knows both the gRPC contract and the engine's types, so each can change
//! without the other.
use std::collections::BTreeMap;

use rebound_config::RoutingType;
use rebound_protocol::properties;
use rebound_protocol::v1 as pb;
use rebound_storage::records::property_value::Value;
use rebound_storage::{MessageRecord, PropertyValue};

use crate::engine::{AddressView, Browsed, RetryOutcome, Selection, Settlement};
use crate::error::{BrokerError, Result};
use crate::message::DEFAULT_PRIORITY;
use crate::outage::Status;
use crate::queue::{BrowseState, Dispatched, Queue};
use crate::scheduled;
use crate::time::now_ms;
use crate::transactions::HeldAcks;

/// A producer's message as the engine takes it (checked by the engine). The fields
/// that ask for scheduled delivery or duplicate detection become the Artemis
/// properties the engine reads (`crate::scheduled`, `crate::duplicates`).
pub fn message_from_wire(msg: pb::OutgoingMessage) -> MessageRecord {
    let mut properties: BTreeMap<String, PropertyValue> = msg
        .properties
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                PropertyValue {
                    value: v.value.map(value_from_wire),
                },
            )
        })
        .collect();
    if msg.deliver_at_ms.is_some() || msg.delay_ms.is_some() {
        let at = scheduled::requested(msg.deliver_at_ms, msg.delay_ms, now_ms());
        properties.insert(properties::SCHED_DELIVERY.into(), property(at.map(Value::Int)));
    }
    if let Some(id) = msg.duplicate_id {
        properties.insert(properties::DUPL_ID.into(), property(Some(Value::String(id))));
    }
    MessageRecord {
        message_id: 0,
        address: msg.address,
        body: msg.body,
        properties,
        durable: msg.durable.unwrap_or(true),
        timestamp_ms: 0,
        priority: msg.priority.unwrap_or(DEFAULT_PRIORITY),
        expiration_ms: msg.expiration_ms.unwrap_or(0),
        routing_type: 0,
        // Set as it is stored, from `_AMQ_SCHED_DELIVERY`.
        scheduled_at_ms: 0,
    }
}

fn property(value: Option<Value>) -> PropertyValue {
    PropertyValue { value }
}

pub fn messages_from_wire(batch: Vec<pb::OutgoingMessage>) -> Vec<MessageRecord> {
    batch.into_iter().map(message_from_wire).collect()
}

fn value_from_wire(v: pb::property_value::Value) -> Value {
    use pb::property_value::Value as W;
    match v {
        W::String(s) => Value::String(s),
        W::Int(i) => Value::Int(i),
        W::Double(d) => Value::Double(d),
        W::Bool(b) => Value::Bool(b),
        W::Bytes(b) => Value::Bytes(b),
    }
}

fn value_to_wire(v: &Value) -> pb::property_value::Value {
    use pb::property_value::Value as W;
    match v {
        Value::String(s) => W::String(s.clone()),
        Value::Int(i) => W::Int(*i),
        Value::Double(d) => W::Double(*d),
        Value::Bool(b) => W::Bool(*b),
        Value::Bytes(b) => W::Bytes(b.clone()),
    }
}

/// The wire form of a stored message.
pub fn message_to_wire(record: &MessageRecord) -> pb::Message {
    pb::Message {
        message_id: record.message_id,
        address: record.address.clone(),
        body: record.body.clone(),
        properties: record
            .properties
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    pb::PropertyValue {
                        value: v.value.as_ref().map(value_to_wire),
                    },
                )
            })
            .collect(),
        durable: record.durable,
        timestamp_ms: record.timestamp_ms,
        priority: record.priority,
        expiration_ms: record.expiration_ms,
    }
}

/// `UNSPECIFIED` is None: the settings decide.
pub fn routing_from_wire(value: i32) -> Result<Option<RoutingType>> {
    match pb::RoutingType::try_from(value) {
        Ok(pb::RoutingType::Unspecified) => Ok(None),
        Ok(pb::RoutingType::Anycast) => Ok(Some(RoutingType::Anycast)),
        Ok(pb::RoutingType::Multicast) => Ok(Some(RoutingType::Multicast)),
        Err(_) => Err(BrokerError::InvalidArgument(format!(
            "unknown routing type {value}"
        ))),
    }
}

pub fn routing_to_wire(routing: RoutingType) -> i32 {
    match routing {
        RoutingType::Anycast => pb::RoutingType::Anycast as i32,
        RoutingType::Multicast => pb::RoutingType::Multicast as i32,
    }
}

pub fn selection_from_wire(selection: Option<pb::MessageSelection>) -> Result<Selection> {
    let s = selection.ok_or_else(|| {
        BrokerError::InvalidArgument("a selection (queue, filter, message id) is required".into())
    })?;
    Ok(Selection {
        queue: s.queue,
        filter: s.filter,
        message_ids: s.message_id.into_iter().collect(),
    })
}

pub fn settlement_from_wire(settle: &pb::Settle) -> Result<Settlement> {
    Ok(match pb::Outcome::try_from(settle.outcome) {
        Ok(pb::Outcome::Ack) => Settlement::Ack,
        Ok(pb::Outcome::Nack) => Settlement::Nack {
            reason: settle.reason.clone(),
            retry_after_ms: settle.retry_after_ms,
            pause_queue_ms: settle.pause_queue_ms,
        },
        Ok(pb::Outcome::Release) => Settlement::Release,
        Ok(pb::Outcome::DeadLetter) => Settlement::DeadLetter {
            reason: settle.reason.clone(),
        },
        Ok(pb::Outcome::Unspecified) | Err(_) => {
            return Err(BrokerError::InvalidArgument(format!(
                "settle needs an outcome (ACK, NACK, RELEASE or DEAD_LETTER), got {}",
                settle.outcome
            )));
        }
    })
}

pub fn delivery_to_wire(queue: &str, d: Dispatched) -> pb::Delivery {
    pb::Delivery {
        delivery_id: d.delivery_id,
        message: Some(message_to_wire(&d.record)),
        delivery_count: d.delivery_count,
        redelivered: d.delivery_count > 1,
        queue: queue.to_owned(),
    }
}

pub fn held_to_wire(held: HeldAcks) -> pb::HeldAcks {
    pb::HeldAcks {
        node: held.node,
        queue_id: u64::from(held.queue),
        epoch: held.epoch,
        message_ids: held.message_ids,
        transaction_id: held.transaction,
    }
}

/// What another node says it holds; refused when its queue id is out of range.
pub fn held_from_wire(held: pb::HeldAcks) -> Result<HeldAcks> {
    let queue = u32::try_from(held.queue_id)
        .map_err(|_| BrokerError::InvalidArgument(format!("queue id {} is out of range", held.queue_id)))?;
    Ok(HeldAcks {
        node: held.node,
        queue,
        epoch: held.epoch,
        message_ids: held.message_ids,
        transaction: held.transaction_id,
    })
}

pub fn browsed_to_wire(b: Browsed) -> pb::BrowsedMessage {
    let (state, scheduled_at_ms) = match b.state {
        BrowseState::Ready => (pb::MessageState::Ready, 0),
        BrowseState::Delivering => (pb::MessageState::Delivering, 0),
        BrowseState::Scheduled(at) => (pb::MessageState::Scheduled, at),
    };
    pb::BrowsedMessage {
        message: Some(message_to_wire(&b.record)),
        delivery_count: b.entry.delivery_count,
        state: state as i32,
        scheduled_at_ms,
    }
}

pub fn retry_outcome_to_wire(o: RetryOutcome) -> pb::RetryOutcome {
    pb::RetryOutcome {
        message_id: o.message_id,
        to_address: o.to_address,
        to_queue: o.to_queue,
        skipped: o.skipped.unwrap_or_default(),
    }
}

/// A queue's figures; `served_by` is the node serving it (`Cluster::served_by`).
pub fn queue_info(queue: &Queue, served_by: String) -> pb::QueueInfo {
    let snap = queue.snapshot();
    pb::QueueInfo {
        name: queue.name.clone(),
        address: queue.address.clone(),
        routing_type: routing_to_wire(queue.routing_type),
        durable: queue.durable,
        auto_created: queue.auto_created,
        messages: snap.messages,
        delivering: snap.delivering,
        scheduled: snap.scheduled,
        consumers: snap.consumers,
        added: snap.counters.added,
        acked: snap.counters.acked,
        redelivered: snap.counters.redelivered,
        dead_lettered: snap.counters.dead_lettered,
        dropped: snap.counters.dropped,
        removed: snap.counters.removed,
        moved_out: snap.counters.moved_out,
        expired: snap.counters.expired,
        bytes: snap.bytes,
        paged_messages: snap.paged,
        paged_bytes: snap.paged_bytes,
        counting: snap.counting,
        outage: snap.outage != Status::Normal,
        outage_since_ms: match snap.outage {
            Status::Outage { since_ms, .. } => since_ms,
            Status::Normal => 0,
        },
        next_probe_at_ms: match snap.outage {
            Status::Outage { next_probe_ms, .. } => next_probe_ms.unwrap_or(0),
            Status::Normal => 0,
        },
        served_by,
    }
}

/// An address with its queues' names and their gauges summed.
/// An address, with the gauges of its `queues` summed.
pub fn address_info(address: &AddressView, queues: &[pb::QueueInfo]) -> pb::AddressInfo {
    let mut info = pb::AddressInfo {
        name: address.name.clone(),
        routing_types: [
            (address.anycast, RoutingType::Anycast),
            (address.multicast, RoutingType::Multicast),
        ]
        .into_iter()
        .filter(|(allowed, _)| *allowed)
        .map(|(_, routing)| routing_to_wire(routing))
        .collect(),
        auto_created: address.auto_created,
        max_size_bytes: address.max_size_bytes.unwrap_or(0),
        address_full_policy: address.policy.to_string(),
        blocked_sends: address.size.blocked(),
        dropped_messages: address.size.dropped(),
        ..Default::default()
    };
    for queue in queues {
        info.queues.push(queue.name.clone());
        info.messages += queue.messages;
        info.delivering += queue.delivering;
        info.scheduled += queue.scheduled;
        info.consumers += queue.consumers;
        info.bytes += queue.bytes;
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_round_trip() {
        let mut m = pb::OutgoingMessage {
            address: "a".into(),
            ..Default::default()
        };
        m.properties.insert(
            "n".into(),
            pb::PropertyValue {
                value: Some(pb::property_value::Value::Int(5)),
            },
        );
        let record = message_from_wire(m.clone());
        assert!(record.durable);
        assert_eq!(record.priority, DEFAULT_PRIORITY);
        let wire = message_to_wire(&record);
        assert_eq!(wire.properties, m.properties);
        assert_eq!(wire.address, "a");
    }

    #[test]
    fn routing_types_round_trip_and_unknown_ones_are_refused() {
        for routing in [RoutingType::Anycast, RoutingType::Multicast] {
            assert_eq!(
                routing_from_wire(routing_to_wire(routing)).unwrap(),
                Some(routing)
            );
        }
        assert_eq!(routing_from_wire(0).unwrap(), None);
        assert!(matches!(
            routing_from_wire(42),
            Err(BrokerError::InvalidArgument(_))
        ));
    }
}
