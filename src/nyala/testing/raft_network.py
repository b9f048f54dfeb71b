"""Several Raft replicas in one event loop, joined by an in-memory network on a virtual clock.

:class:`LocalRaftNetwork` hands out :class:`LocalRaftTransport` objects, one per "server".
A replica registers with its transport as it would with the real one, but the messages it
sends never touch a socket: each is handed, in a later turn of the same event loop, to the
replica of its group on the recipient's transport (the Raft message objects themselves, not
their encoding).  Nothing ticks on its own: :meth:`LocalRaftNetwork.tick` advances the one
shared clock by one tick for every replica, and :meth:`LocalRaftNetwork.settle` waits until
every delivery has arrived and every replica's pipeline is idle (durable, applied), so that
the clock never outruns the disk however slow the machine is.  Elections, heartbeats and
timeouts therefore happen after the same number of ticks in every run; only the real WAL
and metadata writes (in temporary directories) take wall-clock time.

Links can be cut and restored (:meth:`LocalRaftNetwork.cut`, :meth:`LocalRaftNetwork.isolate`,
:meth:`LocalRaftNetwork.heal`) to model crashed or partitioned servers.  A message to a
server that has no replica of its group is dropped and reported to the sender's
``on_unknown_group``, as the real transport does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from nyala.common.hostport import HostPort
from nyala.consensus.core import Message
from nyala.consensus.runtime import RaftEndpoint, RaftReplica, RaftTransport
from nyala.errors import InvalidArgument, TimedOut
from nyala.rpc import Messenger, RpcServer

__all__ = ["LocalRaftNetwork", "LocalRaftTransport"]


class LocalRaftTransport(RaftTransport):
    """A :class:`RaftTransport` whose messages go through a :class:`LocalRaftNetwork`."""

    def __init__(self, network: LocalRaftNetwork, uuid: str) -> None:
        # The base class only needs the messenger and the RPC server to send and to receive
        # Deliver calls, which this transport never does: neither is ever started.
        super().__init__(uuid, HostPort("127.0.0.1", 1), Messenger(), RpcServer())
        self._network = network
        self.endpoints: dict[str, RaftEndpoint] = {}

    def register(self, endpoint: RaftEndpoint) -> None:
        super().register(endpoint)
        self.endpoints[endpoint.group_id] = endpoint

    def unregister(self, group_id: str) -> None:
        super().unregister(group_id)
        self.endpoints.pop(group_id, None)

    def start(self) -> None:
        """Nothing to start: the network's virtual clock ticks the replicas."""

    def send(self, messages: Sequence[Message]) -> None:
        for message in messages:
            self._network.post(self.uuid, message)


class LocalRaftNetwork:
    """In-memory links between transports, a shared virtual clock, and a way to wait for quiet."""

    def __init__(self) -> None:
        self.transports: dict[str, LocalRaftTransport] = {}
        self._cut: set[tuple[str, str]] = set()
        self._in_flight = 0
        self._now_tick = 0
        #: Messages delivered and dropped (cut links, unknown groups), for tests to look at.
        self.delivered = 0
        self.dropped = 0

    def transport(self, uuid: str) -> LocalRaftTransport:
        """The transport of server ``uuid`` (made on first use)."""
        if not uuid:
            raise InvalidArgument("a server needs a non-empty uuid")
        transport = self.transports.get(uuid)
        if transport is None:
            transport = self.transports[uuid] = LocalRaftTransport(self, uuid)
        return transport

    # -- links ------------------------------------------------------------------------------

    def cut(self, a: str, b: str) -> None:
        """Drop every message between servers ``a`` and ``b``, both ways."""
        self._cut.update({(a, b), (b, a)})

    def isolate(self, uuid: str) -> None:
        """Cut ``uuid`` off from every other server (as if it had crashed)."""
        for other in self.transports:
            if other != uuid:
                self.cut(uuid, other)

    def heal(self) -> None:
        """Restore every link."""
        self._cut.clear()

    def post(self, sender: str, message: Message) -> None:
        if (sender, message.recipient) in self._cut:
            self.dropped += 1
            return
        self._in_flight += 1
        asyncio.get_running_loop().call_soon(self._deliver, sender, message)

    def _deliver(self, sender: str, message: Message) -> None:
        self._in_flight -= 1
        if (sender, message.recipient) in self._cut:  # cut while the message was on its way
            self.dropped += 1
            return
        target = self.transports.get(message.recipient)
        endpoint = target.endpoints.get(message.group_id) if target is not None else None
        if endpoint is None:
            self.dropped += 1
            source = self.transports.get(sender)
            if source is not None and source.on_unknown_group is not None:
                source.on_unknown_group(message.recipient, message.group_id)
            return
        self.delivered += 1
        endpoint.receive(message)

    # -- time -------------------------------------------------------------------------------

    @property
    def now_tick(self) -> int:
        return self._now_tick

    def _endpoints(self) -> list[RaftEndpoint]:
        return [e for t in self.transports.values() for e in t.endpoints.values()]

    def tick(self) -> None:
        """Advance the shared clock by one tick for every registered replica."""
        self._now_tick += 1
        for endpoint in self._endpoints():
            endpoint.tick(self._now_tick)

    def quiet(self) -> bool:
        """No message on its way and no replica with work under way."""
        if self._in_flight:
            return False
        return not any(isinstance(e, RaftReplica) and e.busy for e in self._endpoints())

    async def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until :meth:`quiet` holds twice in a row across an event-loop turn."""
        async with asyncio.timeout(timeout_s):
            calm = 0
            while calm < 2:
                await asyncio.sleep(0)
                calm = calm + 1 if self.quiet() else 0
                if not calm:
                    await asyncio.sleep(0.0005)  # the disk works on other threads

    async def run_until(self, condition: Callable[[], bool], max_ticks: int = 1000, what: str = "") -> int:
        """Tick and settle until ``condition`` holds; return the ticks it took.

        TimedOut after ``max_ticks`` ticks (a bound in virtual time, not in seconds).
        """
        await self.settle()
        for ticks in range(max_ticks + 1):
            if condition():
                return ticks
            self.tick()
            await self.settle()
        raise TimedOut(f"{what or 'condition'} did not hold within {max_ticks} ticks")
