//! New messages as the engine accepts them: the checks every producer's message
//! passes (names, property names, priority, its group id, the size of its properties), how a
//! selector sees a message, and how much of a user's text the broker keeps or
//! echoes.
//!
//! The wire form is the gRPC edge's business (`grpc/convert.rs`); the engine works
//! on the stored record (`rebound_storage::MessageRecord`).
//!
//! # Sizes
//!
//! The store keeps a message with its body in a file when the body is large, but
//! everything else of the record must fit [`MAX_INLINE_RECORD_BYTES`] (128 KiB).
//! Producers get at most half of that for their properties (`max-properties-bytes`,
//! at most [`rebound_config::MAX_PROPERTIES_BYTES_LIMIT`]); the other half is for the record's own fields (address, headers, key, the large-body
//! marker: under 1 KiB) and for what the broker adds when it moves a message to a
//! dead-letter or expiry address (`_AMQ_ORIG_*`, the reason and the last failures,
//! each reason at most [`MAX_REASON_BYTES`]: under 40 KiB). So a message the broker
//! accepted can always be dead-lettered; a test in `dead_letter.rs` checks the worst
//! case.
//!
//! `max-message-size` counts what the producer controls: the body's bytes plus the
//! properties' bytes ([`properties_bytes`]), so a 1 MiB body fits the 1 MiB default.
//!
//! # Bounded text
//!
//! A consumer's failure reason is kept with the message and travels with it to the
//! dead-letter address: reasons are cut to [`MAX_REASON_BYTES`] with a marker
//! ([`bounded_reason`]) rather than refused, because refusing a nack would leave a
//! consumer no way to give a message back. Error messages quote at most
//! `rebound_config::EXCERPT_BYTES` of any input (`rebound_config::excerpt`): gRPC
//! carries them in a header, and an error bigger than the client's header limit
//! reaches it as a protocol error instead of the status the broker meant.
use bytes::Bytes;
use rebound_config::{Limits, MAX_PROPERTIES_BYTES_LIMIT, clip, excerpt};
use rebound_protocol::properties::{DUPL_ID, GROUP_ID, JMSX_GROUP_ID, PRODUCER_SET, SCHED_DELIVERY};
use rebound_storage::records::group_of;
use rebound_storage::records::property_value::Value;
use rebound_storage::{MAX_INLINE_RECORD_BYTES, MessageRecord, PropertyValue};

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

/// The longest duplicate id (`_AMQ_DUPL_ID`) taken: an address remembers up to
/// `id-cache-size` of them in memory.
pub const MAX_DUPLICATE_ID_BYTES: usize = 256;

/// The longest group id (`_AMQ_GROUP_ID`, `JMSXGroupID`) taken: a queue keeps
/// the id of each group with a message in memory.
pub const MAX_GROUP_ID_BYTES: usize = 1024;

/// What a producer's message asks of the broker through the reserved properties a
/// producer may set (`rebound_protocol::properties::PRODUCER_SET`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Requests {
    /// `_AMQ_SCHED_DELIVERY`: deliver at this time, ms since the Unix epoch.
    pub deliver_at_ms: Option<i64>,
    /// `_AMQ_DUPL_ID`: its duplicate id.
    pub duplicate_id: Option<Bytes>,
}

/// A producer's message as the engine accepted it: given its id and timestamp,
/// with what it asked for.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub record: MessageRecord,
    /// When it becomes deliverable, ms since the Unix epoch; `0` = at once.
    pub due_ms: u64,
    /// Its duplicate id, when its address detects duplicates (`id-cache-size` > 0).
    pub duplicate_id: Option<Bytes>,
    /// Accepted past a size limit under `address-full-policy = PAGE`: its queues
    /// page it at once rather than keep it in memory (`queue/tail.rs`).
    pub to_disk: bool,
}

/// Checks a message a producer sent (its id and timestamp are the broker's to set)
/// against the `[limits]` on its properties; returns what its reserved properties
/// ask for.
pub fn check_new(record: &MessageRecord, limits: &Limits) -> Result<Requests> {
    check_name("address", &record.address)?;
    let count = record.properties.len() as u64;
    if count > limits.max_properties_per_message {
        return Err(BrokerError::InvalidArgument(format!(
            "the message has {count} properties, more than max-properties-per-message {}",
            limits.max_properties_per_message
        )));
    }
    let mut requests = Requests::default();
    for (name, value) in &record.properties {
        let problem = if name.is_empty() {
            Some("must not be empty")
        } else if name.len() > MAX_PROPERTY_NAME_BYTES {
            Some("must be at most 256 bytes")
        } else if RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) {
            // Only names with a reserved prefix are looked at twice.
            match name.as_str() {
                SCHED_DELIVERY => {
                    requests.deliver_at_ms = Some(deliver_at(value)?);
                    None
                }
                DUPL_ID => {
                    requests.duplicate_id = Some(duplicate_id(value)?);
                    None
                }
                // The others a producer may set (the group id) are kept as they are.
                other if PRODUCER_SET.contains(&other) => None,
                _ => Some("uses a prefix reserved for the broker (_AMQ_, _REBOUND_)"),
            }
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(BrokerError::InvalidArgument(format!(
                "property name {:?} {problem}",
                excerpt(name)
            )));
        }
    }
    if record.priority > 9 {
        return Err(BrokerError::InvalidArgument(format!(
            "priority must be 0..=9, got {}",
            record.priority
        )));
    }
    if let Some(group) = group_of(&record.properties)
        && group.len() > MAX_GROUP_ID_BYTES
    {
        return Err(BrokerError::InvalidArgument(format!(
            "a group id ({GROUP_ID} or {JMSX_GROUP_ID}) must be at most {MAX_GROUP_ID_BYTES} bytes \
             long, this one has {}",
            group.len()
        )));
    }
    let size = properties_bytes(record);
    if size > limits.max_properties_bytes {
        return Err(BrokerError::InvalidArgument(format!(
            "the properties take {size} bytes (names and values, encoded), more than \
             max-properties-bytes {}",
            limits.max_properties_bytes
        )));
    }
    Ok(requests)
}

fn deliver_at(value: &PropertyValue) -> Result<i64> {
    match value.value {
        Some(Value::Int(at)) => Ok(at),
        _ => Err(BrokerError::InvalidArgument(format!(
            "{SCHED_DELIVERY} must be an integer: ms since the Unix epoch"
        ))),
    }
}

fn duplicate_id(value: &PropertyValue) -> Result<Bytes> {
    let id = match &value.value {
        Some(Value::String(s)) => Bytes::copy_from_slice(s.as_bytes()),
        Some(Value::Bytes(b)) => b.clone(),
        _ => {
            return Err(BrokerError::InvalidArgument(format!(
                "{DUPL_ID} must be a string or bytes"
            )));
        }
    };
    if id.is_empty() || id.len() > MAX_DUPLICATE_ID_BYTES {
        return Err(BrokerError::InvalidArgument(format!(
            "a duplicate id must be 1 to {MAX_DUPLICATE_ID_BYTES} bytes long, this one has {}",
            id.len()
        )));
    }
    Ok(id)
}

// The config refuses a `max-properties-bytes` above its ceiling at load; the config
// cannot see the store, so the ceiling is tied to the store's inline record here.
const _: () = assert!(
    MAX_PROPERTIES_BYTES_LIMIT == (MAX_INLINE_RECORD_BYTES / 2) as u64,
    "rebound_config::MAX_PROPERTIES_BYTES_LIMIT must be half the store's MAX_INLINE_RECORD_BYTES"
);

/// The longest failure reason kept, in bytes; longer ones are cut with a marker.
pub const MAX_REASON_BYTES: usize = 1024;

/// A failure reason as the broker keeps it: at most [`MAX_REASON_BYTES`] of it.
pub fn bounded_reason(reason: &str) -> String {
    clip(reason, MAX_REASON_BYTES).into_owned()
}

/// The bytes of a message that the producer controls, as `max-message-size` and
/// `max-transaction-bytes` count them: its body and its properties.
pub fn counted_bytes(record: &MessageRecord) -> u64 {
    record.body.len() as u64 + properties_bytes(record)
}

/// The encoded size of a message's properties, as `max-properties-bytes` and
/// `max-message-size` count them.
pub fn properties_bytes(record: &MessageRecord) -> u64 {
    prost::encoding::btree_map::encoded_len(
        prost::encoding::string::encoded_len,
        prost::encoding::message::encoded_len,
        PROPERTIES_TAG,
        &record.properties,
    ) as u64
}

/// The tag of `MessageRecord.properties` (storage/src/records.rs).
const PROPERTIES_TAG: u32 = 4;

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
    use rebound_storage::PropertyValue;

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
        let err = check_new(&record(""), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not be empty"), "{err}");
        let mut m = record("a");
        m.properties.insert(
            rebound_protocol::properties::ORIG_QUEUE.into(),
            Default::default(),
        );
        assert!(
            check_new(&m, &Limits::default())
                .unwrap_err()
                .to_string()
                .contains("reserved")
        );
        let mut m = record("a");
        m.properties.insert(String::new(), Default::default());
        assert!(check_new(&m, &Limits::default()).is_err());
        let mut m = record("a");
        m.priority = 10;
        assert!(
            check_new(&m, &Limits::default())
                .unwrap_err()
                .to_string()
                .contains("priority")
        );
    }

    #[test]
    fn the_reserved_names_a_producer_may_set_are_read_and_checked() {
        let mut m = record("a");
        let int = |i| PropertyValue {
            value: Some(Value::Int(i)),
        };
        let text = |s: &str| PropertyValue {
            value: Some(Value::String(s.into())),
        };
        m.properties.insert(SCHED_DELIVERY.into(), int(1234));
        m.properties.insert(DUPL_ID.into(), text("order-7"));
        let requests = check_new(&m, &Limits::default()).unwrap();
        assert_eq!(
            requests,
            Requests {
                deliver_at_ms: Some(1234),
                duplicate_id: Some(Bytes::from_static(b"order-7")),
            }
        );
        for (name, bad) in [
            (SCHED_DELIVERY, text("tomorrow")),
            (DUPL_ID, int(7)),
            (DUPL_ID, text("")),
            (DUPL_ID, text(&"x".repeat(MAX_DUPLICATE_ID_BYTES + 1))),
            (GROUP_ID, text(&"x".repeat(MAX_GROUP_ID_BYTES + 1))),
            (JMSX_GROUP_ID, text(&"x".repeat(MAX_GROUP_ID_BYTES + 1))),
        ] {
            let mut m = record("a");
            m.properties.insert(name.into(), bad);
            let err = check_new(&m, &Limits::default()).unwrap_err();
            assert!(matches!(err, BrokerError::InvalidArgument(_)), "{err}");
        }
        assert_eq!(
            check_new(&record("a"), &Limits::default()).unwrap(),
            Requests::default()
        );
        let mut m = record("a");
        m.properties
            .insert(GROUP_ID.into(), text(&"x".repeat(MAX_GROUP_ID_BYTES)));
        assert!(check_new(&m, &Limits::default()).is_ok());
        m.properties
            .insert(GROUP_ID.into(), text(&"x".repeat(MAX_GROUP_ID_BYTES + 1)));
        let err = check_new(&m, &Limits::default()).unwrap_err().to_string();
        assert!(err.contains("at most 1024 bytes"), "{err}");
    }

    #[test]
    fn properties_are_bounded_and_the_limit_is_named() {
        let mut m = record("a");
        let big = PropertyValue {
            value: Some(Value::String("x".repeat(MAX_PROPERTIES_BYTES_LIMIT as usize))),
        };
        m.properties.insert("big".into(), big);
        let err = check_new(&m, &Limits::default()).unwrap_err();
        assert!(matches!(err, BrokerError::InvalidArgument(_)));
        assert!(err.to_string().contains("max-properties-bytes 65536"), "{err}");
        m.properties.clear();
        assert_eq!(properties_bytes(&m), 0);
        assert!(check_new(&m, &Limits::default()).is_ok());
    }

    #[test]
    fn properties_are_bounded_by_the_configured_limits() {
        let limits = Limits {
            max_properties_per_message: 2,
            max_properties_bytes: 20,
            ..Limits::default()
        };
        let mut m = record("a");
        for name in ["p", "q"] {
            m.properties.insert(name.into(), PropertyValue::default());
        }
        assert!(check_new(&m, &limits).is_ok());
        m.properties.insert("r".into(), PropertyValue::default());
        let err = check_new(&m, &limits).unwrap_err().to_string();
        assert!(
            err.contains("3 properties, more than max-properties-per-message 2"),
            "{err}"
        );
        m.properties.clear();
        let value = PropertyValue {
            value: Some(Value::String("x".repeat(20))),
        };
        m.properties.insert("k".into(), value);
        let err = check_new(&m, &limits).unwrap_err().to_string();
        assert!(err.contains("more than max-properties-bytes 20"), "{err}");
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary_with_a_marker() {
        assert_eq!(bounded_reason("db down"), "db down");
        let reason = bounded_reason(&"é".repeat(MAX_REASON_BYTES));
        // 512 two-byte characters fit; the other 512 are cut.
        assert_eq!(reason, format!("{}…[truncated 1024 bytes]", "é".repeat(512)));
        let odd = format!("a{}", "é".repeat(100));
        assert_eq!(
            excerpt(&odd),
            format!("a{}…[truncated 102 bytes]", "é".repeat(49))
        );
        let err = check_name("queue", &"q".repeat(10_000)).unwrap_err().to_string();
        assert!(err.len() < 200, "{err}");
    }
}
