"""rebound-client: the Python client and worker library of the rebound broker.

`rebound.Client` blocks; `rebound.aio.Client` is the same for asyncio. A
`rebound.Worker` runs handler functions per queue. Failures raise the exceptions
of `rebound.errors`, which carry the broker's message.
"""

from rebound import errors
from rebound._connection import DEFAULT_URL
from rebound._messages import Delivery, Message, OutgoingMessage, PropertyValue, SendResult
from rebound._sync import Admin, Client, Consumer, Publisher, Session, Transaction
from rebound.aio import ANYCAST, MULTICAST, PublisherOptions
from rebound.worker import DependencyDown, Job, Permanent, TemporarilyUnavailable, Worker, WorkerStats

__all__ = [
    "ANYCAST",
    "DEFAULT_URL",
    "MULTICAST",
    "Admin",
    "Client",
    "Consumer",
    "Delivery",
    "DependencyDown",
    "Job",
    "Message",
    "OutgoingMessage",
    "Permanent",
    "PropertyValue",
    "Publisher",
    "PublisherOptions",
    "SendResult",
    "Session",
    "TemporarilyUnavailable",
    "Transaction",
    "Worker",
    "WorkerStats",
    "errors",
]
