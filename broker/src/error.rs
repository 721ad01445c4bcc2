//! The broker's errors, and their one mapping to gRPC status codes.
//!
//! Everything inside the broker returns [`BrokerError`]; the gRPC services convert
//! it with `Status::from` at the edge and nowhere else, so a user always gets the same
//! code and wording for the same problem.
use rebound_storage::StorageError;
use tonic::{Code, Status};

#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("queue '{0}' not found")]
    QueueNotFound(String),
    #[error("address '{0}' not found")]
    AddressNotFound(String),
    #[error("transaction {0} not found")]
    TransactionNotFound(u64),
    #[error("queue '{0}' already exists")]
    QueueExists(String),
    #[error("{0}")]
    InvalidArgument(String),
    #[error("message of {size} bytes is larger than max-message-size {limit} bytes of address '{address}'")]
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

impl From<BrokerError> for Status {
    fn from(err: BrokerError) -> Status {
        let code = match &err {
            BrokerError::QueueNotFound(_)
            | BrokerError::AddressNotFound(_)
            | BrokerError::TransactionNotFound(_) => Code::NotFound,
            BrokerError::QueueExists(_) => Code::AlreadyExists,
            BrokerError::InvalidArgument(_) | BrokerError::MessageTooLarge { .. } => Code::InvalidArgument,
            BrokerError::AddressFull { .. } => Code::ResourceExhausted,
            BrokerError::FailedPrecondition(_) => Code::FailedPrecondition,
            BrokerError::ShuttingDown => Code::Unavailable,
            BrokerError::Storage(_) => Code::Internal,
        };
        Status::new(code, err.to_string())
    }
}
