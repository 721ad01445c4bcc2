//! The values a selector compares, and how a message hands them over.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;

/// A property or header value as a selector sees it.
///
/// JMS's byte, short, int and long all become [`Value::Int`]; float and
/// double become [`Value::Float`]. Strings borrow from the message where
/// they can ([`Cow::Borrowed`]) and are owned where the caller has to build
/// them, e.g. a formatted `JMSMessageID`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// A string property.
    String(Cow<'a, str>),
    /// An integral property (byte, short, int, long).
    Int(i64),
    /// A floating-point property (float, double).
    Float(f64),
    /// A boolean property.
    Bool(bool),
}

/// A value that borrows nothing, as stored in a property map.
pub type OwnedValue = Value<'static>;

impl Value<'_> {
    /// The same value, borrowing its string instead of cloning it.
    pub fn borrowed(&self) -> Value<'_> {
        match self {
            Value::String(s) => Value::String(Cow::Borrowed(s)),
            Value::Int(i) => Value::Int(*i),
            Value::Float(f) => Value::Float(*f),
            Value::Bool(b) => Value::Bool(*b),
        }
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::String(Cow::Borrowed(s))
    }
}

impl From<String> for Value<'_> {
    fn from(s: String) -> Self {
        Value::String(Cow::Owned(s))
    }
}

impl From<i64> for Value<'_> {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<i32> for Value<'_> {
    fn from(i: i32) -> Self {
        Value::Int(i.into())
    }
}

impl From<f64> for Value<'_> {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<bool> for Value<'_> {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Where a selector looks up identifiers: a message's properties and headers.
///
/// The evaluator treats every identifier alike, so the implementation maps
/// headers too (`JMSPriority` → `Int`, `JMSDeliveryMode` → `'PERSISTENT'` or
/// `'NON_PERSISTENT'`, ...). `None` means the message has no such property,
/// which the selector sees as NULL.
pub trait Properties {
    /// The value of the property or header `name` (case-sensitive).
    fn get(&self, name: &str) -> Option<Value<'_>>;
}

impl<S: BuildHasher> Properties for HashMap<String, OwnedValue, S> {
    fn get(&self, name: &str) -> Option<Value<'_>> {
        HashMap::get(self, name).map(Value::borrowed)
    }
}

impl Properties for BTreeMap<String, OwnedValue> {
    fn get(&self, name: &str) -> Option<Value<'_>> {
        BTreeMap::get(self, name).map(Value::borrowed)
    }
}
