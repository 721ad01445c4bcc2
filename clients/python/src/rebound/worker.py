"""A worker: handler functions per queue, run the way the Rust `Listener` runs
them, with the outcome of each call decided by what it raised.

| the handler               | the message                                                        |
|---------------------------|--------------------------------------------------------------------|
| returns                   | acked                                                              |
| `TemporarilyUnavailable`  | nacked, redelivered after `retry_after` (or the address's delay)   |
| `DependencyDown`          | nacked, the whole queue paused for `pause` (no attempt counted)    |
| `Permanent`               | dead-lettered now, with the reason                                 |
| any other exception       | nacked with the exception's text as the failure reason, and logged |

One task per handler owns its consumer, whose credit window is the handler's
concurrency: it takes deliveries while fewer than `concurrency` calls run, and
settles each outcome as it comes back. When the stream breaks it forgets the
calls tied to it (a delivery id means nothing on another stream: the broker
redelivers those messages) and resubscribes, waiting from 100 ms, doubling, up
to 5 s. On stop it takes no more messages, lets the running calls finish and
settles them, then closes the consumer, so that the messages received but not
yet handed out go back to the queue without counting as an attempt.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rebound._messages import Delivery, Message, PropertyValue
from rebound.aio import Client, Consumer
from rebound.errors import ReboundError

log = logging.getLogger("rebound.worker")

#: The first wait before resubscribing after a failure; doubled per failure.
MIN_BACKOFF = 0.1
#: The longest wait between two subscription attempts.
MAX_BACKOFF = 5.0

DUPLICATE_ID = "_AMQ_DUPL_ID"


class TemporarilyUnavailable(Exception):
    """A transient failure the handler recognised: the message is nacked and
    redelivered after `retry_after` seconds (capped by the address's
    `max-retry-after`), or after the address's redelivery delay if None."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class DependencyDown(Exception):
    """A dependency every message needs is down: the message is nacked and the
    broker pauses the whole queue for `pause` seconds (outage mode: capped by the
    address's `max-outage-pause`, then one probe message). The attempt does not
    count unless the address sets `outage-counts-attempts`, so no message is
    dead-lettered because of an outage."""

    def __init__(self, reason: str, pause: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.pause = pause


class Permanent(Exception):
    """The message can never be processed: it is dead-lettered now, with `reason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Job:
    """One message handed to a handler."""

    message: Message
    #: 1 on the first delivery, incremented by every failed attempt.
    delivery_count: int
    #: Whether the message was delivered before: the handler may have seen it
    #: already (a worker that crashed before its ack), possibly on another worker.
    redelivered: bool
    queue: str

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def properties(self) -> dict[str, PropertyValue]:
        return self.message.properties

    @property
    def duplicate_id(self) -> str | None:
        """The id it was sent with (`OutgoingMessage.duplicate_id`): a key for an
        idempotent handler."""
        value = self.message.properties.get(DUPLICATE_ID)
        return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


#: A handler: a function or a coroutine function of a `Job`.
Handler = Callable[[Job], Any]
_H = TypeVar("_H", bound=Handler)


@dataclass
class WorkerStats:
    """What a worker did with the messages it was handed, since it started. Every
    handler call ends up in exactly one of the settled counters or in `abandoned`."""

    #: Handled and acknowledged.
    acked: int = 0
    #: Nacked after `TemporarilyUnavailable` or `DependencyDown`.
    retried: int = 0
    #: Nacked after any other exception.
    failed: int = 0
    #: Dead-lettered after `Permanent`.
    dead_lettered: int = 0
    #: Not settled because their stream broke first; the broker redelivers them.
    abandoned: int = 0
    #: Times a subscription was lost and opened again.
    reconnects: int = 0


@dataclass(frozen=True)
class _Route:
    queue: str
    handler: Handler
    concurrency: int
    selector: str


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


class Worker:
    """Runs handler functions for the messages of queues::

        worker = rebound.Worker("http://127.0.0.1:61616")

        @worker.handler("orders", concurrency=8)
        def handle(job: rebound.Job) -> None:
            ...

        worker.run()   # until SIGTERM or SIGINT

    or `rebound-worker module:worker` from a shell. Connection settings left out
    come from the environment, as for the `rebound` command line:
    REBOUND_SERVER, REBOUND_USER, REBOUND_PASSWORD, REBOUND_CA_CERT,
    REBOUND_CLIENT_CERT, REBOUND_CLIENT_KEY.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        user: str | None = None,
        password: str | None = None,
        ca_cert: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
    ) -> None:
        self._connect = dict(
            url=url, user=user, password=password, ca_cert=ca_cert, client_cert=client_cert, client_key=client_key
        )
        self._routes: list[_Route] = []
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # A stop asked for before the worker runs ends its run at once.
        self._stop_requested = False
        self.stats = WorkerStats()

    def handler(self, queue: str, *, concurrency: int = 1, selector: str = "") -> Callable[[_H], _H]:
        """Registers the decorated function (plain or `async def`) for the messages
        of `queue` (of those `selector` matches), with up to `concurrency` calls at
        once. Plain functions run in a thread pool."""

        def register(function: _H) -> _H:
            self._routes.append(_Route(queue, function, max(1, concurrency), selector))
            return function

        return register

    def run(self) -> WorkerStats:
        """Runs until SIGTERM or SIGINT, then stops gracefully; returns the stats."""

        async def main() -> WorkerStats:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
            return await self.run_async()

        return asyncio.run(main())

    def stop(self) -> None:
        """Stops the worker gracefully (callable from any thread, also before it runs)."""
        self._stop_requested = True
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            log.info("stopping: finishing the running handlers")
            loop.call_soon_threadsafe(stopping.set)

    async def run_async(self) -> WorkerStats:
        """Runs until `stop`; returns the stats."""
        if not self._routes:
            raise ReboundError("the worker has no handlers: register one with @worker.handler(queue)")
        options = {k: v for k, v in self._connect.items() if v is not None}
        env = {
            "url": "REBOUND_SERVER",
            "user": "REBOUND_USER",
            "password": "REBOUND_PASSWORD",
            "ca_cert": "REBOUND_CA_CERT",
            "client_cert": "REBOUND_CLIENT_CERT",
            "client_key": "REBOUND_CLIENT_KEY",
        }
        for key, name in env.items():
            if key not in options and (value := _env(name)) is not None:
                options[key] = value
        client = Client(**options)
        threads = sum(r.concurrency for r in self._routes if not inspect.iscoroutinefunction(r.handler))
        pool = concurrent.futures.ThreadPoolExecutor(max(1, threads), thread_name_prefix="rebound-worker")
        self._stopping = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        if self._stop_requested:
            self._stopping.set()
        try:
            listeners = [_Listener(self, client, route, pool, self._stopping) for route in self._routes]
            log.info("worker started: %s", ", ".join(f"{r.queue} (x{r.concurrency})" for r in self._routes))
            await asyncio.gather(*(listener.run() for listener in listeners))
        finally:
            await client.close()
            pool.shutdown(wait=True)
            self._loop = self._stopping = None
            self._stop_requested = False
        log.info("worker stopped: %s", self.stats)
        return self.stats


class _Broken(Exception):
    """The subscription was lost."""


@dataclass
class _Listener:
    worker: Worker
    client: Client
    route: _Route
    pool: concurrent.futures.Executor
    stopping: asyncio.Event
    # Calls of a broken stream, left to finish: referenced so they are not collected.
    _detached: set[asyncio.Task[None]] = field(default_factory=set)

    async def run(self) -> None:
        queue = self.route.queue
        backoff = MIN_BACKOFF
        while not self.stopping.is_set():
            try:
                consumer = await self.client.consumer(queue, window=self.route.concurrency, selector=self.route.selector)
            except ReboundError as e:
                log.warning("cannot subscribe to %s: %s; retrying in %.1f s", queue, e, backoff)
            else:
                backoff = MIN_BACKOFF
                try:
                    await self._serve(consumer)
                    return
                except (_Broken, ReboundError) as e:
                    self.worker.stats.reconnects += 1
                    log.warning("lost the subscription to %s: %s; resubscribing", queue, e)
            try:
                await asyncio.wait_for(self.stopping.wait(), backoff)
            except asyncio.TimeoutError:
                pass
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _serve(self, consumer: Consumer) -> None:
        """Runs one subscription until the worker stops (returns) or it breaks (raises)."""
        running: set[asyncio.Task[None]] = set()
        # Calls that have finished, with what they raised, waiting to be settled.
        finished: list[tuple[Delivery, BaseException | None]] = []
        wake = asyncio.Event()

        def start(delivery: Delivery) -> None:
            async def call() -> None:
                finished.append((delivery, await self._call(delivery)))
                wake.set()

            task = asyncio.create_task(call())
            running.add(task)
            task.add_done_callback(running.discard)

        # Waits for a delivery without taking it, so that none is taken before it starts:
        # one that a `Voided` removes meanwhile never reaches the handler.
        receiving: asyncio.Task[bool] | None = None
        stop = asyncio.create_task(self.stopping.wait())
        try:
            while True:
                await self._settle_all(consumer, finished)
                # Every delivery starts here, taken from those received.
                while len(running) < self.route.concurrency and (buffered := consumer._buffered_delivery()):
                    start(buffered)
                if self.stopping.is_set():
                    break
                if finished:
                    continue
                wake.clear()
                woken = asyncio.create_task(wake.wait())
                if receiving is None and len(running) < self.route.concurrency:
                    receiving = asyncio.create_task(consumer._wait_buffered())
                await asyncio.wait({stop, woken, *([receiving] if receiving else [])}, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if receiving is not None and receiving.done():
                    arrived = receiving.result()
                    receiving = None
                    if not arrived:
                        raise _Broken("the broker ended the stream")
        except BaseException:
            # The deliveries went back to the queue with the stream, so the running
            # calls finish on their own and their outcomes are not settled.
            self.worker.stats.abandoned += len(running) + len(finished)
            self._detached |= running
            for task in running:
                task.add_done_callback(self._detached.discard)
            raise
        finally:
            stop.cancel()
            if receiving is not None:
                receiving.cancel()  # It took nothing: what is buffered is released below.
        while running or finished:
            if not finished:
                wake.clear()
                await wake.wait()
            await self._settle_all(consumer, finished)
        await consumer.close()

    async def _settle_all(self, consumer: Consumer, finished: list[tuple[Delivery, BaseException | None]]) -> None:
        """Settles the finished calls: the successes in one ack, the failures one by one."""
        batch = finished[:]
        finished.clear()
        stats = self.worker.stats
        unsettled = len(batch)
        try:
            successes = [delivery for delivery, error in batch if error is None]
            if successes:
                await consumer.ack(*successes)
                stats.acked += len(successes)
                unsettled -= len(successes)
            for delivery, error in batch:
                if error is not None:
                    await self._settle_failure(consumer, delivery, error)
                    unsettled -= 1
        except ReboundError:
            # Their deliveries went back with the stream, like the running ones.
            stats.abandoned += unsettled
            raise

    async def _call(self, delivery: Delivery) -> BaseException | None:
        """Runs the handler; returns what it raised."""
        job = Job(delivery.message, delivery.delivery_count, delivery.redelivered, delivery.queue)
        try:
            if inspect.iscoroutinefunction(self.route.handler):
                await self.route.handler(job)
            else:
                result = await asyncio.get_running_loop().run_in_executor(self.pool, self.route.handler, job)
                # An async handler that does not look like one (a functools.partial of
                # one, say) only made its awaitable in the thread: it runs here.
                if isinstance(result, Awaitable):
                    await result
        except Exception as e:
            return e
        return None

    async def _settle_failure(self, consumer: Consumer, delivery: Delivery, error: BaseException) -> None:
        stats = self.worker.stats
        queue, message_id = self.route.queue, delivery.message.message_id
        if isinstance(error, TemporarilyUnavailable):
            log.debug("%s message %d temporarily unavailable: %s", queue, message_id, error.reason)
            await consumer.nack(delivery, reason=error.reason, retry_after=error.retry_after)
            stats.retried += 1
        elif isinstance(error, DependencyDown):
            log.debug("%s message %d: dependency down (%s); pausing the queue %g s", queue, message_id, error.reason, error.pause)
            await consumer.nack(delivery, reason=error.reason, pause_queue=error.pause)
            stats.retried += 1
        elif isinstance(error, Permanent):
            log.warning("%s message %d dead-lettered: %s", queue, message_id, error.reason)
            await consumer.dead_letter(delivery, reason=error.reason)
            stats.dead_lettered += 1
        else:
            reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            log.warning(
                "%s message %d failed, it will be redelivered: %s", queue, message_id, reason, exc_info=error
            )
            await consumer.nack(delivery, reason=reason)
            stats.failed += 1


__all__ = [
    "DependencyDown",
    "Job",
    "Permanent",
    "TemporarilyUnavailable",
    "Worker",
    "WorkerStats",
]
