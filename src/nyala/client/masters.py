"""Finding the leader master and calling it, following hints and retrying within a deadline.

Discovery asks every known master ``ConnectToMaster`` at once and takes the first that
answers LEADER.  When none does, a ``leader_address`` hint from a follower is tried; when
there is no leader yet (an election is running), the round is repeated with backoff until
the deadline.  Concurrent callers share one discovery.

The leader's answer lists the masters of now (added or removed ones included): the client
asks those from then on.  While a leader is cached, a successful call at most every
``MASTERS_REFRESH_S`` also asks it ConnectToMaster in the background, so a client that never
loses its leader still learns of masters added and removed meanwhile, before it needs them.

A catalog call goes to the cached leader.  NOT_THE_LEADER with a hint (a master's RPC
address) moves the cache there; SERVICE_UNAVAILABLE (a new leader still loading its catalog)
waits and retries; a network error or a timed-out attempt forgets the leader and discovers
it again.  Every one of those is retried until the operation's deadline.

A call retried after a network error or a timed-out attempt may have taken effect the first
time; :class:`CallTracker` records that, so DDL can tell "the table exists because my own
earlier attempt created it" from a real conflict.

Follower reads (``master_read_staleness_ms`` > 0): :meth:`MasterProxy.read` sends catalog
reads with that bound to the masters in turn (round robin, so the load spreads over all of
them); a master that cannot prove its catalog that fresh refuses with NotTheLeader, and the
next one is tried.  A follower's NotFound is checked with the leader (the table may be newer
than the follower's catalog).  For one bound after the client's own call to the leader (DDL),
reads go to the leader, so the client always sees its own changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import Sequence
from typing import TypeVar

from nyala.common.hostport import HostPort, parse_address
from nyala.errors import (
    InvalidArgument,
    NetworkError,
    NotFound,
    NotTheLeader,
    NyalaError,
    ServiceUnavailable,
    TimedOut,
)
from nyala.proto import common_pb2
from nyala.proto import master_pb2 as mpb
from nyala.rpc import Messenger
from nyala.rpc.method import RequestT, ResponseT, RpcMethod
from nyala.services import CONNECT_TO_MASTER

from ._retry import Backoff, Deadline
from .info import role_name
from .options import ClientOptions

__all__ = ["MASTERS_REFRESH_S", "CallTracker", "MasterProxy"]


#: The catalog reads a follower master may answer: each carries the staleness bound.
ReadRequestT = TypeVar(
    "ReadRequestT",
    mpb.ListTablesRequestPB,
    mpb.GetTableSchemaRequestPB,
    mpb.GetTableLocationsRequestPB,
    mpb.GetTabletLocationsRequestPB,
    mpb.ListTabletServersRequestPB,
)

log = logging.getLogger("nyala.client")

#: How often a client that keeps its leader asks it for the current masters.
MASTERS_REFRESH_S = 2.0


@dataclasses.dataclass(slots=True)
class CallTracker:
    """Filled in by :meth:`MasterProxy.call`: whether an attempt's outcome was unknown."""

    ambiguous: bool = False
    attempts: int = 0


class MasterProxy:
    """The client's view of the masters: who leads, and how to reach it."""

    def __init__(
        self,
        addresses: Sequence[HostPort],
        messenger: Messenger,
        options: ClientOptions,
        rng: random.Random,
    ) -> None:
        if not addresses:
            raise InvalidArgument("at least one master address is needed")
        self.addresses = list(dict.fromkeys(addresses))
        self._messenger = messenger
        self._options = options
        self._rng = rng
        self.leader: HostPort | None = None
        self.cluster_id = ""
        self.client_location = ""
        self._discovery: asyncio.Task[HostPort] | None = None
        #: The last answer (a role or an error) of every master asked during discovery.
        self._outcomes: dict[str, str] = {}
        #: Follower reads: the master the last read went to, and until when (loop time) reads
        #: go to the leader because this client just changed the catalog there.
        self._next_read = rng.randrange(len(self.addresses))
        self._leader_reads_until = 0.0
        self._refreshed_at = 0.0
        self._refresh: asyncio.Task[None] | None = None

    async def find_leader(self, deadline: Deadline) -> HostPort:
        """The leader master's address (cached, or discovered now)."""
        while self.leader is None:
            if self._discovery is None or self._discovery.done():
                self._discovery = asyncio.get_running_loop().create_task(self._discover(deadline))
                self._discovery.add_done_callback(lambda t: t.cancelled() or t.exception())
            try:
                async with asyncio.timeout(deadline.remaining()):
                    return await asyncio.shield(self._discovery)
            except TimeoutError:
                raise self._no_leader() from None
            except TimedOut:
                # Another caller's shorter deadline ended the shared discovery; ours may go on.
                if deadline.expired:
                    raise
        return self.leader

    async def _discover(self, deadline: Deadline) -> HostPort:
        backoff = Backoff(self._options, self._rng)
        while True:
            leader = await self._discovery_round(deadline, self._outcomes)
            if leader is not None:
                self.leader = leader
                return leader
            try:
                await backoff.wait(deadline)
            except TimedOut:
                raise self._no_leader() from None

    def _no_leader(self) -> TimedOut:
        detail = "; ".join(f"{a}: {o}" for a, o in self._outcomes.items()) or "no master answered yet"
        return TimedOut(f"no leader master found among {', '.join(map(str, self.addresses))} in time ({detail})")

    async def _discovery_round(self, deadline: Deadline, outcomes: dict[str, str]) -> HostPort | None:
        timeout = max(1e-3, deadline.attempt_timeout(self._options))
        tasks = [asyncio.ensure_future(self._probe(a, timeout)) for a in self.addresses]
        hints: list[str] = []
        try:
            for next_done in asyncio.as_completed(tasks):
                address, outcome = await next_done
                if isinstance(outcome, NyalaError):
                    outcomes[str(address)] = f"{type(outcome).__name__}: {outcome}"
                    continue
                outcomes[str(address)] = role_name(outcome.role)
                if outcome.role == common_pb2.LEADER:
                    self._learn(outcome)
                    return address
                if outcome.leader_address:
                    hints.append(outcome.leader_address)
        finally:
            for task in tasks:
                task.cancel()
        return await self._try_hints(hints, deadline)

    async def _try_hints(self, hints: list[str], deadline: Deadline) -> HostPort | None:
        for hint in dict.fromkeys(hints):
            address = _parse_hint(hint)
            if address is None:
                continue
            _, outcome = await self._probe(address, max(1e-3, deadline.attempt_timeout(self._options)))
            if not isinstance(outcome, NyalaError) and outcome.role == common_pb2.LEADER:
                self._learn(outcome)
                return address
        return None

    async def _probe(
        self, address: HostPort, timeout: float
    ) -> tuple[HostPort, mpb.ConnectToMasterResponsePB | NyalaError]:
        try:
            request = mpb.ConnectToMasterRequestPB()
            return address, await self._messenger.call(address, CONNECT_TO_MASTER, request, timeout=timeout)
        except NyalaError as exc:
            return address, exc

    def _maybe_refresh(self, leader: HostPort) -> None:
        """Ask the leader for the current masters in the background, at most every MASTERS_REFRESH_S."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._refreshed_at < MASTERS_REFRESH_S or (self._refresh and not self._refresh.done()):
            return
        self._refreshed_at = loop.time()

        async def refresh() -> None:
            _, outcome = await self._probe(leader, 5.0)
            if not isinstance(outcome, NyalaError) and outcome.role == common_pb2.LEADER:
                self._learn(outcome)

        self._refresh = loop.create_task(refresh())

    def _learn(self, response: mpb.ConnectToMasterResponsePB) -> None:
        self._refreshed_at = asyncio.get_running_loop().time()
        self.cluster_id = response.cluster_id
        self.client_location = response.client_location
        # The leader's members: masters added or removed since this client started are
        # followed, so the next discovery asks the masters of now.
        members = [HostPort(a.host, a.port) for a in response.master_addresses]
        if members and members != self.addresses:
            log.info("the masters are now %s", ", ".join(map(str, members)))
            self.addresses = members

    async def read(
        self,
        method: RpcMethod[ReadRequestT, ResponseT],
        request: ReadRequestT,
        deadline: Deadline,
    ) -> ResponseT:
        """A catalog read: to any master within ``master_read_staleness_ms``, else the leader."""
        bound = self._options.master_read_staleness_ms
        if not bound or asyncio.get_running_loop().time() < self._leader_reads_until:
            return await self._call(method, request, deadline, None)
        request.max_staleness_ms = bound
        backoff = Backoff(self._options, self._rng)
        answers: dict[str, NyalaError] = {}  # every master's last refusal or failure
        while True:
            if deadline.expired:
                raise self._no_read(deadline, bound, answers)
            error: NyalaError | None = None
            for _ in range(len(self.addresses)):
                self._next_read = (self._next_read + 1) % len(self.addresses)
                address = self.addresses[self._next_read]
                try:
                    return await self._messenger.call(
                        address, method, request, timeout=max(1e-3, deadline.attempt_timeout(self._options))
                    )
                except NotFound:
                    if address == self.leader:
                        raise
                    return await self._call(method, request, deadline, None)  # the leader is authoritative
                except NotTheLeader as exc:  # too stale (or not open yet): the next master may do
                    error = answers[str(address)] = exc
                    hint = _parse_hint(exc.leader_hint)
                    if hint is not None and hint in self.addresses:
                        self.leader = hint
                except (ServiceUnavailable, NetworkError, TimedOut) as exc:
                    error = answers[str(address)] = exc
                    if self.leader == address and not deadline.expired:
                        self.leader = None
                    log.debug("%s to master %s failed: %s", method.full_name, address, exc)
                if deadline.expired:
                    break
            if deadline.expired:
                raise self._no_read(deadline, bound, answers)
            await backoff.wait(deadline, error)

    def _no_read(self, deadline: Deadline, bound: int, answers: dict[str, NyalaError]) -> TimedOut:
        detail = "; ".join(f"{a}: {type(e).__name__}: {e}" for a, e in answers.items()) or "no master answered"
        return TimedOut(
            f"{deadline.what} did not finish before its deadline: no master answered within the "
            f"{bound} ms staleness bound ({detail})"
        )

    async def call(
        self,
        method: RpcMethod[RequestT, ResponseT],
        request: RequestT,
        deadline: Deadline,
        tracker: CallTracker | None = None,
    ) -> ResponseT:
        """Call ``method`` on the leader master, retrying retriable failures until ``deadline``.

        With follower reads on, the client's reads go to the leader for one staleness bound
        after this, so that they see whatever this call changed.
        """
        try:
            return await self._call(method, request, deadline, tracker)
        finally:
            bound = self._options.master_read_staleness_ms
            if bound:
                self._leader_reads_until = asyncio.get_running_loop().time() + bound / 1000

    async def _call(
        self,
        method: RpcMethod[RequestT, ResponseT],
        request: RequestT,
        deadline: Deadline,
        tracker: CallTracker | None,
    ) -> ResponseT:
        tracker = tracker or CallTracker()
        backoff = Backoff(self._options, self._rng)
        while True:
            backoff.check(deadline)
            leader = await self.find_leader(deadline)
            tracker.attempts += 1
            try:
                response = await self._messenger.call(
                    leader, method, request, timeout=max(1e-3, deadline.attempt_timeout(self._options))
                )
                self._maybe_refresh(leader)
                return response
            except NotTheLeader as exc:
                self.leader = _parse_hint(exc.leader_hint)
                await backoff.wait(deadline, exc)
            except ServiceUnavailable as exc:
                await backoff.wait(deadline, exc)
            except (NetworkError, TimedOut) as exc:
                tracker.ambiguous = True
                # An attempt cut short by the caller's own deadline says nothing about the
                # master; forgetting it would make every later call rediscover the leader.
                if self.leader == leader and not (isinstance(exc, TimedOut) and deadline.expired):
                    self.leader = None
                log.debug("%s to master %s failed: %s", method.full_name, leader, exc)
                await backoff.wait(deadline, exc)


def _parse_hint(hint: str) -> HostPort | None:
    if not hint:
        return None
    try:
        return parse_address(hint)
    except InvalidArgument:
        return None  # an old master may send a uuid; rediscover instead
