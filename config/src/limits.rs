//! The `[limits]` table: bounds on what one client can make the broker hold or
//! do, so that a hostile or broken client meets a clear refusal rather than
//! growing the broker without bound.
//!
//! Every limit is a positive integer with a default; a reload puts new values
//! in force for what comes next (nothing already accepted is undone).
//!
//! Each limit is one entry of the `define_limits!` table below (doc, field,
//! key, check, default): the struct, its defaults and the loading all come
//! from that one entry, so a new limit cannot be half-added.

use serde::Deserialize;
use toml::Spanned;

use crate::check::{self, checked};
use crate::error::{ConfigError, Document};
use crate::names::MAX_PROPERTIES_BYTES_LIMIT;

macro_rules! define_limits {
    ($(
        $(#[doc = $doc:literal])*
        $field:ident = $key:literal, $check:path, default = $default:expr;
    )*) => {
        /// The broker's limits against abuse. [`Limits::default`] holds the
        /// defaults documented in `default.toml`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub struct Limits {
            $( $(#[doc = $doc])* #[doc = concat!("(`", $key, "`)")] pub $field: u64, )*
        }

        impl Default for Limits {
            fn default() -> Limits {
                Limits { $( $field: $default, )* }
            }
        }

        /// `[limits]` as written.
        #[derive(Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        pub(crate) struct RawLimits {
            $( #[serde(rename = $key)] $field: Option<Spanned<i64>>, )*
        }

        impl RawLimits {
            pub(crate) fn validate(self, doc: &Document<'_>) -> Result<Limits, ConfigError> {
                let default = Limits::default();
                Ok(Limits {
                    $( $field: checked(doc, self.$field, $check, || format!("limits.{}", $key))?
                        .unwrap_or(default.$field), )*
                })
            }
        }
    };
}

define_limits! {
    /// Delivery ids one settle may name.
    max_ids_per_settle = "max-ids-per-settle", check::positive, default = 10_000;
    /// Responses one stream (Consume or Transact) may hold for a client that
    /// does not read them, counting settles still being committed; at the
    /// bound the broker stops reading the stream's requests until the client
    /// reads.
    max_unread_responses = "max-unread-responses", check::positive, default = 256;
    /// Requests (not messages) of one Publish stream the broker works on, or has
    /// answered while its response buffer (`max-unread-responses`) is full; at
    /// the bound it stops reading the stream until the client reads.
    max_publish_in_flight = "max-publish-in-flight", check::positive, default = 1024;
    /// Messages one open transaction may hold, sends plus acks.
    max_transaction_messages = "max-transaction-messages", check::positive, default = 10_000;
    /// Bytes (bodies and properties) of the messages sent in one open
    /// transaction.
    max_transaction_bytes = "max-transaction-bytes", check::positive, default = 64 << 20;
    /// Transactions one Transact stream may have open.
    max_open_transactions = "max-open-transactions", check::positive, default = 100;
    /// Addresses and queues that sends and consumers may have auto-created, in
    /// all; explicitly created ones do not count.
    max_auto_created = "max-auto-created", check::positive, default = 10_000;
    /// Deliveries one consumer may have unsettled plus the credit it has not yet
    /// used; credit granted beyond it is dropped.
    max_consumer_credit = "max-consumer-credit", check::positive, default = 10_000;
    /// Consume streams open at once on one client connection.
    max_consume_streams_per_connection = "max-consume-streams-per-connection",
        check::positive, default = 100;
    /// Properties one message may carry.
    max_properties_per_message = "max-properties-per-message", check::positive, default = 256;
    /// Bytes a message's properties may take, encoded (names, values and a few
    /// bytes of framing each); at most [`MAX_PROPERTIES_BYTES_LIMIT`].
    max_properties_bytes = "max-properties-bytes", check::properties_bytes,
        default = MAX_PROPERTIES_BYTES_LIMIT;
    /// Bytes of a filter a client sends: a consumer's selector, and the filter
    /// of a browse, count, move, remove or retry.
    max_selector_length = "max-selector-length", check::positive, default = 4096;
    /// Client connections open at once, plaintext and TLS together; one more
    /// takes the place of the oldest that has not logged in, or is closed at
    /// accept if every one has.
    max_connections = "max-connections", check::positive, default = 1024;
    /// Client connections open at once from one IP address (loopback too), by
    /// the same rule.
    max_connections_per_ip = "max-connections-per-ip", check::positive, default = 256;
    /// Connections to the HTTP endpoint open at once, by the same rule.
    max_http_connections = "max-http-connections", check::positive, default = 128;
    /// Milliseconds a new connection has to open its protocol (TLS handshake,
    /// HTTP/2 preface, HTTP request line) before it is closed.
    handshake_timeout_ms = "handshake-timeout-ms", check::positive, default = 10_000;
    /// Milliseconds a connection may go without a call (gRPC) or a request
    /// (HTTP) under way before it is closed.
    idle_connection_timeout_ms = "idle-connection-timeout-ms", check::positive, default = 300_000;
}
