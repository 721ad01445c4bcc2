//! How the CLI shows messages and queues: one human-readable line, or (with
//! `--json`) one JSON object per line for scripts.
//!
//! The JSON shapes are part of the CLI's interface; keys keep their documented
//! order (struct field order, or an explicit list for queues).
//!
//! Bodies, property names and values and dead-letter reasons are whatever some
//! producer or consumer sent. The human output shows them with every control
//! character escaped (`\n`, `\u{1b}`: [`rebound_config::escape_controls`]),
//! newline and tab included, so that a message cannot move the cursor, clear
//! or retitle the terminal, ring its bell, or break its one line or table row
//! into several. Address and queue names need nothing: they cannot hold control
//! characters. The JSON output needs nothing either: JSON escapes them itself.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rebound_client::proto::PropertyValue;
use rebound_client::proto::property_value::Value;
use rebound_client::{
    AddressInfo, BrowsedMessage, Delivery, Message, MessageState, QueueInfo, RoutingType, properties,
};
use rebound_config::escape_controls;
use std::io::Write as _;

use serde::Serialize;
use serde::ser::Serializer;

use crate::table;

/// A received message: `rebound receive --json`.
#[derive(Serialize)]
pub struct MessageJson<'a> {
    message_id: u64,
    address: &'a str,
    queue: &'a str,
    /// UTF-8 text, or base64 when the body is not valid UTF-8.
    body: Cow<'a, str>,
    body_base64: bool,
    properties: BTreeMap<&'a str, Option<PropertyJson>>,
    delivery_count: u32,
    redelivered: bool,
    durable: bool,
    priority: u32,
    timestamp_ms: u64,
    expiration_ms: u64,
}

impl<'a> MessageJson<'a> {
    fn new(message: &'a Message, queue: &'a str, delivery_count: u32, redelivered: bool) -> Self {
        let (body, body_base64) = body_text(&message.body);
        MessageJson {
            message_id: message.message_id,
            address: &message.address,
            queue,
            body,
            body_base64,
            properties: message
                .properties
                .iter()
                .map(|(k, v)| (k.as_str(), PropertyJson::new(v)))
                .collect(),
            delivery_count,
            redelivered,
            durable: message.durable,
            priority: message.priority,
            timestamp_ms: message.timestamp_ms,
            expiration_ms: message.expiration_ms,
        }
    }

    /// The JSON of a delivery.
    pub fn delivery(delivery: &'a Delivery) -> Self {
        MessageJson::new(
            &delivery.message,
            &delivery.queue,
            delivery.delivery_count,
            delivery.redelivered,
        )
    }
}

/// A browsed message: `rebound queue browse --json`, the receive shape plus the
/// message's state. `redelivered` means what it means on a delivery: delivered
/// more than once so far.
#[derive(Serialize)]
pub struct BrowsedJson<'a> {
    #[serde(flatten)]
    message: MessageJson<'a>,
    state: &'static str,
    scheduled_at_ms: u64,
}

impl<'a> BrowsedJson<'a> {
    /// The JSON of a message browsed on `queue`.
    pub fn new(browsed: &'a BrowsedMessage, queue: &'a str) -> Self {
        let count = browsed.delivery_count;
        BrowsedJson {
            message: MessageJson::new(&browsed.message, queue, count, count > 1),
            state: state_name(browsed.state),
            scheduled_at_ms: browsed.scheduled_at_ms,
        }
    }
}

/// A property value as JSON: its natural JSON type, bytes as `{"base64": ...}`.
#[derive(Serialize)]
#[serde(untagged)]
enum PropertyJson {
    String(String),
    Int(i64),
    Double(f64),
    Bool(bool),
    Bytes { base64: String },
}

impl PropertyJson {
    fn new(value: &PropertyValue) -> Option<Self> {
        Some(match value.value.as_ref()? {
            Value::String(s) => PropertyJson::String(s.clone()),
            Value::Int(i) => PropertyJson::Int(*i),
            Value::Double(d) => PropertyJson::Double(*d),
            Value::Bool(b) => PropertyJson::Bool(*b),
            Value::Bytes(b) => PropertyJson::Bytes {
                base64: BASE64.encode(b),
            },
        })
    }
}

/// The body as text, and whether that text is base64 (the body is not UTF-8).
fn body_text(body: &[u8]) -> (Cow<'_, str>, bool) {
    match std::str::from_utf8(body) {
        Ok(text) => (Cow::Borrowed(text), false),
        Err(_) => (Cow::Owned(BASE64.encode(body)), true),
    }
}

/// The body for a human: the text, or a note with the base64 of binary data.
fn body_for_humans(body: &[u8]) -> String {
    match body_text(body) {
        (text, false) => escape_controls(&text).into_owned(),
        (base64, true) => format!("<{} bytes, not UTF-8; base64 {base64}>", body.len()),
    }
}

/// `rebound receive`'s line for a delivery.
pub fn delivery_line(delivery: &Delivery) -> String {
    let message = &delivery.message;
    format!(
        "#{} (delivery {}): {}",
        message.message_id,
        delivery.delivery_count,
        body_for_humans(&message.body)
    )
}

/// A time in ms since the Unix epoch as RFC 3339 UTC (ms as is if out of range).
fn rfc3339(ms: u64) -> String {
    let nanos = i128::from(ms) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// `rebound queue browse`'s table: one row per message, with the dead-letter
/// reason (if it is a dead letter) in a column of its own.
pub fn browsed_table(messages: &[BrowsedMessage]) -> String {
    let rows: Vec<Vec<String>> = messages
        .iter()
        .map(|browsed| {
            let message = &browsed.message;
            let state = match browsed.state {
                MessageState::Scheduled => format!("scheduled until {}", rfc3339(browsed.scheduled_at_ms)),
                other => state_name(other).to_owned(),
            };
            let reason = message
                .properties
                .get(properties::DEAD_LETTER_REASON)
                .map_or_else(|| "-".to_owned(), property_text);
            vec![
                message.message_id.to_string(),
                state,
                browsed.delivery_count.to_string(),
                reason,
                properties_text(message),
                body_for_humans(&message.body),
            ]
        })
        .collect();
    table::render(
        &["ID", "STATE", "DELIVERIES", "REASON", "PROPERTIES", "BODY"],
        &rows,
    )
}

/// Every property as `key=value`, sorted by key, comma-separated; `-` for none.
fn properties_text(message: &Message) -> String {
    if message.properties.is_empty() {
        return "-".to_owned();
    }
    let sorted: BTreeMap<&str, &PropertyValue> =
        message.properties.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let pairs: Vec<String> = sorted
        .into_iter()
        .map(|(key, value)| format!("{}={}", escape_controls(key), property_text(value)))
        .collect();
    pairs.join(", ")
}

/// A property value as its JSON rendering, strings without their quotes (and
/// with control characters escaped, as JSON would have).
fn property_text(value: &PropertyValue) -> String {
    match PropertyJson::new(value) {
        Some(PropertyJson::String(s)) => escape_controls(&s).into_owned(),
        Some(other) => serde_json::to_string(&other).unwrap_or_default(),
        None => "null".to_owned(),
    }
}

fn state_name(state: MessageState) -> &'static str {
    match state {
        MessageState::Unspecified => "unspecified",
        MessageState::Ready => "ready",
        MessageState::Delivering => "delivering",
        MessageState::Scheduled => "scheduled",
    }
}

/// `anycast`, `multicast` (or `unspecified`).
pub fn routing_name(routing_type: RoutingType) -> &'static str {
    match routing_type {
        RoutingType::Unspecified => "unspecified",
        RoutingType::Anycast => "anycast",
        RoutingType::Multicast => "multicast",
    }
}

/// A queue and its counters in documented order; the one list behind the JSON,
/// `queue stat` and the `queue list` table.
/// The state, outage start and next probe (ms since the epoch; null when not in
/// outage mode, or while a probe is out) come after the counters, as outage mode
/// added them; then the paged messages and bytes (included in `messages` and
/// `bytes`), and whether they are still being counted after a restart; then,
/// on a cluster, the node serving the queue (null on a single broker).
pub fn queue_fields(q: &QueueInfo) -> [(&'static str, serde_json::Value); 25] {
    let ms = |value: u64| (value > 0).then_some(value);
    [
        ("name", q.name.clone().into()),
        ("address", q.address.clone().into()),
        ("routing_type", routing_name(q.routing_type()).into()),
        ("durable", q.durable.into()),
        ("auto_created", q.auto_created.into()),
        ("messages", q.messages.into()),
        ("delivering", q.delivering.into()),
        ("scheduled", q.scheduled.into()),
        ("consumers", q.consumers.into()),
        ("added", q.added.into()),
        ("acked", q.acked.into()),
        ("redelivered", q.redelivered.into()),
        ("dead_lettered", q.dead_lettered.into()),
        ("dropped", q.dropped.into()),
        ("expired", q.expired.into()),
        ("removed", q.removed.into()),
        ("moved_out", q.moved_out.into()),
        ("bytes", q.bytes.into()),
        ("state", if q.outage { "outage" } else { "normal" }.into()),
        ("outage_since_ms", ms(q.outage_since_ms).into()),
        ("next_probe_at_ms", ms(q.next_probe_at_ms).into()),
        ("paged_messages", q.paged_messages.into()),
        ("paged_bytes", q.paged_bytes.into()),
        ("counting", q.counting.into()),
        (
            "served_by",
            (!q.served_by.is_empty()).then(|| q.served_by.clone()).into(),
        ),
    ]
}

/// A JSON field value as plain text: strings without their quotes, lists as
/// `a, b` (`-` when empty).
pub fn plain(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(items) if items.is_empty() => "-".to_owned(),
        serde_json::Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// An address, its queues and their summed gauges in documented order; the one
/// list behind `address stat`, its JSON and the `address list` table.
pub fn address_fields(a: &AddressInfo) -> [(&'static str, serde_json::Value); 13] {
    let routing_types: Vec<&str> = a.routing_types().map(routing_name).collect();
    [
        ("name", a.name.clone().into()),
        ("routing_types", routing_types.into()),
        ("auto_created", a.auto_created.into()),
        ("queues", a.queues.clone().into()),
        ("messages", a.messages.into()),
        ("delivering", a.delivering.into()),
        ("scheduled", a.scheduled.into()),
        ("consumers", a.consumers.into()),
        ("bytes", a.bytes.into()),
        // -1 = unlimited, as in the config.
        (
            "max_size_bytes",
            match a.max_size_bytes {
                0 => (-1).into(),
                limit => limit.into(),
            },
        ),
        ("address_full_policy", a.address_full_policy.clone().into()),
        ("blocked_sends", a.blocked_sends.into()),
        ("dropped_messages", a.dropped_messages.into()),
    ]
}

/// A queue or an address as management shows it: one list of documented fields
/// behind its JSON object, its `stat` lines and its table row.
pub trait Fields {
    fn fields(&self) -> Vec<(&'static str, serde_json::Value)>;
}

impl Fields for QueueInfo {
    fn fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        queue_fields(self).into()
    }
}

impl Fields for AddressInfo {
    fn fields(&self) -> Vec<(&'static str, serde_json::Value)> {
        address_fields(self).into()
    }
}

/// A record as one JSON object with the keys of its [`Fields`].
struct AsJson<'a, T>(&'a T);

impl<T: Fields> Serialize for AsJson<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.fields())
    }
}

/// `list`: one JSON object per line, or the table `table` makes.
pub fn print_list<T: Fields>(
    items: &[T],
    json: bool,
    table: impl FnOnce(&[T]) -> String,
) -> anyhow::Result<()> {
    if !json {
        write!(std::io::stdout(), "{}", table(items))?;
        return Ok(());
    }
    for item in items {
        outln!("{}", serde_json::to_string(&AsJson(item))?)?;
    }
    Ok(())
}

/// `stat`: one JSON object, or a `key: value` line per field.
pub fn print_stat<T: Fields>(item: &T, json: bool) -> anyhow::Result<()> {
    if json {
        outln!("{}", serde_json::to_string(&AsJson(item))?)?;
        return Ok(());
    }
    for (key, value) in item.fields() {
        outln!("{key}: {}", plain(&value))?;
    }
    Ok(())
}
