"""The messages the client sends and receives, as plain Python objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rebound.errors import ProtocolError
from rebound.v1 import messaging_pb2 as pb

#: A message property's value: the broker's typed values (string, int64, double,
#: bool, bytes) as Python's.
PropertyValue = str | int | float | bool | bytes

#: The property that puts a message in a group (Artemis's `_AMQ_GROUP_ID`).
GROUP_ID = "_AMQ_GROUP_ID"


def _property_to_proto(value: PropertyValue) -> pb.PropertyValue:
    # bool before int: a bool is an int in Python.
    if isinstance(value, bool):
        return pb.PropertyValue(bool=value)
    if isinstance(value, int):
        return pb.PropertyValue(int=value)
    if isinstance(value, float):
        return pb.PropertyValue(double=value)
    if isinstance(value, str):
        return pb.PropertyValue(string=value)
    if isinstance(value, bytes):
        return pb.PropertyValue(bytes=value)
    raise TypeError(f"a property value must be str, int, float, bool or bytes, not {type(value).__name__}")


def _property_from_proto(value: pb.PropertyValue) -> PropertyValue:
    kind = value.WhichOneof("value")
    if kind is None:
        raise ProtocolError("the broker sent a property without a value")
    result: PropertyValue = getattr(value, kind)
    return result


@dataclass
class OutgoingMessage:
    """One message to send.

    `durable` messages are on disk before their send returns. `priority` is 0
    (lowest) to 9, 4 by default. Times are milliseconds since the Unix epoch:
    `expiration_ms` (0 or None: never), `deliver_at_ms` (scheduled delivery), or
    `delay_ms` from when the broker receives it. The broker stores a message with
    a `duplicate_id` its address remembers only once. `group` puts it in a message
    group: a queue delivers a group's messages one at a time, in order.
    """

    address: str
    body: bytes = b""
    properties: Mapping[str, PropertyValue] = field(default_factory=dict)
    durable: bool = True
    priority: int | None = None
    expiration_ms: int | None = None
    deliver_at_ms: int | None = None
    delay_ms: int | None = None
    duplicate_id: str | None = None
    group: str | None = None

    def to_proto(self) -> pb.OutgoingMessage:
        """The message as the broker's protocol has it."""
        message = pb.OutgoingMessage(
            address=self.address,
            body=self.body,
            durable=self.durable,
            priority=self.priority,
            expiration_ms=self.expiration_ms,
            deliver_at_ms=self.deliver_at_ms,
            delay_ms=self.delay_ms,
            duplicate_id=self.duplicate_id,
        )
        for key, value in self.properties.items():
            message.properties[key].CopyFrom(_property_to_proto(value))
        if self.group is not None:
            message.properties[GROUP_ID].CopyFrom(_property_to_proto(self.group))
        return message


@dataclass(frozen=True)
class Message:
    """A message as the broker hands it to a consumer."""

    message_id: int
    address: str
    body: bytes
    properties: dict[str, PropertyValue]
    durable: bool
    timestamp_ms: int
    priority: int
    expiration_ms: int

    @classmethod
    def from_proto(cls, m: pb.Message) -> Message:
        return cls(
            message_id=m.message_id,
            address=m.address,
            body=m.body,
            properties={k: _property_from_proto(v) for k, v in m.properties.items()},
            durable=m.durable,
            timestamp_ms=m.timestamp_ms,
            priority=m.priority,
            expiration_ms=m.expiration_ms,
        )


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message to a consumer; settle it by passing it (or its
    `id`) to the consumer's `ack`, `nack`, `release` or `dead_letter`."""

    id: int
    message: Message
    #: 1 on the first delivery, incremented by every failed attempt (JMSXDeliveryCount).
    delivery_count: int
    #: Whether the message was delivered before (`delivery_count > 1`).
    redelivered: bool
    queue: str

    @classmethod
    def from_proto(cls, d: pb.Delivery) -> Delivery:
        if not d.HasField("message"):
            raise ProtocolError("the broker sent a delivery without its message")
        return cls(
            id=d.delivery_id,
            message=Message.from_proto(d.message),
            delivery_count=d.delivery_count,
            redelivered=d.redelivered,
            queue=d.queue,
        )


@dataclass(frozen=True)
class SendResult:
    """What became of a batch sent together."""

    #: The id the broker gave each message, in order (for a duplicate or a message
    #: its full address dropped: an id that names nothing stored).
    message_ids: list[int]
    #: Messages that found no queue on their address and were dropped.
    unrouted: int
    #: Per message, whether its address remembered its duplicate id (not stored
    #: again); empty when none was.
    duplicates: list[bool]

    @classmethod
    def from_proto(cls, r: pb.SendResponse) -> SendResult:
        return cls(message_ids=list(r.message_ids), unrouted=r.unrouted, duplicates=list(r.duplicates))

    def only_id(self) -> int:
        """The id of a one-message send."""
        if len(self.message_ids) != 1:
            raise ProtocolError(f"one message sent, {len(self.message_ids)} ids returned")
        return self.message_ids[0]
