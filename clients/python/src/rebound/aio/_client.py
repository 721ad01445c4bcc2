"""The asyncio client: one channel (one HTTP/2 connection) and the calls on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import grpc

from rebound._connection import DEFAULT_URL, ConnectOptions
from rebound._messages import OutgoingMessage, SendResult
from rebound.aio._admin import Admin
from rebound.aio._consumer import Consumer
from rebound.aio._publisher import PublishMethod, Publisher, PublisherOptions
from rebound.aio._session import Session
from rebound.errors import ConnectError, from_rpc_error
from rebound.v1 import messaging_pb2 as pb
from rebound.v1.admin_pb2_grpc import AdminStub
from rebound.v1.messaging_pb2_grpc import MessagingStub

#: How long `connect` waits for the broker.
CONNECT_TIMEOUT = 5.0


class Client:
    """A connection to a rebound broker, for asyncio code.

    Create it inside the event loop that uses it; `async with` connects (failing
    with `ConnectError` if the broker cannot be reached within 5 s) and closes::

        async with rebound.aio.Client("http://127.0.0.1:61616") as client:
            await client.send(rebound.OutgoingMessage("orders", b"hello"))

    Once connected, the channel reconnects by itself when the connection drops.
    `user`/`password` log in on every call; an `https://` URL needs `ca_cert`
    (and `client_cert` with `client_key` for mutual TLS).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        user: str | None = None,
        password: str | None = None,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
    ) -> None:
        self.options = ConnectOptions(url, user, password, ca_cert, client_cert, client_key)
        self._metadata = self.options.metadata()
        self._channel = self.options.channel()
        self._messaging = MessagingStub(self._channel)
        # Publish frames are encoded by the publisher itself (see `_frame`).
        self._publish: PublishMethod = self._channel.stream_stream(
            "/rebound.v1.Messaging/Publish", response_deserializer=pb.PublishResponse.FromString
        )
        #: Management calls.
        self.admin = Admin(AdminStub(self._channel), self._metadata)

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def connect(self, timeout: float = CONNECT_TIMEOUT) -> None:
        """Waits until the broker is reachable; `ConnectError` after `timeout` seconds."""
        try:
            await asyncio.wait_for(self._channel.channel_ready(), timeout)
        except asyncio.TimeoutError:
            state = self._channel.get_state().name.lower()
            raise ConnectError(
                f"cannot connect to {self.options.full_url()}: not reachable within {timeout:g} s (channel {state})"
            ) from None

    async def close(self) -> None:
        """Closes the connection; calls still running fail."""
        await self._channel.close()

    async def send(self, message: OutgoingMessage) -> int:
        """Sends one message in a call of its own; returns its id once it is on
        disk (if durable). For many messages, a `publisher` is much cheaper."""
        return (await self.send_batch([message])).only_id()

    async def send_batch(self, messages: Iterable[OutgoingMessage]) -> SendResult:
        """Sends messages as one batch: accepted or refused together, the durable
        ones written in one storage commit."""
        request = pb.SendRequest(messages=[m.to_proto() for m in messages])
        try:
            response = await self._messaging.Send(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        return SendResult.from_proto(response)

    def publisher(self, options: PublisherOptions = PublisherOptions()) -> Publisher:
        """A publisher: concurrent sends share one Publish stream, coalesced into
        frames (one storage commit each) while earlier frames are in flight."""
        return Publisher(self._publish, self._metadata, options)

    async def consumer(
        self, queue: str, *, window: int = 10, credit: int | None = None, selector: str = ""
    ) -> Consumer:
        """Subscribes to `queue`. By default a steady `window` of unsettled
        deliveries (a credit granted back per settle); with `credit`, that much
        credit and no more unless `Consumer.grant`ed. `selector` (JMS syntax, e.g.
        `color = 'red'`) takes only the messages it matches."""
        return await Consumer.open(
            self._messaging, self._metadata, queue, window=window, credit=credit, selector=selector
        )

    async def session(self) -> Session:
        """Opens a transacted session for `Session.begin`."""
        return await Session.open(self._messaging, self._metadata)
