//! What a dead letter looks like: the copy of a failed (or expired) message that is
//! sent on to the dead-letter (or expiry) address.
//!
//! As in Artemis (`QueueImpl.makeCopy`, `Message.referenceOriginalMessage`) the copy
//! is a new message with a new id, the original body and properties, no expiration,
//! and `_AMQ_ORIG_*` properties saying where it came from, so that an operator can
//! send it back to exactly the queue it failed on. A copy of a copy (a dead letter
//! that fails again, or is moved to a parking address) keeps the first origin, as in
//! Artemis. Beyond Artemis it says why it died and carries the last failures, the
//! earlier copies' included, so nobody has to read logs to find out.
//!
//! The move itself — remove from the original queue, route the copy — is one storage
//! commit (see `engine/moves.rs`), so after a crash the message is in exactly one
//! of the two places.
use rebound_config::{EffectiveSettings, RoutingType};
use rebound_storage::records::property_value::Value;
use rebound_storage::{MessageRecord, PropertyValue};

use crate::message::bounded_reason;
use crate::queue::{Entry, MAX_FAILURES_KEPT};

// The names are the protocol's, shared with the CLI and the client.
pub use rebound_protocol::properties::{
    ACTUAL_EXPIRY, DEAD_LETTER_REASON as REASON, DELIVERY_COUNT, FAILURES, GROUP_HELD, ORIG_ADDRESS,
    ORIG_MESSAGE_ID, ORIG_QUEUE, ORIG_ROUTING_TYPE, REDRIVE_COUNT,
};

/// The properties a dead letter carries about its death; a retried message sheds them
/// (it starts afresh, as in Artemis's retryMessages) but keeps its redrive count.
const DEATH_PROPERTIES: [&str; 9] = [
    ORIG_ADDRESS,
    ORIG_QUEUE,
    ORIG_MESSAGE_ID,
    ORIG_ROUTING_TYPE,
    ACTUAL_EXPIRY,
    REASON,
    DELIVERY_COUNT,
    FAILURES,
    GROUP_HELD,
];

/// Where messages leaving an address go: the target address and, when the settings
/// auto-create one, the queue of its own it gets there (`DLQ.orders`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub address: String,
    pub own_queue: Option<String>,
}

impl Destination {
    /// Where the dead letters of `address` go; None: they are dropped.
    pub fn dead_letters(settings: &EffectiveSettings, address: &str) -> Option<Destination> {
        Destination::of(
            settings.dead_letter_address.as_ref()?,
            settings.auto_create_dead_letter_resources,
            &settings.dead_letter_queue_prefix,
            &settings.dead_letter_queue_suffix,
            address,
        )
    }

    /// Where the expired messages of `address` go; None: they are dropped.
    pub fn expired(settings: &EffectiveSettings, address: &str) -> Option<Destination> {
        Destination::of(
            settings.expiry_address.as_ref()?,
            settings.auto_create_expiry_resources,
            &settings.expiry_queue_prefix,
            &settings.expiry_queue_suffix,
            address,
        )
    }

    fn of(target: &str, own: bool, prefix: &str, suffix: &str, address: &str) -> Option<Destination> {
        Some(Destination {
            address: target.to_owned(),
            own_queue: own.then(|| format!("{prefix}{address}{suffix}")),
        })
    }
}

/// Why a message leaves its queue for another address.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    MaxDeliveryAttempts,
    /// The consumer said it can never succeed; the text is bounded
    /// (`message::bounded_reason`).
    Rejected(String),
    Expired,
    /// A `move(...)` step of the redelivery schedule.
    Schedule,
    /// Moved by an operator (`queue move`).
    Moved,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::MaxDeliveryAttempts => f.write_str("max-delivery-attempts"),
            Reason::Rejected(text) if text.is_empty() => f.write_str("rejected"),
            Reason::Rejected(text) => write!(f, "rejected: {text}"),
            Reason::Expired => f.write_str("expired"),
            Reason::Schedule => f.write_str("schedule"),
            Reason::Moved => f.write_str("moved"),
        }
    }
}

/// Builds the copy of `original` (which failed as `entry` on queue `queue`) bound for
/// `target_address`. The caller gives it its new id.
///
/// If `original` is itself a copy, the copy keeps its origin, which is where a retry
/// sends it back to, and adds `entry`'s failures to the ones it carries.
pub fn copy_for(
    original: &MessageRecord,
    entry: &Entry,
    queue: &str,
    queue_routing: RoutingType,
    target_address: &str,
    reason: &Reason,
    now_ms: u64,
) -> MessageRecord {
    let mut copy = original.clone();
    copy.address = target_address.to_owned();
    copy.expiration_ms = 0;
    let mut set = |key: &str, value: Value| {
        copy.properties
            .insert(key.to_owned(), PropertyValue { value: Some(value) });
    };
    if origin(original).is_none() {
        set(ORIG_ADDRESS, Value::String(original.address.clone()));
        set(ORIG_QUEUE, Value::String(queue.to_owned()));
        set(ORIG_MESSAGE_ID, Value::Int(original.message_id as i64));
        set(
            ORIG_ROUTING_TYPE,
            Value::String(queue_routing.as_str().to_owned()),
        );
    }
    set(REASON, Value::String(reason.to_string()));
    set(DELIVERY_COUNT, Value::Int(entry.delivery_count as i64));
    if *reason == Reason::Expired {
        set(ACTUAL_EXPIRY, Value::Int(now_ms as i64));
    }
    // Bounded as an entry's are: the carried ones may have been sent by anyone.
    let mut kept: Vec<Failure> = failures(original)
        .into_iter()
        .map(|f| Failure {
            reason: bounded_reason(&f.reason),
            ..f
        })
        .chain(entry.failures.iter().map(|f| Failure {
            at_ms: f.at_ms,
            reason: f.reason.clone(),
        }))
        .collect();
    kept.drain(..kept.len().saturating_sub(MAX_FAILURES_KEPT));
    if !kept.is_empty() {
        let text = serde_json::to_string(&kept).expect("failures serialize");
        set(FAILURES, Value::String(text));
    }
    copy
}

/// Marks a dead letter that held its message group (it keeps `_AMQ_GROUP_ID`):
/// `waiting` messages of the group were waiting behind it.
pub fn mark_group_held(copy: &mut MessageRecord, waiting: usize) {
    copy.properties.insert(
        GROUP_HELD.to_owned(),
        PropertyValue {
            value: Some(Value::Int(waiting as i64)),
        },
    );
}

/// Where a dead letter came from: its original address and queue, if it says.
pub fn origin(record: &MessageRecord) -> Option<(&str, &str)> {
    Some((
        string_property(record, ORIG_ADDRESS)?,
        string_property(record, ORIG_QUEUE)?,
    ))
}

/// How many times the message was sent back from a dead-letter queue.
pub fn redrive_count(record: &MessageRecord) -> u32 {
    match record
        .properties
        .get(REDRIVE_COUNT)
        .and_then(|p| p.value.as_ref())
    {
        Some(Value::Int(n)) => (*n).clamp(0, u32::MAX as i64) as u32,
        _ => 0,
    }
}

/// The message an operator's retry sends back to `address`: the dead letter without
/// its death properties, one more redrive on its count. The caller gives it its id.
pub fn retry_copy(dead: &MessageRecord, address: &str) -> MessageRecord {
    let mut copy = dead.clone();
    copy.address = address.to_owned();
    for key in DEATH_PROPERTIES {
        copy.properties.remove(key);
    }
    let redrives = redrive_count(dead) as i64 + 1;
    copy.properties.insert(
        REDRIVE_COUNT.to_owned(),
        PropertyValue {
            value: Some(Value::Int(redrives)),
        },
    );
    copy
}

/// Why a dead letter died (`_REBOUND_DEAD_LETTER_REASON`), if it says.
pub fn reason(record: &MessageRecord) -> Option<&str> {
    string_property(record, REASON)
}

/// One failed delivery a dead letter remembers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct Failure {
    pub at_ms: u64,
    pub reason: String,
}

/// The last failures a dead letter carries (`_REBOUND_FAILURES`, as [`copy_for`]
/// writes them), oldest first; none if it carries none or they do not parse.
pub fn failures(record: &MessageRecord) -> Vec<Failure> {
    string_property(record, FAILURES)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

fn string_property<'a>(record: &'a MessageRecord, key: &str) -> Option<&'a str> {
    match record.properties.get(key)?.value.as_ref()? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use rebound_storage::FailureRecord;

    use crate::message::MAX_REASON_BYTES;

    #[test]
    fn copy_keeps_body_and_properties_and_says_where_it_came_from() {
        let mut original = MessageRecord {
            message_id: 42,
            address: "orders".into(),
            body: Bytes::from_static(b"payload"),
            durable: true,
            expiration_ms: 99,
            ..Default::default()
        };
        original.properties.insert(
            "color".into(),
            PropertyValue {
                value: Some(Value::String("red".into())),
            },
        );
        let entry = Entry {
            id: 42,
            priority: 4,
            expiration_ms: 99,
            size: 7,
            delivery_count: 3,
            failures: vec![FailureRecord {
                at_ms: 5,
                reason: "db down".into(),
            }],
            stored: true,
            state_stored: true,
            group: None,
            record: None,
            serving: None,
        };
        let copy = copy_for(
            &original,
            &entry,
            "orders.eu",
            RoutingType::Multicast,
            "DLQ",
            &Reason::MaxDeliveryAttempts,
            1000,
        );
        let get = |k: &str| copy.properties.get(k).and_then(|p| p.value.clone());
        assert_eq!(copy.address, "DLQ");
        assert_eq!(copy.body, original.body);
        assert_eq!(copy.expiration_ms, 0);
        assert_eq!(get("color"), Some(Value::String("red".into())));
        assert_eq!(get(ORIG_ADDRESS), Some(Value::String("orders".into())));
        assert_eq!(get(ORIG_QUEUE), Some(Value::String("orders.eu".into())));
        assert_eq!(get(ORIG_MESSAGE_ID), Some(Value::Int(42)));
        assert_eq!(get(ORIG_ROUTING_TYPE), Some(Value::String("multicast".into())));
        assert_eq!(get(REASON), Some(Value::String("max-delivery-attempts".into())));
        assert_eq!(get(DELIVERY_COUNT), Some(Value::Int(3)));
        assert_eq!(
            get(FAILURES),
            Some(Value::String(r#"[{"at_ms":5,"reason":"db down"}]"#.into()))
        );
        assert_eq!(get(ACTUAL_EXPIRY), None);
        assert_eq!(
            failures(&copy),
            [Failure {
                at_ms: 5,
                reason: "db down".into()
            }]
        );
        assert_eq!(reason(&copy), Some("max-delivery-attempts"));
    }

    #[test]
    fn a_copy_of_a_copy_keeps_the_first_origin_and_the_last_failures() {
        let original = MessageRecord {
            message_id: 7,
            address: "orders".into(),
            ..Default::default()
        };
        let failed = |reasons: &[&str]| {
            let mut entry = Entry {
                id: 0,
                priority: 4,
                expiration_ms: 0,
                size: 1,
                delivery_count: reasons.len() as u32,
                failures: Vec::new(),
                stored: true,
                state_stored: true,
                group: None,
                record: None,
                serving: None,
            };
            reasons.iter().for_each(|r| entry.record_failure(1, r));
            entry
        };
        let reasons =
            |copy: &MessageRecord| -> Vec<String> { failures(copy).into_iter().map(|f| f.reason).collect() };
        let dead = copy_for(
            &original,
            &failed(&["a", "b", "c"]),
            "orders",
            RoutingType::Anycast,
            "DLQ",
            &Reason::MaxDeliveryAttempts,
            5,
        );
        let dead = MessageRecord {
            message_id: 8,
            ..dead
        };
        let again = copy_for(
            &dead,
            &failed(&["d", "e", "f"]),
            "DLQ",
            RoutingType::Multicast,
            "graveyard",
            &Reason::Rejected("no".into()),
            6,
        );
        assert_eq!(origin(&again), Some(("orders", "orders")));
        let get = |k: &str| again.properties.get(k).and_then(|p| p.value.clone());
        assert_eq!(get(ORIG_MESSAGE_ID), Some(Value::Int(7)));
        assert_eq!(get(ORIG_ROUTING_TYPE), Some(Value::String("anycast".into())));
        assert_eq!(reason(&again), Some("rejected: no"));
        assert_eq!(get(DELIVERY_COUNT), Some(Value::Int(3)));
        assert_eq!(reasons(&again), ["b", "c", "d", "e", "f"]);
        // Moved with no failures of its own, it keeps the ones it carries.
        let parked = copy_for(
            &again,
            &failed(&[]),
            "graveyard",
            RoutingType::Anycast,
            "parked",
            &Reason::Moved,
            7,
        );
        assert_eq!(origin(&parked), Some(("orders", "orders")));
        assert_eq!(reasons(&parked), ["b", "c", "d", "e", "f"]);
        // Carried failures are bounded as a consumer's reasons are: anyone may send them.
        let mut forged = parked.clone();
        let long = "x".repeat(3 * MAX_REASON_BYTES);
        let text = serde_json::to_string(&[Failure {
            at_ms: 0,
            reason: long,
        }])
        .unwrap();
        forged.properties.insert(
            FAILURES.into(),
            PropertyValue {
                value: Some(Value::String(text)),
            },
        );
        let cut = copy_for(
            &forged,
            &failed(&["g"]),
            "parked",
            RoutingType::Anycast,
            "DLQ",
            &Reason::Moved,
            8,
        );
        let cut = reasons(&cut);
        assert_eq!(cut[1], "g");
        assert!(
            cut[0].len() < 2 * MAX_REASON_BYTES,
            "a carried failure is bounded too"
        );
    }

    #[test]
    fn a_retried_copy_sheds_its_death_and_counts_the_redrive() {
        let original = MessageRecord {
            message_id: 1,
            address: "orders".into(),
            ..Default::default()
        };
        let entry = Entry {
            id: 1,
            priority: 4,
            expiration_ms: 0,
            size: 1,
            delivery_count: 2,
            failures: Vec::new(),
            stored: true,
            state_stored: true,
            group: None,
            record: None,
            serving: None,
        };
        let dead = copy_for(
            &original,
            &entry,
            "orders",
            RoutingType::Anycast,
            "DLQ",
            &Reason::MaxDeliveryAttempts,
            5,
        );
        assert_eq!(origin(&dead), Some(("orders", "orders")));
        let retried = retry_copy(&dead, "orders");
        assert_eq!(retried.address, "orders");
        assert_eq!(origin(&retried), None);
        assert!(!retried.properties.contains_key(REASON));
        assert_eq!(redrive_count(&retried), 1);
        assert_eq!(redrive_count(&retry_copy(&retried, "orders")), 2);
    }

    #[test]
    fn a_dead_letter_of_any_accepted_message_fits_the_store() {
        use prost::Message as _;
        use rebound_storage::MAX_INLINE_RECORD_BYTES;

        use rebound_config::MAX_PROPERTIES_BYTES_LIMIT;

        use crate::message::properties_bytes;

        let name = "n".repeat(255);
        let mut original = MessageRecord {
            message_id: u64::MAX,
            address: name.clone(),
            durable: true,
            timestamp_ms: u64::MAX,
            priority: 9,
            expiration_ms: u64::MAX,
            routing_type: 2,
            ..Default::default()
        };
        // Properties as large as a producer may send.
        let mut value = "v".repeat(MAX_PROPERTIES_BYTES_LIMIT as usize);
        loop {
            let property = PropertyValue {
                value: Some(Value::String(value.clone())),
            };
            original.properties.insert("p".into(), property);
            if properties_bytes(&original) <= MAX_PROPERTIES_BYTES_LIMIT {
                break;
            }
            value.pop();
        }
        // The worst reasons: control characters, which JSON escapes six-fold.
        let worst = "\u{1}".repeat(2 * MAX_REASON_BYTES);
        let mut entry = Entry {
            id: u64::MAX,
            priority: 9,
            expiration_ms: u64::MAX,
            size: 0,
            delivery_count: u32::MAX,
            failures: Vec::new(),
            stored: true,
            state_stored: true,
            group: None,
            record: None,
            serving: None,
        };
        for _ in 0..MAX_FAILURES_KEPT {
            entry.record_failure(u64::MAX, &worst);
        }
        let reason = Reason::Rejected(bounded_reason(&worst));
        let mut copy = copy_for(
            &original,
            &entry,
            &name,
            RoutingType::Multicast,
            &name,
            &reason,
            u64::MAX,
        );
        mark_group_held(&mut copy, usize::MAX);
        // With its body in a file the store keeps the key, the record without the
        // body and a marker of at most 20 bytes (storage/src/large.rs) inline.
        let inline = rebound_storage::keys::message(u32::MAX, u64::MAX).len() + copy.encoded_len() + 20;
        assert!(inline <= MAX_INLINE_RECORD_BYTES, "{inline} bytes");
    }

    #[test]
    fn reasons_read_well() {
        assert_eq!(
            Reason::Rejected("bad json".into()).to_string(),
            "rejected: bad json"
        );
        assert_eq!(Reason::Rejected(String::new()).to_string(), "rejected");
        assert_eq!(Reason::Expired.to_string(), "expired");
    }
}
