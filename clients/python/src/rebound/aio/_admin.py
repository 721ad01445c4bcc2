"""Management calls: addresses, queues, their counters, browsing, dead-letter retry.

Answers are the protocol's own messages (`rebound.v1.admin_pb2`), documented
field by field in protocol/proto/rebound/v1/admin.proto.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import grpc

from rebound._connection import Metadata
from rebound.errors import from_rpc_error
from rebound.v1 import admin_pb2 as pb

if TYPE_CHECKING:
    # Only in the generated type stubs: the runtime stub serves both kinds of channel.
    from rebound.v1.admin_pb2_grpc import AdminAsyncStub

_T = TypeVar("_T")

RoutingType: TypeAlias = pb.RoutingType.ValueType
ANYCAST: RoutingType = pb.ROUTING_TYPE_ANYCAST
MULTICAST: RoutingType = pb.ROUTING_TYPE_MULTICAST


def _selection(queue: str, selector: str, message_id: int | None) -> pb.MessageSelection:
    return pb.MessageSelection(queue=queue, filter=selector, message_id=message_id)


class Admin:
    """The broker's management API, as `client.admin`."""

    def __init__(self, stub: AdminAsyncStub, metadata: Metadata) -> None:
        self._stub = stub
        self._metadata = metadata

    async def _call(self, method: Callable[..., Awaitable[_T]], request: object) -> _T:
        try:
            return await method(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            raise from_rpc_error(e) from None

    async def create_address(self, name: str, routing_type: RoutingType = pb.ROUTING_TYPE_UNSPECIFIED) -> bool:
        """Creates an address; False if it existed already as asked."""
        request = pb.CreateAddressRequest(name=name, routing_type=routing_type)
        return (await self._call(self._stub.CreateAddress, request)).created

    async def delete_address(self, name: str, *, force: bool = False) -> None:
        """Deletes an address; `force` deletes its queues and their messages too."""
        await self._call(self._stub.DeleteAddress, pb.DeleteAddressRequest(name=name, force=force))

    async def create_queue(
        self,
        address: str,
        queue: str,
        routing_type: RoutingType = pb.ROUTING_TYPE_UNSPECIFIED,
        *,
        durable: bool = True,
    ) -> pb.QueueInfo:
        """Creates a queue bound to `address` (created if it does not exist)."""
        request = pb.CreateQueueRequest(address=address, queue=queue, routing_type=routing_type, durable=durable)
        return (await self._call(self._stub.CreateQueue, request)).queue

    async def delete_queue(self, queue: str) -> None:
        await self._call(self._stub.DeleteQueue, pb.DeleteQueueRequest(queue=queue))

    async def list_queues(self) -> list[pb.QueueInfo]:
        """Every queue with its counters, sorted by name (following the pages)."""
        queues: list[pb.QueueInfo] = []
        token = ""
        while True:
            page = await self._call(self._stub.ListQueues, pb.ListQueuesRequest(page_token=token))
            queues.extend(page.queues)
            token = page.next_page_token
            if not token:
                return queues

    async def queue(self, name: str) -> pb.QueueInfo:
        """One queue and its counters."""
        return (await self._call(self._stub.GetQueue, pb.GetQueueRequest(queue=name))).queue

    async def browse(self, queue: str, limit: int = 200, selector: str = "") -> list[pb.BrowsedMessage]:
        """Reads messages without consuming them or touching their delivery counts."""
        request = pb.BrowseQueueRequest(queue=queue, limit=limit, filter=selector)
        return list((await self._call(self._stub.BrowseQueue, request)).messages)

    async def purge(self, queue: str) -> int:
        """Removes every message not being delivered; returns how many."""
        return (await self._call(self._stub.PurgeQueue, pb.PurgeQueueRequest(queue=queue))).removed

    async def count_messages(self, queue: str, selector: str = "", message_id: int | None = None) -> int:
        request = pb.CountMessagesRequest(selection=_selection(queue, selector, message_id))
        return (await self._call(self._stub.CountMessages, request)).count

    async def remove_messages(self, queue: str, selector: str = "", message_id: int | None = None) -> int:
        request = pb.RemoveMessagesRequest(selection=_selection(queue, selector, message_id))
        return (await self._call(self._stub.RemoveMessages, request)).removed

    async def move_messages(
        self, queue: str, to_address: str, selector: str = "", message_id: int | None = None
    ) -> int:
        request = pb.MoveMessagesRequest(selection=_selection(queue, selector, message_id), to_address=to_address)
        return (await self._call(self._stub.MoveMessages, request)).moved

    async def retry_messages(
        self,
        queue: str,
        selector: str = "",
        message_id: int | None = None,
        *,
        dry_run: bool = False,
        rate_per_second: int = 0,
        limit: int | None = None,
    ) -> pb.RetryMessagesResponse:
        """Sends dead letters back to exactly the queue each failed on."""
        request = pb.RetryMessagesRequest(
            selection=_selection(queue, selector, message_id),
            dry_run=dry_run,
            rate_per_second=rate_per_second,
            limit=limit,
        )
        return await self._call(self._stub.RetryMessages, request)

    async def settings(self, address: str) -> list[pb.SettingValue]:
        """The effective address-settings of an address and where each came from."""
        return list((await self._call(self._stub.GetSettings, pb.GetSettingsRequest(address=address))).settings)

    async def server_info(self) -> pb.GetServerInfoResponse:
        return await self._call(self._stub.GetServerInfo, pb.GetServerInfoRequest())

    async def list_addresses(self) -> list[pb.AddressInfo]:
        """Every address with its queues' names and summed gauges (following the pages)."""
        addresses: list[pb.AddressInfo] = []
        token = ""
        while True:
            page = await self._call(self._stub.ListAddresses, pb.ListAddressesRequest(page_token=token))
            addresses.extend(page.addresses)
            token = page.next_page_token
            if not token:
                return addresses

    async def address(self, name: str) -> pb.AddressInfo:
        return (await self._call(self._stub.GetAddress, pb.GetAddressRequest(name=name))).address
