//! The names of the message properties the broker itself sets or reserves, in one
//! place for the server, the CLI and the client.
//!
//! Application properties may not start with [`AMQ_PREFIX`] or [`REBOUND_PREFIX`]:
//! the broker refuses such a send, except for the names in [`PRODUCER_SET`],
//! which a producer sets to ask something of the broker (as in Artemis). The `_AMQ_*` names are Apache ActiveMQ Artemis's
//! (so Artemis tooling and selectors written for it keep working); the
//! `_REBOUND_*` names are rebound's own additions.
//!
//! A dead letter (a message moved to the `dead-letter-address` after too many
//! failed attempts, rejected, or moved by a redelivery schedule) and an expired
//! message (moved to the `expiry-address`) carry the `ORIG_*` properties, the
//! reason, the delivery count and the last failures; `rebound queue retry` reads
//! [`ORIG_QUEUE`] to send it back and counts the retries in [`REDRIVE_COUNT`].
//! The wire contract is tested by the black-box tests, which spell the names out.

/// The prefix of Artemis's broker-set properties, reserved.
pub const AMQ_PREFIX: &str = "_AMQ_";
/// The prefix of rebound's own broker-set properties, reserved.
pub const REBOUND_PREFIX: &str = "_REBOUND_";
/// Every reserved prefix: a producer's property name may start with none of them,
/// except the names in [`PRODUCER_SET`].
pub const RESERVED_PREFIXES: [&str; 2] = [AMQ_PREFIX, REBOUND_PREFIX];

/// The message group (string): messages of one group go to one consumer at a time,
/// one at a time, in send order, also across failed deliveries. A producer sets it.
pub const GROUP_ID: &str = "_AMQ_GROUP_ID";
/// The JMS name of the group, used when [`GROUP_ID`] is absent (string).
pub const JMSX_GROUP_ID: &str = "JMSXGroupID";
/// On a dead letter of a group: how many messages of its group were waiting
/// behind it when it left (integer). Its `_AMQ_GROUP_ID` says which group.
pub const GROUP_HELD: &str = "_REBOUND_GROUP_HELD";
/// When to deliver the message, ms since the Unix epoch (integer): Artemis's
/// scheduled delivery. A send's `deliver_at_ms` or `delay_ms` field, when set,
/// replaces it (with the absolute time it asks for).
pub const SCHED_DELIVERY: &str = "_AMQ_SCHED_DELIVERY";
/// The message's duplicate id (string or bytes, 1 to 256 bytes): a send whose
/// id the address remembers is acknowledged but not stored again. A send's
/// `duplicate_id` field, when set, replaces it.
pub const DUPL_ID: &str = "_AMQ_DUPL_ID";
/// The reserved names a producer may set; the message keeps them.
pub const PRODUCER_SET: [&str; 3] = [GROUP_ID, SCHED_DELIVERY, DUPL_ID];

/// The address the message had when it died (string).
pub const ORIG_ADDRESS: &str = "_AMQ_ORIG_ADDRESS";
/// The queue (for a multicast address: the subscription) it died on (string).
pub const ORIG_QUEUE: &str = "_AMQ_ORIG_QUEUE";
/// Its message id on that queue (integer).
pub const ORIG_MESSAGE_ID: &str = "_AMQ_ORIG_MESSAGE_ID";
/// The routing type of that queue: `anycast` or `multicast` (string).
pub const ORIG_ROUTING_TYPE: &str = "_AMQ_ORIG_ROUTING_TYPE";
/// When an expired message was moved, ms since the Unix epoch (integer).
pub const ACTUAL_EXPIRY: &str = "_AMQ_ACTUAL_EXPIRY";
/// Why it was moved: `max-delivery-attempts`, `rejected: <text>`, `expired`,
/// `schedule` or `moved` (string).
pub const DEAD_LETTER_REASON: &str = "_REBOUND_DEAD_LETTER_REASON";
/// How many times it had been delivered when it was moved (integer).
pub const DELIVERY_COUNT: &str = "_REBOUND_DELIVERY_COUNT";
/// Its last failures, a JSON array of `{"at_ms": .., "reason": ".."}`, oldest
/// first (string).
pub const FAILURES: &str = "_REBOUND_FAILURES";
/// How many times an operator sent it back from a dead-letter queue
/// (`rebound queue retry`); kept across retries (integer).
pub const REDRIVE_COUNT: &str = "_REBOUND_REDRIVE_COUNT";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_reserved() {
        for name in [
            ORIG_ADDRESS,
            ORIG_QUEUE,
            ORIG_MESSAGE_ID,
            ORIG_ROUTING_TYPE,
            ACTUAL_EXPIRY,
            DEAD_LETTER_REASON,
            DELIVERY_COUNT,
            FAILURES,
            REDRIVE_COUNT,
            GROUP_ID,
            GROUP_HELD,
            SCHED_DELIVERY,
            DUPL_ID,
        ] {
            assert!(RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)), "{name}");
        }
    }
}
