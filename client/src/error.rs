//! The client's error type.
//!
//! Every failure of the broker reaches the client as a gRPC status; [`Error::Status`]
//! keeps its code and message so that a program can branch on the code and a command
//! line can print one clear line such as `queue 'nope' not found (NOT_FOUND)`.

use tonic::Code;

/// A `Result` with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong talking to rebound.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server URL could not be parsed.
    #[error("invalid server URL '{url}': {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The URL asks for TLS (`https://`) but no CA certificate to verify the
    /// broker with was given ([`TlsOptions::ca_cert`](crate::TlsOptions)); the
    /// client does not use the system's trust store. Refused rather than dialled
    /// in plaintext, which would send what the URL promised to encrypt in the clear.
    #[error(
        "TLS needs the CA certificate that signed the broker's: give --ca-cert FILE (or REBOUND_CA_CERT) to connect to '{url}', or use http:// (the connection will not be encrypted)"
    )]
    TlsUnsupported {
        /// The URL as given.
        url: String,
    },
    /// The TLS settings cannot be used: a file that cannot be read, a client
    /// certificate without its key.
    #[error("TLS: {0}")]
    Tls(String),
    /// The credentials cannot be sent (a user name with `:`, or empty).
    #[error("credentials: {0}")]
    Credentials(String),
    /// The broker could not be reached.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL that was dialled.
        url: String,
        /// The innermost cause, e.g. `connection refused`.
        reason: String,
    },
    /// The broker refused a request, or the call failed in transit.
    #[error("{message} ({})", code_name(*.code))]
    Status {
        /// The gRPC status code, e.g. [`Code::NotFound`].
        code: Code,
        /// The broker's explanation.
        message: String,
    },
    /// The broker answered something the protocol does not allow.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The broker could not apply a settle (for example an ack in an unknown or
    /// finished transaction); its deliveries are still outstanding.
    #[error("the broker could not apply a settle: {0}")]
    SettleRejected(String),
    /// A [`Publisher`](crate::Publisher)'s stream broke before the broker
    /// answered for this message: it may or may not have been stored.
    #[error("no confirmation from the broker, the message may or may not have been stored: {0}")]
    Unconfirmed(String),
    /// The consume or transact stream ended while answers were still expected.
    #[error("the stream was closed by the broker")]
    StreamClosed,
}

impl Error {
    /// The error for a response field the broker must always fill in.
    pub(crate) fn missing(field: &str) -> Error {
        Error::Protocol(format!("the broker sent no {field}"))
    }

    /// The gRPC status code if this error is a broker status.
    pub fn code(&self) -> Option<Code> {
        match self {
            Error::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        // A failure in transit ("transport error") says what failed underneath,
        // e.g. the broker refusing a TLS client without a certificate.
        let mut message = status.message().to_owned();
        if let Some(source) = std::error::Error::source(&status) {
            let cause = crate::client::innermost_cause(source);
            if !cause.is_empty() && !message.contains(&cause) {
                message = format!("{message}: {cause}");
            }
        }
        Error::Status {
            code: status.code(),
            message,
        }
    }
}

/// The canonical upper-case name of a status code, as gRPC documents them.
/// (`Code`'s `Display` prints a sentence instead.)
fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_prints_message_and_code_name() {
        let err = Error::from(tonic::Status::not_found("queue 'nope' not found"));
        assert_eq!(err.to_string(), "queue 'nope' not found (NOT_FOUND)");
        assert_eq!(err.code(), Some(Code::NotFound));
    }
}
