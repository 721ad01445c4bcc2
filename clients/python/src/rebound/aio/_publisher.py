"""A producer on one Publish stream, shared by every coroutine that sends through
it, with natural batching; the Rust client's `Publisher`, message for message.

`send` queues a message and waits for its own answer. A driver task owns the
stream: it sends a frame (one Publish request: one storage commit on the broker)
as soon as fewer than `max_frames_in_flight` frames are unanswered, so an idle
publisher adds no delay; messages queued while the window is full are coalesced
into the next frame. When the broker refuses a frame of several callers'
messages for something one message can cause, each is sent again alone, so that
every caller gets the answer to its own message. When the stream breaks, every
message sent on it and not yet answered fails with `Unconfirmed` (it may or may
not have been stored); messages not yet sent go on a new stream.
"""

from __future__ import annotations


import asyncio
import concurrent.futures
from collections import deque
from dataclasses import dataclass, field

import grpc

from rebound._connection import Metadata
from rebound._messages import OutgoingMessage
from rebound.errors import ProtocolError, ReboundError, Unconfirmed, from_rpc_error, status_error
from rebound.v1 import messaging_pb2 as pb

# Refusals that a single message can cause, all made before anything is stored.
_REFUSED_FOR_A_MESSAGE = frozenset(
    code.value[0]
    for code in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
    )
)


@dataclass(frozen=True)
class PublisherOptions:
    """How a publisher batches: by default no linger, two frames in flight, frames
    of at most 256 messages or 1 MiB, and 10 000 messages queued or in flight."""

    #: Frames sent and not yet answered, at most; more messages wait and are
    #: coalesced into the next frame.
    max_frames_in_flight: int = 2
    #: Messages in one frame, at most.
    max_batch: int = 256
    #: Encoded bytes of one frame's messages, at most (a larger message goes alone).
    max_batch_bytes: int = 1 << 20
    #: Seconds a frame that is not full may wait for more messages; 0: it goes as
    #: soon as the window allows.
    linger: float = 0.0
    #: Messages queued or in flight, at most; a send beyond waits for room.
    max_pending: int = 10_000


#: Where a message's id goes: an asyncio future, or a thread's (the blocking client's).
Answer = asyncio.Future[int] | concurrent.futures.Future[int]


@dataclass
class _Queued:
    # The message as field 2 of a PublishRequest (`encode`): frames are put together
    # from these bytes instead of copying each message into a request object.
    encoded: bytes
    answer: Answer


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode(message: OutgoingMessage) -> bytes:
    """The message as field 2 of a PublishRequest."""
    data = message.to_proto().SerializeToString()
    return b"\x12" + _varint(len(data)) + data


def _frame(sequence: int, items: list[_Queued]) -> bytes:
    """The encoded PublishRequest: field 1 the sequence, field 2 each message."""
    return b"\x08" + _varint(sequence) + b"".join(item.encoded for item in items)


#: The Publish method, taking encoded requests (`_frame`).
PublishMethod = grpc.aio.StreamStreamMultiCallable[bytes, pb.PublishResponse]


@dataclass
class _Stream:
    call: grpc.aio.StreamStreamCall[bytes, pb.PublishResponse]
    in_flight: deque[tuple[int, list[_Queued]]] = field(default_factory=deque)
    next_sequence: int = 1
    reader: asyncio.Task[None] | None = None
    broken: bool = False


class Publisher:
    """A producer whose concurrent sends share one Publish stream and are batched.
    Made by `Client.publisher`; its stream opens with the first send. `close`
    (or `async with`) waits for the messages already queued to be answered."""

    def __init__(self, method: PublishMethod, metadata: Metadata, options: PublisherOptions) -> None:
        self._method = method
        self._metadata = metadata
        #: How it batches.
        self.options = options
        # Messages queued or in flight, and whether that is below `max_pending`.
        self._pending = 0
        self._room = asyncio.Event()
        self._waiting: deque[_Queued] = deque()
        # From a refused frame, to be sent again one per frame (before `waiting`).
        self._alone: deque[_Queued] = deque()
        self._stream: _Stream | None = None
        self._wake = asyncio.Event()
        self._driver: asyncio.Task[None] | None = None
        self._closing = False
        # When a frame that is not full goes anyway (with a linger), in loop time.
        self._linger_until: float | None = None
        #: Frames (Publish requests) sent so far, on every stream of this publisher.
        self.frames_sent = 0
        #: Messages sent so far that found no queue on their address (counted per frame).
        self.unrouted = 0
        #: Messages sent so far that were duplicates: acknowledged, not stored again.
        self.duplicates = 0

    async def __aenter__(self) -> Publisher:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def send(self, message: OutgoingMessage) -> int:
        """Sends one message; returns the id the broker gave it once it is on disk
        (if durable). Raises the broker's refusal as a `StatusError` (nothing
        stored), or `Unconfirmed` if the stream broke before the answer came."""
        return await (await self.publish(message))

    async def publish(self, message: OutgoingMessage) -> asyncio.Future[int]:
        """Queues one message and returns the future of its id, completed as `send`
        returns. Waits only while `max_pending` messages are queued or in flight:
        a producer can publish many messages and gather their futures later."""
        if self._closing:
            raise Unconfirmed("the publisher is closed")
        while self._pending >= max(1, self.options.max_pending):
            self._room.clear()
            await self._room.wait()
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue(encode(message), answer)
        return answer

    def _queue(self, encoded: bytes, answer: Answer) -> None:
        """Queues an encoded message, on the loop's thread. The blocking client
        calls it directly, keeping its own count of room."""
        if self._closing:
            answer.set_exception(Unconfirmed("the publisher is closed"))
            return
        self._pending += 1
        if not self._waiting and self.options.linger > 0:
            self._linger_until = asyncio.get_running_loop().time() + self.options.linger
        self._waiting.append(_Queued(encoded, answer))
        if self._driver is None:
            self._driver = asyncio.create_task(self._drive())
        self._wake.set()

    async def close(self) -> None:
        """Waits until every message queued so far is answered, then closes the stream."""
        self._closing = True
        self._wake.set()
        if self._driver is not None:
            await self._driver

    async def _drive(self) -> None:
        try:
            await self._run()
        except BaseException as e:
            # Nobody must wait forever for an answer the driver will never give.
            self._closing = True
            why = Unconfirmed(f"the publisher failed: {e!r}")
            stream = self._stream
            in_flight = [item for _, items in stream.in_flight for item in items] if stream else []
            for item in (*in_flight, *self._alone, *self._waiting):
                self._answer(item, why)
            raise

    async def _run(self) -> None:
        while True:
            await self._send_frames()
            idle = not self._waiting and not self._alone
            if self._closing and idle and (self._stream is None or not self._stream.in_flight):
                if self._stream is not None:
                    await self._close_stream(self._stream)
                return
            self._wake.clear()
            linger = None
            if self._linger_until is not None and self._waiting:
                linger = max(0.0, self._linger_until - asyncio.get_running_loop().time())
            try:
                await asyncio.wait_for(self._wake.wait(), linger)
            except asyncio.TimeoutError:
                pass  # The linger is over: the next round sends the frame.

    def _lingering(self) -> bool:
        return self._linger_until is not None and asyncio.get_running_loop().time() < self._linger_until

    async def _send_frames(self) -> None:
        """Sends frames while the window has room and something may go."""
        options = self.options
        while True:
            stream = self._stream
            if stream is not None and len(stream.in_flight) >= max(1, options.max_frames_in_flight):
                return
            if self._alone:
                items = [self._alone.popleft()]
            elif not self._waiting or (
                self._lingering() and not self._closing and len(self._waiting) < options.max_batch
            ):
                return
            else:
                items = self._take_batch()
            if stream is None:
                try:
                    stream = self._stream = await self._open()
                except ReboundError as why:
                    # Not sent: the callers learn why at once.
                    for item in (*items, *self._alone, *self._waiting):
                        self._answer(item, why)
                    self._alone.clear()
                    self._waiting.clear()
                    return
            sequence = stream.next_sequence
            stream.next_sequence += 1
            stream.in_flight.append((sequence, items))
            self.frames_sent += 1
            try:
                await stream.call.write(_frame(sequence, items))
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError) as e:
                self._broken(stream, str(from_rpc_error(e)) if isinstance(e, grpc.aio.AioRpcError) else str(e))

    def _take_batch(self) -> list[_Queued]:
        """The next frame's messages from `waiting`, within the frame bounds."""
        items: list[_Queued] = []
        size = 0
        while self._waiting:
            nxt = self._waiting[0]
            if items and (
                len(items) >= self.options.max_batch or size + len(nxt.encoded) > self.options.max_batch_bytes
            ):
                break
            size += len(nxt.encoded)
            items.append(self._waiting.popleft())
        self._linger_until = None
        if self._waiting and self.options.linger > 0:
            self._linger_until = asyncio.get_running_loop().time() + self.options.linger
        return items

    async def _open(self) -> _Stream:
        call = self._method(metadata=self._metadata)
        try:
            await call.wait_for_connection()
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        stream = _Stream(call)
        stream.reader = asyncio.create_task(self._read(stream))
        return stream

    async def _read(self, stream: _Stream) -> None:
        """Matches the stream's answers with its frames, until it ends."""
        try:
            while True:
                response = await stream.call.read()
                if response is grpc.aio.EOF:
                    why = "the broker closed the stream"
                    break
                assert isinstance(response, pb.PublishResponse)
                if not stream.in_flight or stream.in_flight[0][0] != response.sequence:
                    why = f"an answer to request {response.sequence} out of order"
                    break
                _, items = stream.in_flight.popleft()
                if not self._settle(response, items):
                    why = f"a malformed answer to request {response.sequence}"
                    break
                self._wake.set()
        except grpc.aio.AioRpcError as e:
            why = str(from_rpc_error(e))
        self._broken(stream, why)

    def _settle(self, response: pb.PublishResponse, items: list[_Queued]) -> bool:
        """Gives a frame's callers their answers; False when the answer breaks the protocol."""
        kind = response.WhichOneof("result")
        if kind == "sent" and len(response.sent.message_ids) == len(items):
            self.unrouted += response.sent.unrouted
            self.duplicates += sum(response.sent.duplicates)
            for item, message_id in zip(items, response.sent.message_ids):
                self._answer(item, message_id)
            return True
        if kind == "error":
            code, message = response.error.code, response.error.message
            if len(items) > 1 and code in _REFUSED_FOR_A_MESSAGE:
                self._alone.extend(items)
            else:
                for item in items:
                    self._answer(item, status_error(code, message))
            return True
        for item in items:
            self._answer(item, ProtocolError(f"a malformed answer to request {response.sequence}: {kind}"))
        return False

    def _broken(self, stream: _Stream, why: str) -> None:
        """Fails what the stream held: it may or may not have been stored."""
        if stream.broken:
            return
        stream.broken = True
        if self._stream is stream:
            self._stream = None
        stream.call.cancel()
        for _, items in stream.in_flight:
            for item in items:
                self._answer(item, Unconfirmed(why))
        stream.in_flight.clear()
        self._wake.set()

    def _answer(self, item: _Queued, result: int | BaseException) -> None:
        self._pending -= 1
        self._room.set()
        # A caller that stopped waiting (cancelled the future) does not want it.
        if item.answer.done():
            return
        try:
            if isinstance(result, BaseException):
                item.answer.set_exception(result)
            else:
                item.answer.set_result(result)
        except (asyncio.InvalidStateError, concurrent.futures.InvalidStateError):
            pass  # A thread's future cancelled meanwhile.

    async def _close_stream(self, stream: _Stream) -> None:
        self._stream = None
        stream.broken = True
        try:
            await stream.call.done_writing()
            if stream.reader is not None:
                await stream.reader
        except grpc.aio.AioRpcError:
            pass  # Nothing was in flight: there is nobody left to tell.
