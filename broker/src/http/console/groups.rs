//! Dead-letter triage: a dead-letter queue's messages grouped by the queue they
//! failed on and why, so that an operator sees "312 from orders: rejected: bad json,
//! last 2 min ago" rather than 312 rows.
//!
//! A group is the original address and queue (`_AMQ_ORIG_*`), the reason it died
//! (`_REBOUND_DEAD_LETTER_REASON`) and the reason of its last failed delivery (from
//! `_REBOUND_FAILURES`): "max-delivery-attempts" alone says little, the consumer's
//! last words say what broke. Reasons are compared with what varies from one
//! message to the next masked ([`mask`]: "gateway timeout after 6242 ms (request
//! id 9f75ef68)" and "... 17 ms (request id 0c1d2e3f)" are one cause), and a
//! group shows the original text of one of its messages. Groups carry the ids
//! of their messages, so that an action on a group acts on exactly those.
use std::collections::HashMap;

use serde::Serialize;

use super::json::Id;
use crate::dead_letter;
use crate::engine::Browsed;

/// Messages that died on the same queue for the same reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Group {
    pub orig_address: Option<String>,
    pub orig_queue: Option<String>,
    /// Masked.
    pub reason: Option<String>,
    pub last_failure: Option<String>,
    /// The reasons of one of the messages as written.
    pub example_reason: Option<String>,
    pub example_failure: Option<String>,
    pub count: u64,
    /// When the first and the last of them arrived on the dead-letter queue.
    pub first_seen_ms: u64,
    pub last_seen_ms: u64,
    /// In queue order.
    pub message_ids: Vec<Id>,
}

type Key = (Option<String>, Option<String>, Option<String>, Option<String>);

/// Groups `messages`, largest group first (then the most recent).
pub fn group(messages: &[Browsed]) -> Vec<Group> {
    let mut groups: HashMap<Key, Group> = HashMap::new();
    for browsed in messages {
        let record = &browsed.record;
        let (orig_address, orig_queue) = match dead_letter::origin(record) {
            Some((address, queue)) => (Some(address.to_owned()), Some(queue.to_owned())),
            None => (None, None),
        };
        let reason = dead_letter::reason(record).map(str::to_owned);
        let failure = dead_letter::failures(record).pop().map(|f| f.reason);
        let key = (
            orig_address,
            orig_queue,
            reason.as_deref().map(mask),
            failure.as_deref().map(mask),
        );
        let seen = record.timestamp_ms;
        let group = groups.entry(key.clone()).or_insert_with(|| Group {
            orig_address: key.0,
            orig_queue: key.1,
            reason: key.2,
            last_failure: key.3,
            example_reason: reason,
            example_failure: failure,
            count: 0,
            first_seen_ms: seen,
            last_seen_ms: seen,
            message_ids: Vec::new(),
        });
        group.count += 1;
        group.first_seen_ms = group.first_seen_ms.min(seen);
        group.last_seen_ms = group.last_seen_ms.max(seen);
        group.message_ids.push(Id(browsed.entry.id));
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    groups.sort_by(|a, b| {
        (b.count, b.last_seen_ms, &a.orig_queue, &a.reason).cmp(&(
            a.count,
            a.last_seen_ms,
            &b.orig_queue,
            &b.reason,
        ))
    });
    groups
}

/// `text` with what tells one occurrence of a cause from another masked: UUIDs
/// and hex ids (six hex digits or more, a digit among them) as `<id>`, numbers
/// (decimals included) as `<n>`.
pub fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if !c.is_ascii_alphanumeric() {
            out.push(c);
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let word = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(rest, |end| &rest[..end]);
        let hex = |s: &str| s.chars().all(|c| c.is_ascii_hexdigit());
        let taken = if is_uuid(rest) {
            out.push_str("<id>");
            36
        } else if word.len() >= 6
            && hex(word)
            && word.contains(|c: char| c.is_ascii_digit())
            && !word.chars().all(|c| c.is_ascii_digit())
        {
            out.push_str("<id>");
            word.len()
        } else if word.chars().all(|c| c.is_ascii_digit()) {
            out.push_str("<n>");
            // A decimal's fraction belongs to it.
            match rest[word.len()..].strip_prefix('.') {
                Some(fraction) if fraction.starts_with(|c: char| c.is_ascii_digit()) => {
                    word.len()
                        + 1
                        + fraction
                            .find(|c: char| !c.is_ascii_digit())
                            .unwrap_or(fraction.len())
                }
                _ => word.len(),
            }
        } else {
            // Letters with digits (`id42`, `v2`): only the digits vary.
            let mut digits = false;
            for c in word.chars() {
                match c.is_ascii_digit() {
                    true if !digits => out.push_str("<n>"),
                    true => {}
                    false => out.push(c),
                }
                digits = c.is_ascii_digit();
            }
            word.len()
        };
        rest = &rest[taken..];
    }
    out
}

/// Whether `text` starts with a UUID (8-4-4-4-12 hex digits).
fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 36
        && bytes[..36].iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
        && !bytes.get(36).is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;

    use rebound_storage::records::property_value::Value;
    use rebound_storage::{MessageRecord, PropertyValue};

    use super::*;
    use crate::queue::{BrowseState, Entry};

    /// A dead letter `id` that arrived `at`, from `queue`, with its reasons.
    pub(in crate::http::console) fn dead(
        id: u64,
        at: u64,
        queue: &str,
        reason: &str,
        failures: &str,
    ) -> Browsed {
        let mut record = MessageRecord {
            message_id: id,
            timestamp_ms: at,
            ..Default::default()
        };
        let mut set = |k: &str, v: &str| {
            let value = Some(Value::String(v.to_owned()));
            record.properties.insert(k.to_owned(), PropertyValue { value });
        };
        set(dead_letter::ORIG_ADDRESS, queue);
        set(dead_letter::ORIG_QUEUE, queue);
        set(dead_letter::REASON, reason);
        if !failures.is_empty() {
            set(dead_letter::FAILURES, failures);
        }
        Browsed {
            entry: Entry {
                id,
                priority: 4,
                expiration_ms: 0,
                size: 0,
                delivery_count: 0,
                failures: Vec::new(),
                stored: true,
                state_stored: true,
                group: None,
                record: None,
                serving: None,
            },
            record: Arc::new(record),
            state: BrowseState::Ready,
            paged: false,
        }
    }

    #[test]
    fn groups_by_queue_reason_and_last_failure_with_counts_and_times() {
        let db = r#"[{"at_ms":1,"reason":"timeout"},{"at_ms":2,"reason":"db down"}]"#;
        let messages = [
            dead(1, 100, "orders", "max-delivery-attempts", db),
            dead(2, 300, "orders", "rejected: bad json", ""),
            dead(3, 200, "orders", "max-delivery-attempts", db),
            dead(4, 50, "billing", "max-delivery-attempts", db),
            dead(
                5,
                400,
                "orders",
                "max-delivery-attempts",
                r#"[{"at_ms":3,"reason":"timeout"}]"#,
            ),
        ];
        let groups = group(&messages);
        let summary: Vec<_> = groups
            .iter()
            .map(|g| {
                (
                    g.orig_queue.as_deref(),
                    g.last_failure.as_deref(),
                    g.count,
                    g.first_seen_ms,
                    g.last_seen_ms,
                    g.message_ids.iter().map(|id| id.0).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (Some("orders"), Some("db down"), 2, 100, 200, vec![1, 3]),
                (Some("orders"), Some("timeout"), 1, 400, 400, vec![5]),
                (Some("orders"), None, 1, 300, 300, vec![2]),
                (Some("billing"), Some("db down"), 1, 50, 50, vec![4]),
            ]
        );
        assert_eq!(groups[2].reason.as_deref(), Some("rejected: bad json"));
    }

    #[test]
    fn numbers_hex_ids_and_uuids_are_masked() {
        let cases = [
            (
                "gateway timeout after 6242 ms (request id 9f75ef68)",
                "gateway timeout after <n> ms (request id <id>)",
            ),
            ("took 1.5 s", "took <n> s"),
            (
                "order 3fa85f64-5717-4562-b3fc-2c963f66afa6 failed",
                "order <id> failed",
            ),
            ("HTTP/2 502 from shard7", "HTTP/<n> <n> from shard<n>"),
            ("db down: connection refused", "db down: connection refused"),
            ("decade facade", "decade facade"),
            ("café 12€", "café <n>€"),
        ];
        for (text, masked) in cases {
            assert_eq!(mask(text), masked, "{text}");
        }
    }

    #[test]
    fn one_cause_with_varying_ids_is_one_group_with_an_example() {
        let failure = |reason: &str| format!(r#"[{{"at_ms":1,"reason":"{reason}"}}]"#);
        let messages = [
            dead(
                1,
                100,
                "orders",
                "max-delivery-attempts",
                &failure("timeout after 6242 ms (request id 9f75ef68)"),
            ),
            dead(
                2,
                200,
                "orders",
                "max-delivery-attempts",
                &failure("timeout after 17 ms (request id 0c1d2e3f)"),
            ),
        ];
        let groups = group(&messages);
        assert_eq!(groups.len(), 1, "{groups:?}");
        let g = &groups[0];
        assert_eq!(
            (g.count, g.last_failure.as_deref(), g.example_failure.as_deref()),
            (
                2,
                Some("timeout after <n> ms (request id <id>)"),
                Some("timeout after 6242 ms (request id 9f75ef68)")
            )
        );
    }

    #[test]
    fn messages_that_say_nothing_form_one_group() {
        let mut plain = dead(9, 5, "x", "r", "");
        plain.record = Arc::new(MessageRecord::default());
        let groups = group(&[plain]);
        assert_eq!(groups.len(), 1);
        assert_eq!(
            (groups[0].orig_queue.clone(), groups[0].reason.clone()),
            (None, None)
        );
    }
}
