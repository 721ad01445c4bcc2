"""The asyncio client: the same calls as the blocking one, awaited."""

from __future__ import annotations

import asyncio

from conftest import Broker, unique

import rebound
from rebound import OutgoingMessage, errors


def test_send_consume_and_transact(broker: Broker) -> None:
    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("aio")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            ids = (await client.send_batch([OutgoingMessage(q, f"{i}".encode()) for i in range(5)])).message_ids
            seen = []
            async with await client.consumer(q, window=2) as consumer:
                async for delivery in consumer:
                    seen.append(delivery.message.message_id)
                    await consumer.ack(delivery)
                    if len(seen) == 5:
                        break
                assert await consumer.flush() == []
                assert seen == ids
                await client.send(OutgoingMessage(q, b"tx"))
                tx_delivery = await consumer.receive(timeout=10)
                assert tx_delivery is not None
                async with await client.session() as session:
                    tx = await session.begin()
                    await consumer.ack_in(tx, tx_delivery)
                    await tx.commit()
                    # An ack in a finished transaction is refused, the delivery kept.
                    await client.send(OutgoingMessage(q, b"late"))
                    late = await consumer.receive(timeout=10)
                    assert late is not None
                    try:
                        await consumer.ack_in(tx, late)
                        raise AssertionError("an ack in a committed transaction was accepted")
                    except errors.SettleRejected as e:
                        assert "could not apply a settle" in str(e)
                    await consumer.ack(late)
            assert (await client.admin.queue(q)).messages == 0

    asyncio.run(main())


def test_receive_times_out_and_wrong_queue_errors(broker: Broker) -> None:
    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("aio")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            consumer = await client.consumer(q)
            assert await asyncio.wait_for(consumer.receive(timeout=0.2), 5) is None
            await consumer.close()
            try:
                await client.admin.delete_queue(unique("missing"))
                raise AssertionError("deleting a missing queue succeeded")
            except errors.NotFound as e:
                assert e.code.name == "NOT_FOUND" and "not found" in e.message

    asyncio.run(main())


def test_an_error_leaving_a_consumer_block_is_not_hidden(broker: Broker) -> None:
    async def main() -> None:
        async with rebound.aio.Client(broker.url) as client:
            q = unique("aio")
            await client.admin.create_queue(q, q, rebound.ANYCAST)
            try:
                async with await client.consumer(q) as consumer:
                    consumer.cancel()  # its close on the way out then fails too
                    raise LookupError("the block's own error")
            except LookupError as e:
                assert str(e) == "the block's own error"
            consumer = await client.consumer(q)
            consumer.cancel()
            try:
                await consumer.close()
                raise AssertionError("closing a cancelled consumer succeeded")
            except errors.ReboundError:
                pass

    asyncio.run(main())
