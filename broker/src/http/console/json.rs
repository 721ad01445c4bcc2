//! How the console's API shows the engine's things as JSON: queues, messages
//! (properties typed, the body as a bounded text or hex preview), settings with
//! their sources, redelivery plans; and message ids, both ways ([`Id`]).
use std::fmt::{self, Write};

use rebound_config::ResolvedSettings;
use rebound_storage::records::property_value::Value;
use serde::de::{self, Deserializer, Unexpected};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Value as Json, json};

use crate::dead_letter;
use crate::engine::{Browsed, RetryOutcome};
use crate::explain::{End, Plan};
use crate::outage::Status;
use crate::queue::{BrowseState, Queue};

/// Bytes of a body shown as text; as hex, half of it.
const PREVIEW_BYTES: usize = 2048;

/// A message id as the API writes and reads it: a JSON string of decimal
/// digits. Ids are 64-bit, and the page's JavaScript numbers are exact only
/// up to 2^53: as a number, a large id would reach the page rounded, and an
/// action would name another message. Read, a JSON number is taken too (for
/// scripts written when ids were numbers), as a `u64`, never rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id(pub u64);

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Id, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a message id: a string of decimal digits, or a non-negative integer")
            }
            fn visit_u64<E: de::Error>(self, id: u64) -> Result<Id, E> {
                Ok(Id(id))
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Id, E> {
                // Digits only: `parse` would also take a sign.
                match text.parse() {
                    Ok(id) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(Id(id)),
                    _ => Err(E::invalid_value(Unexpected::Str(text), &self)),
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A queue's identity and live counts.
pub fn queue(queue: &Queue) -> Json {
    let snap = queue.snapshot();
    let c = &snap.counters;
    json!({
        "name": queue.name,
        "address": queue.address,
        "routing_type": queue.routing_type.as_str(),
        "durable": queue.durable,
        "auto_created": queue.auto_created,
        "filter": queue.filter.as_ref().map(|f| f.as_str()),
        "messages": snap.messages,
        "delivering": snap.delivering,
        "scheduled": snap.scheduled,
        "consumers": snap.consumers,
        "bytes": snap.bytes,
        "paged_messages": snap.paged,
        "paged_bytes": snap.paged_bytes,
        "counting": snap.counting,
        "added": c.added,
        "acked": c.acked,
        "redelivered": c.redelivered,
        "dead_lettered": c.dead_lettered,
        "expired": c.expired,
        "dropped": c.dropped,
        "removed": c.removed,
        "moved_out": c.moved_out,
        "state": if snap.outage == Status::Normal { "normal" } else { "outage" },
        "outage_since_ms": match snap.outage {
            Status::Outage { since_ms, .. } => Some(since_ms),
            Status::Normal => None,
        },
        "next_probe_at_ms": match snap.outage {
            Status::Outage { next_probe_ms, .. } => next_probe_ms,
            Status::Normal => None,
        },
    })
}

/// A browsed message, with its failure history when it is a dead letter.
pub fn message(b: &Browsed) -> Json {
    let record = &b.record;
    let (state, due) = match b.state {
        BrowseState::Ready => ("ready", None),
        BrowseState::Delivering => ("delivering", None),
        BrowseState::Scheduled(at) => ("scheduled", Some(at)),
    };
    let properties: serde_json::Map<String, Json> = record
        .properties
        .iter()
        .map(|(k, v)| (k.clone(), property(v.value.as_ref())))
        .collect();
    let (encoding, preview) = preview(&record.body);
    json!({
        "id": Id(b.entry.id),
        "address": record.address,
        "priority": record.priority,
        "durable": record.durable,
        "timestamp_ms": record.timestamp_ms,
        "expiration_ms": record.expiration_ms,
        "delivery_count": b.entry.delivery_count,
        "state": state,
        "scheduled_until_ms": due,
        "properties": properties,
        "body_size": record.body.len(),
        "body_encoding": encoding,
        "body_preview": preview,
        "body_truncated": record.body.len() > PREVIEW_BYTES,
        "origin": dead_letter::origin(record).map(|(address, queue)| json!({"address": address, "queue": queue})),
        "dead_letter_reason": dead_letter::reason(record),
        "failures": failures(b),
        "redrives": dead_letter::redrive_count(record),
    })
}

/// Where a retried (or, in a dry run, previewed) message goes, or why it stays.
pub fn retry_outcome(o: &RetryOutcome) -> Json {
    json!({
        "id": Id(o.message_id),
        "to_address": o.to_address,
        "to_queue": o.to_queue,
        "skipped": o.skipped,
    })
}

/// A message's failed deliveries: those a dead letter carries, or those its queue
/// keeps for it while it is retried.
fn failures(b: &Browsed) -> Vec<dead_letter::Failure> {
    let carried = dead_letter::failures(&b.record);
    if !carried.is_empty() {
        return carried;
    }
    b.entry
        .failures
        .iter()
        .map(|f| dead_letter::Failure {
            at_ms: f.at_ms,
            reason: f.reason.clone(),
        })
        .collect()
}

/// A property's value with its type. An int is 64-bit, and may be a message id
/// (`_AMQ_ORIG_MESSAGE_ID`): written as a string of digits, as ids are ([`Id`]).
fn property(value: Option<&Value>) -> Json {
    match value {
        None => json!({"type": "null", "value": null}),
        Some(Value::String(s)) => json!({"type": "string", "value": s}),
        Some(Value::Int(i)) => json!({"type": "int", "value": i.to_string()}),
        Some(Value::Double(d)) => json!({"type": "double", "value": d}),
        Some(Value::Bool(b)) => json!({"type": "bool", "value": b}),
        Some(Value::Bytes(b)) => json!({"type": "bytes", "value": hex(&b[..b.len().min(PREVIEW_BYTES / 2)])}),
    }
}

/// The start of a body: as text when it is UTF-8 (a cut character at the end
/// forgiven), else as hex.
fn preview(body: &[u8]) -> (&'static str, String) {
    let head = &body[..body.len().min(PREVIEW_BYTES)];
    match std::str::from_utf8(head) {
        Ok(text) => ("text", text.to_owned()),
        Err(e) if e.error_len().is_none() => (
            "text",
            String::from_utf8_lossy(&head[..e.valid_up_to()]).into_owned(),
        ),
        Err(_) => ("hex", hex(&head[..head.len().min(PREVIEW_BYTES / 2)])),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(if i % 16 == 0 { '\n' } else { ' ' });
        }
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Every effective setting with the match (or default) that supplied it.
pub fn settings(resolved: &ResolvedSettings, keep: impl Fn(&str) -> bool) -> Vec<Json> {
    resolved
        .entries
        .iter()
        .filter(|e| keep(e.key))
        .map(|e| json!({"key": e.key, "value": e.value, "source": e.source.to_string()}))
        .collect()
}

/// The `match` patterns that supply at least one value, in table order.
pub fn matches(resolved: &ResolvedSettings) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for entry in &resolved.entries {
        if let rebound_config::Source::Match(pattern) = &entry.source
            && !out.contains(pattern)
        {
            out.push(pattern.clone());
        }
    }
    out
}

/// A redelivery plan.
pub fn plan(plan: &Plan) -> Json {
    let deliveries: Vec<Json> = plan
        .deliveries
        .iter()
        .map(|d| {
            json!({
                "number": d.number,
                "delay_ms": [d.delay_ms.0, d.delay_ms.1],
                "at_ms": [d.at_ms.0, d.at_ms.1],
            })
        })
        .collect();
    let end = match &plan.end {
        End::DeadLetter { after, to } => json!({
            "kind": "dead-letter",
            "after": after,
            "address": to.as_ref().map(|d| &d.address),
            "queue": to.as_ref().and_then(|d| d.own_queue.as_ref()),
        }),
        End::Move { after, address } => json!({"kind": "move", "after": after, "address": address}),
        End::Delete { after } => json!({"kind": "delete", "after": after}),
        End::Never => json!({"kind": "never"}),
    };
    json!({
        "deliveries": deliveries,
        "more": plan.more,
        "end": end,
        "total_ms": plan.total_ms.map(|(least, most)| [least, most]),
        "jitter_factor": plan.jitter_factor,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rebound_storage::PropertyValue;

    use super::*;
    use crate::http::console::groups;

    /// 2^60 + 1: past 2^53, where a JavaScript number stops being exact.
    const BIG: u64 = (1 << 60) + 1;

    #[test]
    fn message_ids_past_2_53_show_as_exact_strings() {
        let browsed = groups::tests::dead(BIG, 1, "orders", "max-delivery-attempts", "");
        assert_eq!(message(&browsed)["id"], json!("1152921504606846977"));
        let groups = serde_json::to_value(groups::group(&[browsed])).unwrap();
        assert_eq!(groups[0]["message_ids"], json!(["1152921504606846977"]));
        let outcome = RetryOutcome {
            message_id: BIG,
            to_address: "orders".into(),
            to_queue: "orders".into(),
            skipped: None,
        };
        assert_eq!(retry_outcome(&outcome)["id"], json!("1152921504606846977"));
    }

    #[test]
    fn int_properties_show_as_exact_strings() {
        let mut browsed = groups::tests::dead(1, 1, "orders", "max-delivery-attempts", "");
        let record = Arc::make_mut(&mut browsed.record);
        for (name, value) in [(dead_letter::ORIG_MESSAGE_ID, BIG as i64), ("delta", -5)] {
            let value = Some(Value::Int(value));
            record.properties.insert(name.into(), PropertyValue { value });
        }
        let properties = &message(&browsed)["properties"];
        assert_eq!(
            properties[dead_letter::ORIG_MESSAGE_ID],
            json!({"type": "int", "value": "1152921504606846977"})
        );
        assert_eq!(properties["delta"], json!({"type": "int", "value": "-5"}));
    }

    #[test]
    fn bodies_preview_as_text_or_hex() {
        assert_eq!(preview(b"hello"), ("text", "hello".into()));
        assert_eq!(preview(&[0xff, 0x00, 0x41]), ("hex", "ff 00 41".into()));
        // A multi-byte character cut by the preview's end is still text.
        let mut long = "a".repeat(PREVIEW_BYTES - 1).into_bytes();
        long.extend_from_slice("é".as_bytes());
        assert_eq!(preview(&long).0, "text");
        assert_eq!(hex(&[0; 17]).matches('\n').count(), 1);
    }
}
