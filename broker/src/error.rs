//! The engine's errors.
//!
//! Everything inside the broker returns [`BrokerError`], one variant per problem a
//! user can have; the gRPC edge maps it to a status code in one place
//! (`grpc/status.rs`) and nowhere else, so a user always gets the same code and
//! wording for the same problem.
use rebound_storage::StorageError;

use crate::message::excerpt;

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("queue '{}' not found", excerpt(.0))]
    QueueNotFound(String),
    #[error("address '{}' not found", excerpt(.0))]
    AddressNotFound(String),
    #[error("transaction {0} not found")]
    TransactionNotFound(u64),
    #[error("queue '{0}' already exists")]
    QueueExists(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error(
        "message of {size} bytes (body and properties) is larger than max-message-size {limit} bytes of address '{address}'"
    )]
    MessageTooLarge { address: String, size: u64, limit: u64 },
    #[error("address '{address}' is full: it holds {held} bytes and max-size-bytes is {limit}")]
    AddressFull { address: String, held: u64, limit: u64 },
    #[error("{0}")]
    FailedPrecondition(String),
    #[error("the broker is shutting down")]
    ShuttingDown,
    #[error("storage failure: {0}")]
    Storage(#[from] StorageError),
}

pub type Result<T, E = BrokerError> = std::result::Result<T, E>;
