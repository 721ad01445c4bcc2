//! The engine's errors.
//!
//! Everything inside the broker returns [`BrokerError`], one variant per problem a
//! user can have; the gRPC edge maps it to a status code in one place
//! (`grpc/status.rs`) and nowhere else, so a user always gets the same code and
//! wording for the same problem.
use std::fmt;

use rebound_storage::StorageError;

use crate::address_full::Full;

use rebound_config::{Permission, excerpt};

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("queue '{}' not found", excerpt(.0))]
    QueueNotFound(String),
    #[error("address '{}' not found", excerpt(.0))]
    AddressNotFound(String),
    #[error("message {id} not found on queue '{}'", excerpt(.queue))]
    MessageNotFound { queue: String, id: u64 },
    #[error("transaction {0} not found")]
    TransactionNotFound(u64),
    /// `differs` is empty when the queue is exactly what was asked for: creating a
    /// queue is not idempotent (a client may rely on having made it).
    #[error("queue '{name}' already exists{differs}")]
    QueueExists { name: String, differs: Differences },
    /// Only when it differs: creating an address that exists as asked is a no-op.
    #[error("address '{name}' already exists{differs}")]
    AddressExists { name: String, differs: Differences },
    #[error("{0}")]
    InvalidArgument(String),
    #[error(
        "message of {size} bytes (body and properties) is larger than max-message-size {limit} bytes of address '{address}'"
    )]
    MessageTooLarge { address: String, size: u64, limit: u64 },
    /// A send met a limit under FAIL, or waited `max-block-time` for room under
    /// BLOCK (`waited_ms`).
    #[error("address '{}' is full: {full}{}", excerpt(.address), Waited(*.waited_ms))]
    AddressFull {
        address: String,
        full: Full,
        waited_ms: Option<u64>,
    },
    /// A quota of the `[limits]` table is full: `what` says how, `limit` names the key.
    #[error("{what}: {limit} is {value}")]
    LimitReached {
        what: String,
        limit: &'static str,
        value: u64,
    },
    #[error("{0}")]
    FailedPrecondition(String),
    /// A transaction sent a message whose duplicate id its address remembers.
    #[error(
        "duplicate id '{}' was already sent to address '{}': the transaction is rolled back, nothing of it was applied",
        excerpt(.id),
        excerpt(.address)
    )]
    DuplicateId { address: String, id: String },
    /// The caller's roles do not hold `permission` on `address` (security-settings).
    #[error(
        "permission denied: user '{}' lacks the `{permission}` permission on address '{}'",
        excerpt(.user),
        excerpt(.address)
    )]
    PermissionDenied {
        user: String,
        permission: Permission,
        address: String,
    },
    #[error("the broker is shutting down")]
    ShuttingDown,
    /// Several brokers on one database: another node serves the queue now.
    #[error("queue '{}' is served by another node now (its lease moved): connect again", excerpt(.0))]
    QueueMoved(String),
    /// Several brokers on one database: a non-durable message for a durable
    /// queue this node does not serve, which it would lose (it keeps such a
    /// message in memory only). `owner`: where the node serving the queue is
    /// reached, if one is known to.
    #[error("{}", not_kept(.queue, .owner.as_deref()))]
    NotKeptHere { queue: String, owner: Option<String> },
    #[error("storage failure: {0}")]
    Storage(#[from] StorageError),
}

/// How long a blocked send waited, said after the limit it met.
struct Waited(Option<u64>);

impl fmt::Display for Waited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(ms) => write!(f, "; the send waited {ms} ms (max-block-time) for room"),
            None => Ok(()),
        }
    }
}

/// Why a non-durable message was refused ([`BrokerError::NotKeptHere`]), and
/// what the sender can do.
fn not_kept(queue: &str, owner: Option<&str>) -> String {
    let queue = excerpt(queue);
    match owner {
        Some(owner) => format!(
            "queue '{queue}' is served by the node at {owner}, and this node does not keep \
             non-durable messages for a queue it does not serve: send it through {owner}, or \
             send it durable"
        ),
        None => format!(
            "no node serves queue '{queue}' yet; non-durable messages are not kept for it: retry, \
             or send it durable"
        ),
    }
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;

/// How an existing address or queue differs from what was asked for, shown as
/// ` with routing type anycast, not multicast; durable true, not false` (nothing
/// when it does not), so that a refusal says what to change.
#[derive(Debug, Default)]
pub struct Differences(Vec<String>);

impl Differences {
    /// Notes `what` if the existing value is not the one asked for.
    pub fn compare<T: PartialEq + fmt::Display>(mut self, what: &str, existing: T, asked: T) -> Self {
        if existing != asked {
            self.0.push(format!("{what} {existing}, not {asked}"));
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Differences {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.is_empty() {
            write!(f, " with {}", self.0.join("; "))?;
        }
        Ok(())
    }
}
