//! The Rust client for the rebound message broker.
//!
//! rebound speaks gRPC (package `rebound.v1`, see the `.proto` files in the
//! `rebound-protocol` crate). This crate wraps the generated stubs in the shape a
//! program actually wants: connect once, [`Client::send`] messages built with
//! [`OutgoingMessage`], consume a queue ([`Client::consumer`]) through a [`Consumer`] that
//! hides the bidirectional stream's bookkeeping (credit, settles, their
//! confirmations), and manage addresses and queues with the admin methods.
//!
//! ```no_run
//! # async fn demo() -> rebound_client::Result<()> {
//! use rebound_client::{Client, OutgoingMessage, RoutingType};
//! use std::time::Duration;
//!
//! let client = Client::connect("http://127.0.0.1:61616").await?;
//! client.create_queue("orders", "orders", RoutingType::Anycast, true).await?;
//! client.send(OutgoingMessage::new("orders", "hello").property("tenant", "acme")).await?;
//!
//! let mut consumer = client.consume("orders", 10).await?;
//! while let Some(delivery) = consumer.next_timeout(Duration::from_secs(1)).await? {
//!     println!("{:?}", delivery.message.body);
//!     consumer.ack(&[delivery.id]).await?;
//! }
//! consumer.close().await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`Client::send`] is one call per message (or batch). A program whose tasks
//! send concurrently shares a [`Publisher`] ([`Client::publisher`]): its sends go
//! on one Publish stream and are coalesced into frames (one storage commit each)
//! while earlier frames are in flight, with no added delay when it is idle.
//!
//! A broker with users wants a login: connect with
//! [`Client::connect_with_options`] and [`ConnectOptions::credentials`]
//! ([`Credentials`]), which every call and stream of the client then carries;
//! the same options hold the TLS settings ([`TlsOptions`]).
//!
//! Types that the API returns unchanged are re-exported from the protocol crate
//! (for example [`QueueInfo`]); everything else of it is under [`proto`].
//!
//! | file | what |
//! |---|---|
//! | `client.rs` | the connection to a broker, its options, and the messaging calls (send, consume) |
//! | `message.rs` | building messages to send |
//! | `publisher.rs` | a producer on one Publish stream, shared by tasks, with natural batching |
//! | `consumer.rs` | a consumer: one Consume stream, with its credit and settle bookkeeping |
//! | `listener.rs` | a listener container: handlers run concurrently, their outcomes settled |
//! | `transaction.rs` | transacted sessions: local transactions on one `Transact` stream |
//! | `admin.rs` | management calls: addresses, queues, counters, browsing, operations on messages |
//! | `health.rs` | the broker's health, by the standard gRPC health check |
//! | `credentials.rs` | logging in: a user name and password sent with every call |
//! | `error.rs` | the client's error type, keeping the broker's gRPC status |
#![warn(missing_docs)]

mod admin;
mod client;
mod consumer;
mod credentials;
mod error;
mod health;
mod listener;
mod message;
mod publisher;
mod transaction;

pub use admin::{BrowsedMessage, Selection};
pub use client::{Client, ConnectOptions, DEFAULT_URL, Sent, TlsOptions};
pub use consumer::{Consumer, ConsumerBuilder, Delivery};
pub use credentials::Credentials;
pub use error::{Error, Result};
pub use health::HealthStatus;
pub use listener::{HandlerError, Incoming, Listener, ListenerBuilder, ListenerStats};
pub use message::{OutgoingMessage, PropertyValue};
pub use publisher::{Publisher, PublisherOptions};
pub use transaction::{Session, Transaction};

/// The names of the properties the broker sets on dead letters and expired messages
/// (`_AMQ_ORIG_QUEUE`, `_REBOUND_DEAD_LETTER_REASON`, ...) and the reserved prefixes.
pub use rebound_protocol::properties;
/// The generated gRPC types and stubs of package `rebound.v1`.
pub use rebound_protocol::v1 as proto;

/// A gRPC status code, as carried by [`Error::Status`].
pub use tonic::Code;

pub use proto::{
    AddressInfo, GetServerInfoResponse as ServerInfo, Message, MessageState, QueueInfo,
    RetryMessagesResponse, RetryOutcome, RoutingType, SendResponse, SettingValue,
};

pub use proto::{Committed, RolledBack};
