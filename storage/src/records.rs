//! The stored record types: the storage **format**, in one place.
//!
//! Every value in the store is one of these protobuf messages, encoded with
//! prost. Protobuf gives us forward and backward compatibility for free as
//! long as two rules are kept: never reuse or renumber a tag, and only add
//! fields whose zero value means "as before". Decoders skip unknown fields,
//! which recovery relies on to read a message's priority and expiry without
//! copying its body.
//!
//! # Large bodies
//!
//! A [`MessageRecord`] whose body is above
//! [`LARGE_BODY_THRESHOLD`](crate::LARGE_BODY_THRESHOLD) (or would not fit
//! [`MAX_INLINE_RECORD_BYTES`](crate::MAX_INLINE_RECORD_BYTES) inline) is
//! stored with an empty `body` (tag 3 absent) followed by one extra field,
//! **tag 100**, a message
//!
//! ```text
//! LargeBody { uint64 len = 1; uint32 generation = 2; }
//! ```
//!
//! saying that the body is the file `large/q<queue>-m<id>.body` (generation
//! 0) or `large/q<queue>-m<id>.g<generation>.body`, of exactly `len` bytes
//! ([`crate::large`]). The public [`MessageRecord`] has no such field, so
//! decoding it skips tag 100 and the store fills `body` from the file; tag
//! 100 must never be given to a [`MessageRecord`] field. A reader that does
//! not know tag 100 (a store from before large messages) sees an empty body
//! rather than garbage.
//!
//! Enum fields are stored as `i32` (prost's representation, so unknown values
//! from a newer writer survive a round trip); use the generated accessors,
//! e.g. [`MessageRecord::routing_type()`], to read them as [`RoutingType`].

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::Message;

use crate::error::StorageError;
use crate::keys;

/// A message reference as stored for one queue.
///
/// A multicast message is stored once per queue it was routed to: bodies are
/// duplicated per subscription, but acknowledging never coordinates across
/// queues and a dead-letter move is one batch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MessageRecord {
    /// Globally unique id, from [`Store::generate_id`](crate::Store::generate_id).
    #[prost(uint64, tag = "1")]
    pub message_id: u64,
    /// The address the message was sent to.
    #[prost(string, tag = "2")]
    pub address: String,
    /// The opaque payload.
    #[prost(bytes = "bytes", tag = "3")]
    pub body: Bytes,
    /// Application and broker properties.
    #[prost(btree_map = "string, message", tag = "4")]
    pub properties: BTreeMap<String, PropertyValue>,
    /// Whether the producer asked for persistence.
    #[prost(bool, tag = "5")]
    pub durable: bool,
    /// Milliseconds since the Unix epoch at which the broker accepted it.
    #[prost(uint64, tag = "6")]
    pub timestamp_ms: u64,
    /// JMS-style priority, `0..=9`.
    #[prost(uint32, tag = "7")]
    pub priority: u32,
    /// Milliseconds since the Unix epoch after which it expires; `0` = never.
    #[prost(uint64, tag = "8")]
    pub expiration_ms: u64,
    /// Routing type of the queue it was routed to (for `_AMQ_ORIG_ROUTING_TYPE`).
    #[prost(enumeration = "RoutingType", tag = "9")]
    pub routing_type: i32,
    /// When its queue may first deliver it (ms since the epoch), as its
    /// scheduled send asked; `0` = at once. Kept with the message so that a
    /// scheduled send writes no delivery state; once one is written
    /// ([`DeliveryState::scheduled_at_ms`]), the state says when instead.
    #[prost(uint64, tag = "10")]
    pub scheduled_at_ms: u64,
}

/// The properties that name a message's group, in the order they are looked up:
/// Artemis's `_AMQ_GROUP_ID`, then JMS's `JMSXGroupID` (a string value).
pub const GROUP_PROPERTIES: [&str; 2] = ["_AMQ_GROUP_ID", "JMSXGroupID"];

/// The message group named by `properties` (see [`GROUP_PROPERTIES`]); an empty
/// name is no group.
pub fn group_of(properties: &BTreeMap<String, PropertyValue>) -> Option<&str> {
    GROUP_PROPERTIES
        .iter()
        .find_map(|name| match properties.get(*name)?.value.as_ref()? {
            property_value::Value::String(group) if !group.is_empty() => Some(group.as_str()),
            _ => None,
        })
}

impl MessageRecord {
    /// `encoded_len()` less the body field (tag 3): the part that stays
    /// inline when the body goes to a file.
    pub(crate) fn encoded_len_without_body(&self) -> usize {
        let body = match self.body.is_empty() {
            true => 0,
            false => prost::encoding::bytes::encoded_len(3, &self.body),
        };
        self.encoded_len() - body
    }
}

/// The fields of a [`MessageRecord`] that recovery indexes, decoded without
/// touching the body. Its tags must match [`MessageRecord`]'s.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct MessageIndex {
    #[prost(uint32, tag = "7")]
    pub priority: u32,
    #[prost(uint64, tag = "8")]
    pub expiration_ms: u64,
    #[prost(uint64, tag = "10")]
    pub scheduled_at_ms: u64,
    /// The properties, for the message's group ([`group_of`]).
    #[prost(btree_map = "string, message", tag = "4")]
    pub properties: BTreeMap<String, PropertyValue>,
    /// The large-body marker, if the body is in a file.
    #[prost(message, optional, tag = "100")]
    pub large: Option<crate::large::LargeBody>,
}

/// A typed message property value.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PropertyValue {
    /// The value; `None` only if written by a newer format with a new variant.
    #[prost(oneof = "property_value::Value", tags = "1, 2, 3, 4, 5")]
    pub value: Option<property_value::Value>,
}

/// The variants of [`PropertyValue`].
pub mod property_value {
    /// A property value of one of the supported types.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// A string.
        #[prost(string, tag = "1")]
        String(String),
        /// A signed integer (all JMS integer types widen to this).
        #[prost(int64, tag = "2")]
        Int(i64),
        /// A floating-point number.
        #[prost(double, tag = "3")]
        Double(f64),
        /// A boolean.
        #[prost(bool, tag = "4")]
        Bool(bool),
        /// Raw bytes.
        #[prost(bytes = "bytes", tag = "5")]
        Bytes(bytes::Bytes),
    }
}

/// A queue definition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueueRecord {
    /// The broker-assigned id used in message keys.
    #[prost(uint32, tag = "1")]
    pub id: u32,
    /// The queue's name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The address the queue is bound to.
    #[prost(string, tag = "3")]
    pub address: String,
    /// Anycast or multicast.
    #[prost(enumeration = "RoutingType", tag = "4")]
    pub routing_type: i32,
    /// Selector expression; empty = no filter.
    #[prost(string, tag = "5")]
    pub filter: String,
    /// Whether the broker created it on demand.
    #[prost(bool, tag = "6")]
    pub auto_created: bool,
}

/// An address definition.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AddressRecord {
    /// The address name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Whether anycast queues may be bound.
    #[prost(bool, tag = "2")]
    pub anycast: bool,
    /// Whether multicast queues may be bound.
    #[prost(bool, tag = "3")]
    pub multicast: bool,
    /// Whether the broker created it on demand.
    #[prost(bool, tag = "4")]
    pub auto_created: bool,
}

/// Delivery bookkeeping of one message reference; stored only once written.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeliveryState {
    /// How many times it has been delivered.
    #[prost(uint32, tag = "1")]
    pub delivery_count: u32,
    /// Not deliverable before this time (ms since the epoch); `0` = now.
    #[prost(uint64, tag = "2")]
    pub scheduled_at_ms: u64,
    /// The most recent failures (the broker keeps the last 5), oldest first.
    #[prost(message, repeated, tag = "3")]
    pub failures: Vec<FailureRecord>,
}

/// One failed delivery attempt.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FailureRecord {
    /// When it failed, ms since the epoch.
    #[prost(uint64, tag = "1")]
    pub at_ms: u64,
    /// Why, as reported by the consumer or the broker.
    #[prost(string, tag = "2")]
    pub reason: String,
}

/// A batch of a queue's due-time index ([`crate::Op::PutDues`]): its
/// messages in ascending order, when each is due (ms since the epoch) and its
/// id, in two parallel lists of differences from the entry before (the first
/// from 0), so that a batch of messages scheduled close together takes a few
/// bytes per message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DueBatchRecord {
    /// When each is due, as the time since the one before.
    #[prost(uint64, repeated, tag = "1")]
    pub at_ms: Vec<u64>,
    /// Their ids, as the difference from the one before (ids of messages due
    /// later may be lower).
    #[prost(sint64, repeated, tag = "2")]
    pub ids: Vec<i64>,
}

impl DueBatchRecord {
    /// The record of a batch of `entries`.
    pub fn of(entries: &[crate::Due]) -> DueBatchRecord {
        let mut sorted = entries.to_vec();
        sorted.sort_unstable();
        let mut record = DueBatchRecord::default();
        let mut before = crate::Due { at_ms: 0, id: 0 };
        for due in sorted {
            record.at_ms.push(due.at_ms - before.at_ms);
            // Two's complement: the difference of any two ids round-trips.
            record.ids.push(due.id.wrapping_sub(before.id) as i64);
            before = due;
        }
        record
    }

    /// The entries, ascending, of the batch stored as `value` under `key`
    /// (named in the error if it does not decode, or its two lists differ in
    /// length).
    pub(crate) fn decode_entries(key: &[u8], value: &[u8]) -> Result<Vec<crate::Due>, StorageError> {
        let record: DueBatchRecord = decode(key, value)?;
        if record.at_ms.len() != record.ids.len() {
            return Err(StorageError::Corrupt {
                key: keys::hex(key),
                reason: "a due-time batch whose lists differ in length".into(),
            });
        }
        let mut before = crate::Due { at_ms: 0, id: 0 };
        Ok(record
            .at_ms
            .into_iter()
            .zip(record.ids)
            .map(|(at_delta, id_delta)| {
                before = crate::Due {
                    at_ms: before.at_ms.wrapping_add(at_delta),
                    id: before.id.wrapping_add(id_delta as u64),
                };
                before
            })
            .collect())
    }
}

/// One entry of an address's duplicate-id cache: an id a producer sent with a
/// message (`_AMQ_DUPL_ID`), written in the same commit as that message.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DuplicateIdRecord {
    /// The id, as the producer sent it (a string's UTF-8 bytes).
    #[prost(bytes = "bytes", tag = "1")]
    pub id: Bytes,
}

/// How an address routes messages to its queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum RoutingType {
    /// Each message goes to one of the queues.
    Anycast = 0,
    /// Each message goes to every queue.
    Multicast = 1,
}

/// Decodes the value stored under `key`, reporting failure as
/// [`StorageError::Corrupt`].
pub(crate) fn decode<M: Message + Default>(key: &[u8], value: &[u8]) -> Result<M, StorageError> {
    M::decode(value).map_err(|e| StorageError::Corrupt {
        key: keys::hex(key),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any batch reads back whole and ascending, whatever the ids and times.
        #[test]
        fn due_batches_round_trip_ascending(
            pairs in proptest::collection::vec((proptest::prelude::any::<u64>(), proptest::prelude::any::<u64>()), 0..50)
        ) {
            let entries: Vec<crate::Due> = pairs.into_iter().map(|(at_ms, id)| crate::Due { at_ms, id }).collect();
            let encoded = DueBatchRecord::of(&entries).encode_to_vec();
            let back = DueBatchRecord::decode_entries(b"k", &encoded).unwrap();
            let mut sorted = entries;
            sorted.sort_unstable();
            proptest::prop_assert_eq!(back, sorted);
        }
    }

    #[test]
    fn a_batch_whose_lists_differ_in_length_is_corrupt() {
        let record = DueBatchRecord {
            at_ms: vec![1, 2],
            ids: vec![7],
        };
        let err = DueBatchRecord::decode_entries(&[0x03, 0xab], &record.encode_to_vec()).unwrap_err();
        assert!(
            matches!(err, StorageError::Corrupt { ref key, ref reason } if key == "03ab" && reason.contains("differ in length")),
            "{err}"
        );
    }

    #[test]
    fn a_batch_of_close_messages_takes_a_few_bytes_each() {
        let entries: Vec<crate::Due> = (0..1000)
            .map(|i| crate::Due {
                at_ms: 1_800_000_000_000 + i * 3,
                id: 5_000_000 + i,
            })
            .collect();
        assert!(DueBatchRecord::of(&entries).encoded_len() < 3 * 1000 + 20);
    }

    fn sample() -> MessageRecord {
        MessageRecord {
            message_id: 42,
            address: "orders".into(),
            body: Bytes::from_static(&[7; 300]),
            properties: BTreeMap::from([
                (
                    "s".into(),
                    PropertyValue {
                        value: Some(property_value::Value::String("x".into())),
                    },
                ),
                (
                    "i".into(),
                    PropertyValue {
                        value: Some(property_value::Value::Int(-3)),
                    },
                ),
                (
                    "d".into(),
                    PropertyValue {
                        value: Some(property_value::Value::Double(0.5)),
                    },
                ),
                (
                    "b".into(),
                    PropertyValue {
                        value: Some(property_value::Value::Bool(true)),
                    },
                ),
                (
                    "y".into(),
                    PropertyValue {
                        value: Some(property_value::Value::Bytes(Bytes::from_static(b"\0"))),
                    },
                ),
            ]),
            durable: true,
            timestamp_ms: 1_700_000_000_000,
            priority: 9,
            expiration_ms: 1_700_000_060_000,
            routing_type: RoutingType::Multicast.into(),
            scheduled_at_ms: 1_700_000_030_000,
        }
    }

    #[test]
    fn length_without_body_is_that_of_the_record_with_an_empty_body() {
        for body in [0, 1, 300, 70_000] {
            let record = MessageRecord {
                body: vec![1; body].into(),
                ..sample()
            };
            let emptied = MessageRecord {
                body: Bytes::new(),
                ..record.clone()
            };
            assert_eq!(
                record.encoded_len_without_body(),
                emptied.encoded_len(),
                "body {body}"
            );
        }
    }

    #[test]
    fn message_round_trips() {
        let record = sample();
        let decoded: MessageRecord = decode(b"k", &record.encode_to_vec()).unwrap();
        assert_eq!(decoded, record);
        assert_eq!(decoded.routing_type(), RoutingType::Multicast);
    }

    #[test]
    fn index_view_matches_message_tags() {
        let record = sample();
        let index: MessageIndex = decode(b"k", &record.encode_to_vec()).unwrap();
        assert_eq!(
            (index.priority, index.expiration_ms, index.scheduled_at_ms),
            (record.priority, record.expiration_ms, record.scheduled_at_ms)
        );
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        let err = decode::<MessageRecord>(&[0x01, 0xab], &[0xff, 0xff, 0xff]).unwrap_err();
        assert!(
            matches!(err, StorageError::Corrupt { ref key, .. } if key == "01ab"),
            "{err}"
        );
    }
}
