"""Raft messages between servers: one coalesced ``Deliver`` call per destination.

One :class:`RaftTransport` serves every replica of a process.  Replicas hand it the messages
of their Readies when the driver contract allows (a leader's AppendEntries at once, before its
own fsync; votes and acknowledgements only once durable); it groups them by destination
server and sends each group as one ``ConsensusService.Deliver`` call, whatever tablets they
belong to.  All replicas are ticked by one timer, so the heartbeats of every tablet leave in
the same event-loop turn and share one call per peer (Kudu's KUDU-1973 batching).

At most ``max_inflight_delivers`` calls are outstanding per destination; messages produced
meanwhile wait and leave together in the next call.  A failed call drops its messages: Raft
tolerates lost messages and the next heartbeat or retry repairs the gap.

Incoming calls are handled inline (no task per call): each message is stepped into its
replica's core, which only queues work for that replica's drive loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from nyala.common.hostport import HostPort
from nyala.consensus.core import Message
from nyala.consensus.runtime.codec import decode_message, encode_message
from nyala.consensus.runtime.metrics import RaftMetrics
from nyala.errors import InvalidArgument, NyalaError
from nyala.proto import common_pb2
from nyala.proto import consensus_rpc_pb2 as cpb
from nyala.rpc import Buffer, CallContext, Messenger, RpcServer
from nyala.services import DELIVER

__all__ = ["PeerDirectory", "RaftEndpoint", "RaftTransport"]

log = logging.getLogger("nyala.consensus")


class RaftEndpoint(Protocol):
    """What the transport needs of a replica."""

    @property
    def group_id(self) -> str: ...

    def receive(self, message: Message) -> None: ...

    def tick(self, now_tick: int | None = None) -> None: ...


class PeerDirectory:
    """Where each server (by permanent uuid) can be reached; learned from the master and from peers."""

    def __init__(self) -> None:
        self._addresses: dict[str, HostPort] = {}

    def learn(self, uuid: str, address: HostPort) -> None:
        if uuid and address.port:
            self._addresses[uuid] = address

    def get(self, uuid: str) -> HostPort | None:
        return self._addresses.get(uuid)

    def known(self) -> dict[str, HostPort]:
        return dict(self._addresses)


class _Outgoing:
    """The messages waiting for one destination, and the entry payloads they carry as sidecars."""

    __slots__ = ("messages", "sidecars")

    def __init__(self) -> None:
        self.messages: list[cpb.RaftMessagePB] = []
        self.sidecars: list[Buffer] = []


class RaftTransport:
    """Coalesces outgoing Raft messages per destination server and dispatches incoming ones."""

    def __init__(
        self,
        uuid: str,
        address: HostPort,
        messenger: Messenger,
        rpc_server: RpcServer,
        *,
        directory: PeerDirectory | None = None,
        tick_interval_ms: int = 100,
        deliver_timeout_s: float = 5.0,
        max_inflight_delivers: int = 2,
        metrics: RaftMetrics | None = None,
    ) -> None:
        """``metrics``: where the process's replicas count (a server's registry); by default nowhere exported."""
        self.uuid = uuid
        self.metrics = metrics or RaftMetrics()
        self.address = address
        self.directory = directory or PeerDirectory()
        self._messenger = messenger
        self._tick_interval_s = tick_interval_ms / 1000
        self._deliver_timeout_s = deliver_timeout_s
        self._max_inflight = max_inflight_delivers
        self._endpoints: dict[str, RaftEndpoint] = {}
        self._outbox: dict[str, _Outgoing] = {}
        self._inflight: dict[str, int] = {}
        self._flush_scheduled = False
        self._ticker: asyncio.TimerHandle | None = None
        # One clock for every replica, so leaders send their periodic heartbeats on the same
        # ticks and the transport carries them to each peer in one call.
        self._tick_count = 0
        self._tasks: set[asyncio.Task[None]] = set()
        #: Deliver calls sent and Raft messages in them (coalescing shows as messages >> calls).
        self.delivers_sent = 0
        self.messages_sent = 0
        #: Called with (peer uuid, group id) when a peer says it does not host a group.
        self.on_unknown_group: Callable[[str, str], None] | None = None
        rpc_server.add_method(DELIVER, self._on_deliver)

    # -- registration and ticking --------------------------------------------------------

    def register(self, endpoint: RaftEndpoint) -> None:
        if endpoint.group_id in self._endpoints:
            raise InvalidArgument(f"Raft group {endpoint.group_id} is already registered")
        self._endpoints[endpoint.group_id] = endpoint

    def unregister(self, group_id: str) -> None:
        self._endpoints.pop(group_id, None)

    def registered(self) -> list[RaftEndpoint]:
        """The replicas registered now."""
        return list(self._endpoints.values())

    def start(self) -> None:
        """Start ticking every registered replica once per tick interval."""
        if self._ticker is None:
            self._ticker = asyncio.get_running_loop().call_later(self._tick_interval_s, self._tick_all)

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _tick_all(self) -> None:
        loop = asyncio.get_running_loop()
        self._ticker = loop.call_later(self._tick_interval_s, self._tick_all)
        self._tick_count += 1
        for endpoint in list(self._endpoints.values()):
            try:
                endpoint.tick(self._tick_count)
            except Exception:  # one broken replica must not stop the others' clocks
                log.exception("tick of Raft group %s failed", endpoint.group_id)

    # -- outgoing ---------------------------------------------------------------------------

    def send(self, messages: Sequence[Message]) -> None:
        """Queue messages the contract allows to leave now; they go at the end of this event-loop turn."""
        if not messages:
            return
        outbox = self._outbox
        for m in messages:
            outgoing = outbox.get(m.recipient)
            if outgoing is None:
                outgoing = outbox[m.recipient] = _Outgoing()
            outgoing.messages.append(encode_message(m, outgoing.sidecars))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        for dest in list(self._outbox):
            if self._inflight.get(dest, 0) >= self._max_inflight:
                continue  # leaves when a call to dest returns
            batch = self._outbox.pop(dest)
            address = self.directory.get(dest)
            if address is None:
                log.debug("dropping %d Raft messages to %s: address unknown", len(batch.messages), dest)
                continue
            self._inflight[dest] = self._inflight.get(dest, 0) + 1
            self.delivers_sent += 1
            self.messages_sent += len(batch.messages)
            task = asyncio.get_running_loop().create_task(self._deliver(dest, address, batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _deliver(self, dest: str, address: HostPort, batch: _Outgoing) -> None:
        request = cpb.DeliverRequestPB(
            sender_uuid=self.uuid,
            sender_address=common_pb2.HostPortPB(host=self.address.host, port=self.address.port),
            dest_uuid=dest,
            messages=batch.messages,
        )
        try:
            response = await self._messenger.call(
                address, DELIVER, request, timeout=self._deliver_timeout_s, sidecars=batch.sidecars
            )
            if response.unknown_groups and self.on_unknown_group is not None:
                for group_id in response.unknown_groups:
                    self.on_unknown_group(dest, group_id)
        except NyalaError as exc:
            log.debug("dropped %d Raft messages to %s at %s: %s", len(batch.messages), dest, address, exc)
        finally:
            self._inflight[dest] -= 1
            if self._outbox.get(dest) and not self._flush_scheduled:
                self._flush_scheduled = True
                asyncio.get_running_loop().call_soon(self._flush)

    # -- incoming ---------------------------------------------------------------------------

    def _on_deliver(self, request: cpb.DeliverRequestPB, ctx: CallContext) -> cpb.DeliverResponsePB:
        if request.dest_uuid != self.uuid:
            raise InvalidArgument(
                f"Raft messages for server {request.dest_uuid!r} reached server {self.uuid!r} (stale address?)"
            )
        if request.sender_address.port:
            self.directory.learn(
                request.sender_uuid, HostPort(request.sender_address.host, request.sender_address.port)
            )
        # Validate everything before stepping anything: a bad call changes nothing.
        decoded = []
        for pb in request.messages:
            if pb.recipient != self.uuid:
                raise InvalidArgument(f"Raft message for peer {pb.recipient!r} reached server {self.uuid!r}")
            decoded.append(decode_message(pb, ctx.request_sidecars))
        unknown: set[str] = set()
        for message in decoded:
            endpoint = self._endpoints.get(message.group_id)
            if endpoint is None:
                unknown.add(message.group_id)
            else:
                endpoint.receive(message)
        return cpb.DeliverResponsePB(unknown_groups=sorted(unknown))
