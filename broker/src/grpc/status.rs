//! The one mapping from the engine's errors to gRPC status codes: every error a
//! client sees passes here, so the same problem always has the same code and words.
use rebound_storage::StorageError;
use tonic::{Code, Status};

use crate::error::BrokerError;

impl From<BrokerError> for Status {
    fn from(err: BrokerError) -> Status {
        let code = match &err {
            BrokerError::QueueNotFound(_)
            | BrokerError::AddressNotFound(_)
            | BrokerError::MessageNotFound { .. }
            | BrokerError::TransactionNotFound(_) => Code::NotFound,
            BrokerError::QueueExists { .. }
            | BrokerError::AddressExists { .. }
            | BrokerError::DuplicateId { .. }
            | BrokerError::Storage(StorageError::DuplicateIds { .. }) => Code::AlreadyExists,
            BrokerError::InvalidArgument(_) | BrokerError::MessageTooLarge { .. } => Code::InvalidArgument,
            BrokerError::AddressFull { .. } | BrokerError::LimitReached { .. } => Code::ResourceExhausted,
            BrokerError::FailedPrecondition(_) => Code::FailedPrecondition,
            BrokerError::PermissionDenied { .. } => Code::PermissionDenied,
            // The database of the PostgreSQL engine is away: retry later.
            BrokerError::ShuttingDown
            | BrokerError::QueueMoved(_)
            | BrokerError::NotKeptHere { .. }
            | BrokerError::Storage(StorageError::Unavailable(_) | StorageError::Fenced { .. }) => {
                Code::Unavailable
            }
            BrokerError::Storage(_) => Code::Internal,
        };
        Status::new(code, err.to_string())
    }
}

/// An error answered inside a stream that carries on (a refused Publish or
/// Transact request, a refused settle): the code and words of its [`Status`].
pub(crate) fn code_and_message(err: BrokerError) -> (i32, String) {
    let status = Status::from(err);
    (status.code() as i32, status.message().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_words() {
        let status = Status::from(BrokerError::QueueNotFound("q".into()));
        assert_eq!(
            (status.code(), status.message()),
            (Code::NotFound, "queue 'q' not found")
        );
        assert_eq!(Status::from(BrokerError::ShuttingDown).code(), Code::Unavailable);
        let away =
            StorageError::Unavailable(std::sync::Arc::new(std::io::Error::other("connection refused")));
        assert_eq!(
            (
                Status::from(BrokerError::Storage(away.clone())).code(),
                Status::from(BrokerError::Storage(away)).message()
            ),
            (
                Code::Unavailable,
                "storage failure: the database is unavailable: connection refused"
            )
        );
        assert_eq!(
            Status::from(BrokerError::Storage(StorageError::Closed)).code(),
            Code::Internal
        );
        let denied = Status::from(BrokerError::PermissionDenied {
            user: "bob".into(),
            permission: rebound_config::Permission::Consume,
            address: "orders".into(),
        });
        assert_eq!(
            (denied.code(), denied.message()),
            (
                Code::PermissionDenied,
                "permission denied: user 'bob' lacks the `consume` permission on address 'orders'"
            )
        );
    }
}
