//! New messages as the engine accepts them: the checks every producer's message
//! passes (names, property names, priority), and how a selector sees a message.
//!
//! The wire form is the gRPC edge's business (`grpc/convert.rs`); the engine works
//! on the stored record (`rebound_storage::MessageRecord`).
use rebound_storage::MessageRecord;
use rebound_storage::records::property_value::Value;

use crate::error::{BrokerError, Result};

/// Default JMS priority.
pub const DEFAULT_PRIORITY: u32 = 4;
const MAX_PROPERTY_NAME_BYTES: usize = 256;
const RESERVED_PREFIXES: [&str; 2] = rebound_protocol::properties::RESERVED_PREFIXES;

/// Checks an address or queue name by the config's rule ([`rebound_config::check_name`]),
/// so that a name a config may declare and one a client may use are the same.
pub fn check_name(kind: &str, name: &str) -> Result<()> {
    rebound_config::check_name(kind, name).map_err(BrokerError::InvalidArgument)
}

/// Checks a message a producer sent (its id and timestamp are the broker's to set).
pub fn check_new(record: &MessageRecord) -> Result<()> {
    check_name("address", &record.address)?;
    for name in record.properties.keys() {
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
    if record.priority > 9 {
        return Err(BrokerError::InvalidArgument(format!(
            "priority must be 0..=9, got {}",
            record.priority
        )));
    }
    Ok(())
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

    fn record(address: &str) -> MessageRecord {
        MessageRecord {
            address: address.into(),
            priority: DEFAULT_PRIORITY,
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
        let err = check_new(&record("")).unwrap_err().to_string();
        assert!(err.contains("must not be empty"), "{err}");
        let mut m = record("a");
        m.properties.insert(
            rebound_protocol::properties::ORIG_QUEUE.into(),
            Default::default(),
        );
        assert!(check_new(&m).unwrap_err().to_string().contains("reserved"));
        let mut m = record("a");
        m.properties.insert(String::new(), Default::default());
        assert!(check_new(&m).is_err());
        let mut m = record("a");
        m.priority = 10;
        assert!(check_new(&m).unwrap_err().to_string().contains("priority"));
    }
}
