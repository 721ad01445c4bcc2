"""From a URL and login options to a gRPC channel and the metadata every call carries."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import grpc

from rebound.errors import CredentialsError, InvalidUrl, TlsError

#: The broker's documented default listen address.
DEFAULT_URL = "http://127.0.0.1:61616"

#: Largest message encoded or decoded: far above any sensible broker limit, so that
#: an oversized message is refused by the broker's own `max-message-size` check,
#: whose error names the limit.
_MAX_GRPC_MESSAGE = 64 * 1024 * 1024

Metadata = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ConnectOptions:
    """Where the broker is and how to log in.

    `url` is `http://host:port`, `host:port` or `https://host:port`; TLS needs
    `ca_cert`, the PEM file of the CA that signed the broker's certificate (the
    system's trust store is not used, as with the Rust client and the CLI), and,
    for a broker that requires client certificates, `client_cert` and
    `client_key`. `user` and `password` are sent with every call.
    """

    url: str = DEFAULT_URL
    user: str | None = None
    password: str | None = None
    ca_cert: str | Path | None = None
    client_cert: str | Path | None = None
    client_key: str | Path | None = None

    def __repr__(self) -> str:
        # Never the password.
        return f"ConnectOptions(url={self.url!r}, user={self.user!r}, ca_cert={self.ca_cert!r})"

    def full_url(self) -> str:
        """The URL with its scheme (`http://` when it has none)."""
        return self.url if "://" in self.url else f"http://{self.url}"

    def metadata(self) -> Metadata:
        """The `authorization` metadata of every call: HTTP basic credentials."""
        if self.user is None:
            return ()
        if not self.user or ":" in self.user:
            raise CredentialsError(f"invalid user name {self.user!r}: it must be non-empty and without ':'")
        token = base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
        return (("authorization", f"Basic {token}"),)

    def channel(self) -> grpc.aio.Channel:
        """A channel to the broker (it connects lazily; see `Client.connect`).
        Must be called inside the event loop that will use it."""
        options = [
            ("grpc.max_send_message_length", _MAX_GRPC_MESSAGE),
            ("grpc.max_receive_message_length", _MAX_GRPC_MESSAGE),
        ]
        scheme, _, rest = self.full_url().partition("://")
        target = rest.rstrip("/")
        if not target:
            raise InvalidUrl(f"invalid server URL {self.url!r}: no host")
        if scheme.lower() == "http":
            return grpc.aio.insecure_channel(target, options=options)
        if scheme.lower() != "https":
            raise InvalidUrl(f"invalid server URL {self.url!r}: unsupported scheme '{scheme}', use http:// or https://")
        if self.ca_cert is None:
            raise TlsError(
                "TLS needs the CA certificate that signed the broker's: give ca_cert "
                f"to connect to '{self.url}', or use http:// (the connection will not be encrypted)"
            )
        if (self.client_cert is None) != (self.client_key is None):
            raise TlsError("a client certificate needs its key: give both client_cert and client_key, or neither")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_cert, "CA certificate"),
            private_key=_read(self.client_key, "client key") if self.client_key else None,
            certificate_chain=_read(self.client_cert, "client certificate") if self.client_cert else None,
        )
        return grpc.aio.secure_channel(target, credentials, options=options)


def _read(path: str | Path, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise TlsError(f"cannot read the {what} {path}: {e.strerror}") from e
