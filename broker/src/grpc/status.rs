//! The one mapping from the engine's errors to gRPC status codes: every error a
//! client sees passes here, so the same problem always has the same code and words.
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
            | BrokerError::DuplicateId { .. } => Code::AlreadyExists,
            BrokerError::InvalidArgument(_) | BrokerError::MessageTooLarge { .. } => Code::InvalidArgument,
            BrokerError::AddressFull { .. } | BrokerError::LimitReached { .. } => Code::ResourceExhausted,
            BrokerError::FailedPrecondition(_) => Code::FailedPrecondition,
            BrokerError::PermissionDenied { .. } => Code::PermissionDenied,
            BrokerError::ShuttingDown => Code::Unavailable,
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
