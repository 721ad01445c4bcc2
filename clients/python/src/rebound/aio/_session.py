"""Transacted sessions: local transactions, as a JMS transacted session has them.

A `Session` is one Transact stream. Its requests carry a `request_id` that the
broker's answer repeats; a reader task hands each answer to the call waiting for
it, so several coroutines may use one session at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import asyncio
import itertools
from collections.abc import Iterable

import grpc

from rebound._connection import Metadata
from rebound._messages import OutgoingMessage, SendResult
from rebound.errors import ProtocolError, ReboundError, StreamClosed, from_rpc_error, status_error
from rebound.v1 import messaging_pb2 as pb

if TYPE_CHECKING:
    # Only in the generated type stubs: the runtime stub serves both kinds of channel.
    from rebound.v1.messaging_pb2_grpc import MessagingAsyncStub


class Session:
    """A transacted session, from `Client.session`: the transactions begun on it
    belong to it, and the broker rolls back those still open when it is closed or
    its connection breaks."""

    def __init__(self, call: grpc.aio.StreamStreamCall[pb.TransactRequest, pb.TransactResponse]) -> None:
        self._call = call
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[pb.TransactResponse]] = {}
        self._ended: ReboundError | None = None
        self._write_lock = asyncio.Lock()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, stub: MessagingAsyncStub, metadata: Metadata) -> Session:
        call = stub.Transact(metadata=metadata)
        try:
            await call.wait_for_connection()
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None
        return cls(call)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def begin(self) -> Transaction:
        """Begins a transaction."""
        response = await self._ask(pb.TransactRequest(begin=pb.Begin()), "begun")
        return Transaction(self, response.begun.transaction_id)

    async def close(self) -> None:
        """Ends the session; the broker rolls back its open transactions."""
        try:
            await self._call.done_writing()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            pass  # Already gone: so are its transactions.
        await self._reader

    async def _ask(self, request: pb.TransactRequest, expected: str) -> pb.TransactResponse:
        if self._ended is not None or self._reader.done():
            raise self._ended or StreamClosed("the transacted session is closed")
        request.request_id = next(self._ids)
        answer: asyncio.Future[pb.TransactResponse] = asyncio.get_running_loop().create_future()
        self._waiting[request.request_id] = answer
        async with self._write_lock:
            try:
                await self._call.write(request)
            except grpc.aio.AioRpcError as e:
                raise from_rpc_error(e) from None
        response = await answer
        kind = response.WhichOneof("kind")
        if kind == "error":
            raise status_error(response.error.code, response.error.message)
        if kind != expected:
            raise ProtocolError(f"expected {expected} in answer to request {request.request_id}, got {kind}")
        return response

    async def _read(self) -> None:
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    break
                assert isinstance(response, pb.TransactResponse)
                answer = self._waiting.pop(response.request_id, None)
                # No one waits when the caller was cancelled.
                if answer is not None and not answer.done():
                    answer.set_result(response)
        except grpc.aio.AioRpcError as e:
            self._ended = from_rpc_error(e)
        ended = self._ended or StreamClosed("the broker closed the transacted session")
        for answer in self._waiting.values():
            if not answer.done():
                answer.set_exception(ended)
        self._waiting.clear()


class Transaction:
    """A local transaction of a `Session`: its sends are invisible until `commit`
    and discarded by `rollback`; acks made in it (`Consumer.ack_in`) are applied
    by the commit and undone by a rollback."""

    def __init__(self, session: Session, transaction_id: int) -> None:
        self._session = session
        #: The transaction's id on the broker.
        self.id = transaction_id

    async def send(self, messages: OutgoingMessage | Iterable[OutgoingMessage]) -> SendResult:
        """Sends inside the transaction; returns the ids the messages will have."""
        batch = [messages] if isinstance(messages, OutgoingMessage) else list(messages)
        send = pb.TransactionalSend(transaction_id=self.id, messages=[m.to_proto() for m in batch])
        response = await self._session._ask(pb.TransactRequest(send=send), "sent")
        return SendResult.from_proto(response.sent)

    async def commit(self) -> pb.Committed:
        """Makes every send and ack of the transaction durable in one storage commit."""
        request = pb.TransactRequest(commit=pb.Commit(transaction_id=self.id))
        return (await self._session._ask(request, "committed")).committed

    async def rollback(self) -> pb.RolledBack:
        """Discards the sends; the acked messages go back to their queues with their
        delivery count incremented."""
        request = pb.TransactRequest(rollback=pb.Rollback(transaction_id=self.id))
        return (await self._session._ask(request, "rolled_back")).rolled_back
