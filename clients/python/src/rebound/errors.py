"""The exceptions of the rebound client, one class per way a call can fail.

Every failure the broker reports reaches the client as a gRPC status; it becomes a
`StatusError` subclass named after the code (`NotFound`, `PermissionDenied`, ...)
whose `message` is the broker's own text and whose `str()` reads like the Rust
client's and the CLI's: `queue 'nope' not found (NOT_FOUND)`.
"""

from __future__ import annotations

import grpc


class ReboundError(Exception):
    """Any failure of the rebound client."""


class InvalidUrl(ReboundError):
    """The server URL cannot be used (an unknown scheme, no host)."""


class TlsError(ReboundError):
    """The TLS settings cannot be used: a file that cannot be read, a client
    certificate without its key, or an `https://` URL without a CA certificate."""


class CredentialsError(ReboundError):
    """The user name cannot be sent (empty, or containing `:`)."""


class ConnectError(ReboundError):
    """The broker could not be reached."""


class ProtocolError(ReboundError):
    """The broker answered something the protocol does not allow."""


class StreamClosed(ReboundError):
    """A consume or transact stream ended while answers were still expected."""


class SettleRejected(ReboundError):
    """The broker could not apply a settle (for example an ack in an unknown or
    finished transaction); its deliveries are still outstanding."""


class Unconfirmed(ReboundError):
    """A publisher's stream broke before the broker answered for this message: it
    may or may not have been stored."""

    def __init__(self, why: str) -> None:
        super().__init__(
            f"no confirmation from the broker, the message may or may not have been stored: {why}"
        )


class StatusError(ReboundError):
    """The broker refused a request, or the call failed in transit."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(f"{message} ({code.name})")
        self.code = code
        self.message = message


class Cancelled(StatusError): ...


class Unknown(StatusError): ...


class InvalidArgument(StatusError): ...


class DeadlineExceeded(StatusError): ...


class NotFound(StatusError): ...


class AlreadyExists(StatusError): ...


class PermissionDenied(StatusError): ...


class ResourceExhausted(StatusError): ...


class FailedPrecondition(StatusError): ...


class Aborted(StatusError): ...


class OutOfRange(StatusError): ...


class Unimplemented(StatusError): ...


class Internal(StatusError): ...


class Unavailable(StatusError): ...


class DataLoss(StatusError): ...


class Unauthenticated(StatusError): ...


_BY_CODE: dict[grpc.StatusCode, type[StatusError]] = {
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNKNOWN: Unknown,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}
_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_error(code: grpc.StatusCode | int, message: str) -> StatusError:
    """The exception for a status, given as a `grpc.StatusCode` or its number (as
    in a Publish, Settled or Transact error)."""
    if isinstance(code, int):
        code = _BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(code, StatusError)(code, message)


def from_rpc_error(error: grpc.aio.AioRpcError) -> StatusError:
    """The exception for a failed call."""
    return status_error(error.code(), error.details() or "")
