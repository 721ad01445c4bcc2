//! The one mapping from the engine's errors to HTTP statuses, for the console's
//! API (as `grpc/status.rs` is for gRPC): every error answers `{"error": "..."}`
//! with the engine's own words, so the page can show it as it is.
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rebound_storage::StorageError;

use crate::error::BrokerError;

/// An error of the console's API.
#[derive(Debug)]
pub enum ApiError {
    Broker(BrokerError),
    /// A request the API cannot read (bad JSON, missing fields, bad query).
    BadRequest(String),
    /// Another node serves the queue and cannot answer for it (`forward.rs`).
    Unavailable(String),
}

impl From<BrokerError> for ApiError {
    fn from(err: BrokerError) -> ApiError {
        ApiError::Broker(err)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(err: JsonRejection) -> ApiError {
        ApiError::BadRequest(err.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(err: QueryRejection) -> ApiError {
        ApiError::BadRequest(err.body_text())
    }
}

impl ApiError {
    fn status(&self) -> StatusCode {
        let err = match self {
            ApiError::BadRequest(_) => return StatusCode::BAD_REQUEST,
            ApiError::Unavailable(_) => return StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Broker(err) => err,
        };
        match err {
            BrokerError::QueueNotFound(_)
            | BrokerError::AddressNotFound(_)
            | BrokerError::MessageNotFound { .. }
            | BrokerError::TransactionNotFound(_) => StatusCode::NOT_FOUND,
            BrokerError::QueueExists { .. }
            | BrokerError::AddressExists { .. }
            | BrokerError::DuplicateId { .. }
            | BrokerError::Storage(StorageError::DuplicateIds { .. })
            | BrokerError::FailedPrecondition(_) => StatusCode::CONFLICT,
            BrokerError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            BrokerError::MessageTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            BrokerError::AddressFull { .. } | BrokerError::LimitReached { .. } => {
                StatusCode::INSUFFICIENT_STORAGE
            }
            BrokerError::PermissionDenied { .. } => StatusCode::FORBIDDEN,
            BrokerError::ShuttingDown
            | BrokerError::QueueMoved(_)
            | BrokerError::NotKeptHere { .. }
            | BrokerError::Storage(StorageError::Unavailable(_) | StorageError::Fenced { .. }) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            BrokerError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let error = match self {
            ApiError::Broker(err) => err.to_string(),
            ApiError::BadRequest(text) | ApiError::Unavailable(text) => text,
        };
        (status, Json(serde_json::json!({ "error": error }))).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_words() {
        let err = ApiError::from(BrokerError::QueueNotFound("q".into()));
        assert_eq!(err.status(), StatusCode::NOT_FOUND);
        let err = ApiError::from(BrokerError::InvalidArgument("filter: bad".into()));
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            ApiError::from(BrokerError::ShuttingDown).status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
