"""The asyncio client: the same names as the blocking one in `rebound`, awaitable."""

from rebound.aio._admin import ANYCAST, MULTICAST, Admin
from rebound.aio._client import Client
from rebound.aio._consumer import Consumer
from rebound.aio._publisher import Publisher, PublisherOptions
from rebound.aio._session import Session, Transaction

__all__ = [
    "ANYCAST",
    "MULTICAST",
    "Admin",
    "Client",
    "Consumer",
    "Publisher",
    "PublisherOptions",
    "Session",
    "Transaction",
]
