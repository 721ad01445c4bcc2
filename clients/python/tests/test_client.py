"""The blocking client against a real broker: sends and their options, consuming
with credit and selectors, every settle outcome, transactions, admin, errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from conftest import Broker, unique, wait_for

import rebound
from rebound import OutgoingMessage, errors


@pytest.fixture(scope="module")
def client(broker: Broker) -> Iterator[rebound.Client]:
    with rebound.Client(broker.url) as client:
        yield client


def queue(client: rebound.Client, prefix: str = "orders") -> str:
    name = unique(prefix)
    client.admin.create_queue(name, name, rebound.ANYCAST)
    return name


def now_ms() -> int:
    return int(time.time() * 1000)


def test_send_consume_ack_with_properties(client: rebound.Client) -> None:
    q = queue(client)
    props: dict[str, rebound.PropertyValue] = {"s": "text", "i": 7, "f": 1.5, "b": True, "raw": b"\x00\x01"}
    message_id = client.send(OutgoingMessage(q, b"hello", properties=props))
    with client.consumer(q) as consumer:
        delivery = consumer.receive(timeout=10)
        assert delivery is not None
        assert delivery.message.message_id == message_id
        assert delivery.message.body == b"hello"
        assert delivery.message.durable
        assert delivery.delivery_count == 1 and not delivery.redelivered
        for key, value in props.items():
            assert delivery.message.properties[key] == value
        consumer.ack(delivery)
        assert consumer.flush() == []
    assert client.admin.queue(q).messages == 0


def test_batch_priority_group_and_expiration(client: rebound.Client) -> None:
    q = queue(client)
    result = client.send_batch(
        [
            OutgoingMessage(q, b"low", priority=1),
            OutgoingMessage(q, b"high", priority=9, group="g1"),
            OutgoingMessage(q, b"expired", expiration_ms=now_ms() + 100),
        ]
    )
    assert len(result.message_ids) == 3 and result.unrouted == 0
    time.sleep(0.3)
    with client.consumer(q) as consumer:
        first, second = consumer.receive(timeout=10), consumer.receive(timeout=10)
        assert first is not None and second is not None
        assert (first.message.body, second.message.body) == (b"high", b"low")
        assert first.message.properties["_AMQ_GROUP_ID"] == "g1"
        assert consumer.receive(timeout=0.5) is None, "the expired message was delivered"
        consumer.ack(first, second)
        consumer.flush()
    # With no expiry-address the expired message is dropped (counted as such).
    info = client.admin.queue(q)
    assert (info.messages, info.dropped) == (0, 1)


def test_scheduled_delivery(client: rebound.Client) -> None:
    q = queue(client)
    sent_at = time.monotonic()
    client.send(OutgoingMessage(q, b"later", delay_ms=700))
    client.send(OutgoingMessage(q, b"at", deliver_at_ms=now_ms() + 700))
    with client.consumer(q) as consumer:
        assert consumer.receive(timeout=0.3) is None
        assert client.admin.queue(q).scheduled == 2
        got = [consumer.receive(timeout=10), consumer.receive(timeout=10)]
        assert time.monotonic() - sent_at >= 0.6
        assert sorted(d.message.body for d in got if d) == [b"at", b"later"]
        consumer.ack(*[d for d in got if d])


def test_duplicate_id_is_stored_once(client: rebound.Client) -> None:
    q = queue(client)
    first = client.send_batch([OutgoingMessage(q, b"x", duplicate_id="order-1")])
    again = client.send_batch([OutgoingMessage(q, b"x", duplicate_id="order-1")])
    assert first.duplicates in ([], [False])
    assert again.duplicates == [True]
    assert client.admin.queue(q).messages == 1


def test_selector_and_manual_credit(client: rebound.Client) -> None:
    q = queue(client)
    for color in ["red", "blue", "red", "red"]:
        client.send(OutgoingMessage(q, color.encode(), properties={"color": color}))
    with client.consumer(q, credit=2, selector="color = 'red'") as consumer:
        got = [consumer.receive(timeout=10), consumer.receive(timeout=10)]
        assert all(d is not None and d.message.body == b"red" for d in got)
        assert consumer.receive(timeout=0.5) is None, "delivered beyond the credit"
        consumer.grant(1)
        third = consumer.receive(timeout=10)
        assert third is not None and third.message.body == b"red"
        consumer.ack(*[d for d in got if d], third)
    assert [m.message.body for m in client.admin.browse(q)] == [b"blue"]
    with pytest.raises(errors.InvalidArgument, match="INVALID_ARGUMENT"):
        client.consumer(q, selector="color = = 'red'")


def test_nack_retry_after_release_and_dead_letter(client: rebound.Client) -> None:
    q = queue(client)
    client.send(OutgoingMessage(q, b"job"))
    with client.consumer(q) as consumer:
        d = consumer.receive(timeout=10)
        assert d is not None
        consumer.release(d)
        d = consumer.receive(timeout=10)
        assert d is not None and d.delivery_count == 1, "a release counted as an attempt"
        nacked_at = time.monotonic()
        consumer.nack(d, reason="db slow", retry_after=0.5)
        d = consumer.receive(timeout=10)
        assert d is not None and d.delivery_count == 2 and d.redelivered
        assert time.monotonic() - nacked_at >= 0.45
        consumer.dead_letter(d, reason="bad schema")
        consumer.flush()
    dead = [m for m in client.admin.browse("DLQ", selector=f"_AMQ_ORIG_QUEUE = '{q}'")]
    assert len(dead) == 1
    assert dead[0].message.properties["_REBOUND_DEAD_LETTER_REASON"].string == "rejected: bad schema"


def test_nack_pausing_the_queue(client: rebound.Client) -> None:
    q = queue(client)
    client.send(OutgoingMessage(q, b"job"))
    with client.consumer(q) as consumer:
        d = consumer.receive(timeout=10)
        assert d is not None
        consumer.nack(d, reason="db down", pause_queue=1.0)
        consumer.flush()
        info = client.admin.queue(q)
        assert info.outage
        assert consumer.receive(timeout=0.5) is None, "delivered during the pause"
        d = consumer.receive(timeout=10)
        assert d is not None and d.delivery_count == 1, "the outage counted an attempt"
        consumer.ack(d)


def test_transactions(client: rebound.Client) -> None:
    q, out = queue(client), queue(client, "out")
    client.send(OutgoingMessage(q, b"in"))
    with client.session() as session, client.consumer(q) as consumer:
        d = consumer.receive(timeout=10)
        assert d is not None
        tx = session.begin()
        tx.send(OutgoingMessage(out, b"result"))
        consumer.ack_in(tx, d)
        assert client.admin.queue(out).messages == 0, "a transactional send is visible before commit"
        tx.rollback()
        d = consumer.receive(timeout=10)
        assert d is not None and d.delivery_count == 2
        tx = session.begin()
        tx.send([OutgoingMessage(out, b"result")])
        consumer.ack_in(tx, d)
        committed = tx.commit()
        assert (committed.sent, committed.acked) == (1, 1)
        with pytest.raises(errors.StatusError) as refused:
            tx.commit()
        assert refused.value.code.name in ("NOT_FOUND", "FAILED_PRECONDITION")
    assert client.admin.queue(q).messages == 0
    assert client.admin.queue(out).messages == 1


def test_admin_basics(client: rebound.Client) -> None:
    name = unique("admin")
    assert client.admin.create_address(name, rebound.MULTICAST)
    client.admin.create_queue(name, name + ".a", rebound.MULTICAST)
    client.admin.create_queue(name, name + ".b", rebound.MULTICAST)
    client.send(OutgoingMessage(name, b"fan", properties={"n": 1}))
    assert {q.name for q in client.admin.list_queues()} >= {name + ".a", name + ".b"}
    assert client.admin.address(name).messages == 2
    assert client.admin.count_messages(name + ".a", "n = 1") == 1
    assert client.admin.purge(name + ".a") == 1
    assert client.admin.move_messages(name + ".b", "DLQ") == 1
    keys = {s.key for s in client.admin.settings(name)}
    assert "max-delivery-attempts" in keys
    assert client.admin.server_info().version
    client.admin.delete_address(name, force=True)
    with pytest.raises(errors.NotFound) as missing:
        client.admin.queue(name + ".a")
    assert missing.value.code.name == "NOT_FOUND"
    assert str(missing.value).endswith("(NOT_FOUND)") and name in str(missing.value)


def test_errors_carry_the_broker_message(client: rebound.Client) -> None:
    with pytest.raises(errors.InvalidArgument) as bad:
        client.send(OutgoingMessage("", b"x"))
    assert "address" in bad.value.message
    with pytest.raises(errors.InvalidArgument, match="_AMQ_"):
        client.send(OutgoingMessage(unique("x"), b"x", properties={"_AMQ_MINE": 1}))


def test_connect_errors() -> None:
    with pytest.raises(errors.ConnectError, match="cannot connect to http://127.0.0.1:1"):
        rebound.Client("127.0.0.1:1", connect_timeout=1)
    with pytest.raises(errors.TlsError, match="TLS needs the CA certificate"):
        rebound.Client("https://127.0.0.1:1")
    with pytest.raises(errors.InvalidUrl, match="unsupported scheme"):
        rebound.Client("grpc://127.0.0.1:1")
    with pytest.raises(errors.CredentialsError):
        rebound.Client("127.0.0.1:1", user="a:b", password="x")


def test_dead_letter_failures_are_json(client: rebound.Client) -> None:
    q = queue(client)
    client.send(OutgoingMessage(q, b"poison"))
    with client.consumer(q) as consumer:
        for attempt in range(3):
            d = consumer.receive(timeout=10)
            assert d is not None and d.delivery_count == attempt + 1
            consumer.nack(d, reason=f"failure {attempt + 1}")
        consumer.flush()
    wait_for(lambda: client.admin.count_messages("DLQ", f"_AMQ_ORIG_QUEUE = '{q}'") == 1, what="the dead letter")
    [dead] = client.admin.browse("DLQ", selector=f"_AMQ_ORIG_QUEUE = '{q}'")
    failures = json.loads(dead.message.properties["_REBOUND_FAILURES"].string)
    assert "failure 3" in json.dumps(failures)
