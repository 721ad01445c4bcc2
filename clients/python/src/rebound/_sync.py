"""The blocking client: the asyncio client run on an event loop in a background
thread, so that there is one implementation of every behaviour. Every blocking
client of the process shares that loop, which lives as long as the process:
gRPC's asyncio support dispatches late events of a call to its loop, which must
not be closed by then.

Each blocking method hands its coroutine to that loop and waits for the result;
`_blocking` makes such a method from the asyncio one, keeping its signature and
documentation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from rebound import aio
from rebound._connection import DEFAULT_URL
from rebound._messages import Delivery, OutgoingMessage, SendResult
from rebound.aio._client import CONNECT_TIMEOUT
from rebound.aio._consumer import DeliveryRef
from rebound.aio._publisher import encode

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Loop:
    """An event loop running in a daemon thread."""

    _shared: _Loop | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="rebound-client", daemon=True).start()

    @classmethod
    def shared(cls) -> _Loop:
        with cls._lock:
            if cls._shared is None:
                cls._shared = _Loop()
            return cls._shared

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


class _Blocking:
    """A blocking wrapper of the asyncio object `_aio`, run on `_loop`."""

    def __init__(self, wrapped: Any, loop: _Loop) -> None:
        self._aio = wrapped
        self._loop = loop


def _blocking(method: Callable[Concatenate[Any, _P], Coroutine[Any, Any, _T]]) -> Callable[Concatenate[_Blocking, _P], _T]:
    name = method.__name__

    def call(self: _Blocking, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        result: _T = self._loop.run(getattr(self._aio, name)(*args, **kwargs))
        return result

    call.__name__ = name
    call.__doc__ = method.__doc__
    return call


class Admin(_Blocking):
    """The broker's management API, as `client.admin`; see `rebound.aio.Admin`."""

    create_address = _blocking(aio.Admin.create_address)
    delete_address = _blocking(aio.Admin.delete_address)
    create_queue = _blocking(aio.Admin.create_queue)
    delete_queue = _blocking(aio.Admin.delete_queue)
    list_queues = _blocking(aio.Admin.list_queues)
    queue = _blocking(aio.Admin.queue)
    browse = _blocking(aio.Admin.browse)
    purge = _blocking(aio.Admin.purge)
    count_messages = _blocking(aio.Admin.count_messages)
    remove_messages = _blocking(aio.Admin.remove_messages)
    move_messages = _blocking(aio.Admin.move_messages)
    retry_messages = _blocking(aio.Admin.retry_messages)
    settings = _blocking(aio.Admin.settings)
    server_info = _blocking(aio.Admin.server_info)
    list_addresses = _blocking(aio.Admin.list_addresses)
    address = _blocking(aio.Admin.address)


class Publisher(_Blocking):
    """A producer whose concurrent sends (from any threads) share one Publish
    stream and are batched; see `rebound.aio.Publisher`."""

    _aio: aio.Publisher

    def __init__(self, wrapped: aio.Publisher, loop: _Loop) -> None:
        super().__init__(wrapped, loop)
        # Room for max_pending messages, counted here so that a publish needs no
        # round trip to the event loop: it hands the message over and returns.
        self._room = threading.BoundedSemaphore(max(1, wrapped.options.max_pending))
        # Messages handed over and not yet queued on the loop; one wake-up of the
        # loop takes all of them.
        self._handed: deque[tuple[bytes, concurrent.futures.Future[int]]] = deque()
        self._lock = threading.Lock()
        self._take_scheduled = False

    def publish(self, message: OutgoingMessage) -> concurrent.futures.Future[int]:
        """Queues one message and returns the future of its id, completed once it
        is on disk (if durable), or with the broker's refusal or `Unconfirmed`.
        Blocks only while `max_pending` messages are queued or in flight."""
        encoded = encode(message)
        self._room.acquire()
        answer: concurrent.futures.Future[int] = concurrent.futures.Future()
        answer.add_done_callback(lambda _: self._room.release())
        with self._lock:
            self._handed.append((encoded, answer))
            wake, self._take_scheduled = not self._take_scheduled, True
        if wake:
            self._loop.loop.call_soon_threadsafe(self._take)
        return answer

    def _take(self) -> None:
        """Queues what was handed over (on the loop)."""
        with self._lock:
            handed = list(self._handed)
            self._handed.clear()
            self._take_scheduled = False
        for encoded, answer in handed:
            self._aio._queue(encoded, answer)

    def send(self, message: OutgoingMessage) -> int:
        """Sends one message and waits for its id; see `publish`."""
        return self.publish(message).result()

    close = _blocking(aio.Publisher.close)

    def __enter__(self) -> Publisher:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def frames_sent(self) -> int:
        return self._aio.frames_sent

    @property
    def unrouted(self) -> int:
        return self._aio.unrouted

    @property
    def duplicates(self) -> int:
        return self._aio.duplicates


class Consumer(_Blocking):
    """A subscription to a queue; see `rebound.aio.Consumer`. Iterating it
    yields deliveries until the broker ends the stream."""

    _aio: aio.Consumer

    receive = _blocking(aio.Consumer.receive)
    grant = _blocking(aio.Consumer.grant)
    ack = _blocking(aio.Consumer.ack)
    nack = _blocking(aio.Consumer.nack)
    release = _blocking(aio.Consumer.release)
    dead_letter = _blocking(aio.Consumer.dead_letter)
    flush = _blocking(aio.Consumer.flush)
    close = _blocking(aio.Consumer.close)

    @property
    def queue(self) -> str:
        return self._aio.queue

    @property
    def address(self) -> str:
        return self._aio.address

    def ack_in(self, transaction: Transaction, *deliveries: DeliveryRef) -> list[int]:
        """Acknowledges inside `transaction`; see `rebound.aio.Consumer.ack_in`."""
        return self._loop.run(self._aio.ack_in(transaction._aio, *deliveries))

    def __iter__(self) -> Iterator[Delivery]:
        while (delivery := self.receive()) is not None:
            yield delivery

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        self._loop.run(self._aio.__aexit__(error_type))


class Transaction(_Blocking):
    """A local transaction; see `rebound.aio.Transaction`."""

    _aio: aio.Transaction

    send = _blocking(aio.Transaction.send)
    commit = _blocking(aio.Transaction.commit)
    rollback = _blocking(aio.Transaction.rollback)

    @property
    def id(self) -> int:
        return self._aio.id


class Session(_Blocking):
    """A transacted session; see `rebound.aio.Session`."""

    _aio: aio.Session

    close = _blocking(aio.Session.close)

    def begin(self) -> Transaction:
        """Begins a transaction."""
        return Transaction(self._loop.run(self._aio.begin()), self._loop)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Client:
    """A connection to a rebound broker, for blocking code; connects at once
    (`ConnectError` if the broker cannot be reached within `connect_timeout`
    seconds). Thread-safe: one client serves a whole program. See
    `rebound.aio.Client` for the options."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        user: str | None = None,
        password: str | None = None,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self._loop = _Loop.shared()

        async def connect() -> aio.Client:
            client = aio.Client(
                url, user=user, password=password, ca_cert=ca_cert, client_cert=client_cert, client_key=client_key
            )
            try:
                await client.connect(connect_timeout)
            except BaseException:
                await client.close()
                raise
            return client

        self._aio = self._loop.run(connect())
        #: Management calls.
        self.admin = Admin(self._aio.admin, self._loop)

    def close(self) -> None:
        """Closes the connection; calls still running fail."""
        self._loop.run(self._aio.close())

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def send(self, message: OutgoingMessage) -> int:
        """Sends one message in a call of its own; see `rebound.aio.Client.send`."""
        return self._loop.run(self._aio.send(message))

    def send_batch(self, messages: Iterable[OutgoingMessage]) -> SendResult:
        """Sends messages as one batch; see `rebound.aio.Client.send_batch`."""
        return self._loop.run(self._aio.send_batch(list(messages)))

    def publisher(self, options: aio.PublisherOptions = aio.PublisherOptions()) -> Publisher:
        """A publisher; see `rebound.aio.Client.publisher`."""
        return Publisher(self._aio.publisher(options), self._loop)

    def consumer(self, queue: str, *, window: int = 10, credit: int | None = None, selector: str = "") -> Consumer:
        """Subscribes to `queue`; see `rebound.aio.Client.consumer`."""
        consumer = self._loop.run(self._aio.consumer(queue, window=window, credit=credit, selector=selector))
        return Consumer(consumer, self._loop)

    def session(self) -> Session:
        """Opens a transacted session."""
        return Session(self._loop.run(self._aio.session()), self._loop)
