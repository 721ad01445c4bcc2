"""The publisher: concurrent sends sharing one Publish stream and its frames, each
answered once durable; a refused message failing alone; a broken stream failing
what it held as unconfirmed."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable

import pytest
from conftest import Broker, unique

import rebound
from rebound import OutgoingMessage, errors


def test_threads_share_frames_and_each_gets_its_id(broker: Broker) -> None:
    with rebound.Client(broker.url) as client:
        q = unique("pub")
        client.admin.create_queue(q, q, rebound.ANYCAST)
        with client.publisher() as publisher:
            ids: list[int] = []
            lock = threading.Lock()

            def produce(n: int) -> None:
                futures = [publisher.publish(OutgoingMessage(q, f"{n}-{i}".encode())) for i in range(250)]
                got = [f.result(timeout=30) for f in futures]
                with lock:
                    ids.extend(got)

            threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert len(set(ids)) == 1000
            assert publisher.frames_sent < 1000, "no frame carried more than one message"
            assert publisher.send(OutgoingMessage(q, b"one more")) > max(ids)
        assert client.admin.queue(q).messages == 1001


def test_a_refused_message_fails_alone(broker: Broker) -> None:
    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("pub")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            async with client.publisher() as publisher:
                good = [await publisher.publish(OutgoingMessage(q, b"ok")) for _ in range(50)]
                bad = await publisher.publish(OutgoingMessage(q, b"bad", properties={"_REBOUND_X": 1}))
                more = [await publisher.publish(OutgoingMessage(q, b"ok")) for _ in range(50)]
                assert len(await asyncio.gather(*good, *more)) == 100
                with pytest.raises(errors.InvalidArgument, match="_REBOUND_"):
                    await bad
            assert (await client.admin.queue(q)).messages == 100

    asyncio.run(main())


def test_a_broken_stream_fails_as_unconfirmed(start_broker: Callable[..., Broker]) -> None:
    broker = start_broker()

    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("pub")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            publisher = client.publisher()
            assert await publisher.send(OutgoingMessage(q, b"stored")) > 0
            # A stalled broker never answers; killing it breaks the stream.
            broker.signal(signal.SIGSTOP)
            pending = [await publisher.publish(OutgoingMessage(q, b"x")) for _ in range(20)]
            await asyncio.sleep(0.3)
            broker.kill()
            results = await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 30)
            assert all(isinstance(r, errors.ReboundError) for r in results), results
            assert any(isinstance(r, errors.Unconfirmed) for r in results), results
            assert "may or may not have been stored" in str(next(r for r in results if isinstance(r, errors.Unconfirmed)))
            # Nothing was sent of a message published now: it fails with why, on a new stream.
            with pytest.raises(errors.Unavailable):
                await asyncio.wait_for(publisher.send(OutgoingMessage(q, b"later")), 30)

    asyncio.run(main())


def test_aio_publisher_throughput_smoke(broker: Broker) -> None:
    """Many messages in flight from one coroutine: all answered, in order."""

    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("pub")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            async with client.publisher() as publisher:
                started = time.monotonic()
                futures = [await publisher.publish(OutgoingMessage(q, b"x" * 1024)) for _ in range(5000)]
                ids = await asyncio.gather(*futures)
                assert ids == sorted(ids)
                assert time.monotonic() - started < 60
            assert (await client.admin.queue(q)).messages == 5000

    asyncio.run(main())


def test_frames_keep_to_their_bounds_and_linger(broker: Broker) -> None:
    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("pub")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            bounded = rebound.PublisherOptions(max_batch=3, max_batch_bytes=2500, max_frames_in_flight=1)
            async with client.publisher(bounded) as publisher:
                # 3 a frame at most; two 1 KiB bodies fill 2500 bytes; 4 KiB goes alone.
                bodies = [b"s"] * 4 + [b"k" * 1024] * 3 + [b"b" * 4096, b"s"]
                futures = [await publisher.publish(OutgoingMessage(q, body)) for body in bodies]
                await asyncio.gather(*futures)
                assert publisher.frames_sent == 5  # [s s s] [s k k] [k] [b] [s]
            lingering = rebound.PublisherOptions(linger=0.3)
            async with client.publisher(lingering) as publisher:
                started = asyncio.get_running_loop().time()
                futures = [await publisher.publish(OutgoingMessage(q, b"x")) for _ in range(3)]
                await asyncio.gather(*futures)
                assert asyncio.get_running_loop().time() - started >= 0.25
                assert publisher.frames_sent == 1, "the linger did not gather the messages into one frame"
            assert (await client.admin.queue(q)).messages == 12

    asyncio.run(main())
