"""`Voided` against a fake broker: a `grpc.aio` Messaging server on 127.0.0.1 that
does what a cluster node does when a consumer stream moves to its queue's next
node. It delivers 1, 2 and 3, then voids 2 and 3 (and 7, which the consumer never
had): the application must see only 1, and the two dropped deliveries' credit must
be granted again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest

import rebound
from rebound.v1 import messaging_pb2 as pb
from rebound.v1.messaging_pb2_grpc import MessagingServicer, add_MessagingServicer_to_server

#: What a client grants again after the voiding of 2 and 3 before it took them.
REGRANT = 2


def _deliveries(*ids: int) -> pb.ConsumeResponse:
    return pb.ConsumeResponse(
        deliveries=pb.Deliveries(
            deliveries=[
                pb.Delivery(
                    delivery_id=i, message=pb.Message(message_id=100 + i, address="q", body=b"%d" % i), delivery_count=1, queue="q"
                )
                for i in ids
            ]
        )
    )


class FakeBroker(MessagingServicer):
    """One Consume stream: deliveries 1, 2, 3, then `Voided` [2, 3] and [7]; each
    settle answered, and the grant of `REGRANT` credit answered with delivery 4.
    Records every request."""

    def __init__(self) -> None:
        self.requests: list[pb.ConsumeRequest] = []
        self.voided_sent = asyncio.Event()

    async def Consume(
        self,
        request_iterator: AsyncIterator[pb.ConsumeRequest],
        context: grpc.aio.ServicerContext[pb.ConsumeRequest, pb.ConsumeResponse],
    ) -> AsyncIterator[pb.ConsumeResponse]:
        self.requests.append(await anext(request_iterator))
        yield pb.ConsumeResponse(subscribed=pb.Subscribed(queue="q", address="q"))
        yield _deliveries(1, 2, 3)
        yield pb.ConsumeResponse(voided=pb.Voided(delivery_ids=[2, 3]))
        yield pb.ConsumeResponse(voided=pb.Voided(delivery_ids=[7]))
        self.voided_sent.set()
        async for request in request_iterator:
            self.requests.append(request)
            if request.HasField("settle"):
                yield pb.ConsumeResponse(settled=pb.Settled(delivery_ids=request.settle.delivery_ids))
            elif request.HasField("credit") and request.credit.credit == REGRANT:
                yield _deliveries(4)

    def summary(self) -> list[tuple[str, object]]:
        """The requests, each as its kind and its credit or delivery ids."""
        out: list[tuple[str, object]] = []
        for r in self.requests:
            kind = r.WhichOneof("kind")
            if kind == "subscribe":
                out.append((kind, r.subscribe.initial_credit))
            elif kind == "credit":
                out.append((kind, r.credit.credit))
            elif kind == "settle":
                out.append((kind, list(r.settle.delivery_ids)))
            else:
                out.append((str(kind), None))
        return out


async def _with_fake_broker(body: Callable[[FakeBroker, str], Awaitable[None]]) -> FakeBroker:
    fake = FakeBroker()  # type: ignore[abstract]  # the rest answers UNIMPLEMENTED, as generated
    server = grpc.aio.server()
    add_MessagingServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        await asyncio.wait_for(body(fake, f"http://127.0.0.1:{port}"), 60)
    finally:
        await server.stop(None)
    return fake


@pytest.mark.parametrize("window", [True, False], ids=["window", "manual-credit"])
def test_voided_deliveries_not_yet_received_are_dropped_and_their_credit_granted_again(window: bool) -> None:
    async def consume(fake: FakeBroker, url: str) -> None:
        async with rebound.aio.Client(url) as client:
            consumer = await (client.consumer("q", window=3) if window else client.consumer("q", credit=3))
            first = await consumer.receive(timeout=10)
            assert first is not None and first.id == 1
            await consumer.ack(first)
            # Settled comes after the Voided: once flushed, the voiding is filed.
            # Neither it nor the id 7 counts as a settle's answer.
            assert await consumer.flush() == []
            # Not 2: the buffer lost 2 and 3, whose credit, granted again, brings 4.
            second = await consumer.receive(timeout=10)
            assert second is not None and second.id == 4
            await consumer.ack(second)
            assert await consumer.close() == []

    fake = asyncio.run(_with_fake_broker(consume))
    settle_grant = [("credit", 1)] if window else []
    assert fake.summary() == [
        ("subscribe", 3),
        ("settle", [1]),
        *settle_grant,
        ("credit", REGRANT),
        ("settle", [4]),
        *settle_grant,
        ("close", None),
    ]


def test_a_worker_never_hands_a_voided_delivery_to_its_handler() -> None:
    handled: list[int] = []

    async def work(fake: FakeBroker, url: str) -> None:
        worker = rebound.Worker(url)

        @worker.handler("q")
        async def handle(job: rebound.Job) -> None:
            handled.append(job.message.message_id - 100)
            if len(handled) == 1:
                # 2 and 3 wait in the consumer's buffer meanwhile (concurrency 1),
                # until the Voided, sent back to back with them, removes them.
                await fake.voided_sent.wait()
                await asyncio.sleep(1)
            else:
                worker.stop()

        stats = await worker.run_async()
        assert stats.acked == 2 and stats.abandoned == 0 and stats.reconnects == 0

    fake = asyncio.run(_with_fake_broker(work))
    assert handled == [1, 4]
    assert ("credit", REGRANT) in fake.summary()
