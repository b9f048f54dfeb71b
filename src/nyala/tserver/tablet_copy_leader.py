"""The leader's side of a tablet copy: notice who needs one, pick a source, send StartTabletCopy.

A leading replica learns that a peer needs a copy in two ways:

- its Raft core lists the peer in ``Ready.tablet_copy_targets``: the peer's log ends before
  the first entry the leader still holds, so replication cannot catch it up (the core says so
  again every few election timeouts while it lasts).  The request carries
  ``replace_live_replica``: the destination tombstones its useless replica and copies;
- a Deliver answer from the peer's server lists the tablet in ``unknown_groups``: the server
  does not host the tablet (a new member, or a tombstone).  The request does not carry
  ``replace_live_replica``, so a replica that is only starting up is left alone.

:class:`TabletCopyRequester` sends at most one StartTabletCopy per tablet and peer every
``tablet_copy_start_interval_ms`` however often either signal repeats, only while its replica
leads, with its term as ``caller_term`` and its first in-memory log index (the destination
keeps a live replica that replication can still catch up).  The call is answered at once; the
leader learns that the copy landed from the peer's next heartbeat answer.

**Choosing the source** (:func:`choose_copy_source`): an up-to-date replica in the
destination's location when there is one, else the leader itself.  The leader is chosen when
it shares the destination's location; otherwise a follower there qualifies when it is in
REPLICATE state with its log matching the leader's up to the commit index: its log then holds
every committed entry, including every entry the destination ever acknowledged (the
destination needs a copy because its own log ends before the leader's first entry, which is
at or below the commit index), so the copy never loses an acknowledged write.  Locations come
from the masters' heartbeat answers; when the destination's location is unknown, the leader
is the source.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from nyala.common.hostport import HostPort
from nyala.consensus.core import PeerProgress, Role
from nyala.consensus.runtime import PeerDirectory, RaftReplica
from nyala.errors import AlreadyPresent, IllegalState, NyalaError
from nyala.proto import common_pb2
from nyala.proto import tablet_copy_pb2 as tcpb
from nyala.rpc import Messenger
from nyala.services import START_TABLET_COPY
from nyala.tserver.tablet import TabletReplica

__all__ = ["TabletCopyRequester", "choose_copy_source"]

log = logging.getLogger("nyala.tserver")

START_TIMEOUT_S = 10.0


def choose_copy_source(
    leader: str,
    dest: str,
    progress: Sequence[PeerProgress],
    commit_index: int,
    location_of: Callable[[str], str],
    reachable: Callable[[str], bool],
) -> str:
    """The uuid of the server a copy to ``dest`` should come from (see the module doc)."""
    where = location_of(dest)
    if not where or location_of(leader) == where:
        return leader
    candidates = [
        p
        for p in progress
        if p.peer_id not in (leader, dest)
        and p.state == "REPLICATE"
        and p.match >= commit_index
        and location_of(p.peer_id) == where
        and reachable(p.peer_id)
    ]
    if not candidates:
        return leader
    return max(candidates, key=lambda p: (p.match, p.peer_id)).peer_id


class TabletCopyRequester:
    """Sends StartTabletCopy for the tablets this server leads (one instance per server)."""

    def __init__(
        self,
        uuid: str,
        messenger: Messenger,
        directory: PeerDirectory,
        location_of: Callable[[str], str],
        own_address: Callable[[], HostPort],
        *,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._uuid = uuid
        self._own_address = own_address
        self._messenger = messenger
        self._directory = directory
        self._location_of = location_of
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[tuple[str, str], float] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: StartTabletCopy calls sent, and what became of them (tests and the status page read them).
        self.sent = 0
        self.accepted = 0
        self.refused = 0

    def copy_needed(self, tablet: TabletReplica, peer_id: str, *, replace_live: bool) -> bool:
        """Ask ``peer_id`` to copy ``tablet`` unless asked recently; True when a request left."""
        raft = tablet.raft
        if raft is None or raft.role is not Role.LEADER or raft.failed is not None:
            return False
        if peer_id == self._uuid or not raft.active_config.contains(peer_id):
            return False
        dest = self._directory.get(peer_id)
        if dest is None:
            return False
        key = (tablet.tablet_id, peer_id)
        now = self._clock()
        if now < self._next.get(key, 0.0):
            return False
        self._next[key] = now + self._interval_s
        request = self._request(tablet.tablet_id, raft, peer_id, replace_live)
        if request is None:
            return False
        task = asyncio.get_running_loop().create_task(self._send(dest, request), name=f"start-copy-{key}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _request(
        self, tablet_id: str, raft: RaftReplica, peer_id: str, replace_live: bool
    ) -> tcpb.StartTabletCopyRequestPB | None:
        source = choose_copy_source(
            self._uuid,
            peer_id,
            raft.peer_progress(),
            raft.commit_index,
            self._location_of,
            lambda uuid: self._directory.get(uuid) is not None,
        )
        address = self._directory.get(source) if source != self._uuid else self._own_address()
        if address is None:
            return None
        return tcpb.StartTabletCopyRequestPB(
            dest_uuid=peer_id,
            tablet_id=tablet_id,
            copy_peer_uuid=source,
            copy_peer_addr=common_pb2.HostPortPB(host=address.host, port=address.port),
            caller_uuid=self._uuid,
            caller_term=raft.term,
            replace_live_replica=replace_live,
            leader_first_index=raft.first_log_index,
        )

    async def _send(self, dest: HostPort, request: tcpb.StartTabletCopyRequestPB) -> None:
        self.sent += 1
        what = f"StartTabletCopy of {request.tablet_id} to {request.dest_uuid} (source {request.copy_peer_uuid})"
        try:
            await self._messenger.call(dest, START_TABLET_COPY, request, timeout=START_TIMEOUT_S)
        except (AlreadyPresent, IllegalState) as e:
            # Already copying, no longer needed, or a newer leader exists: nothing to do.
            self.refused += 1
            log.debug("%s: %s", what, e)
        except NyalaError as e:
            self.refused += 1
            log.info("%s failed: %s: %s", what, type(e).__name__, e)
        else:
            self.accepted += 1
            log.info("%s: accepted", what)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
