//! The `[limits]` table: bounds on what one client can make the broker hold or
//! do, so that a hostile or broken client meets a clear refusal rather than
//! growing the broker without bound.
//!
//! Every limit is a positive integer with a default; a reload puts new values
//! in force for what comes next (nothing already accepted is undone).

use serde::Deserialize;
use toml::Spanned;

use crate::check::{self, checked};
use crate::error::{ConfigError, Document};

/// The broker's limits against abuse. [`Limits::default`] holds the defaults
/// documented in `default.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Delivery ids one settle may name (`max-ids-per-settle`).
    pub max_ids_per_settle: u64,
    /// Responses one stream (Consume or Transact) may hold for a client that
    /// does not read them, counting settles still being committed; at the
    /// bound the broker stops reading the stream's requests until the client
    /// reads (`max-unread-responses`).
    pub max_unread_responses: u64,
    /// Messages one open transaction may hold, sends plus acks
    /// (`max-transaction-messages`).
    pub max_transaction_messages: u64,
    /// Bytes (bodies and properties) of the messages sent in one open
    /// transaction (`max-transaction-bytes`).
    pub max_transaction_bytes: u64,
    /// Transactions one Transact stream may have open (`max-open-transactions`).
    pub max_open_transactions: u64,
    /// Addresses and queues that sends and consumers may have auto-created, in
    /// all (`max-auto-created`); explicitly created ones do not count.
    pub max_auto_created: u64,
    /// Deliveries one consumer may have unsettled plus the credit it has not yet
    /// used (`max-consumer-credit`); credit granted beyond it is dropped.
    pub max_consumer_credit: u64,
    /// Consume streams open at once on one client connection
    /// (`max-consume-streams-per-connection`).
    pub max_consume_streams_per_connection: u64,
    /// Client connections open at once, plaintext and TLS together; one more is
    /// closed at accept (`max-connections`).
    pub max_connections: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_ids_per_settle: 10_000,
            max_unread_responses: 256,
            max_transaction_messages: 10_000,
            max_transaction_bytes: 64 << 20,
            max_open_transactions: 100,
            max_auto_created: 10_000,
            max_consumer_credit: 10_000,
            max_consume_streams_per_connection: 100,
            max_connections: 1024,
        }
    }
}

/// `[limits]` as written.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(crate) struct RawLimits {
    max_ids_per_settle: Option<Spanned<i64>>,
    max_unread_responses: Option<Spanned<i64>>,
    max_transaction_messages: Option<Spanned<i64>>,
    max_transaction_bytes: Option<Spanned<i64>>,
    max_open_transactions: Option<Spanned<i64>>,
    max_auto_created: Option<Spanned<i64>>,
    max_consumer_credit: Option<Spanned<i64>>,
    max_consume_streams_per_connection: Option<Spanned<i64>>,
    max_connections: Option<Spanned<i64>>,
}

impl RawLimits {
    pub(crate) fn validate(self, doc: &Document<'_>) -> Result<Limits, ConfigError> {
        let default = Limits::default();
        let limit = |value: Option<Spanned<i64>>, key: &str, default: u64| {
            checked(doc, value, check::positive, || format!("limits.{key}")).map(|v| v.unwrap_or(default))
        };
        Ok(Limits {
            max_ids_per_settle: limit(
                self.max_ids_per_settle,
                "max-ids-per-settle",
                default.max_ids_per_settle,
            )?,
            max_unread_responses: limit(
                self.max_unread_responses,
                "max-unread-responses",
                default.max_unread_responses,
            )?,
            max_transaction_messages: limit(
                self.max_transaction_messages,
                "max-transaction-messages",
                default.max_transaction_messages,
            )?,
            max_transaction_bytes: limit(
                self.max_transaction_bytes,
                "max-transaction-bytes",
                default.max_transaction_bytes,
            )?,
            max_open_transactions: limit(
                self.max_open_transactions,
                "max-open-transactions",
                default.max_open_transactions,
            )?,
            max_auto_created: limit(
                self.max_auto_created,
                "max-auto-created",
                default.max_auto_created,
            )?,
            max_consumer_credit: limit(
                self.max_consumer_credit,
                "max-consumer-credit",
                default.max_consumer_credit,
            )?,
            max_consume_streams_per_connection: limit(
                self.max_consume_streams_per_connection,
                "max-consume-streams-per-connection",
                default.max_consume_streams_per_connection,
            )?,
            max_connections: limit(self.max_connections, "max-connections", default.max_connections)?,
        })
    }
}
