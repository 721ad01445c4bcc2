"""A consumer: one Consume stream, with the Rust client's credit and settle bookkeeping.

The stream interleaves deliveries and `Settled` confirmations (one per settle, sent
once its effect is on disk). A reader task files them as they come: deliveries
wait in a buffer for `receive`, confirmations are counted so that `flush` can wait
for the outstanding ones. A `Voided` (in a cluster, the stream moved to its queue's
next node, which took those deliveries back to deliver again) removes the voided
deliveries from the buffer, so that the application never processes a message
another consumer may be processing, and their credit is granted again before
`receive` waits for more. Reading continuously also means the broker, which stops
reading requests while its answers go unread, can never deadlock with a consumer
that settles many deliveries before it receives more.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING

import grpc

from rebound._connection import Metadata
from rebound._messages import Delivery
from rebound.errors import ProtocolError, ReboundError, SettleRejected, StreamClosed, from_rpc_error
from rebound.v1 import messaging_pb2 as pb

if TYPE_CHECKING:
    from rebound.v1.messaging_pb2_grpc import MessagingAsyncStub
    from rebound.aio._session import Transaction

#: A delivery to settle, or its id.
DeliveryRef = Delivery | int


def _ids(deliveries: tuple[DeliveryRef, ...]) -> list[int]:
    return [d.id if isinstance(d, Delivery) else d for d in deliveries]


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


class Consumer:
    """A subscription to a queue, from `Client.consumer`.

    Every delivery uses one credit, and the broker never has more deliveries
    outstanding than it was granted: the initial credit, every `grant`, and (with
    a window, the default) one credit per settled delivery. Each delivery must be
    settled: `ack`, `nack`, `release` or `dead_letter`. Settles are pipelined;
    `flush` waits until the broker has made them durable.

    End it with `close` (or `async with`): what it still holds goes back to the
    queue without counting as a delivery attempt. A consumer whose connection
    breaks counts as a failed delivery of everything it held.

    In a cluster the stream follows its queue from node to node, and the
    deliveries the queue's previous node took back are voided: `receive` never
    returns one it has not returned yet (its credit is granted again), and
    settling one it has returned reports its id unknown.
    """

    def __init__(
        self,
        call: grpc.aio.StreamStreamCall[pb.ConsumeRequest, pb.ConsumeResponse],
        subscribed: pb.Subscribed,
        replenish: bool,
    ) -> None:
        self._call = call
        #: The queue consumed from, as the broker named it.
        self.queue = subscribed.queue
        #: The address the queue is bound to.
        self.address = subscribed.address
        self._replenish = replenish
        self._buffered: deque[Delivery] = deque()
        self._unconfirmed = 0
        self._unknown: list[int] = []
        self._rejected: list[str] = []
        # Credit granted for settles the broker then refused: their deliveries are
        # still outstanding, so the window's next grants pay it back.
        self._owed = 0
        # The credit of voided deliveries dropped unseen, to grant again.
        self._regrant = 0
        self._changed = asyncio.Event()
        # Set once the stream has ended: None if the broker ended it cleanly.
        self._ended: ReboundError | None = None
        self._done = False
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        stub: MessagingAsyncStub,
        metadata: Metadata,
        queue: str,
        *,
        window: int = 10,
        credit: int | None = None,
        selector: str = "",
    ) -> Consumer:
        """Subscribes; returns once the broker has confirmed the subscription."""
        call = stub.Consume(metadata=metadata)
        initial = window if credit is None else credit
        try:
            await call.write(pb.ConsumeRequest(subscribe=pb.Subscribe(queue=queue, initial_credit=initial, filter=selector)))
            first = await call.read()
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        if first is grpc.aio.EOF:
            raise StreamClosed("the broker closed the stream before confirming the subscription")
        assert isinstance(first, pb.ConsumeResponse)
        if first.WhichOneof("kind") != "subscribed":
            call.cancel()
            raise ProtocolError(f"expected Subscribed first, got {first.WhichOneof('kind')}")
        return cls(call, first.subscribed, replenish=credit is None)

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, error_type: type[BaseException] | None, *_: object) -> None:
        try:
            await self.close()
        except ReboundError:
            # An error on the way out must not hide the one that ended the block.
            if error_type is None:
                raise

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Delivery:
        delivery = await self.receive()
        if delivery is None:
            raise StopAsyncIteration
        return delivery

    async def receive(self, timeout: float | None = None) -> Delivery | None:
        """The next delivery; None once the broker has ended the stream, or when
        nothing arrived within `timeout` seconds. Raises why the stream broke.
        Cancelling it loses no delivery."""
        return self._buffered.popleft() if await self._wait_buffered(timeout) else None

    async def _wait_buffered(self, timeout: float | None = None) -> bool:
        """Waits until a delivery is buffered: False once the broker has ended the
        stream, or when none came within `timeout` seconds. Raises why the stream
        broke. Grants the credit of voided deliveries first."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self._buffered:
            if self._done:
                if self._ended is not None:
                    raise self._ended
                return False
            if self._regrant:
                # Taken before the write, so that concurrent waits grant it once;
                # put back if the write does not finish (then granted next time).
                regrant, self._regrant = self._regrant, 0
                try:
                    await self.grant(regrant)
                except BaseException:
                    self._regrant += regrant
                    raise
                continue
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), None if deadline is None else deadline - loop.time())
            except asyncio.TimeoutError:
                return False
        return True

    def _buffered_delivery(self) -> Delivery | None:
        """A delivery already received, if there is one (for the worker, which
        takes one only to start its handler at once: a `Voided` removes only the
        deliveries still buffered)."""
        return self._buffered.popleft() if self._buffered else None

    async def grant(self, credit: int) -> None:
        """Grants `credit` more deliveries."""
        await self._request(pb.ConsumeRequest(credit=pb.Credit(credit=credit)))

    async def ack(self, *deliveries: DeliveryRef) -> None:
        """Processed: removes the messages from the queue."""
        await self._settle(deliveries, pb.OUTCOME_ACK)

    async def nack(
        self,
        *deliveries: DeliveryRef,
        reason: str = "",
        retry_after: float | None = None,
        pause_queue: float | None = None,
    ) -> None:
        """Failed: counts as a delivery attempt, redelivered per the address
        settings or dead-lettered after `max-delivery-attempts`. `retry_after`
        (seconds) redelivers after that long instead of the configured delay
        (capped by the address's `max-retry-after`). `pause_queue` (seconds) says
        the consumer's dependency is down: the broker pauses the whole queue that
        long, then sends one probe (outage mode), and the attempt does not count
        unless the address sets `outage-counts-attempts`."""
        if retry_after is not None and pause_queue is not None:
            raise ValueError("a nack takes retry_after or pause_queue, not both")
        await self._settle(
            deliveries,
            pb.OUTCOME_NACK,
            reason=reason,
            retry_after_ms=None if retry_after is None else _ms(retry_after),
            pause_queue_ms=None if pause_queue is None else _ms(pause_queue),
        )

    async def release(self, *deliveries: DeliveryRef) -> None:
        """Not processed: back to the queue at once, not counted as an attempt."""
        await self._settle(deliveries, pb.OUTCOME_RELEASE)

    async def dead_letter(self, *deliveries: DeliveryRef, reason: str) -> None:
        """Failed for good: straight to the dead-letter address, with `reason`."""
        await self._settle(deliveries, pb.OUTCOME_DEAD_LETTER, reason=reason)

    async def ack_in(self, transaction: Transaction, *deliveries: DeliveryRef) -> list[int]:
        """Acknowledges inside `transaction`: the messages are removed when it
        commits; a rollback returns them with their delivery count incremented.
        Waits, as `flush` does, until the broker has taken them into the
        transaction; raises `SettleRejected` if it is unknown or finished."""
        await self._settle(deliveries, pb.OUTCOME_ACK, transaction_id=transaction.id)
        return await self.flush()

    async def flush(self) -> list[int]:
        """Waits until every settle sent so far is durable; returns the delivery ids
        the broker reported unknown (already settled, or never delivered here)
        since the previous flush. Raises `SettleRejected` if the broker could not
        apply one of those settles (its deliveries are still outstanding)."""
        while self._unconfirmed > 0:
            if self._done:
                raise self._ended or StreamClosed("the broker closed the stream before confirming the settles")
            self._changed.clear()
            await self._changed.wait()
        if self._rejected:
            rejected, self._rejected = self._rejected, []
            raise SettleRejected(f"the broker could not apply a settle: {'; '.join(rejected)}")
        unknown, self._unknown = self._unknown, []
        return unknown

    async def close(self) -> list[int]:
        """Ends the subscription gracefully: no more deliveries, the settles made
        durable (returns what `flush` returns), and every delivery still unsettled
        back to the queue at once without counting as a delivery attempt."""
        if self._done:
            if self._ended is not None:
                raise self._ended
            return await self.flush()
        await self._request(pb.ConsumeRequest(close=pb.Close()))
        unknown = await self.flush()
        try:
            await self._call.done_writing()
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        await self._reader
        if self._ended is not None:
            raise self._ended
        return unknown

    def cancel(self) -> None:
        """Drops the stream without a graceful close: the broker counts a failed
        delivery of everything unsettled."""
        self._call.cancel()

    async def _settle(
        self,
        deliveries: tuple[DeliveryRef, ...],
        outcome: pb.Outcome.ValueType,
        *,
        reason: str = "",
        retry_after_ms: int | None = None,
        pause_queue_ms: int | None = None,
        transaction_id: int | None = None,
    ) -> None:
        ids = _ids(deliveries)
        if not ids:
            return
        settle = pb.Settle(
            delivery_ids=ids,
            outcome=outcome,
            reason=reason,
            retry_after_ms=retry_after_ms,
            pause_queue_ms=pause_queue_ms,
            transaction_id=transaction_id,
        )
        # Counted before it is written: the reader may see its Settled before this resumes.
        self._unconfirmed += 1
        await self._request(pb.ConsumeRequest(settle=settle))
        if self._replenish:
            # Granted at once, so the window never waits for the settle's fsync.
            paid = min(len(ids), self._owed)
            self._owed -= paid
            if len(ids) > paid:
                await self.grant(len(ids) - paid)

    async def _request(self, request: pb.ConsumeRequest) -> None:
        if self._done:
            raise self._ended or StreamClosed("the broker closed the consumer's stream")
        async with self._write_lock:
            try:
                await self._call.write(request)
            except grpc.aio.AioRpcError as e:
                raise from_rpc_error(e) from None
            except (asyncio.InvalidStateError, grpc.aio.UsageError):
                raise self._ended or StreamClosed("the consumer's stream is closed") from None

    async def _read(self) -> None:
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    return
                assert isinstance(response, pb.ConsumeResponse)
                self._file(response)
                self._changed.set()
        except grpc.aio.AioRpcError as e:
            self._ended = from_rpc_error(e)
        except ProtocolError as e:
            self._ended = e
            self._call.cancel()
        finally:
            self._done = True
            self._changed.set()

    def _file(self, response: pb.ConsumeResponse) -> None:
        kind = response.WhichOneof("kind")
        if kind == "deliveries":
            self._buffered.extend(Delivery.from_proto(d) for d in response.deliveries.deliveries)
        elif kind == "settled":
            settled = response.settled
            if self._unconfirmed == 0:
                raise ProtocolError("Settled without a settle")
            self._unconfirmed -= 1
            if self._replenish:
                # A refused settle's deliveries still hold their credit, so what was
                # granted for them is paid back before the window grows.
                self._owed += len(settled.refused_delivery_ids)
            self._unknown.extend(settled.unknown_delivery_ids)
            if settled.error:
                self._rejected.append(settled.error)
        elif kind == "voided":
            # Their messages went back to the queue: the application must not see
            # them, and never used their credit. Those not buffered it already has:
            # their settles will be answered with the ids unknown.
            voided = set(response.voided.delivery_ids)
            kept = deque(d for d in self._buffered if d.id not in voided)
            self._regrant += len(self._buffered) - len(kept)
            self._buffered = kept
        else:
            raise ProtocolError(f"unexpected {kind} on a consume stream")
