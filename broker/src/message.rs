//! Messages at the edge: validating what producers send, and converting between the
//! wire types (`rebound_protocol::v1`) and the stored record (`rebound_storage`).
//!
//! The two are kept apart on purpose: the gRPC contract and the on-disk format evolve
//! separately, and this file is the only place that knows both.
use rebound_protocol::v1 as pb;
use rebound_storage::records::property_value::Value;
use rebound_storage::{MessageRecord, PropertyValue};

use crate::error::{BrokerError, Result};

/// Default JMS priority.
pub const DEFAULT_PRIORITY: u32 = 4;
const MAX_NAME_BYTES: usize = 255;
const MAX_PROPERTY_NAME_BYTES: usize = 256;
const RESERVED_PREFIXES: [&str; 2] = rebound_protocol::properties::RESERVED_PREFIXES;

/// Checks an address or queue name: non-empty, at most 255 bytes, no whitespace or
/// control characters (they make names impossible to type in a CLI or a config).
pub fn check_name(kind: &str, name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        "must not be empty"
    } else if name.len() > MAX_NAME_BYTES {
        "must be at most 255 bytes"
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "must not contain whitespace or control characters"
    } else {
        return Ok(());
    };
    Err(BrokerError::InvalidArgument(format!(
        "{kind} name {name:?} {problem}"
    )))
}

/// Checks a message a producer sent and turns it into a record (id and timestamp
/// filled in by the caller).
pub fn from_outgoing(msg: pb::OutgoingMessage) -> Result<MessageRecord> {
    check_name("address", &msg.address)?;
    for name in msg.properties.keys() {
        let problem = if name.is_empty() {
            Some("must not be empty")
        } else if name.len() > MAX_PROPERTY_NAME_BYTES {
            Some("must be at most 256 bytes")
        } else if RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) {
            Some("uses a prefix reserved for the broker (_AMQ_, _REBOUND_)")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(BrokerError::InvalidArgument(format!(
                "property name {name:?} {problem}"
            )));
        }
    }
    let priority = msg.priority.unwrap_or(DEFAULT_PRIORITY);
    if priority > 9 {
        return Err(BrokerError::InvalidArgument(format!(
            "priority must be 0..=9, got {priority}"
        )));
    }
    let properties = msg
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
    Ok(MessageRecord {
        message_id: 0,
        address: msg.address,
        body: msg.body,
        properties,
        durable: msg.durable.unwrap_or(true),
        timestamp_ms: 0,
        priority,
        expiration_ms: msg.expiration_ms.unwrap_or(0),
        routing_type: 0,
    })
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
pub fn to_wire(record: &MessageRecord) -> pb::Message {
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

/// Message headers and properties as a selector sees them. The JMS header names map
/// to the record's fields, as in Artemis's filters.
pub struct Selectable<'a>(pub &'a MessageRecord);

impl rebound_selector::Properties for Selectable<'_> {
    fn get(&self, name: &str) -> Option<rebound_selector::Value<'_>> {
        use rebound_selector::Value as S;
        let m = self.0;
        Some(match name {
            "JMSMessageID" | "AMQUserID" => S::Int(m.message_id as i64),
            "JMSPriority" | "AMQPriority" => S::Int(m.priority as i64),
            "JMSTimestamp" | "AMQTimestamp" => S::Int(m.timestamp_ms as i64),
            "JMSExpiration" | "AMQExpiration" => S::Int(m.expiration_ms as i64),
            "JMSDeliveryMode" | "AMQDurable" => {
                S::String(if m.durable { "PERSISTENT" } else { "NON_PERSISTENT" }.into())
            }
            "AMQAddress" => S::String(m.address.as_str().into()),
            _ => match m.properties.get(name)?.value.as_ref()? {
                Value::String(s) => S::String(s.as_str().into()),
                Value::Int(i) => S::Int(*i),
                Value::Double(d) => S::Float(*d),
                Value::Bool(b) => S::Bool(*b),
                // JMS selectors cannot compare byte arrays.
                Value::Bytes(_) => return None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outgoing(address: &str) -> pb::OutgoingMessage {
        pb::OutgoingMessage {
            address: address.into(),
            ..Default::default()
        }
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("queue", "orders.eu").is_ok());
        for bad in ["", "a b", "tab\there", &"x".repeat(256)] {
            assert!(check_name("queue", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_messages_are_refused_with_a_reason() {
        let err = from_outgoing(outgoing("")).unwrap_err().to_string();
        assert!(err.contains("must not be empty"), "{err}");
        let mut m = outgoing("a");
        m.properties.insert(
            rebound_protocol::properties::ORIG_QUEUE.into(),
            pb::PropertyValue::default(),
        );
        assert!(from_outgoing(m).unwrap_err().to_string().contains("reserved"));
        let mut m = outgoing("a");
        m.properties.insert(String::new(), pb::PropertyValue::default());
        assert!(from_outgoing(m).is_err());
        let mut m = outgoing("a");
        m.priority = Some(10);
        assert!(from_outgoing(m).unwrap_err().to_string().contains("priority"));
    }

    #[test]
    fn defaults_and_round_trip() {
        let mut m = outgoing("a");
        m.properties.insert(
            "n".into(),
            pb::PropertyValue {
                value: Some(pb::property_value::Value::Int(5)),
            },
        );
        let record = from_outgoing(m.clone()).unwrap();
        assert!(record.durable);
        assert_eq!(record.priority, DEFAULT_PRIORITY);
        let wire = to_wire(&record);
        assert_eq!(wire.properties, m.properties);
        assert_eq!(wire.address, "a");
    }
}
