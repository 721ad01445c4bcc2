//! Building messages to send.
//!
//! The wire type ([`proto::OutgoingMessage`]) leaves every optional field to the
//! broker's defaults; the builder keeps that: only what you set is sent.

use bytes::Bytes;

use crate::proto;
use crate::proto::property_value::Value;

/// A message to send, built fluently.
///
/// ```
/// use rebound_client::OutgoingMessage;
/// let msg = OutgoingMessage::new("orders", "{\"id\":1}")
///     .property("tenant", "acme")
///     .property("attempt", 1)
///     .durable(false)
///     .priority(7);
/// assert_eq!(msg.address(), "orders");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage(proto::OutgoingMessage);

impl OutgoingMessage {
    /// A message for `address` with the given body and the broker's defaults:
    /// durable, priority 4, no expiration.
    pub fn new(address: impl Into<String>, body: impl Into<Bytes>) -> Self {
        OutgoingMessage(proto::OutgoingMessage {
            address: address.into(),
            body: body.into(),
            ..Default::default()
        })
    }

    /// Sets an application property (names starting with `_AMQ_` or `_REBOUND_` are
    /// reserved for the broker and refused by it, but for `_AMQ_GROUP_ID`: see
    /// [`group`](Self::group)).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<PropertyValue>) -> Self {
        self.0.properties.insert(key.into(), value.into().into());
        self
    }

    /// Puts the message in a group (`_AMQ_GROUP_ID`): a queue delivers a group's
    /// messages one at a time, in send order, to one consumer at a time; a failed one
    /// holds its group until it succeeds or is dead-lettered.
    pub fn group(self, group: impl Into<String>) -> Self {
        self.property(rebound_protocol::properties::GROUP_ID, group.into())
    }

    /// Whether the broker must have the message on disk before acknowledging the send.
    pub fn durable(mut self, durable: bool) -> Self {
        self.0.durable = Some(durable);
        self
    }

    /// Priority from 0 (lowest) to 9 (highest); the broker refuses anything above 9.
    pub fn priority(mut self, priority: u8) -> Self {
        self.0.priority = Some(priority.into());
        self
    }

    /// Absolute expiration, milliseconds since the Unix epoch; 0 means never.
    pub fn expiration_ms(mut self, expiration_ms: u64) -> Self {
        self.0.expiration_ms = Some(expiration_ms);
        self
    }

    /// Scheduled delivery: not delivered before this time, milliseconds since the Unix
    /// epoch (the broker stores it as `_AMQ_SCHED_DELIVERY`). Wins over
    /// [`delay_ms`](Self::delay_ms); a time not in the future delivers at once, more
    /// than 3650 days ahead is refused.
    pub fn deliver_at_ms(mut self, deliver_at_ms: u64) -> Self {
        self.0.deliver_at_ms = Some(deliver_at_ms);
        self
    }

    /// Scheduled delivery: not delivered before this many milliseconds from when the
    /// broker receives it.
    pub fn delay_ms(mut self, delay_ms: u64) -> Self {
        self.0.delay_ms = Some(delay_ms);
        self
    }

    /// Duplicate detection (`_AMQ_DUPL_ID`, 1 to 256 bytes): if the address
    /// remembers this id, the send is acknowledged but the message is not stored
    /// again ([`Sent::duplicate`](crate::Sent::duplicate) says so); inside a
    /// transaction the commit fails with `ALREADY_EXISTS`. Use one id per logical
    /// message and resend with the same id after an error.
    pub fn duplicate_id(mut self, id: impl Into<String>) -> Self {
        self.0.duplicate_id = Some(id.into());
        self
    }

    /// The target address.
    pub fn address(&self) -> &str {
        &self.0.address
    }
}

impl From<OutgoingMessage> for proto::OutgoingMessage {
    fn from(msg: OutgoingMessage) -> Self {
        msg.0
    }
}

/// A typed property value, like a JMS message property.
///
/// Received messages carry the wire form, [`proto::PropertyValue`], whose `value`
/// is a [`proto::property_value::Value`] with the same variants.
#[derive(Debug, Clone, PartialEq)]
pub enum PropertyValue {
    /// UTF-8 text.
    String(String),
    /// A 64-bit signed integer.
    Int(i64),
    /// A 64-bit float.
    Double(f64),
    /// A boolean.
    Bool(bool),
    /// Raw bytes.
    Bytes(Bytes),
}

impl From<PropertyValue> for proto::PropertyValue {
    fn from(value: PropertyValue) -> Self {
        let value = match value {
            PropertyValue::String(s) => Value::String(s),
            PropertyValue::Int(i) => Value::Int(i),
            PropertyValue::Double(d) => Value::Double(d),
            PropertyValue::Bool(b) => Value::Bool(b),
            PropertyValue::Bytes(b) => Value::Bytes(b),
        };
        proto::PropertyValue { value: Some(value) }
    }
}

impl From<&str> for PropertyValue {
    fn from(s: &str) -> Self {
        PropertyValue::String(s.to_owned())
    }
}

impl From<String> for PropertyValue {
    fn from(s: String) -> Self {
        PropertyValue::String(s)
    }
}

impl From<i64> for PropertyValue {
    fn from(i: i64) -> Self {
        PropertyValue::Int(i)
    }
}

/// So that integer literals (`i32` by default) work without a suffix.
impl From<i32> for PropertyValue {
    fn from(i: i32) -> Self {
        PropertyValue::Int(i.into())
    }
}

impl From<f64> for PropertyValue {
    fn from(d: f64) -> Self {
        PropertyValue::Double(d)
    }
}

impl From<bool> for PropertyValue {
    fn from(b: bool) -> Self {
        PropertyValue::Bool(b)
    }
}

impl From<Bytes> for PropertyValue {
    fn from(b: Bytes) -> Self {
        PropertyValue::Bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_sets_only_what_was_given() {
        let wire = proto::OutgoingMessage::from(OutgoingMessage::new("a", "b"));
        assert_eq!(
            (wire.durable, wire.priority, wire.expiration_ms),
            (None, None, None)
        );

        let wire = proto::OutgoingMessage::from(
            OutgoingMessage::new("a", "b")
                .property("s", "x")
                .property("i", 3)
                .property("d", 1.5)
                .property("t", true)
                .property("y", Bytes::from_static(b"\x00"))
                .durable(false)
                .priority(9)
                .expiration_ms(42),
        );
        assert_eq!(wire.properties.len(), 5);
        assert_eq!(wire.properties["i"].value, Some(Value::Int(3)));
        assert_eq!(
            (wire.durable, wire.priority, wire.expiration_ms),
            (Some(false), Some(9), Some(42))
        );
        assert_eq!(
            (wire.deliver_at_ms, wire.delay_ms, wire.duplicate_id),
            (None, None, None)
        );

        let wire = proto::OutgoingMessage::from(
            OutgoingMessage::new("a", "b")
                .deliver_at_ms(7)
                .delay_ms(8)
                .duplicate_id("order-1"),
        );
        assert_eq!(
            (wire.deliver_at_ms, wire.delay_ms, wire.duplicate_id.as_deref()),
            (Some(7), Some(8), Some("order-1"))
        );
    }
}
